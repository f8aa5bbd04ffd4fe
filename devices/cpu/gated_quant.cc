// SPDX-License-Identifier: Apache-2.0
// SwiGluQuant and GeluMulQuant on the cpu device (docs/swiglu_quant.md, docs/quantization.md), and
// ClippedSwigluQuant for 16-bit x where its attribute set has a gate table (clipped_gate_table.h;
// else, and for F32 x, clipped_swiglu_quant.cc computes every value in double).
// Each byte is the reference's (exact/quant.h on the double value), decided as correctly rounded
// maths libraries decide (Ziv): an F32 value with a proven bound per lane, a test of whether a
// rounding boundary of the output grid lies within that bound, and the reference's double for
// the lanes where one does. A row at a time per thread, each step over every group of the row
// before the next (so that each step's loops keep their constants in registers):
//   1. GroupValues: pm_c = p_c m_c, p_c the activation in F32 (16-bit x: the factor tables,
//      within 4 F32 steps; clipped: G(A) (b + bias), within 6; F32 x: the activation's fast path,
//      its window in steps per lane), NaN where the bound does not hold (non-finite, tiny, the
//      far-left tails), a signed 0 where the value is exactly 0 (x1, x2 or m is 0; clipped: A,
//      or b + bias, is 0).
//   2. GroupScale (dynamic): amax is the largest exact |z_c| = |a_c m_c|, and it lies among the
//      lanes whose |pm_c| is within 2^-16 (fixed windows; 2^-8 per-lane ones) of the largest, or
//      NaN: those take a finer value (the tables' hi + lo pair, else the double), and the scale
//      is exact/quant.h's from their largest (clipped: the double); where that scale's rounding
//      is near, from the doubles.
//   3. QuantizeRow: t = pm (1 / s) within 2w + 8 steps (w: p's window; three roundings), its
//      byte where no boundary (a half-integer, an FP8 midpoint) is that near, the double's
//      after the row's last group.
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
#include <limits>
#include <memory>
#include <type_traits>

#include "cpu/clipped_gate_table.h"
#include "cpu/gated-inl.h"
#include "cpu/parallel.h"
#include "cpu/quant_bytes-inl.h"
#include "cpu/softmax_row-inl.h"
#include "cpu/table-inl.h"
#include "exact/clipped_swiglu.h"
#include "exact/gated.h"
#include "exact/quant.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "ops/gated_quant.h"
#include "ops/gated_quant_rows.h"

