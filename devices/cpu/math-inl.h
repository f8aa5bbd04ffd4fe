// SPDX-License-Identifier: Apache-2.0
// Per-target vector maths shared by the cpu kernels, beyond what hwy/contrib/math offers.
#if defined(INFINIOP_CPU_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef INFINIOP_CPU_MATH_INL_H_
#undef INFINIOP_CPU_MATH_INL_H_
#else
#define INFINIOP_CPU_MATH_INL_H_
#endif

#include "cpu/ieee-inl.h"
#include "exact/gelu.h"
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
  const V n_plus_shifter = NegFma(d, a, hn::Set(d, INFINIOP_LOG2E), shifter);
  const V n = hn::Sub(n_plus_shifter, shifter);
  // t = a + lo + n ln2; a + n ln2_hi is exact.
  V t = Fma(d, n, hn::Set(d, INFINIOP_LN2_HI), a);
  t = Fma(d, n, hn::Set(d, INFINIOP_LN2_LO), t);
  if (lo != nullptr) t = hn::Add(t, *lo);  // constant once inlined
  // e^-t = 1 - t (1 - t q(-t)). Horner down to the final 1 leaves one rounding at full weight:
  // t (1 - t q) is below 0.35 ulp-weighted.
  V q = hn::Set(d, INFINIOP_EXP_Q4);
  q = Fma(d, q, t, hn::Set(d, INFINIOP_EXP_Q3));
  q = Fma(d, q, t, hn::Set(d, INFINIOP_EXP_Q2));
  q = Fma(d, q, t, hn::Set(d, INFINIOP_EXP_Q1));
  q = Fma(d, q, t, hn::Set(d, INFINIOP_EXP_Q0));
  const V one = hn::Set(d, 1.0f);
  const V inner = NegFma(d, t, q, one);
  const V p = NegFma(d, t, inner, one);
  const V scale = hn::BitCast(d, hn::ShiftLeft<23>(hn::BitCast(di, n_plus_shifter)));
  if (result_lo != nullptr) {
    // p's own rounding, (1 - t inner) - p: 1 - p is exact (p in [0.7, 1.42]), the fma rounds a
    // value below an ulp of p. With it exp is within about 0.3 ulp (t's rounding and the fit).
    *result_lo = hn::Mul(NegFma(d, t, inner, hn::Sub(one, p)), scale);
  }
  return hn::Mul(p, scale);
}

// exp(-(w + lo)) 2^128 for w in [64, 175] (the activations' far-left tails, where exp(-w) is
// below F32's normal range): w - 128 ln2_hi is exact there (both on the grid of w's ulp, the
// difference below 2^7), so ExpOfMinus sees an argument in [-1.8, 87]. Callers multiply their
// result, scaled the same way, by 2^-128 last (Unscale): one rounding into the subnormal range.
// 2^-128 is itself subnormal, so it is applied as 2^-64 twice (kTailUnscale).
constexpr float kTailUnscale = 0x1p-64f;
template <class D, class V>
HWY_INLINE V ScaledExpOfMinus(D d, V w, V lo) {
  const V a = hn::Sub(w, hn::Set(d, 128.0f * INFINIOP_LN2_HI));
  const V a_lo = hn::Sub(lo, hn::Set(d, 128.0f * INFINIOP_LN2_LO));
  return ExpOfMinus(d, a, &a_lo);
}

// 1 / y from its estimate r within 0.5 ulp + 2^-27 (a Newton step whose residual 1 - y r is an
// fma, so 1 / 1 = 1 and 1 / 2 = 1/2 come out exact).
template <class D, class V>
HWY_INLINE V Reciprocal(D d, V y, V r) {
  return Fma(d, r, NegFma(d, y, r, hn::Set(d, 1.0f)), r);
}

// a b - round(a b), exactly.
template <class D, class V>
HWY_INLINE V ProductError(D d, V a, V b, V product) {
  return FmaSub(d, a, b, product);
}

// n / y from r, an estimate of 1 / y: n r corrected once by its exact remainder.
template <class D, class V>
HWY_INLINE V CorrectedQuotient(D d, V n, V y, V r) {
  const V q = hn::Mul(n, r);
  return Fma(d, NegFma(d, q, y, n), r, q);
}

// n / y for a positive normal y within 0.5 ulp + 2^-27: the quotient of y's estimate corrected
// once by its exact remainder (as Sigmoid::Times).
template <class D, class V>
HWY_INLINE V Quotient(D d, V n, V y) {
  return CorrectedQuotient(d, n, y, ReciprocalEstimate(d, y));
}

// log(f) + k ln2 from the reduced argument of Log and Log1p: f = 1 + a with a exact, f + 1 = b +
// b_lo exactly (b >= 1.5), f in [0.70, 1.5] and k an integer (|k| < 512: k ln2_hi is exact).
//   log(f) = 2 atanh(s) = 2 s + s^3 P(s^2),  s = a / (f + 1),  |s| <= 0.2,  s^2 <= 0.04.
// Error, in u = 2^-24 (ulp(x) > u |x|):
// - s as the pair s + s_lo: s = a / b by the estimate corrected once by its exact remainder
//   (within 0.5 ulp + 2^-27 of a / b, so within 2^-22.9 |s| of a / (f + 1): faithful, and a - s
//   b is exact), s_lo = (a - s b - s b_lo) r rounded twice and off by r's 2^-17: s + s_lo is
//   a / (f + 1) within 2^-40 |s|.
// - 2 s is exact and 2 |s| <= |log(f)|. The rest, c = s^3 P + 2 s_lo (1 + s^2) (s_lo's slope is
//   2 / (1 - s^2), so that it need not enter s^3 P; what that drops is below 2^-31 |s|), is at
//   most s^2 P / 2 <= 0.0137 of log(f). Its roundings (s^2, s^3, P's Horner 0.76, the fma into c)
//   are below 4 u of c, the fit 0.0005 u of log(f) (math_constants.h): 2 s + c is log(f) within
//   0.06 u.
// - k != 0: k ln2_hi + 2 s is rounded to hi and its rounding err caught exactly (Fast2Sum:
//   |k ln2_hi| >= 0.69 > 2 |s|; with k = 0, hi = 2 s and err = 0), the low terms c + err + k
//   ln2_lo added last, two roundings of values below 0.005 + |k| 2^-19.4; with c's 0.06 u |log f|
//   <= 0.021 u and ln2's split 2^-44 |k| off, below 0.031 u + |k| 2^-43, and |result| >= 0.346:
//   0.09 u of the result.
// So the last rounding's 0.5 ulp and 0.09 u |result|: below 0.6 ulp on every target and device
// (tests/cpp/log_math_test.cc measures 0.517 for Log, 0.533 for Log1p).
template <class D, class V>
HWY_INLINE V LogOfReduced(D d, V k, V a, V b, V b_lo) {
  const V estimate = ReciprocalEstimate(d, b);
  const V s = CorrectedQuotient(d, a, b, estimate);
  const V s_lo = hn::Mul(NegFma(d, s, b_lo, NegFma(d, s, b, a)), estimate);
  const V z = hn::Mul(s, s);
  V p = hn::Set(d, INFINIOP_LOG_P3);
  p = Fma(d, p, z, hn::Set(d, INFINIOP_LOG_P2));
  p = Fma(d, p, z, hn::Set(d, INFINIOP_LOG_P1));
  p = Fma(d, p, z, hn::Set(d, INFINIOP_LOG_P0));
  const V two_s_lo = hn::Add(s_lo, s_lo);
  const V c = Fma(d, hn::Mul(s, z), p, Fma(d, two_s_lo, z, two_s_lo));
  const V two_s = hn::Add(s, s);
  const V k_hi = hn::Mul(k, hn::Set(d, INFINIOP_LN2_HI));  // exact
  const V hi = hn::Add(k_hi, two_s);
  const V err = hn::Sub(two_s, hn::Sub(hi, k_hi));  // exact (Fast2Sum)
  return hn::Add(hi, Fma(d, k, hn::Set(d, INFINIOP_LN2_LO), hn::Add(c, err)));
}

