// SPDX-License-Identifier: Apache-2.0
// DequantSwigluQuant on the cpu device (docs/dequant_swiglu_quant.md). Rows are split over
// threads; in each row:
//   1. the dequantization d = ((x + bias_i) w) s_a + bias_f in Highway double lanes (IEEE mul and
//      add, in the reference's order, no contraction: the build has -ffp-contract=off), from
//      per-thread double copies of the row's weight scales and biases (exact: F32, F16, BF16 and
//      INT32 all fit a double; x + bias_i is exact as the sum of two doubles below 2^32): these
//      are the reference's d, bit for bit;
//   2. z = silu(d1) d2 m in double lanes with an exp within 2^-45.5 where the reference's is the
//      C library's: within 2^-45 (relative) of the reference's z (FastValues); the reference's
//      own z (exact/dequant.h) where that bound is not proven (a non-finite z, d1 in (-710, -700),
//      a tiny non-zero product);
//   3. each group's dynamic scale from the reference's z of its amax candidates (the lanes within
//      2^-40 of the largest |z|), so exact/quant.h's scale of the reference's amax;
//   4. each byte from t = z / s in F32 (quant_bytes-inl.h) where no rounding boundary lies
//      within 2 F32 steps of it, else exact/quant.h's byte of the reference's z / s.
// So every byte and scale bit is the reference's on every target and thread count, as with
// GatedQuant's cpu kernel (Ziv's way, as correctly rounded maths libraries decide). Targets
// without double lanes take the reference's functions for every value.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/dequant_swiglu_quant.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "cpu/parallel.h"
#include "cpu/quant_bytes-inl.h"
#include "exact/dequant.h"
#include "exact/quant.h"
#include "hwy/highway.h"
#include "ops/dequant_swiglu_quant.h"
#include "ops/gated_quant_rows.h"

#ifndef INFINIOP_CPU_DEQUANT_ROW_STEPS
#define INFINIOP_CPU_DEQUANT_ROW_STEPS  // once, not per target
namespace infiniop::cpu {
constexpr size_t kPad = 64;
// One row's inputs and outputs for steps 2-4: d1 and d2 (H each, contiguous, readable kPad past
// their ends: the vector loops load whole vectors), the smooth row m (null: 1; H + kPad), z
// (H + kPad), the bytes (H + kPad) and the group scales s (G: written where dynamic, read where
// static). kPad: SVE's widest vector of doubles (32 lanes) and more.
struct RowSteps {
  const double *gate, *multiplier;
  const float *m;
  double *z;
  uint8_t *bytes;
  float *s;
};

// The reference's z of column c (exact/dequant.h).
inline double ExactValue(const RowSteps &row, size_t c) {
  const double a = exact::siluGated(row.gate[c], row.multiplier[c]);
  return row.m ? a * row.m[c] : a;
}

}  // namespace infiniop::cpu
#endif

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// out[c] = ((x[c] + bias_i[c]) w[c]) s_a (+ bias_f[c] where bias_f), c < n, x contiguous; no
// bias_i: x[c] itself (adding 0 to an integer's double changes nothing).
void DequantRow(const int32_t *x, const double *bias_i, const double *w, double s_a,
                const double *bias_f, double *out, size_t n) {
  size_t c = 0;
#if HWY_HAVE_FLOAT64
  const hn::ScalableTag<double> dd;
  const hn::Rebind<int32_t, decltype(dd)> di;
  const size_t N = hn::Lanes(dd);
  const auto sa = hn::Set(dd, s_a);
  for (; c + N <= n; c += N) {
    auto v = hn::PromoteTo(dd, hn::LoadU(di, x + c));
    if (bias_i) v = hn::Add(v, hn::LoadU(dd, bias_i + c));
    v = hn::Mul(hn::Mul(v, hn::LoadU(dd, w + c)), sa);
    if (bias_f) v = hn::Add(v, hn::LoadU(dd, bias_f + c));
    hn::StoreU(v, dd, out + c);
  }
#endif
  for (; c < n; ++c) {
    double v = (static_cast<double>(x[c]) + (bias_i ? bias_i[c] : 0.0)) * w[c];
    v = v * s_a;
    out[c] = bias_f ? v + bias_f[c] : v;
  }
}

