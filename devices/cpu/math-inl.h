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
  // n = round(a / ln2) by adding 1.5 * 2^23, whose ulp is 1: the sum's low bits are then n in
  // two's complement, ready to shift into the exponent field.
  const V shifter = hn::Set(d, 12582912.0f);
  const V n_plus_shifter = hn::MulAdd(a, hn::Set(d, 1.44269504088896341f), shifter);
  const V n = hn::Sub(n_plus_shifter, shifter);
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
  const auto exponent = hn::ShiftLeft<23>(hn::BitCast(di, n_plus_shifter));      // n << 23
  return hn::Mul(p, hn::BitCast(d, hn::Add(exponent, hn::Set(di, 127 << 23))));  // n >= -126
}

// 1 / y for a positive normal y: the hardware estimate refined by one Newton step (<= 1 ulp),
// far cheaper than a division.
template <class D, class V>
HWY_INLINE V Reciprocal(D d, V y) {
  const V estimate = hn::ApproximateReciprocal(y);
  return hn::Mul(estimate, hn::NegMulAdd(y, estimate, hn::Set(d, 2.0f)));
}

// Returns s (1 - s) and sets *s = sigmoid(x), both without cancellation: with e = exp(-|x|) and
// r = 1 / (1 + e), s = (x < 0 ? e r : r) and s (1 - s) = e r^2. exp is clamped at exp(-87), so
// for x < -87 both are tiny (about 1.6e-38) instead of 0 or subnormal.
template <class D, class V>
HWY_INLINE V SigmoidAndSlope(D d, V x, V *s) {
  const V e = ExpNonPositive(d, hn::Neg(hn::Abs(x)));
  const V r = Reciprocal(d, hn::Add(hn::Set(d, 1.0f), e));
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

// silu(x) = x sigmoid(x); returns it and sets *derivative to s + x s (1 - s) (whose zero near
// x = -1.2785 is where the two terms cancel). x is clamped at -87, where sigmoid's exp is clamped
// too: below it both are tiny negative numbers (|value| < 1.5e-36) rather than x * 1.6e-38, which
// grows with |x|; the derivative's x is capped at 40, beyond which x s (1 - s) vanishes.
template <class D, class V>
HWY_INLINE V Silu(D d, V input, V *derivative) {
  const V x = hn::Max(input, hn::Set(d, -87.0f));
  V s;
  const V slope = SigmoidAndSlope(d, x, &s);
  const V capped = hn::Min(x, hn::Set(d, 40.0f));
  *derivative = ZeroAtMinusInfNaNAtNaN(d, input, hn::MulAdd(capped, slope, s));
  return ZeroAtMinusInfNaNAtNaN(d, input, hn::Mul(x, s));
}

// gelu_tanh(x) = x sigmoid(v), v = 2u = 2a (x + b x^3); returns it and sets *derivative to
//   s + x v' s (1 - s),  v' = 2a (1 + 3 b x^2),
// which never cancels for negative x (unlike 0.5 (1 + tanh u)). x is clamped at -20, where both
// are tiny negative numbers (|error| < 2^-125 (1 + |x v'|)), and the derivative's x at +20,
// beyond which it is 1. Unused results cost nothing once inlined.
template <class D, class V>
HWY_INLINE V GeluTanh(D d, V input, V *derivative) {
  constexpr float kTwoA = 1.5957691216057308f;  // 2 sqrt(2/pi)
  constexpr float kTwoAB = kTwoA * 0.044715f;
  constexpr float kSixAB = 3.0f * kTwoAB;
  const V x_low = hn::Max(input, hn::Set(d, -20.0f));
  const V v =
      hn::Mul(x_low, hn::MulAdd(hn::Mul(x_low, x_low), hn::Set(d, kTwoAB), hn::Set(d, kTwoA)));
  V s;
  const V slope = SigmoidAndSlope(d, v, &s);
  const V x = hn::Min(x_low, hn::Set(d, 20.0f));
  const V dv = hn::MulAdd(hn::Mul(x, x), hn::Set(d, kSixAB), hn::Set(d, kTwoA));
  *derivative = ZeroAtMinusInfNaNAtNaN(d, input, hn::MulAdd(hn::Mul(x, dv), slope, s));
  return ZeroAtMinusInfNaNAtNaN(d, input, hn::Mul(x_low, s));
}

// gelu_erf(x) = x Phi(x); returns it and sets *derivative to Phi(x) + x phi(x). Phi comes from
// erfc(|x| / sqrt 2) = t exp(-z^2 - 1.26551223 + t P(t)), t = 1 / (1 + z / 2) (Numerical
// Recipes' Chebyshev fit, relative error < 1.2e-7 for every z >= 0), so the left tail keeps its
// relative accuracy. Clamps as in GeluTanh.
template <class D, class V>
HWY_INLINE V GeluErf(D d, V input, V *derivative) {
  const V x_low = hn::Max(input, hn::Set(d, -20.0f));
  const V x = hn::Min(x_low, hn::Set(d, 20.0f));
  const V z = hn::Mul(hn::Abs(x), hn::Set(d, 0.70710678118654752f));
  const V z2 = hn::Mul(z, z);
  const V t = Reciprocal(d, hn::MulAdd(z, hn::Set(d, 0.5f), hn::Set(d, 1.0f)));
  V p = hn::Set(d, 0.17087277f);
  p = hn::MulAdd(p, t, hn::Set(d, -0.82215223f));
  p = hn::MulAdd(p, t, hn::Set(d, 1.48851587f));
  p = hn::MulAdd(p, t, hn::Set(d, -1.13520398f));
  p = hn::MulAdd(p, t, hn::Set(d, 0.27886807f));
  p = hn::MulAdd(p, t, hn::Set(d, -0.18628806f));
  p = hn::MulAdd(p, t, hn::Set(d, 0.09678418f));
  p = hn::MulAdd(p, t, hn::Set(d, 0.37409196f));
  p = hn::MulAdd(p, t, hn::Set(d, 1.00002368f));
  p = hn::MulAdd(p, t, hn::Set(d, -1.26551223f));
  const V half_erfc = hn::Mul(hn::Mul(t, hn::Set(d, 0.5f)), ExpNonPositive(d, hn::Sub(p, z2)));
  const V cdf =
      hn::IfThenElse(hn::Lt(x, hn::Zero(d)), half_erfc, hn::Sub(hn::Set(d, 1.0f), half_erfc));
  const V pdf = hn::Mul(ExpNonPositive(d, hn::Neg(z2)), hn::Set(d, 0.3989422804014327f));
  *derivative = ZeroAtMinusInfNaNAtNaN(d, input, hn::MulAdd(x, pdf, cdf));
  return ZeroAtMinusInfNaNAtNaN(d, input, hn::Mul(x_low, cdf));
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // INFINIOP_CPU_MATH_INL_H_
