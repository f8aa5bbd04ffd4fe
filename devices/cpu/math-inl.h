// SPDX-License-Identifier: Apache-2.0
// Per-target vector maths shared by the cpu kernels, beyond what hwy/contrib/math offers.
#if defined(INFINIOP_CPU_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef INFINIOP_CPU_MATH_INL_H_
#undef INFINIOP_CPU_MATH_INL_H_
#else
#define INFINIOP_CPU_MATH_INL_H_
#endif

#include "hwy/highway.h"
#include "math_constants.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// exp(-(a + lo)) for a in [-87, 87] (callers clamp; NaN not expected) and lo (if not null) a
// correction below half an ulp of a: a normal F32 in [1.6e-38, 6.1e37], within 1 ulp. Cheaper than
// hn::Exp because it needs neither the overflow nor the subnormal range: one range reduction -a = n
// ln2 - t, |t| <= ln2/2, a degree-6 polynomial, one exponent scale. Taking -a saves the callers a
// negation (sigmoid's exp(-v), erf's exp(-x^2 / 2)); lo lets a caller pass an argument that F32
// cannot hold (x^2 / 2 as hi + lo), so that its rounding is not multiplied by the argument.
template <class D, class V>
HWY_INLINE V ExpOfMinus(D d, V a, const V *lo = nullptr) {
  const hn::RebindToSigned<D> di;
  // n = round(-a / ln2) by adding the shifter, whose ulp is 1 (math_constants.h).
  const V shifter = hn::Set(d, INFINIOP_EXP_SHIFTER);
  const V n_plus_shifter = hn::NegMulAdd(a, hn::Set(d, INFINIOP_LOG2E), shifter);
  const V n = hn::Sub(n_plus_shifter, shifter);
  // t = a + lo + n ln2; a + n ln2_hi is exact.
  V t = hn::MulAdd(n, hn::Set(d, INFINIOP_LN2_HI), a);
  t = hn::MulAdd(n, hn::Set(d, INFINIOP_LN2_LO), t);
  if (lo != nullptr) t = hn::Add(t, *lo);  // constant once inlined
  // e^-t = 1 - t (1 - t q(-t)). Horner down to the final 1 leaves one rounding at full weight:
  // t (1 - t q) is below 0.35 ulp-weighted.
  V q = hn::Set(d, INFINIOP_EXP_Q4);
  q = hn::MulAdd(q, t, hn::Set(d, INFINIOP_EXP_Q3));
  q = hn::MulAdd(q, t, hn::Set(d, INFINIOP_EXP_Q2));
  q = hn::MulAdd(q, t, hn::Set(d, INFINIOP_EXP_Q1));
  q = hn::MulAdd(q, t, hn::Set(d, INFINIOP_EXP_Q0));
  const V one = hn::Set(d, 1.0f);
  const V p = hn::NegMulAdd(t, hn::NegMulAdd(t, q, one), one);
  return hn::Mul(p, hn::BitCast(d, hn::ShiftLeft<23>(hn::BitCast(di, n_plus_shifter))));
}

// 1 / y for a positive normal y within 2^-14 (relative): enough for a multiplier whose result is
// corrected once more (the error is then squared). AVX-512's estimate has 14 bits; AVX2's (12)
// and NEON's (8) get a Newton step. Without an fma (SSE4, SSSE3, SCALAR) that step would round
// its residual twice: a correctly rounded division there instead.
template <class D, class V>
HWY_INLINE V ReciprocalEstimate(D d, V y) {
#if HWY_NATIVE_FMA
  V r = hn::ApproximateReciprocal(y);
#if !(HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3)
  r = hn::MulAdd(r, hn::NegMulAdd(y, r, hn::Set(d, 1.0f)), r);
#endif
  return r;
#else
  return hn::Div(hn::Set(d, 1.0f), y);
#endif
}