#if HWY_HAVE_FLOAT64
// exp(-g) for g >= -700 within 2^-45.5 (relative) where exp(-g) >= 2^-57, else below 2^-57 (g
// above 40 is taken as 40: 1 + e then rounds to 1, as the reference's 1 + exp(-g) does from
// g = 36.8 on: e^-g below 2^-53). -g = n ln2 + t, n = round(-g / ln2) by adding 1.5 2^52 (whose ulp
// is 1), |t| <= ln2 / 2: n ln2_hi is exact (ln2_hi has 32 bits, |n| < 2^10) and so is -g - n ln2_hi
// (Sterbenz: within a factor of 2 for n != 0), t's rounding and ln2_lo's truncation are below
// 2^-53; e^t by its Taylor polynomial of degree 11 (the remainder below |t|^12 / 12! e^|t| < 2^-46
// e^t), Horner's roundings below 2^-49, the scale 2^n exact. With Highway's Exp (within 1 ulp: more
// than the bytes need) the call took 11% longer on Zen 4 (AVX3; 0.4 ns an element more).
template <class D, class V>
HWY_INLINE V ExpOfMinus(D d, V g) {
  const hn::RebindToSigned<D> di;
  const V x = hn::Max(hn::Neg(g), hn::Set(d, -40.0));
  const V shifter = hn::Set(d, 0x1.8p52);
  const V n_plus_shifter = hn::MulAdd(x, hn::Set(d, 1.4426950408889634), shifter);
  const V n = hn::Sub(n_plus_shifter, shifter);
  V t = hn::NegMulAdd(n, hn::Set(d, 6.93147180369123816490e-01), x);  // ln2_hi
  t = hn::NegMulAdd(n, hn::Set(d, 1.90821492927058770002e-10), t);    // ln2_lo
  constexpr double kInverseFactorial[] = {1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320,
                                          1.0 / 5040,     1.0 / 720,     1.0 / 120,    1.0 / 24,
                                          1.0 / 6,        0.5,           1.0,          1.0};
  V p = hn::Set(d, kInverseFactorial[0]);
  for (size_t k = 1; k < 12; ++k) p = hn::MulAdd(p, t, hn::Set(d, kInverseFactorial[k]));
  // 2^n from n_plus_shifter's bits, whose low ones hold 2^51 + n: (n + 1023) << 52.
  const auto bias = hn::Set(di, 1023 - static_cast<int64_t>(0x4338000000000000));
  const V scale = hn::BitCast(d, hn::ShiftLeft<52>(hn::Add(hn::BitCast(di, n_plus_shifter), bias)));
  return hn::Mul(p, scale);
}
#endif

#if HWY_HAVE_FLOAT64
// Below this the reference's exp(-g) overflows (ln of double's largest is 709.78): its silu is -0.
constexpr double kFarLeft = -710.0;

