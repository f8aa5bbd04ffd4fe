// SPDX-License-Identifier: Apache-2.0
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

// exp(max(a, -87)) for a <= 0 (NaN not expected): a normal F32 in [1.6e-38, 1], within 1 ulp.
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
  // e^r = 1 + r (1 + r q(r)), q fitted on Chebyshev nodes of [-ln2/2, ln2/2]. Horner down to
  // the final 1 leaves one rounding at full weight: r (1 + r q) is below 0.35 ulp-weighted.
  V q = hn::Set(d, 0.0013933645095676184f);
  q = hn::MulAdd(q, r, hn::Set(d, 0.008363175205886364f));
  q = hn::MulAdd(q, r, hn::Set(d, 0.04166646674275398f));
  q = hn::MulAdd(q, r, hn::Set(d, 0.16666576266288757f));
  q = hn::MulAdd(q, r, hn::Set(d, 0.5f));
  const V one = hn::Set(d, 1.0f);
  const V p = hn::MulAdd(r, hn::MulAdd(r, q, one), one);
  const auto exponent = hn::ShiftLeft<23>(hn::BitCast(di, n_plus_shifter));      // n << 23
  return hn::Mul(p, hn::BitCast(d, hn::Add(exponent, hn::Set(di, 127 << 23))));  // n >= -126
}

// 1 / y for a positive normal y within about 1 ulp (the hardware estimate, 12 bits on SSE4 and
// AVX2, 14 on AVX-512, plus one Newton step): only ever the multiplier of a correction below,
// where that is plenty, so no division is needed.
template <class D, class V>
HWY_INLINE V Reciprocal(D d, V y) {
  const V estimate = hn::ApproximateReciprocal(y);
  return hn::MulAdd(estimate, hn::NegMulAdd(y, estimate, hn::Set(d, 1.0f)), estimate);
}

// a b - round(a b), exactly: an fma where there is one, else Dekker's product of split halves
// (SSE4, SSSE3 and SCALAR have no fused multiply-add; Highway emulates it with two roundings).
template <class D, class V>
HWY_INLINE V ProductError(D d, V a, V b, V product) {
#if HWY_NATIVE_FMA
  (void)d;
  return hn::MulSub(a, b, product);
#else
  const V split = hn::Set(d, 4097.0f);  // 2^12 + 1: halves of 12 and 12 bits
  const V ca = hn::Mul(a, split), cb = hn::Mul(b, split);
  const V a_hi = hn::Sub(ca, hn::Sub(ca, a)), b_hi = hn::Sub(cb, hn::Sub(cb, b));
  const V a_lo = hn::Sub(a, a_hi), b_lo = hn::Sub(b, b_hi);
  V error = hn::Sub(hn::Mul(a_hi, b_hi), product);
  error = hn::Add(error, hn::Mul(a_hi, b_lo));
  error = hn::Add(error, hn::Mul(a_lo, b_hi));
  return hn::Add(error, hn::Mul(a_lo, b_lo));
#endif
}

// (n + n_lo) / (den + den_lo) for |n_lo| <= ulp(n), |den_lo| <= ulp(den), r ~ 1 / den within a
// few ulp, to about 0.5 ulp: q = n r, corrected by the exact remainder n - q den (q den is within
// a few ulp of n, so the subtraction is exact), so that r's last bits (rcpps, rcp14) never show
// and no division is needed.
template <class D, class V>
HWY_INLINE V Quotient(D d, V n, V n_lo, V den, V den_lo, V r) {
  const V q = hn::Mul(n, r);
#if HWY_NATIVE_FMA
  (void)d;
  V remainder = hn::NegMulAdd(q, den, n);
#else
  const V q_den = hn::Mul(q, den);
  V remainder = hn::Sub(hn::Sub(n, q_den), ProductError(d, q, den, q_den));
#endif
  remainder = hn::NegMulAdd(q, den_lo, hn::Add(remainder, n_lo));
  return hn::MulAdd(remainder, r, q);
}

// x sigmoid(v), and *s = sigmoid(v), *slope = s (1 - s), none with cancellation: with
// e = exp(-|v|) and D = 1 + e (kept exactly as D + D_lo), sigmoid(|v|) = 1 / D and
// sigmoid(-|v|) = e / D, each a corrected quotient, so sigmoid(0) = 1/2 exactly and sigmoid is
// exactly 1 wherever that is the rounded value; x e enters as an exact product (x e + an fma's
// remainder). The error is then e's (<= 1 ulp) plus one rounding. exp is clamped at exp(-87),
// so for v < -87 s and slope are tiny (about 1.6e-38) instead of 0 or subnormal. x = +inf gives
// +inf s. Unused results cost nothing once inlined.
template <class D, class V>
HWY_INLINE V TimesSigmoid(D d, V x, V v, V *s, V *slope) {
  const V zero = hn::Zero(d), one = hn::Set(d, 1.0f);
  const V e = ExpNonPositive(d, hn::Neg(hn::Abs(v)));
  const V den = hn::Add(one, e);
  const V den_lo = hn::Sub(e, hn::Sub(den, one));  // exact (Fast2Sum: 1 >= e)
  const V r = Reciprocal(d, den);
  const V big = Quotient(d, one, zero, den, den_lo, r);  // sigmoid(|v|), in [1/2, 1]
  const V small = Quotient(d, e, zero, den, den_lo, r);  // sigmoid(-|v|) = 1 - big
  const auto negative = hn::Lt(v, zero);
  *s = hn::IfThenElse(negative, small, big);
  *slope = hn::Mul(big, small);
  const V xe = hn::Mul(x, e);
  const V n = hn::IfThenElse(negative, xe, x);
  const V n_lo = hn::IfThenElseZero(negative, ProductError(d, x, e, xe));
  return hn::IfThenElse(hn::IsInf(x), hn::Mul(x, *s), Quotient(d, n, n_lo, den, den_lo, r));
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
  V s, slope;
  const V value = TimesSigmoid(d, x, x, &s, &slope);
  const V capped = hn::Min(x, hn::Set(d, 40.0f));
  *derivative = ZeroAtMinusInfNaNAtNaN(d, input, hn::MulAdd(capped, slope, s));
  return ZeroAtMinusInfNaNAtNaN(d, input, value);
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
  V s, slope;
  const V value = TimesSigmoid(d, x_low, v, &s, &slope);
  const V x = hn::Min(x_low, hn::Set(d, 20.0f));
  const V dv = hn::MulAdd(hn::Mul(x, x), hn::Set(d, kSixAB), hn::Set(d, kTwoA));
  *derivative = ZeroAtMinusInfNaNAtNaN(d, input, hn::MulAdd(hn::Mul(x, dv), slope, s));
  return ZeroAtMinusInfNaNAtNaN(d, input, value);
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
  // A division: t feeds a degree-9 polynomial, where an estimate's last bits would show.
  const V t = hn::Div(hn::Set(d, 1.0f), hn::MulAdd(z, hn::Set(d, 0.5f), hn::Set(d, 1.0f)));
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