// 1 / y from its estimate r within 0.5 ulp + 2^-27 (a Newton step whose residual 1 - y r is an
// fma, so 1 / 1 = 1 and 1 / 2 = 1/2 come out exact); r itself where it is a division.
template <class D, class V>
HWY_INLINE V Reciprocal(D d, V y, V r) {
#if HWY_NATIVE_FMA
  return hn::MulAdd(r, hn::NegMulAdd(y, r, hn::Set(d, 1.0f)), r);
#else
  (void)d;
  (void)y;
  return r;
#endif
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

// n / y for a positive normal y within 0.5 ulp + 2^-27: the quotient of y's estimate corrected
// once by its exact remainder (as Sigmoid::Times); a correctly rounded division without an fma.
template <class D, class V>
HWY_INLINE V Quotient(D d, V n, V y) {
#if HWY_NATIVE_FMA
  const V r = ReciprocalEstimate(d, y);
  const V q = hn::Mul(n, r);
  return hn::MulAdd(hn::NegMulAdd(q, y, n), r, q);
#else
  (void)d;
  return hn::Div(n, y);
#endif
}

// sigmoid(v) = 1 / (1 + e), e = exp(-v), for v >= -87 (callers clamp there, where they also
// clamp what multiplies sigmoid) and clamped here at 87: beyond, sigmoid is 1 or a tiny
// 1.6e-38 rather than 0 or subnormal. `s` is within about 0.5 ulp of 1 / round(1 + e) (plus
// e's error, damped by e / (1 + e)), so s(0) = 1/2 exactly and s = 1 wherever e < 2^-25, i.e.
// wherever 1 is the rounded value.
template <class V>
struct Sigmoid {
  template <class D>
  HWY_INLINE Sigmoid(D d, V v)
      : e(ExpOfMinus(d, hn::Min(v, hn::Set(d, 87.0f)))),
        den(hn::Add(hn::Set(d, 1.0f), e)),
        estimate(ReciprocalEstimate(d, den)),
        s(Reciprocal(d, den, estimate)) {}

  // s (1 - s) without cancellation, as (e s) s: e s = 1 - s is in (0, 1] for every e.
  HWY_INLINE V Slope() const { return hn::Mul(hn::Mul(e, s), s); }

  // x sigmoid(v) = x / (1 + e) within about 0.5 ulp plus e's error: 1 + e kept as den + den_lo,
  // q = x r (r the estimate) corrected once by the exact remainder x - q (den + den_lo), so
  // neither the rounding of 1 + e nor the estimate's shows. den - 1 is exact up to den = 2^24, and
  // so is den_lo; beyond (v < -16.6, |silu| < 1e-6) den_lo is off by at most half an ulp of den,
  // 2^-24 of the quotient. x = +-inf gives NaN (inf - inf in the remainder): callers restore the
  // limits.
  template <class D>
  HWY_INLINE V Times(D d, V x) const {
    const V den_lo = hn::Sub(e, hn::Sub(den, hn::Set(d, 1.0f)));
    const V q = hn::Mul(x, estimate);
#if HWY_NATIVE_FMA
    V remainder = hn::NegMulAdd(q, den, x);
    remainder = hn::NegMulAdd(q, den_lo, remainder);
    return hn::MulAdd(remainder, estimate, q);
#else
    const V q_den = hn::Mul(q, den);
    V remainder = hn::Sub(hn::Sub(x, q_den), ProductError(d, q, den, q_den));
    // Dekker's split overflows beyond 2^100 (x or den; q is then x or tiny), where q's one
    // rounding is all that is left to correct anyway.
    const auto keep_product = hn::Gt(hn::Max(hn::Abs(x), den), hn::Set(d, 0x1p100f));
    remainder = hn::NegMulAdd(q, den_lo, remainder);
    return hn::IfThenElse(keep_product, q, hn::MulAdd(remainder, estimate, q));
#endif
  }

  V e, den, estimate, s;
};

// `value` computed from a clamped x, with x's non-finite cases restored: 0 where x is -inf (the
// limit of silu, gelu and their derivatives there), NaN where x is NaN.
template <class D, class V>
HWY_INLINE V ZeroAtMinusInfNaNAtNaN(D d, V x, V value) {
  value = hn::IfThenZeroElse(hn::Lt(x, hn::Set(d, -3.4028235e38f)), value);
  return hn::IfThenElse(hn::IsNaN(x), x, value);
}

// `value` = x f(x) computed from a clamped x, with x's non-finite cases restored: 0 at -inf (the
// limit of silu and gelu there), x itself at +inf and NaN.
template <class D, class V>
HWY_INLINE V ProductAtNonFinite(D d, V x, V value) {
  return hn::IfThenElse(hn::IsFinite(x), value, hn::IfThenZeroElse(hn::Lt(x, hn::Zero(d)), x));
}

// The activations below return f(x) and, where `derivative` is not null, set *derivative to
// f'(x). Without it the value is x sigmoid(v)'s corrected quotient (Sigmoid::Times); beside the
// derivative's own work, which a backward operator needs, it is x s instead: one rounding more,
// within the backward operators' bounds, and much cheaper. Constant after inlining.

// silu(x) = x sigmoid(x); its derivative is s + x s (1 - s) (whose zero near
// x = -1.2785 is where the two terms cancel). x is clamped at -87, where sigmoid's exp is clamped
// too: below it both are tiny negative numbers (|value| < 1.5e-36) rather than x * 1.6e-38, which
// grows with |x|; the derivative's x is capped at 40, beyond which x s (1 - s) vanishes.
template <class D, class V>
HWY_INLINE V Silu(D d, V input, V *derivative) {
  const V x = hn::Max(input, hn::Set(d, -87.0f));
  const Sigmoid<V> sigmoid(d, x);
  if (derivative == nullptr) return ProductAtNonFinite(d, input, sigmoid.Times(d, x));
  const V capped = hn::Min(x, hn::Set(d, 40.0f));
  *derivative = ZeroAtMinusInfNaNAtNaN(d, input, hn::MulAdd(capped, sigmoid.Slope(), sigmoid.s));
  return ProductAtNonFinite(d, input, hn::Mul(x, sigmoid.s));
}

// gelu_tanh(x) = x sigmoid(v), v = 2u = 2a (x + b x^3), and its derivative
//   s + x v' s (1 - s),  v' = 2a (1 + 3 b x^2),
// which never cancels for negative x (unlike 0.5 (1 + tanh u)). x is clamped at -20, where both
// are tiny negative numbers (|error| < 2^-125 (1 + |x v'|)), and the derivative's x at +20,
// beyond which it is 1. Unused results cost nothing once inlined.
template <class D, class V>
HWY_INLINE V GeluTanh(D d, V input, V *derivative) {
  constexpr float kTwoA = INFINIOP_GELU_TANH_TWO_A;
  constexpr float kTwoAB = kTwoA * INFINIOP_GELU_TANH_B;
  constexpr float kSixAB = 3.0f * kTwoAB;
  const V x_low = hn::Max(input, hn::Set(d, -20.0f));
  const V v =
      hn::Mul(x_low, hn::MulAdd(hn::Mul(x_low, x_low), hn::Set(d, kTwoAB), hn::Set(d, kTwoA)));
  const Sigmoid<V> sigmoid(d, hn::Max(v, hn::Set(d, -87.0f)));
  if (derivative == nullptr) return ProductAtNonFinite(d, input, sigmoid.Times(d, x_low));
  const V x = hn::Min(x_low, hn::Set(d, 20.0f));
  const V dv = hn::MulAdd(hn::Mul(x, x), hn::Set(d, kSixAB), hn::Set(d, kTwoA));
  *derivative =
      ZeroAtMinusInfNaNAtNaN(d, input, hn::MulAdd(hn::Mul(x, dv), sigmoid.Slope(), sigmoid.s));
  return ProductAtNonFinite(d, input, hn::Mul(x_low, sigmoid.s));
}

// gelu_erf(x) = x Phi(x) and its derivative Phi(x) + x phi(x), from one exp: with a = |x|,
//   T = Phi(-a) = exp(-a^2 / 2) / F(a),  F = k a + 2 + a R(a) / P(a)  (math_constants.h,
//   scripts/fit_erf.py),  Phi(x) = T for x < 0, 1 - T otherwise,  phi(x) = exp(-a^2 / 2) c.
// T is a product and quotients, never a difference, so the left tail keeps its relative accuracy;
// a^2 / 2 goes to exp as an exact hi + lo pair, so its rounding is not multiplied by a^2 / 2.
// a is clamped at 13.19 (exp's argument 87; Phi(-13.19) < 6e-39): below, gelu and gelu' are tiny
// numbers of the right sign (|error| < 2^-125 (1 + |x|)).
template <class D, class V>
HWY_INLINE V GeluErf(D d, V input, V *derivative) {
  const V clamp = hn::Set(d, INFINIOP_ERF_CLAMP);
  const V x = hn::Max(input, hn::Neg(clamp));  // -inf -> -clamp; +inf and NaN restored below
  const V a = hn::Min(hn::Abs(x), clamp);
  const V half_a = hn::Mul(a, hn::Set(d, 0.5f));  // exact: a >= 0 is 0 or normal
  const V h = hn::Mul(half_a, a);
  const V h_lo = ProductError(d, half_a, a, h);
  const V e = ExpOfMinus(d, h, &h_lo);
  V s = hn::Set(d, INFINIOP_ERF_R3), p = hn::Set(d, INFINIOP_ERF_P4);
  p = hn::MulAdd(p, a, hn::Set(d, INFINIOP_ERF_P3));
  s = hn::MulAdd(s, a, hn::Set(d, INFINIOP_ERF_R2));
  p = hn::MulAdd(p, a, hn::Set(d, INFINIOP_ERF_P2));
  s = hn::MulAdd(s, a, hn::Set(d, INFINIOP_ERF_R1));
  p = hn::MulAdd(p, a, hn::Set(d, INFINIOP_ERF_P1));
  s = hn::MulAdd(s, a, hn::Set(d, INFINIOP_ERF_R0));
  p = hn::MulAdd(p, a, hn::Set(d, INFINIOP_ERF_P0));
  // F = k a + W, W = 2 + a R / P: the 2 exact, so near a = 0 (W ~ 2, S and P just above powers
  // of two) their roundings are damped by a. F is kept as the pair (k a, W) in the quotients'
  // remainders, so its own rounding does not count either. F >= 2; F(0) = 2 exactly, so
  // Phi(0) = 1/2.
  const V ka = hn::Mul(hn::Set(d, INFINIOP_ERF_K), a);
  const V w = hn::MulAdd(a, Quotient(d, s, p), hn::Set(d, 2.0f));
  const V f = hn::Add(ka, w);
  const auto over_f = [&](V n) {  // n / (k a + W) within 0.5 ulp + 2^-27 (as Quotient)
#if HWY_NATIVE_FMA
    const V r = ReciprocalEstimate(d, f);
    const V q = hn::Mul(n, r);
    return hn::MulAdd(hn::NegMulAdd(q, w, hn::NegMulAdd(q, ka, n)), r, q);
#else
    return hn::Div(n, f);
#endif
  };
  const auto negative = hn::Lt(x, hn::Zero(d));
  if (derivative == nullptr) {
    // x T as one corrected quotient; x Phi(x) = x - x T for x >= 0 (x T <= x / 2: no
    // cancellation).
    const V xt = over_f(hn::Mul(x, e));
    return ProductAtNonFinite(d, input, hn::IfThenElse(negative, xt, hn::Sub(x, xt)));
  }
  const V t = over_f(e);
  const V cdf = hn::IfThenElse(negative, t, hn::Sub(hn::Set(d, 1.0f), t));
  // Beyond the clamp x phi(x) vanishes: x capped there too, so +-huge x times a tiny phi stays
  // tiny.
  const V capped = hn::Min(x, clamp);
  *derivative = ZeroAtMinusInfNaNAtNaN(
      d, input, hn::MulAdd(hn::Mul(capped, e), hn::Set(d, INFINIOP_INV_SQRT_2PI), cdf));
  return ProductAtNonFinite(d, input, hn::Mul(x, cdf));
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // INFINIOP_CPU_MATH_INL_H_
