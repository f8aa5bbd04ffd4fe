// SPDX-License-Identifier: Apache-2.0
// SwiGluQuant and GeluMulQuant on the cpu device (docs/swiglu_quant.md, docs/quantization.md).
// Each byte is the reference's (exact/quant.h on the double value), decided as correctly rounded
// maths libraries decide (Ziv): an F32 value with a proven bound per lane, a test of whether a
// rounding boundary of the output grid lies within that bound, and the reference's double for
// the lanes where one does. A row at a time per thread:
//   1. RowValues: p_c, the activation a_c in F32 (16-bit x: the factor tables, within 4 F32 steps;
//      F32 x: the activation's fast path, its window in steps per lane), or NaN where the
//      bound does not hold (non-finite, tiny, the far-left tails), or a signed 0 where a_c is
//      exactly 0 (x1 or x2 is 0).
//   2. Dynamic scales: amax is the largest exact |z_c| = |a_c m_c|, and it lies among the lanes
//      whose F32 |p_c m_c| is within 2^-8 of the largest (or is unsure): those take the double,
//      and the scale is exact/quant.h's from their largest, as the reference computes it.
//   3. QuantizeGroup: t = (p m) (1 / s) within 2w + 8 steps (w: p's window; three roundings), its
//      byte where no boundary (a half-integer, an FP8 midpoint) is that near, the double's
//      elsewhere.
// The bytes and scales are therefore the reference's on every target and thread count; nothing
// but the speed depends on the F32 arithmetic.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/gated_quant.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu/gated-inl.h"
#include "cpu/parallel.h"
#include "cpu/softmax_row-inl.h"
#include "cpu/table-inl.h"
#include "exact/gated.h"
#include "exact/quant.h"
#include "hwy/highway.h"
#include "ops/gated_quant.h"

namespace infiniop::cpu {
// One thread's rows: x's row (2H), the values p and their windows (H each), the bytes (H) and
// the smooth scales' row (H), each with kPad elements to spare, so that the loops load and store
// whole vectors (of up to 64 lanes: SVE's widest) past a row's end.
constexpr size_t kPad = 64;
struct QuantScratch {
  float *x, *p, *smooth;
  int32_t *window;
  uint8_t *bytes;
};
}  // namespace infiniop::cpu

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace {
namespace hn = hwy::HWY_NAMESPACE;
using exact::QuantFormat;
using quant::GatedQuantData;
using quant::GatedQuantPlan;

// Below this |p m| the relative windows do not hold (subnormal roundings): the double decides.
constexpr float kSmallest = 0x1p-100f;

// The window in F32 steps of an F32 activation value (docs/accuracy.md, the windows of opencl's
// rounded.cl: 2K + 2 for K u |value|): silu 10, gelu_erf 12, gelu_tanh 21 + 12 |v| left of 0 (v
// its rounded exponential argument, taken at x clamped at -13).
template <class Act, class D, class V>
HWY_INLINE hn::Vec<hn::RebindToSigned<D>> ValueWindow(D d, V x1) {
  const hn::RebindToSigned<D> di;
  if constexpr (std::is_same_v<Act, SiluActivation>) {
    return hn::Set(di, 10);
  } else if constexpr (std::is_same_v<Act, GeluErfActivation>) {
    return hn::Set(di, 12);
  } else {
    const V v = GeluTanhArgument(d, hn::Max(x1, hn::Set(d, -13.0f)));
    const V w = hn::MulAdd(hn::Abs(v), hn::Set(d, 12.0f), hn::Set(d, 21.0f));
    return hn::ConvertTo(di, hn::IfThenElse(hn::Lt(x1, hn::Zero(d)), w, hn::Set(d, 21.0f)));
  }
}

// Step 1 for one row: p[c] and window[c] from the activation inputs g and the multipliers b
// (F32, exact). T: x's storage type (the tables' key for 16-bit x).
template <class Act, class T>
void RowValues(const float *g, const float *b, size_t n, float *p, int32_t *window) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const size_t N = hn::Lanes(d);
  constexpr bool kTabled = !std::is_same_v<T, float>;
  FactorTable table{nullptr, nullptr};
  if constexpr (kTabled) table = factorTable<Act::kExact, IsBf16<T>()>();
  const T *storage = nullptr;
  const auto sign = hn::Set(di, static_cast<int32_t>(0x80000000u));
  for (size_t c = 0; c < n; c += N) {  // whole vectors: the buffers have kPad to spare
    const auto x1 = hn::LoadU(d, g + c), x2 = hn::LoadU(d, b + c);
    auto value = hn::Zero(d);
    auto unsure = hn::FirstN(d, 0);
    auto w = hn::Set(di, kTableProductWindow);
    if constexpr (kTabled) {
      value = hn::Mul(Lookup(d, table.hi, x1, storage), x2);
    } else {
      value = Act::WithAt(
          d, x1, [&](const auto &act) __attribute__((always_inline)) { return act.Value(d, x2); });
      unsure = ExactLanes(d, x1, x1, Act::kTailBound, value);
      w = ValueWindow<Act>(d, x1);
    }
    const auto huge = hn::Set(d, 3.4028235e38f);
    const auto finite = hn::And(hn::Le(hn::Abs(x1), huge), hn::Le(hn::Abs(x2), huge));
    const auto exact_zero =
        hn::And(finite, hn::Or(hn::Eq(x1, hn::Zero(d)), hn::Eq(x2, hn::Zero(d))));
    const auto zero = hn::BitCast(d, hn::And(hn::Xor(hn::BitCast(di, x1), hn::BitCast(di, x2)), sign));
    const auto holds = hn::And(hn::Ge(hn::Abs(value), hn::Set(d, kSmallest)),
                               hn::Le(hn::Abs(value), huge));
    unsure = hn::Or(unsure, hn::Not(holds));
    value = hn::IfThenElse(exact_zero, zero, hn::IfThenElse(unsure, hn::Set(d, NAN), value));
    hn::StoreU(value, d, p + c);
    hn::StoreU(w, di, window + c);
  }
}