#ifndef INFINIOP_CPU_GATED_QUANT_SCRATCH
#define INFINIOP_CPU_GATED_QUANT_SCRATCH  // once, not per target
namespace infiniop::cpu {
// One thread's rows: a contiguous copy of x's row where its columns are strided (2H), the values
// pm and their windows (H each), the bytes where y's columns are strided (H) and the smooth
// scales' row (H), each with kPad elements to spare, so that the loops load and store whole
// vectors (of up to 64 lanes: SVE's widest) past a group's end.
constexpr size_t kPad = 64;
struct QuantScratch {
  float *x, *p, *smooth;
  int32_t *window;
  uint8_t *bytes;
  uint64_t *marks;         // 2 (H + 2): LaneMarks' space
  float *top, *scale;      // per group (G): step 1's largest |p m|, the scale
  bool *unsure;            // per group: whether step 1 left a lane unsure
  ClippedGateTables gate;  // ClippedSwigluQuant's (clipped_gate_table.h), else null
};
}  // namespace infiniop::cpu
#endif

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace {
namespace hn = hwy::HWY_NAMESPACE;
using exact::QuantFormat;
using quant::GatedQuantData;
using quant::GatedQuantPlan;

// Below this |p| or |p m| the relative windows do not hold: the double decides. The tables'
// entries are normal F32 (activation_table.h), and their products' roundings are relative down to
// F32's normal range; the F32 fast path's low parts lose bits below 2^-102 (docs/accuracy.md).
template <class T>
constexpr float kSmallest = std::is_same_v<T, float> ? 0x1p-100f : 0x1p-126f;

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

// A storage value as F32 (exact).
inline float AsFloat(float v) {
  return v;
}
template <class T>
float AsFloat(T v) {
  uint16_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return std::is_same_v<T, hwy::bfloat16_t> ? f32FromBf16(bits) : f32FromF16(bits);
}

// ClippedSwigluQuant's gate (clamp_mode 0) as the pipeline's activation: p = G(A) (b + bias),
// G the gate table's F32 entry (the reference's double g rounded), b = clamp(B, -limit, limit)
// exact, b + bias one F32 rounding. 16-bit x only: no F32 path, no pairs (hi only).
struct ClippedActivation {};
template <class Act>
constexpr bool kClipped = std::is_same_v<Act, ClippedActivation>;

// One row's inputs: x1 (the activation's input) and x2, contiguous, in x's storage type T (the
// row itself, or a copy where x's columns are strided or interleaved), the smooth row (null:
// m = 1), the factor table with its pairs (16-bit x; clipped: the gate, lo null), and clipped's
// attributes and double gate by A's bits.
template <class T>
struct RowInputs {
  const T *x1, *x2;
  const float *m;
  FactorTable table;
  const ClippedSwigluAttributes *clipped = nullptr;
  const double *exact_gate = nullptr;
};

// z_c in double as the reference computes it: z = a m.
template <class Act, class T>
double ExactValue(const RowInputs<T> &in, size_t c) {
  double a = 0;
  if constexpr (kClipped<Act>) {  // the reference's gate from the table: no exponential
    uint16_t bits;
    std::memcpy(&bits, in.x1 + c, sizeof bits);
    a = exact::clippedFromGate(*in.clipped, AsFloat(in.x1[c]), AsFloat(in.x2[c]),
                               in.exact_gate[bits]);
  } else {
    exact::Gated<Act::kExact>()(a, AsFloat(in.x1[c]), AsFloat(in.x2[c]));
  }
  return in.m ? a * in.m[c] : a;
}

// The factor the table's entry multiplies: x2 itself, or clipped's b + bias (b = clamp(B), exact;
// the sum one F32 rounding, relative even where subnormal: such a sum is exact). The clamp as
// exact/clipped_swiglu.h's, by compares, so that a NaN B passes; limit, bias: Set once by the
// caller (not reloaded per vector).
template <class Act, class V>
HWY_INLINE V Multiplier(V x2, V limit, V bias) {
  if constexpr (kClipped<Act>) {
    const V neg = hn::Neg(limit);
    const V b = hn::IfThenElse(hn::Gt(x2, limit), limit, hn::IfThenElse(hn::Lt(x2, neg), neg, x2));
    return hn::Add(b, bias);
  } else {
    (void)limit;
    (void)bias;
    return x2;
  }
}
template <class D>
HWY_INLINE hn::Vec<D> ClippedLimit(D d, const ClippedSwigluAttributes *at) {
  return hn::Set(d, at ? at->limit : 0.0f);
}
template <class D>
HWY_INLINE hn::Vec<D> ClippedBias(D d, const ClippedSwigluAttributes *at) {
  return hn::Set(d, at ? at->bias : 0.0f);
}

// Prefetches of the next row's x, one vector of step 3 at a time: a row's 2 H values of T from
// next_row (an address, not a pointer into x: the last row's is its own), element c of step 3
// taking bytes [2 c, 2 (c + N)) sizeof(T) of it. Steps 2 and 3 load no x, so its lines arrive
// while they compute. Prefetching 4 KiB ahead within step 1's loop instead, where step 1 alone
// waits on memory, was about 5% slower on one thread (BF16 at 16M, AMD Zen 4; the same on two).
template <class T>
HWY_INLINE void PrefetchNextRow(uintptr_t next_row, size_t c, size_t N) {
  const uintptr_t at = next_row + 2 * sizeof(T) * c;
  hwy::Prefetch(reinterpret_cast<const char *>(at));
  // More lines only where a vector's share passes one (F32 x on wide vectors): a loop the
  // compiler drops where the lane count is a constant.
  for (size_t o = 64; o < 2 * sizeof(T) * N; o += 64)
    hwy::Prefetch(reinterpret_cast<const char *>(at + o));
}

// |p m|'s bounds for the F32 path without a test per lane: [kSmallest, F32's max], checked on
// the bits of the largest and smallest |p m| as integers (their bits order as the values do, and
// a NaN's lie above every finite's).
template <class T>
bool InBounds(int32_t largest_bits, int32_t smallest_bits) {
  const auto bits = [](float v) {
    int32_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
  };
  return largest_bits <= bits(3.4028235e38f) && smallest_bits >= bits(kSmallest<T>);
}

// Step 1 for the common row of 16-bit x: groups of whole vectors, every |p m| in bounds (no lane
// unsure, none an exact zero). One loop over the row's groups (its constants stay in registers),
// the bounds checked once after it: no test per vector, nor per group. top[g]: each group's
// largest |p m|. Returns whether the row is in bounds; where not, the caller takes the groups
// that are not (GroupInBounds) vector by vector, rewriting their pm_out.
template <class Act, bool kSmooth, class T>
HWY_INLINE bool TabledRowValues(const RowInputs<T> &in, size_t groups, size_t group_size,
                                float *HWY_RESTRICT pm_out, float *HWY_RESTRICT top) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const size_t N = hn::Lanes(d);
  // Local copies: the stores to pm_out may not alias them, so they stay in registers.
  const auto *HWY_RESTRICT bits1 = reinterpret_cast<const uint16_t *>(in.x1);
  const T *HWY_RESTRICT x2 = in.x2;
  const float *HWY_RESTRICT m = in.m;
  const float *HWY_RESTRICT hi = in.table.hi;
  const auto limit = ClippedLimit(d, in.clipped), bias = ClippedBias(d, in.clipped);
  auto row_largest = hn::Zero(di);
  auto smallest = hn::Set(di, std::numeric_limits<int32_t>::max());
  for (size_t g = 0, c = 0; g < groups; ++g) {
    auto largest = hn::Zero(di);
    for (const size_t end = c + group_size; c < end; c += N) {
      auto pm =
          hn::Mul(LookupCodes(d, hi, bits1 + c), Multiplier<Act>(LoadF32(d, x2 + c), limit, bias));
      if constexpr (kSmooth) pm = hn::Mul(pm, hn::LoadU(d, m + c));
      hn::StoreU(pm, d, pm_out + c);
      const auto a = hn::BitCast(di, hn::Abs(pm));
      largest = hn::Max(largest, a);
      smallest = hn::Min(smallest, a);
    }
    const int32_t high = hn::GetLane(hn::MaxOfLanes(di, largest));
    std::memcpy(&top[g], &high, sizeof high);
    row_largest = hn::Max(row_largest, largest);
  }
  return InBounds<T>(hn::GetLane(hn::MaxOfLanes(di, row_largest)),
                     hn::GetLane(hn::MinOfLanes(di, smallest)));
}