// Step 2: z within 2^-45 (relative) of the reference's. The reference computes 1 / (1 + exp(-g))
// with the C library's exp (glibc's within 1 ulp) and this ExpOfMinus (within 2^-45.5): the two e
// are within 2^-45.4 of each other, 1 + e within that (relative, as e / (1 + e) < 1), and the
// next four roundings (1 / (1 + e), g s, b silu, z m) add an ulp each at most. g >= -700 keeps
// every silu(g) for g != 0 normal (above 7e-302); at or below kFarLeft z is the reference's
// signed zero; between the two, the reference's value. So is a lane whose b silu or z is below
// 2^-1000 (the roundings are not relative there), but for an exact zero (g, b or m 0: the same
// IEEE zero), and one whose z is not finite.
void FastValues(const RowSteps &row, size_t H) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const size_t N = hn::Lanes(dd);
  const auto one = hn::Set(dd, 1.0), left = hn::Set(dd, -700.0), far_left = hn::Set(dd, kFarLeft);
  const auto tiny = hn::Set(dd, 0x1p-1000), huge = hn::Set(dd, HUGE_VAL);
  // z of the vector at c (stored whole: z has kPad to spare); returns the lanes that need more:
  // a non-finite z (which a non-finite operand gives, but for d1 = -inf: the far left's zero, the
  // reference's), d1 in (kFarLeft, -700), or b silu or z below 2^-1000 (their roundings are not
  // relative there, and m may scale such a product back up). Few mask operations, as Zen 4 runs
  // one a cycle.
  const auto vector = [&](size_t c, hn::Vec<decltype(dd)> g, hn::Vec<decltype(dd)> b)
      __attribute__((always_inline)) {
    const auto m = row.m ? hn::PromoteTo(dd, hn::LoadU(df, row.m + c)) : one;
    const auto sigmoid = hn::Div(one, hn::Add(one, ExpOfMinus(dd, hn::Max(g, left))));
    // Far left the reference's exp(-g) overflows: sigmoid 0, silu -0, z = (b -0) m.
    const auto far = hn::Le(g, far_left);
    const auto a = hn::Mul(b, hn::IfThenElse(far, hn::Set(dd, -0.0), hn::Mul(g, sigmoid)));
    const auto z = hn::Mul(a, m);
    hn::StoreU(z, dd, row.z + c);
    const auto smaller = hn::Min(hn::Abs(a), hn::Abs(z));
    return hn::Not(hn::And(hn::Lt(hn::Abs(z), huge),
                           hn::Or(far, hn::And(hn::Ge(g, left), hn::Ge(smaller, tiny)))));
  };
  // The lanes left: an exact zero (g, b or m 0, all finite) is the same IEEE zero as the
  // reference's; the others take the reference's z.
  const auto finish = [&](size_t c, hn::Mask<decltype(dd)> open) {
    ForEachLane(dd, open, c, [&](size_t at) {
      const double g = row.gate[at], b = row.multiplier[at], m = row.m ? row.m[at] : 1.0;
      const bool finite = std::isfinite(g) && std::isfinite(b) && std::isfinite(m);
      if (!(finite && (g == 0 || b == 0 || m == 0))) row.z[at] = ExactValue(row, at);
    });
  };
  size_t c = 0;
  for (; c + N <= H; c += N) {
    const auto open = vector(c, hn::LoadU(dd, row.gate + c), hn::LoadU(dd, row.multiplier + c));
    if (HWY_UNLIKELY(!hn::AllFalse(dd, open))) finish(c, open);
  }
  if (c < H) {  // the last part of a vector: zeros past H (row.m has kPad to spare)
    const auto lanes = hn::FirstN(dd, H - c);
    const auto open =
        hn::And(lanes, vector(c, hn::IfThenElseZero(lanes, hn::LoadU(dd, row.gate + c)),
                              hn::IfThenElseZero(lanes, hn::LoadU(dd, row.multiplier + c))));
    if (!hn::AllFalse(dd, open)) finish(c, open);
  }
}

// Step 3 for the group [begin, end): the reference's dynamic scale (exact/quant.h's of the largest
// exact |z|, a NaN propagating). Each z is within 2^-45 of the reference's, so the largest exact
// |z| is the exact value of a lane within 2^-40 of the largest |z| (a wide margin): those lanes
// take their exact z. All zeros (every one an exact zero: FastValues) make amax 0.
float DynamicScale(const quant::GatedQuantPlan &p, const RowSteps &row, size_t begin, size_t end) {
  const hn::ScalableTag<double> dd;
  const hn::RebindToSigned<decltype(dd)> di;
  const size_t N = hn::Lanes(dd);
  const size_t whole = begin + (end - begin) / N * N;
  const auto tail = hn::FirstN(dd, end - whole);
  // The largest |z| as integers: their bits order as the values do, a NaN's above all others'.
  auto largest = hn::Zero(di);
  for (size_t c = begin; c < whole; c += N)
    largest = hn::Max(largest, hn::BitCast(di, hn::Abs(hn::LoadU(dd, row.z + c))));
  if (whole < end)
    largest = hn::Max(
        largest, hn::BitCast(di, hn::IfThenElseZero(tail, hn::Abs(hn::LoadU(dd, row.z + whole)))));
  const int64_t high = hn::GetLane(hn::MaxOfLanes(di, largest));
  double top;
  std::memcpy(&top, &high, sizeof top);
  if (std::isnan(top)) return exact::dynamicScale(NAN, p.format, p.power_of_two);
  double amax = 0;
  if (top > 0) {
    const auto threshold = hn::Set(dd, top * (1 - 0x1p-40));
    const auto take = [&](size_t c, hn::Mask<decltype(dd)> candidates) {
      ForEachLane(dd, candidates, c,
                  [&](size_t at) { amax = std::fmax(amax, std::fabs(ExactValue(row, at))); });
    };
    for (size_t c = begin; c < whole; c += N) {
      const auto candidates = hn::Ge(hn::Abs(hn::LoadU(dd, row.z + c)), threshold);
      if (!hn::AllFalse(dd, candidates)) take(c, candidates);
    }
    if (whole < end) {
      const auto candidates =
          hn::And(tail, hn::Ge(hn::Abs(hn::LoadU(dd, row.z + whole)), threshold));
      if (!hn::AllFalse(dd, candidates)) take(whole, candidates);
    }
  }
  return exact::dynamicScale(amax, p.format, p.power_of_two);
}