// The lanes whose p m the bound does not cover: p unsure (NaN), p m beyond F32's range, or a
// non-zero p m below kSmallest (an exact zero is p = 0 or m = 0).
template <class D, class V>
HWY_INLINE auto Unsure(D d, V p, V m, V pm) {
  const V a = hn::Abs(pm);
  const auto tiny = hn::And(hn::Lt(a, hn::Set(d, kSmallest)),
                            hn::And(hn::Ne(p, hn::Zero(d)), hn::Ne(m, hn::Zero(d))));
  return hn::Or(hn::Or(hn::IsNaN(p), hn::Not(hn::Le(a, hn::Set(d, 3.4028235e38f)))), tiny);
}

// A group's values as the reference computes them, in double: z = a m.
template <class Act>
double ExactValue(const float *g, const float *b, const float *m, size_t c) {
  double a = 0;
  exact::Gated<Act::kExact>()(a, g[c], b[c]);
  return m ? a * m[c] : a;
}

// Step 2: the dynamic scale of the group [begin, end) (m: the smooth row or null).
template <class Act>
float GroupScale(const GatedQuantPlan &plan, const float *g, const float *b, const float *m,
                 const float *p, size_t begin, size_t end) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const auto one = hn::Set(d, 1.0f);
  auto largest = hn::Zero(d);
  bool any_unsure = false;
  for (size_t c = begin; c < end; c += N) {
    const auto lanes = hn::FirstN(d, end - c);
    const auto pv = hn::LoadU(d, p + c);
    const auto mv = m ? hn::LoadU(d, m + c) : one;
    const auto pm = hn::Mul(pv, mv);
    const auto unsure = hn::And(lanes, Unsure(d, pv, mv, pm));
    any_unsure = any_unsure || !hn::AllFalse(d, unsure);
    largest = hn::Max(largest, hn::IfThenElseZero(hn::AndNot(unsure, lanes), hn::Abs(pm)));
  }
  const float top = hn::GetLane(hn::MaxOfLanes(d, largest));
  if (top == 0.0f && !any_unsure) return exact::dynamicScale(0.0, plan.format, plan.power_of_two);
  const float threshold = top * (1.0f - 0x1p-8f);
  double amax = 0;
  for (size_t c = begin; c < end; ++c) {
    const float mc = m ? m[c] : 1.0f;
    const float pm = p[c] * mc;
    const bool unsure = std::isnan(p[c]) || !(std::fabs(pm) <= 3.4028235e38f) ||
                        (std::fabs(pm) < kSmallest && p[c] != 0 && mc != 0);
    if (!unsure && !(std::fabs(pm) >= threshold)) continue;
    const double z = ExactValue<Act>(g, b, m, c);
    amax = std::isnan(z) || std::isnan(amax) ? NAN : std::fmax(amax, std::fabs(z));
  }
  return exact::dynamicScale(amax, plan.format, plan.power_of_two);
}