// Whether the group [begin, end) of TabledRowValues' pm (whole vectors) is in bounds.
template <class T>
bool GroupInBounds(const float *pm, size_t begin, size_t end) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  auto largest = hn::Zero(di);
  auto smallest = hn::Set(di, std::numeric_limits<int32_t>::max());
  for (size_t c = begin; c < end; c += hn::Lanes(d)) {
    const auto a = hn::BitCast(di, hn::Abs(hn::LoadU(d, pm + c)));
    largest = hn::Max(largest, a);
    smallest = hn::Min(smallest, a);
  }
  return InBounds<T>(hn::GetLane(hn::MaxOfLanes(di, largest)),
                     hn::GetLane(hn::MinOfLanes(di, smallest)));
}

// Step 1 for one group [begin, end): pm[c] = p_c m_c, p_c the activation in F32 (16-bit x: from the
// factor tables, within 4 F32 steps; F32 x: the activation's fast path, its window in steps per
// lane), NaN where the bound does not hold: p non-finite or tiny, the fast path's exact lanes (the
// far-left tails), p m beyond F32's range or a non-zero p m below kSmallest; an exact zero
// (x1 or x2 or m is 0, all finite) is the signed 0 of the product. window[c]: p's window (only
// where it varies per lane). Returns the largest |pm| of the lanes that are not NaN; *unsure:
// whether any is.
template <class Act, class T>
float GroupValues(const RowInputs<T> &in, size_t begin, size_t end, float *pm_out, int32_t *window,
                  bool *any_unsure) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const size_t N = hn::Lanes(d);
  constexpr bool kTabled = !std::is_same_v<T, float>;
  const T *storage = nullptr;
  const auto sign = hn::Set(di, static_cast<int32_t>(0x80000000u));
  const auto huge = hn::Set(d, 3.4028235e38f), zero = hn::Zero(d), one = hn::Set(d, 1.0f);
  const auto limit = ClippedLimit(d, in.clipped), bias = ClippedBias(d, in.clipped);
  auto largest = hn::Zero(d);
  auto unsure_lanes = hn::FirstN(d, 0);
  // One vector at element c (whole: pm_out and window have kPad to spare). The loop below takes
  // the whole ones and the group's last part once after it, so that no call (a copy) sits in
  // the loop: a call clobbers every vector register, and the loop then reloads its constants.
  // x2: the factor (clipped: b + bias), whose 0 makes an exact zero.
  const auto vector = [&](size_t c, hn::Vec<decltype(d)> x1, hn::Vec<decltype(d)> x2_in)
      __attribute__((always_inline)) {
    const auto x2 = Multiplier<Act>(x2_in, limit, bias);
    auto value = hn::Zero(d);
    auto unsure = hn::FirstN(d, 0);
    if constexpr (kTabled) {
      value = hn::Mul(Lookup(d, in.table.hi, x1, storage), x2);
    } else {
      value = Act::WithAt(
          d, x1, [&](const auto &act) __attribute__((always_inline)) { return act.Value(d, x2); });
      unsure = ExactLanes(d, x1, x1, Act::kTailBound, value);
      if constexpr (std::is_same_v<Act, GeluTanhActivation>)
        hn::StoreU(ValueWindow<Act>(d, x1), di, window + c);
    }
    const auto m = in.m ? hn::LoadU(d, in.m + c) : one;  // the smooth row has kPad spare
    auto pm = hn::Mul(value, m);
    auto a = hn::Abs(pm);
    // The common case: every lane's p m in [kSmallest<T>, F32's max] (a NaN fails), a whole vector.
    const auto fine =
        hn::AndNot(unsure, hn::And(hn::Ge(a, hn::Set(d, kSmallest<T>)), hn::Le(a, huge)));
    if (HWY_LIKELY(c + N <= end && hn::AllTrue(d, fine))) {
      hn::StoreU(pm, d, pm_out + c);
      largest = hn::Max(largest, a);
      return;
    }
    const auto finite = hn::And(hn::Le(hn::Abs(x1), huge), hn::Le(hn::Abs(x2), huge));
    const auto exact_zero = hn::And(finite, hn::Or(hn::Eq(x1, zero), hn::Eq(x2, zero)));
    const auto signed_zero =
        hn::BitCast(d, hn::And(hn::Xor(hn::BitCast(di, x1), hn::BitCast(di, x2)), sign));
    unsure = hn::Or(unsure, hn::Not(hn::And(hn::Ge(hn::Abs(value), hn::Set(d, kSmallest<T>)),
                                            hn::Le(hn::Abs(value), huge))));
    const auto p = hn::IfThenElse(exact_zero, signed_zero, value);
    unsure = hn::AndNot(exact_zero, unsure);
    pm = hn::Mul(p, m);
    // Beyond F32's range (a NaN: an infinite m), or tiny but for an exact zero (p or m 0).
    a = hn::Abs(pm);
    const auto exact = hn::And(hn::Eq(pm, zero), hn::Or(hn::Eq(p, zero), hn::Eq(m, zero)));
    unsure = hn::Or(unsure, hn::Not(hn::Le(a, huge)));
    unsure = hn::Or(unsure, hn::AndNot(exact, hn::Lt(a, hn::Set(d, kSmallest<T>))));
    hn::StoreU(hn::IfThenElse(unsure, hn::Set(d, NAN), pm), d, pm_out + c);
    const auto lanes = hn::FirstN(d, end - c);
    unsure_lanes = hn::Or(unsure_lanes, hn::And(lanes, unsure));
    largest = hn::Max(largest, hn::IfThenElseZero(hn::AndNot(unsure, lanes), a));
  };
  size_t c = begin;
  for (; c + N <= end; c += N) vector(c, LoadF32(d, in.x1 + c), LoadF32(d, in.x2 + c));
  if (c < end) {  // the last part of a vector: zeros past the group (exact zeros, not stored)
    HWY_ALIGN T part1[kPad] = {}, part2[kPad] = {};
    std::copy(in.x1 + c, in.x1 + end, part1);
    std::copy(in.x2 + c, in.x2 + end, part2);
    vector(c, LoadF32(d, part1), LoadF32(d, part2));
  }
  *any_unsure = !hn::AllFalse(d, unsure_lanes);
  return hn::GetLane(hn::MaxOfLanes(d, largest));
}

