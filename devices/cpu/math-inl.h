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
HWY_INLINE V ExpOfMinus(D d, V a, const V *lo = nullptr, V *result_lo = nullptr) {
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
  const V inner = hn::NegMulAdd(t, q, one);
  const V p = hn::NegMulAdd(t, inner, one);
  const V scale = hn::BitCast(d, hn::ShiftLeft<23>(hn::BitCast(di, n_plus_shifter)));
  if (result_lo != nullptr) {
    // p's own rounding, (1 - t inner) - p: 1 - p is exact (p in [0.7, 1.42]), the fma rounds a
    // value below an ulp of p. With it exp is within about 0.3 ulp (t's rounding and the fit).
    *result_lo = hn::Mul(hn::NegMulAdd(t, inner, hn::Sub(one, p)), scale);
  }
  return hn::Mul(p, scale);
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

// a b + c with a b exact: an fma, or without one a b's rounding (Dekker) added to the small c,
// so that the sum is the only rounding that counts in full (c is a correction, far below a b).
template <class D, class V>
HWY_INLINE V MulAddCorrection(D d, V a, V b, V c) {
#if HWY_NATIVE_FMA
  (void)d;
  return hn::MulAdd(a, b, c);
#else
  const V product = hn::Mul(a, b);
  // Dekker's split overflows beyond 2^100, where the correction is below product's ulp anyway
  const auto huge = hn::Gt(hn::Max(hn::Abs(a), hn::Abs(b)), hn::Set(d, 0x1p100f));
  const V error = hn::IfThenZeroElse(huge, ProductError(d, a, b, product));
  return hn::Add(product, hn::Add(error, c));
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
// clamp what multiplies sigmoid) and clamped here at 60: beyond, sigmoid is 1 and its slope e^-60
// is below any rounding of the terms it joins (|c| e^-60 < 2^-70 for every caller's c), and
// e's rounding e_lo (a 2^-25 part of e) stays a normal number: subnormal operands cost x86 a
// microcode assist each (F32 GeluBackward ran at half speed over [-10, 10]). `s` is within about
// 0.5 ulp of 1 / round(1 + e) (plus e's error, damped by e / (1 + e)), so s(0) = 1/2 exactly and s
// = 1 wherever e < 2^-25, i.e. wherever 1 is the rounded value.
template <class V>
struct Sigmoid {
  template <class D>
  HWY_INLINE Sigmoid(D d, V v)
      : e(ExpOfMinus(d, hn::Min(v, hn::Set(d, 60.0f)), static_cast<const V *>(nullptr), &e_lo)),
        den(hn::Add(hn::Set(d, 1.0f), e)),
        den_lo(hn::Add(hn::Sub(e, hn::Sub(den, hn::Set(d, 1.0f))), e_lo)),
        estimate(ReciprocalEstimate(d, den)),
        s(Reciprocal(d, den, estimate)) {}

  // s (1 - s) without cancellation, as (e s) s: e s = 1 - s is in (0, 1] for every e.
  HWY_INLINE V Slope() const { return hn::Mul(hn::Mul(e, s), s); }

  // (n + n_lo) / (1 + e) within about 0.5 ulp plus e's error (0.3 ulp as the pair e + e_lo):
  // 1 + e kept as den + den_lo, q = n r (r the estimate) corrected once by the exact remainder
  // n + n_lo - q (den + den_lo), so neither the rounding of 1 + e nor the estimate's shows. den - 1
  // is exact up to den = 2^24, and so is den_lo; beyond (v < -16.6, |silu| < 1e-6) den_lo is off by
  // at most half an ulp of den, 2^-24 of the quotient. n_lo is n's own rounding (a product's
  // ProductError) or null. A non-finite n gives NaN (inf - inf in the remainder): callers take
  // their special path there.
  template <class D>
  HWY_INLINE V Over(D d, V n, const V *n_lo = nullptr) const {
    const V q = hn::Mul(n, estimate);
    return hn::MulAdd(Remainder(d, n, n_lo, q), estimate, q);
  }
  // g x / (1 + e) with g x as an exact pair: the forward value of the x sigmoid(v) family times
  // its multiplier, one rounding.
  template <class D>
  HWY_INLINE V ProductOver(D d, V g, V x) const {
    const V n = hn::Mul(g, x);
    const V lo = ProductError(d, g, x, n);
    return Over(d, n, &lo);
  }
  template <class D>
  HWY_INLINE V Times(D d, V x) const {
    return Over(d, x);
  }

  // n + n_lo - q (den + den_lo) for q near n / den, exactly up to the rounding of a value far
  // below q's ulp.
  template <class D>
  HWY_INLINE V Remainder(D d, V n, const V *n_lo, V q) const {
#if HWY_NATIVE_FMA
    (void)d;
    V remainder = hn::NegMulAdd(q, den, n);
    if (n_lo != nullptr) remainder = hn::Add(remainder, *n_lo);
    return hn::NegMulAdd(q, den_lo, remainder);
#else
    const V q_den = hn::Mul(q, den);
    V remainder = hn::Sub(hn::Sub(n, q_den), ProductError(d, q, den, q_den));
    if (n_lo != nullptr) remainder = hn::Add(remainder, *n_lo);
    remainder = hn::NegMulAdd(q, den_lo, remainder);
    // Dekker's split overflows beyond 2^100 (n or den; q is then n or tiny), where q's one
    // rounding is all that is left to correct anyway.
    const auto keep_product = hn::Gt(hn::Max(hn::Abs(n), den), hn::Set(d, 0x1p100f));
    return hn::IfThenZeroElse(keep_product, remainder);
#endif
  }

  // (g + g_lo) sigmoid'-form slope s (1 + c (1 - s)) for c = v' x (the derivative of x
  // sigmoid(v)): (g + g_lo) / (1 + e) as q + q_lo (the corrected quotient left unrounded) times
  // h = 1 + c (1 - s), one fma each. 1 - s is e s where e < 1 (no cancellation, relative) and
  // 1 - s itself elsewhere (exact or within half an ulp of a value near 1).
  template <class D>
  HWY_INLINE V SlopeTimes(D d, V c, V g, const V *g_lo) const {
    const V one = hn::Set(d, 1.0f);
    const V one_minus_s = hn::IfThenElse(hn::Lt(e, one), hn::Mul(e, s), hn::Sub(one, s));
    const V h = hn::MulAdd(c, one_minus_s, one);
    const V q = hn::Mul(g, estimate);
    // q_lo h as remainder (h estimate), dropped where the estimate is below 2^-102 (v < -70.7):
    // there this correction, 2^-22 of a result below |g h| 2^-102, would be subnormal, and each
    // subnormal costs x86 a microcode assist (F32 GeluBackward over [-10, 10] ran at 0.75x). What
    // that leaves, below 2^-124 |g (1 + c)|, is within the bounds' 2^-125 (1 + |c|) floor.
    const V k = hn::IfThenZeroElse(hn::Lt(estimate, hn::Set(d, 0x1p-102f)), hn::Mul(h, estimate));
    return MulAddCorrection(d, q, h, hn::Mul(Remainder(d, g, g_lo, q), k));
  }

  V e_lo, e, den, den_lo, estimate, s;
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

// The fast paths of the activations, for finite x (callers check their results with ExactLanes
// and take the functions above where a lane is not): `Value(d, g)` is g act(x) and
// `Slope(d, g, g_lo)` is (g + g_lo) act'(x), each with the multiplier folded into the one
// corrected quotient, so that it costs no rounding of its own.

// The lanes whose fast-path results do not stand: a non-finite input or result, or a zero or
// subnormal result (there the pairs' own roundings are subnormal too and lose their bits, so the
// exact path's fewer roundings are the better ones, and zeros keep their sign). Between 2^-126 and
// 2^-102 the low parts lose bits too, but that error is below the bounds' 2^-125 floor.
template <class D, class V, class... Results>
HWY_INLINE auto ExactLanes(D d, V input, Results... results) {
  const V tiny = hn::Set(d, 0x1p-126f), huge = hn::Set(d, 3.4028235e38f);
  auto exact = hn::Not(hn::Le(hn::Abs(input), huge));
  ((exact = hn::Or(
        exact, hn::Not(hn::And(hn::Ge(hn::Abs(results), tiny), hn::Le(hn::Abs(results), huge))))),
   ...);
  return exact;
}

// Whether no lane needs the exact path (ExactLanes all false), as cheaply as the test can be, for
// the one branch per vector: x 0 is NaN for a non-finite x, and the smallest |result| stands
// for all (a NaN result is caught by the first test whatever Min makes of it).
template <class D, class V, class... Results>
HWY_INLINE bool FastPathHolds(D d, V input, V result, Results... more) {
  const V zero = hn::Zero(d);
  V sum = hn::MulAdd(result, zero, hn::Mul(input, zero));
  V smallest = hn::Abs(result);
  ((sum = hn::MulAdd(more, zero, sum), smallest = hn::Min(smallest, hn::Abs(more))), ...);
  return hn::AllTrue(d, hn::And(hn::Eq(sum, sum), hn::Ge(smallest, hn::Set(d, 0x1p-126f))));
}

// g a b exactly as the pair p + p_lo (an fma, or Dekker's product without one).
template <class D, class V>
HWY_INLINE V ProductPair(D d, V a, V b, V *lo) {
  const V p = hn::Mul(a, b);
  *lo = ProductError(d, a, b, p);
  return p;
}

// silu(x) = x sigmoid(x), clamped as Silu; c = x (capped at 40, as Silu's derivative).
template <class V>
struct SiluAt {
  template <class D>
  HWY_INLINE SiluAt(D d, V input) : x(hn::Max(input, hn::Set(d, -87.0f))), sigmoid(d, x) {}
  template <class D>
  HWY_INLINE V Value(D d, V g) const {
    return sigmoid.ProductOver(d, g, x);
  }
  template <class D>
  HWY_INLINE V Slope(D d, V g, const V *g_lo) const {
    return sigmoid.SlopeTimes(d, hn::Min(x, hn::Set(d, 40.0f)), g, g_lo);
  }
  V x;
  Sigmoid<V> sigmoid;
};

// gelu_tanh(x) = x sigmoid(v), v = 2a (x + b x^3), clamped as GeluTanh; c = x v'.
template <class V>
struct GeluTanhAt {
  template <class D>
  HWY_INLINE GeluTanhAt(D d, V input)
      : x(hn::Max(input, hn::Set(d, -20.0f))),
        sigmoid(d, hn::Max(hn::Mul(x, hn::MulAdd(hn::Mul(x, x),
                                                 hn::Set(d, INFINIOP_GELU_TANH_TWO_A *
                                                                INFINIOP_GELU_TANH_B),
                                                 hn::Set(d, INFINIOP_GELU_TANH_TWO_A))),
                           hn::Set(d, -87.0f))) {}
  template <class D>
  HWY_INLINE V Value(D d, V g) const {
    return sigmoid.ProductOver(d, g, x);
  }
  // gelu_tanh(x) alone: x / (1 + e), one corrected quotient (x needs no pair).
  template <class D>
  HWY_INLINE V Value(D d) const {
    return sigmoid.Times(d, x);
  }
  template <class D>
  HWY_INLINE V Slope(D d, V g, const V *g_lo) const {
    constexpr float kSixAB = 3.0f * INFINIOP_GELU_TANH_TWO_A * INFINIOP_GELU_TANH_B;
    const V capped = hn::Min(x, hn::Set(d, 20.0f));
    const V dv = hn::MulAdd(hn::Mul(capped, capped), hn::Set(d, kSixAB),
                            hn::Set(d, INFINIOP_GELU_TANH_TWO_A));
    return sigmoid.SlopeTimes(d, hn::Mul(capped, dv), g, g_lo);
  }
  V x;
  Sigmoid<V> sigmoid;
};

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

// a + b as the pair sum + *lo exactly (Knuth's TwoSum: no order of magnitudes needed).
template <class V>
HWY_INLINE V SumPair(V a, V b, V *lo) {
  const V sum = hn::Add(a, b);
  const V b_virtual = hn::Sub(sum, a);
  *lo = hn::Add(hn::Sub(a, hn::Sub(sum, b_virtual)), hn::Sub(b, b_virtual));
  return sum;
}

// gelu_erf(x) = x Phi(x), clamped as GeluErf, with Phi(x) kept as the pair cdf + cdf_lo (within
// about 0.5 u: T = e / F from e + e_lo over F = (k a + its rounding) + W, one corrected quotient
// left unrounded; 1 - T's rounding caught exactly, 1 being larger than T <= 1/2).
template <class V>
struct GeluErfAt {
  template <class D>
  HWY_INLINE GeluErfAt(D d, V input) {
    const V clamp = hn::Set(d, INFINIOP_ERF_CLAMP);
    x = hn::Max(input, hn::Neg(clamp));
    const V a = hn::Min(hn::Abs(x), clamp);
    const V half_a = hn::Mul(a, hn::Set(d, 0.5f));
    V h_lo;
    const V h = ProductPair(d, half_a, a, &h_lo);
    e = ExpOfMinus(d, h, &h_lo, &e_lo);
    V r = hn::Set(d, INFINIOP_ERF_R3), p = hn::Set(d, INFINIOP_ERF_P4);
    p = hn::MulAdd(p, a, hn::Set(d, INFINIOP_ERF_P3));
    r = hn::MulAdd(r, a, hn::Set(d, INFINIOP_ERF_R2));
    p = hn::MulAdd(p, a, hn::Set(d, INFINIOP_ERF_P2));
    r = hn::MulAdd(r, a, hn::Set(d, INFINIOP_ERF_R1));
    p = hn::MulAdd(p, a, hn::Set(d, INFINIOP_ERF_P1));
    r = hn::MulAdd(r, a, hn::Set(d, INFINIOP_ERF_R0));
    p = hn::MulAdd(p, a, hn::Set(d, INFINIOP_ERF_P0));
    V ka_lo;
    const V ka = ProductPair(d, hn::Set(d, INFINIOP_ERF_K), a, &ka_lo);
    const V w = hn::MulAdd(a, Quotient(d, r, p), hn::Set(d, 2.0f));
    const V f = hn::Add(ka, w);
    // t + t_lo = (e + e_lo) / (ka + ka_lo + w): q = e / f's estimate, its remainder exact but
    // for the roundings of values far below q's ulp.
    const V estimate = ReciprocalEstimate(d, f);
    const V t = hn::Mul(e, estimate);
#if HWY_NATIVE_FMA
    V remainder = hn::NegMulAdd(t, w, hn::NegMulAdd(t, ka, e));
#else
    const V t_ka = hn::Mul(t, ka), t_w = hn::Mul(t, w);
    V remainder = hn::Sub(hn::Sub(hn::Sub(e, t_ka), ProductError(d, t, ka, t_ka)), t_w);
    remainder = hn::Sub(remainder, ProductError(d, t, w, t_w));
#endif
    remainder = hn::NegMulAdd(t, ka_lo, hn::Add(remainder, e_lo));
    const V t_lo = hn::Mul(remainder, estimate);
    // x >= 0: 1 - t within half an ulp, its rounding (1 - cdf) - t exactly (1 >= t).
    const V one = hn::Set(d, 1.0f);
    const auto negative = hn::Lt(x, hn::Zero(d));
    const V upper = hn::Sub(one, t);
    const V upper_lo = hn::Sub(hn::Sub(hn::Sub(one, upper), t), t_lo);
    cdf = hn::IfThenElse(negative, t, upper);
    cdf_lo = hn::IfThenElse(negative, t_lo, upper_lo);
  }
  // g x Phi(x): (g x as a pair) times (cdf + cdf_lo), one rounding.
  template <class D>
  HWY_INLINE V Value(D d, V g) const {
    V n_lo;
    const V n = ProductPair(d, g, x, &n_lo);
    return MulAddCorrection(d, n, cdf, hn::MulAdd(n, cdf_lo, hn::Mul(n_lo, cdf)));
  }
  // gelu_erf(x) alone: x (cdf + cdf_lo), one rounding (x needs no pair).
  template <class D>
  HWY_INLINE V Value(D d) const {
    return MulAddCorrection(d, x, cdf, hn::Mul(x, cdf_lo));
  }
  // (g + g_lo) (Phi(x) + x phi(x)), phi(x) = e / sqrt(2 pi) with e + e_lo and the constant as
  // a pair; the sum with Phi kept as a pair (it cancels near x = -0.75, and x phi dominates on
  // the left).
  template <class D>
  HWY_INLINE V Slope(D d, V g, const V *g_lo) const {
    const V c_hi = hn::Set(d, INFINIOP_INV_SQRT_2PI), c_lo = hn::Set(d, INFINIOP_INV_SQRT_2PI_LO);
    // Beyond the clamp x phi(x) vanishes: x capped there too (as GeluErf).
    const V capped = hn::Min(x, hn::Set(d, INFINIOP_ERF_CLAMP));
    V m_lo;
    const V m = ProductPair(d, capped, e, &m_lo);
    m_lo = hn::MulAdd(capped, e_lo, m_lo);
    V p_lo;
    const V p = ProductPair(d, m, c_hi, &p_lo);
    p_lo = hn::MulAdd(m, c_lo, hn::MulAdd(m_lo, c_hi, p_lo));
    V sum_lo;
    const V sum = SumPair(cdf, p, &sum_lo);
    sum_lo = hn::Add(sum_lo, hn::Add(cdf_lo, p_lo));
    V lo = hn::Mul(g, sum_lo);
    if (g_lo != nullptr) lo = hn::MulAdd(*g_lo, sum, lo);
    return MulAddCorrection(d, g, sum, lo);
  }
  V x, e, e_lo, cdf, cdf_lo;
};

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // INFINIOP_CPU_MATH_INL_H_
