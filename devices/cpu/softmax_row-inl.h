// SPDX-License-Identifier: Apache-2.0
// The softmax of a row on the cpu device, per Highway target, shared by the router operators
// (moe_gating.cc) and the z-loss (moe_z_loss.cc): the row's max, exp(-(m - x)) (ExpFloor), the
// 16-slot fixed-order sum (SlotSum) and the rows' vector loads and stores. The same IEEE F32
// operations in the same order on every target (docs/moe_gating_top_k_softmax.md), as
// opencl's kernels/moe_gating.cl.
#if defined(INFINIOP_CPU_SOFTMAX_ROW_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef INFINIOP_CPU_SOFTMAX_ROW_INL_H_
#undef INFINIOP_CPU_SOFTMAX_ROW_INL_H_
#else
#define INFINIOP_CPU_SOFTMAX_ROW_INL_H_
#endif

#include <cmath>
#include <type_traits>

#include "cpu/convert-inl.h"
#include "cpu/math-inl.h"
#include "cpu/moe_gating_select.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// exp(-a) for a = m - x >= 0; 0 where a > 87 (beyond ExpOfMinus's range, e^-a < 2^-125.5); NaN
// stays NaN.
template <class D, class V>
HWY_INLINE V ExpFloor(D d, V a) {
  const auto beyond = hn::Gt(a, hn::Set(d, 87.0f));
  const V e = ExpOfMinus(d, hn::IfThenZeroElse(beyond, a));
  return hn::IfThenElse(hn::IsNaN(a), a, hn::IfThenZeroElse(beyond, e));
}

// out[j] = f(d, in[j]) over n elements: whole vectors, then one lane at a time (the same
// operations per lane, so the same bits).
template <class F>
HWY_INLINE void MapRow(const float *in, float *out, size_t n, const F &f) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  const size_t N = hn::Lanes(d);
  size_t j = 0;
  for (; j + N <= n; j += N) hn::StoreU(f(d, hn::LoadU(d, in + j)), d, out + j);
  for (; j < n; ++j) hn::StoreU(f(d1, hn::LoadU(d1, in + j)), d1, out + j);
}

// Highway's storage type of a library float type (the same bits).
template <class S>
using HwyStorage =
    std::conditional_t<std::is_same_v<S, F16>, hwy::float16_t,
                       std::conditional_t<std::is_same_v<S, BF16>, hwy::bfloat16_t, float>>;

// LoadRow as whole vectors where the row is contiguous (LoadF32 widens exactly: the same values).
inline void LoadRowVec(const moe::RouterView &v, const void *data, size_t r, float *out) {
  if (v.col_stride != 1) return gating::LoadRow(v, data, r, out);
  visitFloatStorage(v.dtype, [&](auto t) HWY_ATTR {
    using S = decltype(t);
    const S *row = static_cast<const S *>(data) + v.rowOffset(r);
    const hn::ScalableTag<float> d;
    const size_t N = hn::Lanes(d);
    size_t c = 0;
    for (; c + N <= v.cols; c += N)
      hn::StoreU(LoadF32(d, reinterpret_cast<const HwyStorage<S> *>(row + c)), d, out + c);
    for (; c < v.cols; ++c) out[c] = toFloat(row[c]);
  });
}

// StoreRow as whole vectors where the row is contiguous: StoreF32 rounds to nearest even and
// writes the canonical NaN, as the scalar tail does.
inline void StoreRowVec(const moe::RouterView &v, void *data, size_t r, const float *values) {
  if (v.col_stride != 1) return gating::StoreRow(v, data, r, values);
  visitFloatStorage(v.dtype, [&](auto t) HWY_ATTR {
    using S = decltype(t);
    S *row = static_cast<S *>(data) + v.rowOffset(r);
    const hn::ScalableTag<float> d;
    const size_t N = hn::Lanes(d);
    size_t c = 0;
    for (; c + N <= v.cols; c += N)
      StoreF32(d, hn::LoadU(d, values + c), reinterpret_cast<HwyStorage<S> *>(row + c));
    for (; c < v.cols; ++c) row[c] = fromFloat<S>(gating::Canonical(values[c]));
  });
}

// The fixed-order row sum: element j into slot j % 16, each slot from +0 in increasing j, then
// the slots pairwise (i += i + 8, i += i + 4, i += i + 2, 0 += 1).
inline float SlotSum(const float *e, size_t n) {
  HWY_ALIGN float slots[16] = {};
  const hn::CappedTag<float, 16> d;
  const size_t N = hn::Lanes(d);  // a power of two up to 16: whole slots
  size_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (size_t s = 0; s < 16; s += N)
      hn::Store(hn::Add(hn::Load(d, slots + s), hn::LoadU(d, e + j + s)), d, slots + s);
  for (; j < n; ++j) slots[j % 16] += e[j];
  for (size_t half = 8; half >= 1; half /= 2)
    for (size_t i = 0; i < half; ++i) slots[i] += slots[i + half];
  return slots[0];
}

// The scalar max of Softmax: from -inf, m = x_j where x_j > m, the first NaN where there is one.
inline float ScalarMax(const float *x, size_t n) {
  float m = -INFINITY;
  for (size_t j = 0; j < n; ++j) {
    if (std::isnan(x[j])) return x[j];
    m = x[j] > m ? x[j] : m;
  }
  return m;
}

// ScalarMax over whole vectors: a non-zero max is one value whichever lane holds it; a zero max
// (whose sign is the first zero's) and a NaN go to the scalar loop.
inline float RowMax(const float *x, size_t n) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t N = hn::Lanes(d);
  if (n < N) return ScalarMax(x, n);
  V m = hn::Set(d, -INFINITY), nan = hn::Zero(d);
  size_t j = 0;
  for (; j + N <= n; j += N) {
    const V v = hn::LoadU(d, x + j);
    m = hn::IfThenElse(hn::Gt(v, m), v, m);
    nan = hn::Or(nan, hn::VecFromMask(d, hn::IsNaN(v)));
  }
  if (j < n) {  // the last vector again, overlapping: the max does not change
    const V v = hn::LoadU(d, x + n - N);
    m = hn::IfThenElse(hn::Gt(v, m), v, m);
    nan = hn::Or(nan, hn::VecFromMask(d, hn::IsNaN(v)));
  }
  const float max = hn::GetLane(hn::MaxOfLanes(d, m));
  if (!hn::AllFalse(d, hn::MaskFromVec(nan)) || max == 0.0f) return ScalarMax(x, n);
  return max;
}

// p = softmax(x) over n: m = max (NaN if any), e = exp(-(m - x)), S = SlotSum(e), p = e / S.
inline void Softmax(const float *x, float *p, size_t n) {
  const float m = RowMax(x, n);
  MapRow(x, p, n, [m](auto d, auto v) HWY_ATTR { return ExpFloor(d, hn::Sub(hn::Set(d, m), v)); });
  const float sum = SlotSum(p, n);
  MapRow(p, p, n, [sum](auto d, auto v) HWY_ATTR { return hn::Div(v, hn::Set(d, sum)); });
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // INFINIOP_CPU_SOFTMAX_ROW_INL_H_