// log(v) within 0.6 ulp (LogOfReduced) for every positive v, subnormals included (scaled by
// 2^23 first), and log(+inf) = +inf, log(+-0) = -inf, NaN (the quiet NaN 0x7fc00000, whatever
// the input's bits) for v < 0 and NaN v. The reduction is integer: v's bits minus those of
// sqrt(1/2) (rounded down) shifted right by 23 are k, and v's bits minus k << 23 are f in
// [sqrt(1/2), sqrt(2)): f - 1 is exact (Sterbenz), f + 1 is b + b_lo with b_lo = f - (b - 1),
// both subtractions exact. The same operations in the same order as OpenCL's log_f32
// (math.cl), so the same bits on every target and device.
template <class D, class V>
HWY_INLINE V Log(D d, V v) {
  const hn::RebindToSigned<D> di;
  const V zero = hn::Zero(d), one = hn::Set(d, 1.0f);
  // v > 0 or 1: no integer below overflows, and the special cases are chosen last
  const auto positive = hn::Gt(v, zero);
  V x = hn::IfThenElse(positive, v, one);
  const auto subnormal = hn::Lt(x, hn::Set(d, 0x1p-126f));
  x = hn::IfThenElse(subnormal, hn::Mul(x, hn::Set(d, 0x1p23f)), x);
  const auto bits = hn::BitCast(di, x);
  const auto ki = hn::ShiftRight<23>(hn::Sub(bits, hn::Set(di, INFINIOP_LOG_SQRT_HALF_BITS)));
  const V f = hn::BitCast(d, hn::Sub(bits, hn::ShiftLeft<23>(ki)));
  V k = hn::ConvertTo(d, ki);
  k = hn::IfThenElse(subnormal, hn::Sub(k, hn::Set(d, 23.0f)), k);
  const V b = hn::Add(f, one);
  const V result = LogOfReduced(d, k, hn::Sub(f, one), b, hn::Sub(f, hn::Sub(b, one)));
  const V special = hn::IfThenElse(hn::Eq(v, zero), hn::Set(d, -HUGE_VALF), hn::Set(d, NAN));
  const V inf = hn::Set(d, HUGE_VALF);
  return hn::IfThenElse(hn::Eq(v, inf), inf, hn::IfThenElse(positive, result, special));
}

// log(1 + t) within 0.6 ulp (LogOfReduced) for t in [2^-25, 1], t itself below 2^-25 (the
// correctly rounded value there: t^2 / 2 is below a quarter ulp of t), so also for +-0, t < 0
// and NaN (which are returned as they are), and log(2) for t above 1 (+inf included: t is
// clamped at 1). Every operand stays normal. No rounding of 1 + t enters: below t = 1/2, f = 1 + t,
// f - 1 = t and f + 1 = 2
// + t as b + b_lo; from 1/2 on, f = (1 + t) / 2 in [0.75, 1] and k = 1, f - 1 = (t - 1) / 2
// (exact: Sterbenz) and f + 1 = (3 + t) / 2. b_lo = t - (b - 2 or 3) is exact (Fast2Sum, t < 2
// <= 3), so is the halving. The same operations as OpenCL's log1p_f32 (math.cl).
template <class D, class V>
HWY_INLINE V Log1p(D d, V t) {
  const V one = hn::Set(d, 1.0f), half = hn::Set(d, 0.5f), tiny = hn::Set(d, 0x1p-25f);
  // The lanes below 2^-25 (or NaN) return t: computing them on 2^-25 keeps every operand normal
  // (a subnormal one costs x86 a microcode assist).
  const V x = hn::Min(hn::Max(t, tiny), one);
  const auto upper = hn::Ge(x, half);
  const V offset = hn::IfThenElse(upper, hn::Set(d, 3.0f), hn::Set(d, 2.0f));
  const V scale = hn::IfThenElse(upper, half, one);
  const V w = hn::Add(offset, x);
  const V w_lo = hn::Sub(x, hn::Sub(w, offset));
  const V a = hn::IfThenElse(upper, hn::Mul(hn::Sub(x, one), half), x);
  const V k = hn::IfThenElse(upper, one, hn::Zero(d));
  const V result = LogOfReduced(d, k, a, hn::Mul(w, scale), hn::Mul(w_lo, scale));
  return hn::IfThenElse(hn::Ge(t, tiny), result, t);
}