// Step 4 for the group [begin, end) of scale s: t = z (1 / s) (within 2^-44 of the reference's
// z / s) rounded to F32 (half a step more: within 2 F32 steps of it, a binade's smaller steps
// below a power of two counted), its byte where no boundary lies within those steps, else the
// reference's. The vector past the group's end writes bytes the next group (or kPad) overwrites.
template <QuantFormat kFormat>
void GroupBytes(const RowSteps &row, size_t begin, size_t end, float s) {
  if (!F32PathScale(s)) {  // a scale of 0, tiny or not finite: every byte from the reference's z
    for (size_t c = begin; c < end; ++c)
      row.bytes[c] = exact::quantizeByte(ExactValue(row, c) / s, kFormat);
    return;
  }
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::Rebind<uint8_t, decltype(df)> du8;
  const size_t N = hn::Lanes(dd);
  const auto r = hn::Set(dd, 1.0 / s);
  const auto steps = hn::Set(di, 2);
  // The vector at c: its bytes stored, the lanes the reference decides in `lanes`.
  const auto vector = [&](size_t c, hn::Mask<decltype(df)> lanes) __attribute__((always_inline)) {
    const auto t = hn::DemoteTo(df, hn::Mul(hn::LoadU(dd, row.z + c), r));
    hn::Vec<decltype(di)> codes;
    const auto near = hn::Or(NearAndCodes<kFormat>(df, t, steps, &codes), hn::IsNaN(t));
    hn::StoreU(hn::TruncateTo(du8, hn::BitCast(du, codes)), du8, row.bytes + c);
    const auto open = hn::And(lanes, near);
    if (HWY_UNLIKELY(!hn::AllFalse(df, open))) {
      ForEachLane(df, open, c, [&](size_t at) {
        row.bytes[at] = exact::quantizeByte(ExactValue(row, at) / s, kFormat);
      });
    }
  };
  const auto all = hn::FirstN(df, N);
  size_t c = begin;
  for (; c + N <= end; c += N) vector(c, all);
  if (c < end) vector(c, hn::FirstN(df, end - c));
}
#endif