// p's window in F32 steps where it is one for every lane (0: per lane, in window[]).
// Clipped: G (b + bias) has three roundings (the entry's and the sum's, u each relative, the
// product's half a step): below 2.5 steps of the exact value, 5 across a binade boundary (the
// steps below it are half as large), one to spare: kTableProductWindow + 2 (table-inl.h).
template <class Act, class T>
constexpr int32_t kFixedWindow = kClipped<Act>                            ? kTableProductWindow + 2
                                 : !std::is_same_v<T, float>              ? kTableProductWindow
                                 : std::is_same_v<Act, SiluActivation>    ? 10
                                 : std::is_same_v<Act, GeluErfActivation> ? 12
                                                                          : 0;

// The lanes a vector loop leaves to scalar code after it: (element, lane bits) of each vector
// that has any. No call then sits in the loop: a call clobbers every vector register, and the
// loop reloaded its constants on every iteration around the rare one.
class LaneMarks {
 public:
  explicit LaneMarks(uint64_t *space) : space_(space) {}
  template <class D, class M>
  HWY_INLINE void Add(D d, M mask, size_t c) {
    space_[2 * count_] = c;
    space_[2 * count_ + 1] = MaskBits(d, mask);
    ++count_;
  }
  // body(element) for each marked lane, in order.
  template <class Body>
  void ForEach(const Body &body) const {
    for (size_t i = 0; i < count_; ++i) ForEachBit(space_[2 * i], space_[2 * i + 1], body);
  }

 private:
  uint64_t *space_;
  size_t count_ = 0;
};

// z_c from the factor pair (hi + lo within 2^-48 of the reference's double, x2 and m exact): in
// double, within 2^-46 of the reference's z; NaN where the pair holds no such bound.
template <class T>
double PairValue(const RowInputs<T> &in, size_t c) {
  uint16_t bits;
  std::memcpy(&bits, in.x1 + c, sizeof bits);
  const double v = (static_cast<double>(in.table.hi[bits]) + in.table.lo[bits]) * AsFloat(in.x2[c]);
  return in.m ? v * in.m[c] : v;
}