// softplus(x) = max(x, 0) + log1p(exp(-|x|)) (issue 45's sqrtsoftplus): neither overflow at +large
// x (x itself, plus a log1p below ln 2) nor cancellation at -large x (log1p(t) of t = e^x, which is
// t itself below 2^-25). t = ExpOfMinus(|x|) for |x| <= 87 (within 1 ulp), 0 beyond (the routers'
// exp: e^-87 < 2^-125.5), then Log1p (0.6 ulp; its condition in t is t / ((1 + t) log1p(t)) <= 1)
// and one addition of two non-negative values: within 2.2 ulp (tests/cpp/log_math_test.cc measures
// it), x for x > 87 (the rest is below half an ulp), 0 below -87 (where softplus < 2^-125.5),
// +inf at +inf, NaN at NaN (x itself). Max(x, 0) only meets non-NaN x, so its sign of zero is the
// only target choice, and that never shows: x = +-0 adds log(2). The same operations in the same
// order as OpenCL's softplus_f32 (math.cl).
template <class D, class V>
HWY_INLINE V Softplus(D d, V x) {
  const V a = hn::Abs(x);
  const auto beyond = hn::Gt(a, hn::Set(d, 87.0f));
  const V t = hn::IfThenZeroElse(beyond, ExpOfMinus(d, hn::IfThenZeroElse(beyond, a)));
  const V result = hn::Add(hn::Max(x, hn::Zero(d)), Log1p(d, t));
  return hn::IfThenElse(hn::IsNaN(x), x, result);
}

// sqrt(softplus(x)) (DeepSeek-V4's router score): one IEEE square root (correctly rounded on every
// Highway target) of Softplus for x >= -87, within 1.6 ulp (half of softplus's relative error,
// plus the root's rounding). Below, where Softplus is 0, the root is e^(x / 2) (relative error
// e^x / 4 < 2^-127 beside it): ExpOfMinus(-x / 2) (x / 2 exact) within 1 ulp down to x = -174
// (ExpOfMinus's range), 0 below (e^-87 < 2^-125.5, the floor of the routers' sigmoid). +inf at
// +inf, NaN at NaN (x itself). The same operations as OpenCL's sqrt_softplus_f32, whose root is
// IEEE's too (sqrt_rn).
template <class D, class V>
HWY_INLINE V SqrtSoftplus(D d, V x) {
  const auto tail = hn::Lt(x, hn::Set(d, -87.0f));
  const auto beyond = hn::Lt(x, hn::Set(d, -174.0f));
  const V half = hn::Mul(x, hn::Set(d, -0.5f));  // in (43.5, 87] on the tail
  const V e = ExpOfMinus(d, hn::IfThenElse(tail, hn::Min(half, hn::Set(d, 87.0f)), hn::Zero(d)));
  const V root = hn::IfThenElse(hn::IsNaN(x), x, hn::Sqrt(Softplus(d, x)));
  return hn::IfThenElse(tail, hn::IfThenZeroElse(beyond, e), root);
}

// sigmoid(v) = 1 / (1 + e), e = exp(-v), for v >= -87 (callers clamp there, where they also
// clamp what multiplies sigmoid) and clamped here at 60: beyond, sigmoid is 1 and its slope e^-60
// is below any rounding of the terms it joins (|c| e^-60 < 2^-70 for every caller's c), and
// e's rounding e_lo (a 2^-25 part of e) stays a normal number: subnormal operands cost x86 a
// microcode assist each (F32 GeluBackward ran at half speed over [-10, 10]). `s` is within about
// 0.5 ulp of 1 / round(1 + e) (plus e's error, damped by e / (1 + e)), so s(0) = 1/2 exactly and s
// = 1 wherever e < 2^-25, i.e. wherever 1 is the rounded value.
//
// A view of the vectors that WithSigmoid holds in its frame (SVE's vectors are sizeless: no data
// member may have their type, a reference may): e and its rounding e_lo, den = round(1 + e) and
// its rounding den_lo, den's reciprocal estimate, and s.
template <class V>
struct Sigmoid {
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
    return Fma(d, Remainder(d, n, n_lo, q), estimate, q);
  }
  // g x / (1 + e) with g x as an exact pair: the forward value of the x sigmoid(v) family times
  // its multiplier, one rounding.
  template <class D>
  HWY_INLINE V ProductOver(D d, V g, V x) const {
    const V n = hn::Mul(g, x);
    const V lo = ProductError(d, g, x, n);
    return Over(d, n, &lo);
  }
  // x sigmoid, with x's sign also where x is +-0 (the corrected quotient's remainder is +0 for
  // either zero, and q + 0 loses q's sign: silu(-0) is -0).
  template <class D>
  HWY_INLINE V Times(D d, V x) const {
    return hn::CopySign(Over(d, x), x);
  }

  // n + n_lo - q (den + den_lo) for q near n / den, exactly up to the rounding of a value far
  // below q's ulp.
  template <class D>
  HWY_INLINE V Remainder(D d, V n, const V *n_lo, V q) const {
    V remainder = NegFma(d, q, den, n);
    if (n_lo != nullptr) remainder = hn::Add(remainder, *n_lo);
    return NegFma(d, q, den_lo, remainder);
  }

  // (g + g_lo) sigmoid'-form slope s (1 + c (1 - s)) for c = v' x (the derivative of x
  // sigmoid(v)): (g + g_lo) / (1 + e) as q + q_lo (the corrected quotient left unrounded) times
  // h = 1 + c (1 - s), one fma each. 1 - s is e s where e < 1 (no cancellation, relative) and
  // 1 - s itself elsewhere (exact or within half an ulp of a value near 1).
  template <class D>
  HWY_INLINE V SlopeTimes(D d, V c, V g, const V *g_lo) const {
    const V one = hn::Set(d, 1.0f);
    const V h = Fma(d, c, OneMinus(d), one);
    // From s, 1 / den within F32's rounding (the estimate is 2^-17 off, which the correction
    // below cannot repair where it is dropped).
    const V q = hn::Mul(g, s);
    // q_lo h as remainder (h s), dropped where s is below 2^-102 (v < -70.7): there this
    // correction, 2^-22 of a result below |g h| 2^-102, would be subnormal, and each subnormal
    // costs x86 a microcode assist (F32 GeluBackward over [-10, 10] ran at 0.75x). What that
    // leaves, below 2^-124 |g (1 + c)|, is within the bounds' 2^-125 (1 + |c|) floor.
    const V k = hn::IfThenZeroElse(hn::Lt(s, hn::Set(d, 0x1p-102f)), hn::Mul(h, s));
    return Fma(d, q, h, hn::Mul(Remainder(d, g, g_lo, q), k));
  }

  // 1 - s: e s where e < 1 (no cancellation, relative), 1 - s itself elsewhere.
  template <class D>
  HWY_INLINE V OneMinus(D d) const {
    const V one = hn::Set(d, 1.0f);
    return hn::IfThenElse(hn::Lt(e, one), hn::Mul(e, s), hn::Sub(one, s));
  }
  // The terms SlopeTimes sums, s (1 + |c| (1 - s)), for its error bound (ErrorBound).
  template <class D>
  HWY_INLINE V SlopeTerms(D d, V c) const {
    return hn::Mul(s, hn::MulAdd(hn::Abs(c), OneMinus(d), hn::Set(d, 1.0f)));
  }
  // The condition of a value or slope of this sigmoid to a rounding of its argument v by
  // |dv| <= k u |v|: their relative change is |dv| (1 - s) (1 + |c|) / (1 + |c| (1 - s)) at most,
  // below |dv| min(1, (1 - s) (1 + |c|)), so c = |v| min(1, (1 - s) (1 + |c|)) (ErrorBound).
  template <class D>
  HWY_INLINE V ArgumentCondition(D d, V v, V c) const {
    const V one_minus_s = OneMinus(d);
    const V damping = hn::Min(hn::Set(d, 1.0f), hn::MulAdd(hn::Abs(c), one_minus_s, one_minus_s));
    return hn::Mul(hn::Abs(v), damping);
  }

  const V &e_lo, &e, &den, &den_lo, &estimate, &s;
};