// Steps 2-4 for a row: returns false where the target has no double lanes (the caller takes the
// reference's functions for every value).
bool QuantizeDequantRow(const quant::GatedQuantPlan &p, const RowSteps &row) {
#if HWY_HAVE_FLOAT64
  FastValues(row, p.half);
  for (size_t g = 0; g < p.groups; ++g) {
    const size_t begin = g * p.group_size, end = begin + p.group_size;
    if (p.dynamic) row.s[g] = DynamicScale(p, row, begin, end);
    if (p.format == QuantFormat::int8)
      GroupBytes<QuantFormat::int8>(row, begin, end, row.s[g]);
    else
      GroupBytes<QuantFormat::fp8_e4m3>(row, begin, end, row.s[g]);
  }
  return true;
#else
  (void)p;
  (void)row;
  return false;
#endif
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace infiniop::cpu {
HWY_EXPORT(DequantRow);
HWY_EXPORT(QuantizeDequantRow);

namespace {

using quant::DequantSwigluQuantData;
using quant::DequantSwigluQuantPlan;

// One thread's rows: x's row (contiguous), the current expert's weight scales and biases as
// doubles (1 and 0 where absent) and smooth row, the dequantized row, its H values and bytes
// (RowSteps' kPad to spare), and its group scales.
struct Scratch {
  std::vector<int32_t> x;
  std::vector<double> w, bias_i, bias_f, d, z;
  std::vector<float> m, s;
  std::vector<uint8_t> bytes;
  ptrdiff_t expert = -1, smooth_expert = -1;  // whose rows w and the biases, and m, hold

  Scratch(size_t H, size_t G)
      : x(2 * H),
        w(2 * H, 1.0),
        bias_i(2 * H, 0.0),
        bias_f(2 * H, 0.0),
        d(2 * H + kPad),
        z(H + kPad),
        m(H + kPad),
        s(G),
        bytes(H + kPad) {}

  void loadSmooth(const DequantSwigluQuantPlan &p, const float *smooth, ptrdiff_t e) {
    if (e == smooth_expert) return;
    smooth_expert = e;
    for (size_t c = 0; c < p.half; ++c)
      m[c] = smooth[p.smooth_scales.offset(static_cast<size_t>(e), c)];
  }

  void loadExpert(const DequantSwigluQuantPlan &p, const DequantSwigluQuantData &data,
                  ptrdiff_t e) {
    if (e == expert) return;
    expert = e;
    const size_t n = 2 * p.half;
    if (data.weight_scale) {
      const auto *weight = static_cast<const float *>(data.weight_scale);
      for (size_t c = 0; c < n; ++c) w[c] = weight[p.weight_scale.offset(p.weightRow(e), c)];
    }
    if (!data.bias) return;
    const size_t row = p.biasRow(e);
    if (p.bias_int) {
      const auto *bias = static_cast<const int32_t *>(data.bias);
      for (size_t c = 0; c < n; ++c) bias_i[c] = bias[p.bias.offset(row, c)];
      return;
    }
    visitFloatStorage(p.bias.dtype, [&](auto t) {
      const auto *bias = static_cast<const decltype(t) *>(data.bias);
      for (size_t c = 0; c < n; ++c) bias_f[c] = toFloat(bias[p.bias.offset(row, c)]);
    });
  }
};

void rows(const DequantSwigluQuantPlan &p, const DequantSwigluQuantData &data, size_t first,
          size_t last) {
  auto *y = static_cast<uint8_t *>(data.y);
  auto *scale = static_cast<float *>(data.scale);
  const auto *x = static_cast<const int32_t *>(data.x);
  const auto *activation = static_cast<const float *>(data.activation_scale);
  const auto *smooth = static_cast<const float *>(data.smooth_scales);
  const size_t H = p.half, n = 2 * H;
  if (H == 0) {  // no values: x and y may be NULL, and no row pointer into them is formed
    quant::scaleOnlyRows(p, data.counts, scale, first, last);
    return;
  }
  const bool bias_f = data.bias && !p.bias_int;
  Scratch s(H, p.groups);
  const auto dequant = HWY_DYNAMIC_DISPATCH(DequantRow);
  const auto quantize = HWY_DYNAMIC_DISPATCH(QuantizeDequantRow);
  for (size_t r = first; r < last; ++r) {
    const ptrdiff_t e = quant::smoothRowOf(p, data.counts, r);
    if (e < 0) {  // past group_index's counts
      quant::zeroRow(p, y, scale, r);
      continue;
    }
    s.loadExpert(p, data, e);
    if (p.smooth) s.loadSmooth(p, smooth, e);
    const int32_t *xr = x + p.x.rowOffset(r);
    if (p.x.col_stride != 1) {
      for (size_t c = 0; c < n; ++c) s.x[c] = x[p.x.offset(r, c)];
      xr = s.x.data();
    }
    const double s_a = activation ? activation[p.activation_scale.offset(r, 0)] : 1.0;
    dequant(xr, data.bias && p.bias_int ? s.bias_i.data() : nullptr, s.w.data(), s_a,
            bias_f ? s.bias_f.data() : nullptr, s.d.data(), n);
    const ptrdiff_t yr = p.y.rowOffset(r), sr = p.scale.rowOffset(r);
    const ptrdiff_t yc = p.y.col_stride, sc = p.scale.col_stride;
    if (!p.dynamic)
      for (size_t g = 0; g < p.groups; ++g) s.s[g] = scale[sr + static_cast<ptrdiff_t>(g) * sc];
    const RowSteps row{s.d.data() + p.gateColumn(0),
                       s.d.data() + p.multiplierColumn(0),
                       p.smooth ? s.m.data() : nullptr,
                       s.z.data(),
                       s.bytes.data(),
                       s.s.data()};
    if (quantize(p, row)) {
      if (yc == 1)
        std::memcpy(y + yr, s.bytes.data(), H);
      else
        for (size_t c = 0; c < H; ++c) y[yr + static_cast<ptrdiff_t>(c) * yc] = s.bytes[c];
      if (p.dynamic)
        for (size_t g = 0; g < p.groups; ++g) scale[sr + static_cast<ptrdiff_t>(g) * sc] = s.s[g];
      continue;
    }
    for (size_t c = 0; c < H; ++c) s.z[c] = ExactValue(row, c);
    quant::quantizeRow(p, s.z.data(), y, scale, r);
  }
}

}  // namespace

void dequant_swiglu_quant(const DequantSwigluQuantPlan &p, const DequantSwigluQuantData &d) {
  // A row costs about 2H exps' worth of the reference's double work: worth threads early.
  parallelRanges(p.rows, 16 * p.half, [&](size_t first, size_t last) { rows(p, d, first, last); });
}

}  // namespace infiniop::cpu
#endif