// Step 3's test and bytes for one vector of t = p m / s (as t = pm r): the lanes near a rounding
// boundary of the grid (within `steps` F32 steps of t), and the bytes of the others.
template <QuantFormat kFormat, class D, class V, class VI>
HWY_INLINE auto NearAndCodes(D d, V t, VI steps, VI *codes) {
  const hn::RebindToSigned<D> di;
  if constexpr (kFormat == QuantFormat::int8) {
    const V clamped = hn::Min(hn::Max(t, hn::Set(d, -127.0f)), hn::Set(d, 127.0f));
    const V rounded = hn::Round(clamped);
    *codes = hn::ConvertTo(di, rounded);
    // |t - round(t)| is exact below 2^23; its distance to 1/2 against the bound.
    const V a = hn::Abs(t);
    const V bound = hn::Mul(hn::Mul(a, hn::ConvertTo(d, steps)), hn::Set(d, 0x1p-23f));
    const V gap = hn::Sub(hn::Set(d, 0.5f), hn::Abs(hn::Sub(t, rounded)));
    return hn::And(hn::Lt(a, hn::Set(d, 128.0f)), hn::Le(gap, bound));
  } else {
    // FP8 E4M3's midpoints are the F32 values whose low 20 bits are 0x80000, from 2^-6 on; below,
    // |t| + 2^-6 puts the subnormals' (spacing 2^-9, the spacing at 2^-6) there, its rounding
    // within one more step.
    const V a = hn::Abs(t);
    const V smallest_normal = hn::Set(d, 0x1p-6f);
    const auto sub = hn::Lt(a, smallest_normal);
    const VI shifted = hn::BitCast(di, hn::IfThenElse(sub, hn::Add(a, smallest_normal), a));
    const VI w = hn::Add(steps, hn::Set(di, 1));
    const VI offset = hn::And(hn::Add(shifted, hn::Sub(w, hn::Set(di, 0x80000))),
                              hn::Set(di, 0xfffff));
    const auto near = hn::And(hn::RebindMask(d, hn::Gt(hn::Add(hn::Add(w, w), hn::Set(di, 1)),
                                                      offset)),
                              hn::Lt(a, hn::Set(d, 456.0f)));
    // Rounded by adding half the kept step and truncating: no tie is left (near lanes aside).
    const V clamped = hn::Min(a, hn::Set(d, 448.0f));
    const VI bits = hn::BitCast(di, hn::IfThenElse(sub, hn::Add(clamped, smallest_normal), clamped));
    const VI base = hn::IfThenElse(hn::RebindMask(di, sub), hn::Set(di, 121 << 3),
                                   hn::Set(di, 120 << 3));
    const VI code = hn::Sub(hn::ShiftRight<20>(hn::Add(bits, hn::Set(di, 0x80000))), base);
    const VI sign = hn::ShiftRight<24>(hn::And(hn::BitCast(di, t), hn::Set(di, int32_t(0x80000000u))));
    *codes = hn::Or(code, hn::And(sign, hn::Set(di, 0x80)));
    return near;
  }
}