// Calls body(const Sigmoid<V> &) with v's sigmoid, computed once; returns what body returns.
// Callers pass lambdas marked always_inline, so that the vectors stay in registers.
template <class D, class V, class Body>
HWY_INLINE auto WithSigmoid(D d, V v, const Body &body) {
  V e_lo;
  const V e = ExpOfMinus(d, hn::Min(v, hn::Set(d, 60.0f)), static_cast<const V *>(nullptr), &e_lo);
  const V den = hn::Add(hn::Set(d, 1.0f), e);
  const V den_lo = hn::Add(hn::Sub(e, hn::Sub(den, hn::Set(d, 1.0f))), e_lo);
  const V estimate = ReciprocalEstimate(d, den);
  const V s = Reciprocal(d, den, estimate);
  return body(Sigmoid<V>{e_lo, e, den, den_lo, estimate, s});
}

// The absolute bound of an F32 result for a 16-bit output's rounding test (elementwise-inl.h's
// RoundedOnce, kErrorBounds), in units of u = 2^-24 (NearRoundingBoundaryWithin scales the
// distance instead, so that no tiny bound is subnormal: each subnormal operand or result costs x86
// a microcode assist, and the gradients ran at 0.1-0.3x): docs/accuracy.md's K u terms (1 + c)
// with twice the operator's K (its measured maxima are 0.6-0.85 K; the windows' margin too).
// `terms` is the summed terms times |scale|. Without the F32 bound's floors: below the tails'
// clamps, where they count, TailBound (gated-inl.h) takes every lane (ClippedSwiglu's clamped
// fast terms are far above its tail's values); a result's last rounding into the subnormals
// never crosses a 16-bit midpoint, which F32 holds exactly, and lands on one only where the test
// takes the lane anyway; the pairs' low parts that a tiny scale makes subnormal cost at most u
// each. Its own roundings (MulAdd, no fma needed) are far inside the margin; a NaN (an infinite
// scale times zero terms) makes the lane near, as an infinite bound does.
template <int K, class D, class V>
HWY_INLINE V ErrorBound(D d, V terms, V c) {
  const V relative = hn::Mul(terms, hn::Set(d, static_cast<float>(2 * K)));
  return hn::MulAdd(relative, c, relative);
}

// `value` computed from a clamped x, with x's non-finite cases restored: -0 where x is -inf (the
// limit of silu', gelu' and the gate's slope there, approached from below), NaN where x is NaN.
template <class D, class V>
HWY_INLINE V ZeroAtMinusInfNaNAtNaN(D d, V x, V value) {
  value = hn::IfThenElse(hn::Lt(x, hn::Set(d, -3.4028235e38f)), hn::Set(d, -0.0f), value);
  return hn::IfThenElse(hn::IsNaN(x), x, value);
}

// `value` = x f(x) computed from a clamped x, with x's non-finite cases restored: -0 at -inf (the
// limit of silu and gelu there, from below, as at every finite x far left), x itself at +inf and
// NaN.
template <class D, class V>
HWY_INLINE V ProductAtNonFinite(D d, V x, V value) {
  return hn::IfThenElse(hn::IsFinite(x), value,
                        hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Set(d, -0.0f), x));
}

// The activations below are the exact paths, for the lanes whose fast path (the *At views
// further down) does not stand: they return f(x) and, where `derivative` is not null, set
// *derivative to f'(x). Without it the value is x sigmoid(v)'s corrected quotient
// (Sigmoid::Times); beside the derivative's own work it is x s instead: one rounding more, within
// the backward operators' bounds, and much cheaper.
//
// The far-left tail (x below kTailBound): there exp underflows F32's normal range, and the value
// and derivative are e^-w P(x) with w in [64, 175]. They are returned scaled by 2^128
// (ScaledExpOfMinus) and *unscale is TailUnscale's: the caller multiplies its result (the
// value or derivative times the operator's multipliers) by 2^-128 there, last (Unscale), so that
// a result that underflows is rounded once into the subnormals or to a signed 0, as IEEE would
// round the exact value, and one that a large multiplier brings back into range keeps its digits.
// Beyond w = 175 the exponent is clamped: such results are below 2^-252 |P multiplier|.

// The unscale factor of the tail lanes: 2^-64 there (applied twice by Unscale), 1 elsewhere.
template <class D, class M>
HWY_INLINE hn::Vec<D> TailUnscale(D d, M tail) {
  return hn::IfThenElse(tail, hn::Set(d, kTailUnscale), hn::Set(d, 1.0f));
}

// value * 2^-128 in the tail lanes, one rounding: value 2^-64 is exact unless |value| < 2^-62,
// where both this and the single product round to a zero of the same sign. Not one product by
// 2^-128: that operand is subnormal, and each instruction with a subnormal operand costs x86 a
// microcode assist (the exact path ran 3x slower: 105 us against 35 with DAZ for 16384 F32
// gelu_tanh inputs in [-10, -9.9]).
template <class V>
HWY_INLINE V Unscale(V value, V unscale) {
  return hn::Mul(hn::Mul(value, unscale), unscale);
}

