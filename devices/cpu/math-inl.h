// Per-target vector maths shared by the cpu kernels, beyond what hwy/contrib/math offers.
#if defined(INFINIOP_CPU_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef INFINIOP_CPU_MATH_INL_H_
#undef INFINIOP_CPU_MATH_INL_H_
#else
#define INFINIOP_CPU_MATH_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// exp(max(a, -87)) for a <= 0 (NaN not expected): a normal F32 in [1.6e-38, 1], within 2 ulp.
// Cheaper than hn::Exp because it needs neither the overflow nor the subnormal range: one
// range reduction a = n ln2 + r, |r| <= ln2/2, a degree-6 polynomial, one exponent scale.
template <class D, class V>
HWY_INLINE V ExpNonPositive(D d, V a) {
  const hn::RebindToSigned<D> di;
  a = hn::Max(a, hn::Set(d, -87.0f));
  const V n = hn::Round(hn::Mul(a, hn::Set(d, 1.44269504088896341f)));
  // ln2 split in two so that n * ln2_hi is exact for |n| <= 126.
  V r = hn::MulAdd(n, hn::Set(d, -0.693145751953125f), a);
  r = hn::MulAdd(n, hn::Set(d, -1.428606765330187e-6f), r);
  // e^r = 1 + r + r^2 q(r), q fitted on Chebyshev nodes of [-ln2/2, ln2/2].
  V q = hn::Set(d, 0.0013933645095676184f);
  q = hn::MulAdd(q, r, hn::Set(d, 0.008363175205886364f));
  q = hn::MulAdd(q, r, hn::Set(d, 0.04166646674275398f));
  q = hn::MulAdd(q, r, hn::Set(d, 0.16666576266288757f));
  q = hn::MulAdd(q, r, hn::Set(d, 0.5f));
  const V p = hn::MulAdd(hn::Mul(r, r), q, hn::Add(r, hn::Set(d, 1.0f)));
  const auto biased = hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127));  // n in [-126, 0]
  return hn::Mul(p, hn::BitCast(d, hn::ShiftLeft<23>(biased)));
}

// 1 / y for y in [1, 2]: the hardware estimate refined by one Newton step (<= 1 ulp), far
// cheaper than a division.
template <class D, class V>
HWY_INLINE V ReciprocalOneToTwo(D d, V y) {
  const V estimate = hn::ApproximateReciprocal(y);
  return hn::Mul(estimate, hn::NegMulAdd(y, estimate, hn::Set(d, 2.0f)));
}

// Returns s (1 - s) and sets *s = sigmoid(x), both without cancellation: with e = exp(-|x|) and
// r = 1 / (1 + e), s = (x < 0 ? e r : r) and s (1 - s) = e r^2. exp is clamped at exp(-87), so
// for x < -87 both are tiny (about 1.6e-38) instead of 0 or subnormal.
template <class D, class V>
HWY_INLINE V SigmoidAndSlope(D d, V x, V *s) {
  const V e = ExpNonPositive(d, hn::Neg(hn::Abs(x)));
  const V r = ReciprocalOneToTwo(d, hn::Add(hn::Set(d, 1.0f), e));
  const V er = hn::Mul(e, r);
  *s = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), er, r);
  return hn::Mul(er, r);
}

// `value` computed from a clamped x, with x's non-finite cases restored: 0 where x is -inf (the
// limit of silu, gelu and their derivatives there), NaN where x is NaN.
template <class D, class V>
HWY_INLINE V ZeroAtMinusInfNaNAtNaN(D d, V x, V value) {
  value = hn::IfThenZeroElse(hn::Lt(x, hn::Set(d, -3.4028235e38f)), value);
  return hn::IfThenElse(hn::IsNaN(x), x, value);
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // INFINIOP_CPU_MATH_INL_H_