// Step 3 for the group [begin, end) with scale s: bytes[c].
template <class Act, QuantFormat kFormat>
void QuantizeGroup(const float *g, const float *b, const float *m, const float *p,
                   const int32_t *window, float s, size_t begin, size_t end, uint8_t *bytes) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const hn::Rebind<uint8_t, decltype(d)> du8;
  const hn::Rebind<int8_t, decltype(d)> di8;
  const size_t N = hn::Lanes(d);
  const auto oracle = [&](size_t c) {
    bytes[c] = exact::quantizeByte(ExactValue<Act>(g, b, m, c) / s, kFormat);
  };
  if (!(std::fabs(s) >= 0x1p-126f && std::fabs(s) <= 3.4028235e38f)) {
    for (size_t c = begin; c < end; ++c) oracle(c);
    return;
  }
  const auto r = hn::Set(d, 1.0f / s);
  const auto one = hn::Set(d, 1.0f);
  for (size_t c = begin; c < end; c += N) {
    const size_t count = std::min(N, end - c);
    const auto pv = hn::LoadU(d, p + c);
    const auto mv = m ? hn::LoadU(d, m + c) : one;
    const auto pm = hn::Mul(pv, mv);
    const auto t = hn::Mul(pm, r);
    const auto w = hn::LoadU(di, window + c);
    const auto steps = hn::Add(hn::Add(w, w), hn::Set(di, 8));
    hn::Vec<decltype(di)> codes;
    const auto near = NearAndCodes<kFormat>(d, t, steps, &codes);
    if constexpr (kFormat == QuantFormat::int8) {
      hn::StoreU(hn::BitCast(du8, hn::DemoteTo(di8, codes)), du8, bytes + c);
    } else {
      hn::StoreU(hn::DemoteTo(du8, codes), du8, bytes + c);
    }
    const auto open = hn::And(hn::FirstN(d, count), hn::Or(near, Unsure(d, pv, mv, pm)));
    if (HWY_UNLIKELY(!hn::AllFalse(d, open))) {
      for (size_t k = 0; k < count; ++k)
        if (hn::ExtractLane(hn::VecFromMask(d, open), k) != 0) oracle(c + k);
    }
  }
}

template <class Act, class T>
void Rows(const GatedQuantPlan &plan, const GatedQuantData &data, const QuantScratch &scratch,
          size_t first, size_t last) {
  const size_t H = plan.half;
  for (size_t r = first; r < last; ++r) {
    const ptrdiff_t e = quant::smoothRowOf(plan, data.counts, r);
    uint8_t *bytes = scratch.bytes;
    float *scale = static_cast<float *>(data.scale);
    if (e < 0) {  // past group_index's counts: zeros, and scale 0
      std::memset(bytes, 0, H);
      if (plan.dynamic)
        for (size_t gi = 0; gi < plan.groups; ++gi) scale[plan.scale.offset(r, gi)] = 0.0f;
    } else {
      LoadRowVec(plan.x, data.x, r, scratch.x);
      const float *g = scratch.x + plan.gateColumn(0), *b = scratch.x + plan.multiplierColumn(0);
      const float *m = nullptr;
      if (plan.smooth) {
        LoadRowVec(plan.smooth_scales, data.smooth_scales, static_cast<size_t>(e), scratch.smooth);
        m = scratch.smooth;
      }
      RowValues<Act, T>(g, b, H, scratch.p, scratch.window);
      for (size_t gi = 0; gi < plan.groups; ++gi) {
        const size_t begin = gi * plan.group_size, end = begin + plan.group_size;
        float s;
        if (plan.dynamic) {
          s = GroupScale<Act>(plan, g, b, m, scratch.p, begin, end);
          scale[plan.scale.offset(r, gi)] = s;
        } else {
          s = scale[plan.scale.offset(r, gi)];
        }
        if (plan.format == QuantFormat::int8)
          QuantizeGroup<Act, QuantFormat::int8>(g, b, m, scratch.p, scratch.window, s, begin, end,
                                                bytes);
        else
          QuantizeGroup<Act, QuantFormat::fp8_e4m3>(g, b, m, scratch.p, scratch.window, s, begin,
                                                    end, bytes);
      }
    }
    auto *y = static_cast<uint8_t *>(data.y) + plan.y.rowOffset(r);
    if (plan.y.col_stride == 1) {
      std::memcpy(y, bytes, H);
    } else {
      for (size_t c = 0; c < H; ++c) y[static_cast<ptrdiff_t>(c) * plan.y.col_stride] = bytes[c];
    }
  }
}