// Unscale(value m): a tail value scaled by 2^128 (up to 5e10 |x|) times a finite multiplier m
// above about 1e27 overflows, yet the result is finite (gelu_erf(-13) times 3.4e38 is -27).
// There the product is taken as (value 2^-64) m 2^-64 instead: value 2^-64 is exact where
// value m overflows (value > 1), and so is the last factor (the result is above 1), one
// rounding again. An infinite m keeps the infinity.
template <class D, class V>
HWY_INLINE V UnscaleProduct(D /*d*/, V value, V m, V unscale) {
  const V direct = Unscale(hn::Mul(value, m), unscale);
  const auto overflowed = hn::And(hn::IsInf(direct), hn::IsFinite(m));
  return hn::IfThenElse(overflowed, hn::Mul(hn::Mul(hn::Mul(value, unscale), m), unscale), direct);
}

// silu(x) = x sigmoid(x); its derivative is s + x s (1 - s) (whose zero near x = -1.2785 is where
// the two terms cancel); the derivative's x is capped at 40, beyond which x s (1 - s) vanishes.
// The tail is x < -87, where sigmoid(x) = e^x to F32's precision: x e^x and (1 + x) e^x.
constexpr float kSiluTailBound = -87.0f;
template <class D, class V>
HWY_INLINE V Silu(D d, V input, V *derivative, V *unscale) {
  const V x = hn::Max(input, hn::Set(d, kSiluTailBound));
  return WithSigmoid(
      d, x, [&](const Sigmoid<V> &sigmoid) __attribute__((always_inline)) {
        const auto tail = hn::Lt(input, hn::Set(d, kSiluTailBound));
        const V x_tail = hn::Max(input, hn::Set(d, -175.0f));
        const V e_tail =
            ScaledExpOfMinus(d, hn::Min(hn::Neg(x_tail), hn::Set(d, 175.0f)), hn::Zero(d));
        *unscale = TailUnscale(d, tail);
        const V value_tail = hn::Mul(x_tail, e_tail);
        if (derivative == nullptr) {
          return ProductAtNonFinite(d, input,
                                    hn::IfThenElse(tail, value_tail, sigmoid.Times(d, x)));
        }
        const V capped = hn::Min(x, hn::Set(d, 40.0f));
        *derivative =
            ZeroAtMinusInfNaNAtNaN(d, input,
                                   hn::IfThenElse(tail, Fma(d, x_tail, e_tail, e_tail),
                                                  Fma(d, capped, sigmoid.Slope(), sigmoid.s)));
        return ProductAtNonFinite(d, input,
                                  hn::IfThenElse(tail, value_tail, hn::Mul(x, sigmoid.s)));
      });
}

// silu(x) and *derivative = silu'(x) for the relaxed mode's F32 gradients: Silu's formulas
// without its tail (finite x at or above kSiluTailBound; callers take Silu for the rest), x s and
// s + x (e s) s, s within about 0.5 ulp plus e's 2u: within about 6u of the derivative's terms
// s (1 + |x| (1 - s)) (they cancel near x = -1.28).
template <class D, class V>
HWY_INLINE V SiluRelaxed(D d, V input, V *derivative) {
  const V x = hn::Max(input, hn::Set(d, kSiluTailBound));
  // the sigmoid's pairs' low parts unused: the compiler drops them
  return WithSigmoid(
      d, x, [&](const Sigmoid<V> &sigmoid) __attribute__((always_inline)) {
        *derivative = Fma(d, hn::Min(x, hn::Set(d, 40.0f)), sigmoid.Slope(), sigmoid.s);
        return hn::Mul(x, sigmoid.s);
      });
}

// a + b as the pair sum + *lo exactly (Knuth's TwoSum: no order of magnitudes needed).
template <class V>
HWY_INLINE V SumPair(V a, V b, V *lo) {
  const V sum = hn::Add(a, b);
  const V b_virtual = hn::Sub(sum, a);
  *lo = hn::Add(hn::Sub(a, hn::Sub(sum, b_virtual)), hn::Sub(b, b_virtual));
  return sum;
}

// v = 2a (x + b x^3) as every gelu_tanh path rounds it: x (2a + 2ab x^2), the constants F32.
// Within 6u of the exact v (the constants 1.5u, x^2 u, the fma u, the product u, and the sum of
// two positive terms adds none), so exp(-v) carries a relative error up to 6u |v|.
template <class D, class V>
HWY_INLINE V GeluTanhArgument(D d, V x) {
  constexpr float kTwoA = INFINIOP_GELU_TANH_TWO_A;
  constexpr float kTwoAB = kTwoA * INFINIOP_GELU_TANH_B;
  return hn::Mul(x, Fma(d, hn::Mul(x, x), hn::Set(d, kTwoAB), hn::Set(d, kTwoA)));
}

// gelu_tanh(x) = x sigmoid(v), v = 2u = 2a (x + b x^3), and its derivative
//   s + x v' s (1 - s),  v' = 2a (1 + 3 b x^2),
// which never cancels for negative x (unlike 0.5 (1 + tanh u)); the derivative's x is capped at
// +20, beyond which it is 1. The tail is x < -9.9 (v < -85): x e^v and (1 + x v') e^v, x
// clamped at -13 (v = -177.5).
constexpr float kGeluTanhTailBound = -9.9f;
template <class D, class V>
HWY_INLINE V GeluTanh(D d, V input, V *derivative, V *unscale) {
  constexpr float kTwoA = INFINIOP_GELU_TANH_TWO_A;
  constexpr float kSixAB = 3.0f * (kTwoA * INFINIOP_GELU_TANH_B);
  const V x_low = hn::Max(input, hn::Set(d, -13.0f));
  const V v = GeluTanhArgument(d, x_low);
  return WithSigmoid(
      d, hn::Max(v, hn::Set(d, -87.0f)),
      [&](const Sigmoid<V> &sigmoid) __attribute__((always_inline)) {
        const auto tail = hn::Lt(input, hn::Set(d, kGeluTanhTailBound));
        const V e_tail = ScaledExpOfMinus(d, hn::Min(hn::Neg(v), hn::Set(d, 175.0f)), hn::Zero(d));
        *unscale = TailUnscale(d, tail);
        const V value_tail = hn::Mul(x_low, e_tail);
        if (derivative == nullptr) {
          return ProductAtNonFinite(d, input,
                                    hn::IfThenElse(tail, value_tail, sigmoid.Times(d, x_low)));
        }
        const V x = hn::Min(x_low, hn::Set(d, 20.0f));
        const V x_dv = hn::Mul(x, Fma(d, hn::Mul(x, x), hn::Set(d, kSixAB), hn::Set(d, kTwoA)));
        *derivative =
            ZeroAtMinusInfNaNAtNaN(d, input,
                                   hn::IfThenElse(tail, Fma(d, x_dv, e_tail, e_tail),
                                                  Fma(d, x_dv, sigmoid.Slope(), sigmoid.s)));
        return ProductAtNonFinite(d, input,
                                  hn::IfThenElse(tail, value_tail, hn::Mul(x_low, sigmoid.s)));
      });
}