// The dynamic scale from amax, a largest |z| from the factor pairs (within 2^-46 of the
// reference's): the reference's unless amax / qmax lies within 2^-40 of where the scale's
// rounding changes (an F32 midpoint, or a power of two for UE8M0), or outside the scale's clamps;
// there (and for an amax not finite and positive) returns false, and the reference's doubles
// decide.
inline bool PairScale(const GatedQuantPlan &plan, double amax, float *scale) {
  if (!(std::isfinite(amax) && amax > 0)) return false;
  const double q = amax / exact::quantMax(plan.format);
  uint64_t bits;
  std::memcpy(&bits, &q, sizeof bits);
  const uint64_t mantissa = bits & ((uint64_t{1} << 52) - 1);
  bool near = !(q >= 0x1p-126 && q < 0x1p127);  // the scale's clamps
  if (plan.power_of_two) {                      // just above a power of two, or just below the next
    near = near || mantissa < (uint64_t{1} << 12) ||
           mantissa > (uint64_t{1} << 52) - (uint64_t{1} << 12);
  } else {  // F32's midpoints in q's binade: the low 29 of 52 mantissa bits are 2^28
    const auto low = static_cast<int64_t>(mantissa & ((uint64_t{1} << 29) - 1));
    near = near || std::llabs(low - (int64_t{1} << 28)) < (int64_t{1} << 13);
  }
  if (near) return false;
  // q is inside F32's normal range, and the F32 scale is q rounded once, as exact::dynamicScale
  // has it (without its division again).
  *scale = plan.power_of_two ? exact::dynamicScale(amax, plan.format, true) : static_cast<float>(q);
  return true;
}

// Step 2: the dynamic scale of the group [begin, end) from pm (step 1's).
// top, any_unsure: GroupValues'.
template <class Act, class T>
float GroupScale(const GatedQuantPlan &plan, const RowInputs<T> &in, const float *pm, size_t begin,
                 size_t end, float top, bool any_unsure, uint64_t *marks) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  if (top == 0.0f && !any_unsure) return exact::dynamicScale(0.0, plan.format, plan.power_of_two);
  // UE8M0: the largest |p m|, within its window of the exact amax, decides the power of two but
  // where one lies within that window.
  if constexpr (kFixedWindow < Act, T >> 0) {
    if (plan.power_of_two && !any_unsure) {
      const double margin = (2 * kFixedWindow<Act, T> + 8) * 0x1p-23;
      const float low = exact::dynamicScale(top * (1 - margin), plan.format, true);
      const float high = exact::dynamicScale(top * (1 + margin), plan.format, true);
      if (low == high) return low;
    }
  }
  // The candidates for the largest exact |z|: the unsure lanes, and those whose |p m| may hold
  // it. Each |p m| is within w steps (relative 2^-23 w) of its |z|, so the largest |z|'s lies
  // within 2^-22 w of the largest |p m|: 2^-16 for a fixed window (w <= 12), else 2^-8 (the
  // per-lane windows are below 2^-12).
  constexpr float kReach = kFixedWindow < Act, T >> 0 ? 0x1p-16f : 0x1p-8f;
  static_assert(kFixedWindow<Act, T> <= 12);
  const auto threshold = hn::Set(d, top * (1.0f - kReach));
  constexpr bool kPairs = !std::is_same_v<T, float> && !kClipped<Act>;  // clipped: the double
  bool from_pairs = kPairs;
  double amax = 0;
  const auto take = [&](double z) {
    const double a = std::fabs(z);  // a NaN stays (no call to fmax: this runs per group)
    amax = std::isnan(a) || std::isnan(amax) ? NAN : (a > amax ? a : amax);
  };
  LaneMarks candidates(marks);
  if (!any_unsure && (end - begin) % N == 0) {  // the common group: whole vectors, no NaN
    for (size_t c = begin; c < end; c += N) {
      const auto candidate = hn::Ge(hn::Abs(hn::LoadU(d, pm + c)), threshold);
      if (HWY_UNLIKELY(!hn::AllFalse(d, candidate))) candidates.Add(d, candidate, c);
    }
  } else {
    for (size_t c = begin; c < end; c += N) {
      const auto v = hn::LoadU(d, pm + c);
      const auto candidate =
          hn::And(hn::FirstN(d, end - c), hn::Or(hn::IsNaN(v), hn::Ge(hn::Abs(v), threshold)));
      if (!hn::AllFalse(d, candidate)) candidates.Add(d, candidate, c);
    }
  }
  candidates.ForEach([&](size_t c) {
    double z = NAN;
    if constexpr (kPairs) {
      if (!std::isnan(pm[c])) z = PairValue<T>(in, c);
    }
    if (std::isnan(z)) z = ExactValue<Act, T>(in, c);
    take(z);
  });
  if (from_pairs && std::isfinite(amax) && amax > 0) {
    float scale;
    if (PairScale(plan, amax, &scale)) return scale;
    amax = 0;
    candidates.ForEach([&](size_t c) { take(ExactValue<Act, T>(in, c)); });
  }
  return exact::dynamicScale(amax, plan.format, plan.power_of_two);
}

