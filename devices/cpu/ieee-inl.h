// SPDX-License-Identifier: Apache-2.0
// The one place where the cpu kernels' arithmetic meets a target's instruction set. Every
// operation here has one IEEE-defined result (a correctly rounded fused multiply-add, integer bit
// operations, a Newton step of fixed count), so each target returns the same bits; only how fast
// differs. The kernels use these instead of hn::MulAdd (two roundings on SSE4, SSSE3 and SCALAR,
// which have no fma) and hn::ApproximateReciprocal (12 bits on AVX2, 14 on AVX-512, 8 on NEON).
// The build compiles the kernels with -ffp-contract=off, so that the compiler fuses no
// `a * b + c` of its own on the targets that have an fma (docs/accuracy.md).
#if defined(INFINIOP_CPU_IEEE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef INFINIOP_CPU_IEEE_INL_H_
#undef INFINIOP_CPU_IEEE_INL_H_
#else
#define INFINIOP_CPU_IEEE_INL_H_
#endif

#include <cmath>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if !HWY_NATIVE_FMA
// Each lane through std::fma, which is correctly rounded by definition (glibc computes it exactly
// in double with round-to-odd): slower on these legacy targets, never different. Out of line, one
// instance per target: the kernels hold dozens of fmas, each inlined copy would be a loop.
template <class D, class V>
HWY_NOINLINE V EmulatedFma(D d, V a, V b, V c) {
  constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);
  HWY_ALIGN float la[kMaxLanes], lb[kMaxLanes], lc[kMaxLanes];
  hn::Store(a, d, la);
  hn::Store(b, d, lb);
  hn::Store(c, d, lc);
  for (size_t i = 0; i < hn::Lanes(d); ++i) la[i] = std::fma(la[i], lb[i], lc[i]);
  return hn::Load(d, la);
}
#endif

// a b + c rounded once: the target's fma, or EmulatedFma where it has none.
template <class D, class V>
HWY_INLINE V Fma(D d, V a, V b, V c) {
#if HWY_NATIVE_FMA
  (void)d;
  return hn::MulAdd(a, b, c);
#else
  return EmulatedFma(d, a, b, c);
#endif
}

// -a b + c and a b - c, rounded once (negation is exact): one instruction where the target has
// an fma (Highway's Neg is an xor the compiler does not fold into the fma).
template <class D, class V>
HWY_INLINE V NegFma(D d, V a, V b, V c) {
#if HWY_NATIVE_FMA
  (void)d;
  return hn::NegMulAdd(a, b, c);
#else
  return Fma(d, hn::Neg(a), b, c);
#endif
}
template <class D, class V>
HWY_INLINE V FmaSub(D d, V a, V b, V c) {
#if HWY_NATIVE_FMA
  (void)d;
  return hn::MulSub(a, b, c);
#else
  return Fma(d, a, b, hn::Neg(c));
#endif
}

// 1 / y within 2^-17 (relative) for a positive normal y below 2^126, from the same integer
// estimate on every target (within 5.1%, from the bits of y) and two Newton steps whose residual
// is an fma (each squares the error: 2^-8.6, then 2^-17). Every caller corrects its quotient
// once more by an exact remainder, which squares it again (2^-34, far below F32's rounding), or
// takes one more Newton step (Sigmoid::s, within F32's rounding of 1 / y). A third step here cost
// the activations a fifth of their in-cache speed. OpenCL's reciprocal_estimate is the same
// operations.
template <class D, class V>
HWY_INLINE V ReciprocalEstimate(D d, V y) {
  const hn::RebindToSigned<D> di;
  const V one = hn::Set(d, 1.0f);
  V r = hn::BitCast(d, hn::Sub(hn::Set(di, 0x7EF311C3), hn::BitCast(di, y)));
  r = Fma(d, r, NegFma(d, y, r, one), r);
  return Fma(d, r, NegFma(d, y, r, one), r);
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // INFINIOP_CPU_IEEE_INL_H_