// gelu_tanh(x) and, where derivative is not null, its derivative for the relaxed mode: GeluTanh's
// formulas without its tail (finite x at or above kGeluTanhTailBound; callers take GeluTanh for
// the rest), x s and s + x v' (e s) s from the rounded v (GeluTanhArgument: the bound's c, as the
// strict paths').
template <class D, class V>
HWY_INLINE V GeluTanhRelaxed(D d, V input, V *derivative) {
  constexpr float kTwoA = INFINIOP_GELU_TANH_TWO_A;
  constexpr float kSixAB = 3.0f * (kTwoA * INFINIOP_GELU_TANH_B);
  const V x_low = hn::Max(input, hn::Set(d, -13.0f));
  const V v = hn::Max(GeluTanhArgument(d, x_low), hn::Set(d, -87.0f));
  return WithSigmoid(
      d, v, [&](const Sigmoid<V> &sigmoid) __attribute__((always_inline)) {
        if (derivative != nullptr) {
          const V x = hn::Min(x_low, hn::Set(d, 20.0f));
          const V x_dv = hn::Mul(x, Fma(d, hn::Mul(x, x), hn::Set(d, kSixAB), hn::Set(d, kTwoA)));
          *derivative = Fma(d, x_dv, sigmoid.Slope(), sigmoid.s);
        }
        return hn::Mul(x_low, sigmoid.s);
      });
}

// The fast paths of the activations, for finite x at or above the tail bound (callers check
// with FastPathHolds and take the functions above for the lanes ExactLanes names):
// `Value(d, g)` is g act(x) and `Slope(d, g, g_lo)` is (g + g_lo) act'(x), each with the
// multiplier folded into the one corrected quotient, so that it costs no rounding of its own.
// Each *At is a view of the vectors that its With*At function computes once from x and holds in
// its frame while it calls a body with the view (as Sigmoid and WithSigmoid).

// The lanes whose fast-path results do not stand: a non-finite input or result, an input in the
// far-left tail (`tail` < `bound`: the fast path clamps exp there), or a zero or subnormal
// result (there the pairs' own roundings are subnormal too and lose their bits, so the exact
// path's fewer roundings are the better ones, and zeros keep their sign). Between 2^-126 and
// 2^-102 the low parts lose bits too, but that error is below the bounds' 2^-125 floor.
template <class D, class V, class... Results>
HWY_INLINE auto ExactLanes(D d, V input, V tail, float bound, Results... results) {
  const V tiny = hn::Set(d, 0x1p-126f), huge = hn::Set(d, 3.4028235e38f);
  auto exact = hn::Or(hn::Not(hn::Le(hn::Abs(input), huge)), hn::Lt(tail, hn::Set(d, bound)));
  ((exact = hn::Or(
        exact, hn::Not(hn::And(hn::Ge(hn::Abs(results), tiny), hn::Le(hn::Abs(results), huge))))),
   ...);
  return exact;
}

// Whether no lane needs the exact path (ExactLanes all false), as cheaply as the test can be, for
// the one branch per vector: x 0 is NaN for a non-finite x, and the smallest |result| and tail
// value stand for all (a NaN result is caught by the first test whatever Min makes of it).
template <class D, class V, class... Results>
HWY_INLINE bool FastPathHolds(D d, V input, V tail, float bound, V result, Results... more) {
  const V zero = hn::Zero(d);
  V sum = hn::Add(hn::Mul(result, zero), hn::Mul(input, zero));
  V smallest = hn::Abs(result);
  ((sum = hn::Add(hn::Mul(more, zero), sum), smallest = hn::Min(smallest, hn::Abs(more))), ...);
  const auto in_range =
      hn::And(hn::Ge(smallest, hn::Set(d, 0x1p-126f)), hn::Ge(tail, hn::Set(d, bound)));
  return hn::AllTrue(d, hn::And(hn::Eq(sum, sum), in_range));
}

// a b exactly as the pair p + p_lo.
template <class D, class V>
HWY_INLINE V ProductPair(D d, V a, V b, V *lo) {
  const V p = hn::Mul(a, b);
  *lo = ProductError(d, a, b, p);
  return p;
}

// silu(x) = x sigmoid(x), clamped as Silu; c = x (capped at 40, as Silu's derivative). A view
// of the clamped x and its sigmoid, which WithSiluAt holds.
template <class V>
struct SiluAt {
  template <class D>
  HWY_INLINE V Value(D d, V g) const {
    return sigmoid.ProductOver(d, g, x);
  }
  template <class D>
  HWY_INLINE V Slope(D d, V g, const V *g_lo) const {
    return sigmoid.SlopeTimes(d, hn::Min(x, hn::Set(d, 40.0f)), g, g_lo);
  }
  const V &x;
  Sigmoid<V> sigmoid;  // a view itself
};

// Calls body(const SiluAt<V> &) with input's fast-path state; returns what body returns (as
// WithSigmoid).
template <class D, class V, class Body>
HWY_INLINE auto WithSiluAt(D d, V input, const Body &body) {
  const V x = hn::Max(input, hn::Set(d, -87.0f));
  return WithSigmoid(
      d, x, [&](const Sigmoid<V> &sigmoid) __attribute__((always_inline)) {
        return body(SiluAt<V>{x, sigmoid});
      });
}

// n / (1 + exp(-v)) as one quotient (Quotient, the same bits on every target), v in [-87, 60]
// (callers clamp): the relaxed values of the sigmoid family (opencl's over_one_plus_exp_relaxed).
template <class D, class V>
HWY_INLINE V OverOnePlusExp(D d, V n, V v) {
  return Quotient(d, n, hn::Add(hn::Set(d, 1.0f), ExpOfMinus(d, v)));
}

// g silu(x), short, for a relaxed F32 output: none of the pairs' low parts. e within 2u
// (ExpOfMinus; its weight e / (1 + e) <= 1), 1 + e and g x rounded (u each), their quotient (u):
// within 5u |g silu(x)| on every target (3.7u measured), inside the relaxed bound (K = 8). Finite
// x at or above the tail bound, as SiluAt.
template <class D, class V>
HWY_INLINE V SiluValueShort(D d, V input, V g) {
  const V x = hn::Max(input, hn::Set(d, -87.0f));
  return OverOnePlusExp(d, hn::Mul(g, x), hn::Min(x, hn::Set(d, 60.0f)));
}