// Step 3 for a row: bytes[c] for every group g, with scale s[g] (H = groups * group_size bytes).
// unsure: whether any group has an unsure lane (a NaN in pm). The oracle's lanes (near a
// boundary, NaN, or a group whose scale the F32 path cannot take) are done after every group, so
// that no call sits in the loops (a call clobbers every vector register).
template <class Act, class T, QuantFormat kFormat>
void QuantizeRow(const RowInputs<T> &in, const float *pm, const int32_t *window, bool unsure,
                 const float *s, size_t groups, size_t group_size, uint8_t *bytes, uint64_t *marks,
                 uintptr_t next_row) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const hn::RebindToUnsigned<decltype(d)> du32;
  const hn::Rebind<uint8_t, decltype(d)> du8;
  const size_t N = hn::Lanes(d), H = groups * group_size;
  constexpr int32_t kFixed = kFixedWindow<Act, T>;
  LaneMarks oracle_lanes(marks);
  // The bytes of the vector at c (packed) with t = pm r, and its lanes the oracle must take
  // (near a boundary, or NaN where check_nan says a lane may be). t = (p m) r: three roundings
  // (r = 1 / s, the product) on p's window: 2 w + 8 steps of t.
  const auto vector = [&](size_t c, hn::Vec<decltype(d)> r, auto check_nan,
                          hn::Vec<decltype(du8)> &packed) __attribute__((always_inline)) {
    const auto v = hn::LoadU(d, pm + c);
    const auto t = hn::Mul(v, r);
    const auto w = kFixed ? hn::Set(di, kFixed) : hn::LoadU(di, window + c);
    const auto steps = hn::Add(hn::Add(w, w), hn::Set(di, 8));
    hn::Vec<decltype(di)> codes;
    auto open = NearAndCodes<kFormat>(d, t, steps, &codes);
    if constexpr (decltype(check_nan)::value) open = hn::Or(open, hn::IsNaN(v));
    // Every code is a byte's already (INT8's in [-127, 127] as two's complement; a lane the
    // oracle takes may hold anything): its low byte, with no saturation to do.
    packed = hn::TruncateTo(du8, hn::BitCast(du32, codes));
    return open;
  };
  HWY_ALIGN uint8_t last[kPad];
  const size_t whole = group_size / N * N;  // each group's whole vectors
  const auto all = [&](auto check_nan) __attribute__((always_inline)) {
    for (size_t g = 0; g < groups; ++g) {
      const size_t begin = g * group_size, end = begin + group_size;
      if (HWY_UNLIKELY(!F32PathScale(s[g]))) continue;  // the oracle's, below
      const auto r = hn::Set(d, 1.0f / s[g]);
      for (size_t c = begin; c < begin + whole; c += N) {
        hn::Vec<decltype(du8)> packed;
        const auto open = vector(c, r, check_nan, packed);
        PrefetchNextRow<T>(next_row, c, N);
        hn::StoreU(packed, du8, bytes + c);
        if (HWY_UNLIKELY(!hn::AllFalse(d, open))) oracle_lanes.Add(d, open, c);
      }
      if (begin + whole < end) {  // the group's last part of a vector
        const size_t c = begin + whole;
        hn::Vec<decltype(du8)> packed;
        const auto near = vector(c, r, std::true_type(), packed);
        if (c + N <= H) {  // what passes the group's end is the next group's to overwrite
          hn::StoreU(packed, du8, bytes + c);
        } else {  // past the row's end: stored whole, then copied (a call: at the row's end)
          hn::Store(packed, du8, last);
          std::copy(last, last + (H - c), bytes + c);
        }
        const auto open = hn::And(hn::FirstN(d, end - c), near);
        if (!hn::AllFalse(d, open)) oracle_lanes.Add(d, open, c);
      }
    }
  };
  if (unsure)
    all(std::true_type());
  else
    all(std::false_type());
  oracle_lanes.ForEach([&](size_t c) {
    bytes[c] = exact::quantizeByte(ExactValue<Act, T>(in, c) / s[c / group_size], kFormat);
  });
  for (size_t g = 0; g < groups; ++g)  // a scale of 0, tiny or not finite: every byte z / s
    if (HWY_UNLIKELY(!F32PathScale(s[g])))
      for (size_t c = g * group_size; c < (g + 1) * group_size; ++c)
        bytes[c] = exact::quantizeByte(ExactValue<Act, T>(in, c) / s[g], kFormat);
}

// A row's bytes (n of them, in the L1-resident scratch) to y with non-temporal stores: whole
// aligned vectors, the unaligned head and tail plainly. Only where kStreamingStores.
inline void StreamRow(uint8_t *HWY_RESTRICT y, const uint8_t *HWY_RESTRICT bytes, size_t n) {
  const hn::ScalableTag<uint8_t> d8;
  const size_t N = hn::Lanes(d8);
  size_t head = (N - reinterpret_cast<uintptr_t>(y) % N) % N;
  if (head > n) head = n;
  std::memcpy(y, bytes, head);
  size_t c = head;
  for (; c + N <= n; c += N) hn::Stream(hn::LoadU(d8, bytes + c), d8, y + c);
  std::memcpy(y + c, bytes + c, n - c);
}