template <class Act>
void RowsOf(const GatedQuantPlan &plan, const GatedQuantData &data, const QuantScratch &scratch,
            size_t first, size_t last) {
  switch (plan.dtype) {
    case INFINI_DTYPE_BF16:
      return Rows<Act, hwy::bfloat16_t>(plan, data, scratch, first, last);
    case INFINI_DTYPE_F16:
      return Rows<Act, hwy::float16_t>(plan, data, scratch, first, last);
    default:
      return Rows<Act, float>(plan, data, scratch, first, last);
  }
}

}  // namespace

void GatedQuantRows(const GatedQuantPlan &plan, const GatedQuantData &data,
                    const QuantScratch &scratch, size_t first, size_t last) {
  switch (plan.activation) {
    case quant::GateActivation::silu:
      return RowsOf<SiluActivation>(plan, data, scratch, first, last);
    case quant::GateActivation::gelu_erf:
      return RowsOf<GeluErfActivation>(plan, data, scratch, first, last);
    case quant::GateActivation::gelu_tanh:
      return RowsOf<GeluTanhActivation>(plan, data, scratch, first, last);
  }
}

// The factor tables of the plan's activation and dtype, built before the threads start (an
// allocation that fails must fail before anything is written).
void GatedQuantTables(const GatedQuantPlan &plan) {
  const auto build = [&](auto act) {
    using Act = decltype(act);
    if (plan.dtype == INFINI_DTYPE_BF16) factorTable<Act::kExact, true>();
    if (plan.dtype == INFINI_DTYPE_F16) factorTable<Act::kExact, false>();
  };
  switch (plan.activation) {
    case quant::GateActivation::silu:
      return build(SiluActivation());
    case quant::GateActivation::gelu_erf:
      return build(GeluErfActivation());
    case quant::GateActivation::gelu_tanh:
      return build(GeluTanhActivation());
  }
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace infiniop::cpu {
HWY_EXPORT(GatedQuantRows);
HWY_EXPORT(GatedQuantTables);

namespace {
void gatedQuant(const quant::GatedQuantPlan &p, const quant::GatedQuantData &d) {
  HWY_DYNAMIC_DISPATCH(GatedQuantTables)(p);
  // Every thread's rows, allocated before the threads start.
  const size_t H = p.half, ranges = static_cast<size_t>(std::max(1, callThreads()));
  const size_t floats = 2 * H + H + H + 3 * kPad, per = H + kPad;  // x, p, smooth; window; bytes
  std::vector<float> space(floats * ranges);
  std::vector<int32_t> windows(per * ranges);
  std::vector<uint8_t> bytes(per * ranges);
  std::atomic<size_t> next{0};
  const auto run = &HWY_DYNAMIC_DISPATCH(GatedQuantRows);
  parallelRanges(p.rows, 8 * H, [&](size_t first, size_t last) {
    const size_t k = next.fetch_add(1) % ranges;
    float *base = space.data() + k * floats;
    QuantScratch scratch{base, base + 2 * H + kPad, base + 3 * H + 2 * kPad,
                         windows.data() + k * per, bytes.data() + k * per};
    run(p, d, scratch, first, last);
  });
}
}  // namespace

void swiglu_quant(const quant::GatedQuantPlan &p, const quant::GatedQuantData &d) {
  gatedQuant(p, d);
}
void gelu_mul_quant(const quant::GatedQuantPlan &p, const quant::GatedQuantData &d) {
  gatedQuant(p, d);
}
}  // namespace infiniop::cpu
#endif