// gelu_tanh(x) = x sigmoid(v), v = 2a (x + b x^3), clamped as GeluTanh; c = x v'. A view of the
// clamped x and sigmoid(v), which WithGeluTanhAt holds.
template <class V>
struct GeluTanhAt {
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
    return sigmoid.SlopeTimes(d, SlopeFactor(d), g, g_lo);
  }
  // c = x v', v' = 2a (1 + 3 b x^2), x capped at 20.
  template <class D>
  HWY_INLINE V SlopeFactor(D d) const {
    constexpr float kSixAB = 3.0f * INFINIOP_GELU_TANH_TWO_A * INFINIOP_GELU_TANH_B;
    const V capped = hn::Min(x, hn::Set(d, 20.0f));
    const V dv =
        Fma(d, hn::Mul(capped, capped), hn::Set(d, kSixAB), hn::Set(d, INFINIOP_GELU_TANH_TWO_A));
    return hn::Mul(capped, dv);
  }
  const V &x;
  Sigmoid<V> sigmoid;  // a view itself
};

// Calls body(const GeluTanhAt<V> &) with input's fast-path state; returns what body returns (as
// WithSigmoid).
template <class D, class V, class Body>
HWY_INLINE auto WithGeluTanhAt(D d, V input, const Body &body) {
  const V x = hn::Max(input, hn::Set(d, -20.0f));
  const V v = hn::Max(GeluTanhArgument(d, x), hn::Set(d, -87.0f));
  return WithSigmoid(
      d, v, [&](const Sigmoid<V> &sigmoid) __attribute__((always_inline)) {
        return body(GeluTanhAt<V>{x, sigmoid});
      });
}

// W = 2 + a R(a) / P(a) of gelu_erf's F = k a + W (math_constants.h): R and P interleaved by
// Horner, R / P one corrected quotient.
template <class D, class V>
HWY_INLINE V ErfW(D d, V a) {
  V r = hn::Set(d, INFINIOP_ERF_R3), p = hn::Set(d, INFINIOP_ERF_P4);
  p = Fma(d, p, a, hn::Set(d, INFINIOP_ERF_P3));
  r = Fma(d, r, a, hn::Set(d, INFINIOP_ERF_R2));
  p = Fma(d, p, a, hn::Set(d, INFINIOP_ERF_P2));
  r = Fma(d, r, a, hn::Set(d, INFINIOP_ERF_R1));
  p = Fma(d, p, a, hn::Set(d, INFINIOP_ERF_P1));
  r = Fma(d, r, a, hn::Set(d, INFINIOP_ERF_R0));
  p = Fma(d, p, a, hn::Set(d, INFINIOP_ERF_P0));
  return Fma(d, a, Quotient(d, r, p), hn::Set(d, 2.0f));
}

// gelu_erf(x) = x Phi(x) and its derivative Phi(x) + x phi(x), from one exp: with a = |x|,
//   T = Phi(-a) = exp(-a^2 / 2) / F(a),  F = k a + 2 + a R(a) / P(a)  (math_constants.h,
//   scripts/fit_erf.py),  Phi(x) = T for x < 0, 1 - T otherwise,  phi(x) = exp(-a^2 / 2) c.
// T is a product and quotients, never a difference, so the left tail keeps its relative accuracy;
// a^2 / 2 goes to exp as an exact hi + lo pair, so its rounding is not multiplied by a^2 / 2.
// a is clamped at 13.19 (exp's argument 87) on the right, where Phi is 1 and x phi(x) vanishes.
// The tail is x < -12.9, below which Phi(x) (2.3e-38 there) soon leaves the normal range: there
// exp is scaled (ScaledExpOfMinus), x clamped at -18.7 (a^2 / 2 = 174.8), and F's fit holds to
// 2.4e-7 (relative, against 8e-8 below 13.19).
constexpr float kGeluErfTailBound = -12.9f;
template <class D, class V>
HWY_INLINE V GeluErf(D d, V input, V *derivative, V *unscale) {
  const V clamp = hn::Set(d, INFINIOP_ERF_CLAMP);
  const auto tail = hn::Lt(input, hn::Set(d, kGeluErfTailBound));
  // -inf -> -18.7, NaN -> -clamp; +inf and NaN restored below
  const V x = hn::Max(input, hn::IfThenElse(tail, hn::Set(d, -18.7f), hn::Neg(clamp)));
  const V a = hn::Min(hn::Abs(x), hn::IfThenElse(tail, hn::Set(d, 18.7f), clamp));
  const V half_a = hn::Mul(a, hn::Set(d, 0.5f));  // exact: a >= 0 is 0 or normal
  const V h = hn::Mul(half_a, a);
  const V h_lo = ProductError(d, half_a, a, h);
  const V e = hn::IfThenElse(tail, ScaledExpOfMinus(d, h, h_lo), ExpOfMinus(d, h, &h_lo));
  *unscale = TailUnscale(d, tail);
  // F = k a + W, W = 2 + a R / P: the 2 exact, so near a = 0 (W ~ 2, S and P just above powers
  // of two) their roundings are damped by a. F is kept as the pair (k a, W) in the quotients'
  // remainders, so its own rounding does not count either. F >= 2; F(0) = 2 exactly, so
  // Phi(0) = 1/2.
  const V ka = hn::Mul(hn::Set(d, INFINIOP_ERF_K), a);
  const V w = ErfW(d, a);
  const V r = ReciprocalEstimate(d, hn::Add(ka, w));
  const auto over_f = [&](V n) {  // n / (k a + W) within 0.5 ulp + 2^-27 (as Quotient)
    const V q = hn::Mul(n, r);
    return Fma(d, NegFma(d, q, w, NegFma(d, q, ka, n)), r, q);
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
      d, input, Fma(d, hn::Mul(capped, e), hn::Set(d, INFINIOP_INV_SQRT_2PI), cdf));
  return ProductAtNonFinite(d, input, hn::Mul(x, cdf));
}