// The interleaved row (x1 x2 x1 x2 ...) of 2n 16-bit values as x1[n] and x2[n]: whole vectors,
// then the rest.
template <class T>
void Deinterleave(const T *row, size_t n, T *HWY_RESTRICT x1, T *HWY_RESTRICT x2) {
  const hn::ScalableTag<uint16_t> d16;
  const size_t N = hn::Lanes(d16);
  const auto *in = reinterpret_cast<const uint16_t *>(row);
  auto *out1 = reinterpret_cast<uint16_t *>(x1), *out2 = reinterpret_cast<uint16_t *>(x2);
  size_t c = 0;
  for (; c + N <= n; c += N) {
    hn::Vec<decltype(d16)> even, odd;
    hn::LoadInterleaved2(d16, in + 2 * c, even, odd);
    hn::StoreU(even, d16, out1 + c);
    hn::StoreU(odd, d16, out2 + c);
  }
  for (; c < n; ++c) {
    out1[c] = in[2 * c];
    out2[c] = in[2 * c + 1];
  }
}

template <class Act, class T>
void Rows(const GatedQuantPlan &plan, const GatedQuantData &data, const QuantScratch &scratch,
          size_t first, size_t last) {
  const size_t H = plan.half, G = plan.groups;
  // A call moving streamMinBytes() (x read, y written) writes y's rows with non-temporal stores
  // from the scratch, as the elementwise operators write their outputs (docs/performance.md):
  // plain stores would first read each line of y into the cache.
  const bool stream = kStreamingStores && plan.y.col_stride == 1 &&
                      plan.rows * H * (2 * sizeof(T) + 1) >= streamMinBytes();
  for (size_t r = first; r < last; ++r) {
    const ptrdiff_t e = quant::smoothRowOf(plan, data.counts, r);
    auto *y = static_cast<uint8_t *>(data.y) + plan.y.rowOffset(r);
    uint8_t *bytes = plan.y.col_stride == 1 && !stream ? y : scratch.bytes;
    // The row's scales (a division per leading dim to find: once per row, not per group).
    float *scale = static_cast<float *>(data.scale) + plan.scale.rowOffset(r);
    const auto scale_at = [&](size_t g) -> float & {
      return scale[static_cast<ptrdiff_t>(g) * plan.scale.col_stride];
    };
    if (e < 0) {  // past group_index's counts: zeros, and scale 0
      std::memset(bytes, 0, H);
      if (plan.dynamic)
        for (size_t g = 0; g < G; ++g) scale_at(g) = 0.0f;
    } else {
      const T *row = static_cast<const T *>(data.x) + plan.x.rowOffset(r);
      RowInputs<T> in{row + plan.gateColumn(0), row + plan.multiplierColumn(0), nullptr,
                      FactorTable{nullptr, nullptr}};
      if (plan.x.col_stride != 1 || plan.interleaved) {  // x1 and x2 copied contiguous
        T *copy = reinterpret_cast<T *>(scratch.x);
        if (plan.x.col_stride == 1)
          Deinterleave(row, H, copy, copy + H);
        else
          for (size_t c = 0; c < H; ++c) {
            copy[c] = row[static_cast<ptrdiff_t>(plan.gateColumn(c)) * plan.x.col_stride];
            copy[H + c] = row[static_cast<ptrdiff_t>(plan.multiplierColumn(c)) * plan.x.col_stride];
          }
        in.x1 = copy;
        in.x2 = copy + H;
      }
      if (plan.smooth) {
        LoadRowVec(plan.smooth_scales, data.smooth_scales, static_cast<size_t>(e), scratch.smooth);
        in.m = scratch.smooth;
      }
      if constexpr (kClipped<Act>) {
        in.table = FactorTable{scratch.gate.gate, nullptr};
        in.clipped = &plan.clipped;
        in.exact_gate = scratch.gate.exact;
      } else if constexpr (!std::is_same_v<T, float>) {
        in.table = factorTable<Act::kExact, IsBf16<T>()>();
      }
      // Each step for every group of the row before the next, so that each step's loops keep
      // their constants in registers from group to group.
      bool row_unsure = false;
      bool tabled = false, row_in_bounds = false;  // TabledRowValues' top[g] and pm, and its test
      if constexpr (!std::is_same_v<T, float>) {
        tabled = plan.group_size % hn::Lanes(hn::ScalableTag<float>()) == 0;
        if (tabled)
          row_in_bounds =
              in.m ? TabledRowValues<Act, true>(in, G, plan.group_size, scratch.p, scratch.top)
                   : TabledRowValues<Act, false>(in, G, plan.group_size, scratch.p, scratch.top);
      }
      for (size_t g = 0; g < G; ++g) {
        const size_t begin = g * plan.group_size, end = begin + plan.group_size;
        bool unsure = false;
        if (!row_in_bounds && !(tabled && GroupInBounds<T>(scratch.p, begin, end)))
          scratch.top[g] = GroupValues<Act, T>(in, begin, end, scratch.p, scratch.window, &unsure);
        scratch.unsure[g] = unsure;
        row_unsure = row_unsure || unsure;
      }
      for (size_t g = 0; g < G; ++g) {
        if (plan.dynamic) {
          const size_t begin = g * plan.group_size, end = begin + plan.group_size;
          scratch.scale[g] = GroupScale<Act, T>(plan, in, scratch.p, begin, end, scratch.top[g],
                                                scratch.unsure[g], scratch.marks);
          scale_at(g) = scratch.scale[g];
        } else {
          scratch.scale[g] = scale_at(g);
        }
      }
      const uintptr_t next_row =
          reinterpret_cast<uintptr_t>(row) + (r + 1 < last && plan.x.col_stride == 1
                                                  ? plan.x.rowOffset(r + 1) - plan.x.rowOffset(r)
                                                  : 0) *
                                                 sizeof(T);
      if (plan.format == QuantFormat::int8)
        QuantizeRow<Act, T, QuantFormat::int8>(in, scratch.p, scratch.window, row_unsure,
                                               scratch.scale, G, plan.group_size, bytes,
                                               scratch.marks, next_row);
      else
        QuantizeRow<Act, T, QuantFormat::fp8_e4m3>(in, scratch.p, scratch.window, row_unsure,
                                                   scratch.scale, G, plan.group_size, bytes,
                                                   scratch.marks, next_row);
    }
    if (bytes == y) continue;
    if (plan.y.col_stride == 1)
      StreamRow(y, bytes, H);
    else
      for (size_t c = 0; c < H; ++c) y[static_cast<ptrdiff_t>(c) * plan.y.col_stride] = bytes[c];
  }
  if (stream) hwy::FlushStream();
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
    case quant::GateActivation::clipped:  // 16-bit x with a gate table only
      if (plan.dtype == INFINI_DTYPE_BF16)
        return Rows<ClippedActivation, hwy::bfloat16_t>(plan, data, scratch, first, last);
      return Rows<ClippedActivation, hwy::float16_t>(plan, data, scratch, first, last);
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
    case quant::GateActivation::clipped:  // the caller's gate table
      return;
  }
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace infiniop::cpu {
HWY_EXPORT(GatedQuantRows);
HWY_EXPORT(GatedQuantTables);

namespace {
// A thread's block of n elements of T in a scratch array: n rounded up to whole cache lines, and
// one line more, so that no two threads write one line whatever the array's alignment (the
// unsure flags' shared line made 2-thread calls 1.15x the unfused pair's time, against 1.0x on
// one thread).
template <class T>
constexpr size_t threadStride(size_t n) {
  constexpr size_t kLine = 64 / sizeof(T);
  return (n + 2 * kLine - 1) / kLine * kLine;
}

void gatedQuant(const quant::GatedQuantPlan &p, const quant::GatedQuantData &d,
                const ClippedGateTables &gate = {}) {
  if (p.half == 0) {  // no values: x and y may be NULL, and no row pointer into them is formed
    quant::scaleOnlyRows(p, d.counts, static_cast<float *>(d.scale), 0, p.rows);
    return;
  }
  HWY_DYNAMIC_DISPATCH(GatedQuantTables)(p);
  // Every thread's rows, allocated before the threads start.
  const size_t H = p.half, G = p.groups;
  const size_t ranges = static_cast<size_t>(std::max(1, callThreads()));
  // x, p, smooth, each with kPad to spare; the groups' top and scale
  const size_t floats = threadStride<float>(2 * H + H + H + 3 * kPad + 2 * G);
  const size_t windows_n = threadStride<int32_t>(H + kPad),
               bytes_n = threadStride<uint8_t>(H + kPad);
  const size_t marks_n = threadStride<uint64_t>(2 * (H + 2)), unsure_n = threadStride<bool>(G);
  // Not value-initialized (every element is written before it is read, but the lanes past a
  // group's end, which no result takes): zeroing them cost more than a small call's work.
  const std::unique_ptr<float[]> space(new float[floats * ranges]);
  const std::unique_ptr<int32_t[]> windows(new int32_t[windows_n * ranges]);
  const std::unique_ptr<uint8_t[]> bytes(new uint8_t[bytes_n * ranges]);
  const std::unique_ptr<uint64_t[]> marks(new uint64_t[marks_n * ranges]);
  const std::unique_ptr<bool[]> unsure(new bool[unsure_n * ranges]);
  std::atomic<size_t> next{0};
  const auto run = &HWY_DYNAMIC_DISPATCH(GatedQuantRows);
  parallelRanges(p.rows, 8 * H, [&](size_t first, size_t last) {
    const size_t k = next.fetch_add(1) % ranges;
    float *base = space.get() + k * floats;
    float *groups = base + 4 * H + 3 * kPad;
    QuantScratch scratch{base,
                         base + 2 * H + kPad,
                         base + 3 * H + 2 * kPad,
                         windows.get() + k * windows_n,
                         bytes.get() + k * bytes_n,
                         marks.get() + k * marks_n,
                         groups,
                         groups + G,
                         unsure.get() + k * unsure_n,
                         gate};
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
void clippedSwigluQuantTabled(const quant::GatedQuantPlan &p, const quant::GatedQuantData &d,
                              const ClippedGateTables &tables) {
  gatedQuant(p, d, tables);
}
}  // namespace infiniop::cpu
#endif