// Phi(x) as GeluErfValueShort takes it, with *x (clamped at -13.19) and *e = exp(-x^2 / 2).
template <class D, class V>
HWY_INLINE V GeluErfCdfShort(D d, V input, V *x, V *e) {
  const V clamp = hn::Set(d, INFINIOP_ERF_CLAMP);
  *x = hn::Max(input, hn::Neg(clamp));
  const V a = hn::Min(hn::Abs(*x), clamp);
  const V half_a = hn::Mul(a, hn::Set(d, 0.5f));
  V h_lo;
  const V h = ProductPair(d, half_a, a, &h_lo);
  *e = ExpOfMinus(d, h, &h_lo);
  const V f = Fma(d, hn::Set(d, INFINIOP_ERF_K), a, ErfW(d, a));
  const V t = Quotient(d, *e, f);  // Phi(-|x|)
  return hn::IfThenElse(hn::Lt(*x, hn::Zero(d)), t, hn::Sub(hn::Set(d, 1.0f), t));
}

// g gelu_erf(x), short, for a relaxed F32 output (as SiluValueShort): GeluErfAt's formula with
// x^2 / 2 still an exact pair into exp (so c stays 0), but no low parts after it, F = k a + W as
// one fma. The roundings add up to 11u at worst (exp 2, the fit 1.3, W 2.7, F 1, e / F 2, 1 - T
// 1, the products 2), and measure 5.0u at most (4M vectors, x in [-90, 90] down to 1e-3, AVX3,
// AVX2 and SSSE3), inside the relaxed bound (docs/accuracy.md). Finite x at or above the tail
// bound, as GeluErfAt.
template <class D, class V>
HWY_INLINE V GeluErfValueShort(D d, V input, V g) {
  V x, e;
  const V cdf = GeluErfCdfShort(d, input, &x, &e);
  return hn::Mul(hn::Mul(g, x), cdf);
}

// gelu_erf(x) and *derivative = Phi(x) + x phi(x) for the relaxed mode's F32 gradients: the
// short cdf (same bits on every target) and GeluErf's derivative formula, without its tail
// (finite x at or above the tail bound; callers take GeluErf for the rest). The derivative's two
// terms cancel near x = -0.75, so its bound is in units of the terms (ErrorBound's form): cdf
// within about 4u (GeluErfValueShort's), x phi's e 2u and two products, the fma u.
template <class D, class V>
HWY_INLINE V GeluErfRelaxed(D d, V input, V *derivative) {
  V x, e;
  const V cdf = GeluErfCdfShort(d, input, &x, &e);
  const V capped = hn::Min(x, hn::Set(d, INFINIOP_ERF_CLAMP));
  *derivative = Fma(d, hn::Mul(capped, e), hn::Set(d, INFINIOP_INV_SQRT_2PI), cdf);
  return hn::Mul(x, cdf);
}
// gelu_erf(x) = x Phi(x), clamped as GeluErf, with Phi(x) kept as the pair cdf + cdf_lo (within
// about 0.5 u: T = e / F from e + e_lo over F = (k a + its rounding) + W, one corrected quotient
// left unrounded; 1 - T's rounding caught exactly, 1 being larger than T <= 1/2), and e + e_lo =
// exp(-x^2 / 2). A view of the vectors that WithGeluErfAt holds.
template <class V>
struct GeluErfAt {
  // g x Phi(x): (g x as a pair) times (cdf + cdf_lo), one rounding.
  template <class D>
  HWY_INLINE V Value(D d, V g) const {
    V n_lo;
    const V n = ProductPair(d, g, x, &n_lo);
    return Fma(d, n, cdf, Fma(d, n, cdf_lo, hn::Mul(n_lo, cdf)));
  }
  // gelu_erf(x) alone: x (cdf + cdf_lo), one rounding (x needs no pair).
  template <class D>
  HWY_INLINE V Value(D d) const {
    return Fma(d, x, cdf, hn::Mul(x, cdf_lo));
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
    m_lo = Fma(d, capped, e_lo, m_lo);
    V p_lo;
    const V p = ProductPair(d, m, c_hi, &p_lo);
    p_lo = Fma(d, m, c_lo, Fma(d, m_lo, c_hi, p_lo));
    V sum_lo;
    const V sum = SumPair(cdf, p, &sum_lo);
    sum_lo = hn::Add(sum_lo, hn::Add(cdf_lo, p_lo));
    V lo = hn::Mul(g, sum_lo);
    if (g_lo != nullptr) lo = Fma(d, *g_lo, sum, lo);
    return Fma(d, g, sum, lo);
  }
  const V &x, &e, &e_lo, &cdf, &cdf_lo;
};

// Calls body(const GeluErfAt<V> &) with input's fast-path state; returns what body returns (as
// WithSigmoid).
template <class D, class V, class Body>
HWY_INLINE auto WithGeluErfAt(D d, V input, const Body &body) {
  const V clamp = hn::Set(d, INFINIOP_ERF_CLAMP);
  const V x = hn::Max(input, hn::Neg(clamp));
  const V a = hn::Min(hn::Abs(x), clamp);
  const V half_a = hn::Mul(a, hn::Set(d, 0.5f));
  V h_lo, e_lo;
  const V h = ProductPair(d, half_a, a, &h_lo);
  const V e = ExpOfMinus(d, h, &h_lo, &e_lo);
  V ka_lo;
  const V ka = ProductPair(d, hn::Set(d, INFINIOP_ERF_K), a, &ka_lo);
  const V w = ErfW(d, a);
  const V f = hn::Add(ka, w);
  // t + t_lo = (e + e_lo) / (ka + ka_lo + w): q = e / f's estimate, its remainder exact but
  // for the roundings of values far below q's ulp.
  const V estimate = ReciprocalEstimate(d, f);
  const V t = hn::Mul(e, estimate);
  V remainder = NegFma(d, t, w, NegFma(d, t, ka, e));
  remainder = NegFma(d, t, ka_lo, hn::Add(remainder, e_lo));
  const V t_lo = hn::Mul(remainder, estimate);
  // x >= 0: 1 - t within half an ulp, its rounding (1 - cdf) - t exactly (1 >= t).
  const V one = hn::Set(d, 1.0f);
  const auto negative = hn::Lt(x, hn::Zero(d));
  const V upper = hn::Sub(one, t);
  const V upper_lo = hn::Sub(hn::Sub(hn::Sub(one, upper), t), t_lo);
  const V cdf = hn::IfThenElse(negative, t, upper);
  const V cdf_lo = hn::IfThenElse(negative, t_lo, upper_lo);
  return body(GeluErfAt<V>{x, e, e_lo, cdf, cdf_lo});
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // INFINIOP_CPU_MATH_INL_H_
