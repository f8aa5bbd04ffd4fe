// SPDX-License-Identifier: Apache-2.0
// The F32 maths every program shares, after storage.cl and devices/math_constants.h (the embed
// concatenates them: devices/opencl/CMakeLists.txt): exp of a negative argument within 1 ulp, the
// activations' exact and fast paths, their far-left tails and ClippedSwiglu's gate, each the same
// IEEE operations in the same order as the cpu device's (devices/cpu/math-inl.h).

// exp(-(a + lo)) for a in [-87, 87] (callers clamp) and lo below half an ulp of a: a normal F32
// within 1 ulp (math-inl.h's ExpOfMinus; the constants are devices/math_constants.h's, embedded
// in front of this file). Where result_lo is not null it receives the result's own rounding, so
// that e + *result_lo is exp within about 0.3 ulp.
INLINE float exp_of_minus_pair(float a, float lo, float *result_lo) {
  const float shifter = INFINIOP_EXP_SHIFTER;  // the sum's low bits are n + 127
  const float n_plus_shifter = fma(-a, INFINIOP_LOG2E, shifter);
  const float n = n_plus_shifter - shifter;
  float t = fma(n, INFINIOP_LN2_HI, a);
  t = fma(n, INFINIOP_LN2_LO, t) + lo;
  float q = INFINIOP_EXP_Q4;
  q = fma(q, t, INFINIOP_EXP_Q3);
  q = fma(q, t, INFINIOP_EXP_Q2);
  q = fma(q, t, INFINIOP_EXP_Q1);
  q = fma(q, t, INFINIOP_EXP_Q0);
  const float inner = fma(-t, q, 1.0f);
  const float p = fma(-t, inner, 1.0f);
  const float scale = as_float(as_uint(n_plus_shifter) << 23);
  // p's own rounding, (1 - t inner) - p: 1 - p is exact (p in [0.7, 1.42]).
  if (result_lo) *result_lo = fma(-t, inner, 1.0f - p) * scale;
  return p * scale;
}

INLINE float exp_of_minus_sum(float a, float lo) {
  return exp_of_minus_pair(a, lo, 0);
}

// exp(-(w + lo)) 2^128 for w in [64, 175], exactly as math-inl.h's ScaledExpOfMinus (the
// activations' far-left tails): results scaled the same way are multiplied by 2^-128 last, as
// TAIL_UNSCALE twice (math-inl.h's Unscale: 2^-128 is subnormal, 2^-64 is not).
#define TAIL_UNSCALE 0x1p-64f
// v times the unscale factor u twice (TAIL_UNSCALE or 1): math-inl.h's Unscale.
INLINE float unscale_tail(float v, float u) {
  return v * u * u;
}
// v m times the unscale factor u twice (math-inl.h's UnscaleProduct): where v m overflows for a
// finite m, (v u) m u, which cannot (one rounding either way).
INLINE float unscale_product(float v, float m, float u) {
  const float direct = unscale_tail(v * m, u);
  return isinf(direct) && isfinite(m) ? v * u * m * u : direct;
}
INLINE float scaled_exp_of_minus(float w, float lo) {
  return exp_of_minus_sum(w - 128.0f * INFINIOP_LN2_HI, lo - 128.0f * INFINIOP_LN2_LO);
}

// 1 / y within 2^-17 for a positive normal y below 2^126 (ieee-inl.h's ReciprocalEstimate): the
// same integer estimate and two Newton steps on every device, so that no driver's division or
// native reciprocal enters a result. Callers correct once more.
INLINE float reciprocal_estimate(float y) {
  float r = as_float(0x7EF311C3u - as_uint(y));
  r = fma(r, fma(-y, r, 1.0f), r);
  return fma(r, fma(-y, r, 1.0f), r);
}

// sigmoid(v) = 1 / (1 + e), e = exp(-v), for v >= -87 (callers clamp), clamped at 60 here
// (math-inl.h's Sigmoid: beyond, sigmoid is 1 and its slope below any rounding it joins, and e's
// rounding e_lo stays normal). reciprocal_estimate is the estimate; s is one Newton step on it,
// so s(0) = 1/2 and s = 1 wherever 1 is the rounded value.
// 1 + e is also kept as the pair den + den_lo (e's rounding e_lo included).
typedef struct {
  float e, e_lo, den, den_lo, estimate, s;
} sigmoid_t;

// 1 / y from an estimate r by one Newton step whose residual 1 - y r is an fma.
INLINE float newton_reciprocal(float y, float r) {
  return fma(r, fma(-y, r, 1.0f), r);
}

INLINE sigmoid_t sigmoid_of(float v) {
  sigmoid_t g;
  g.e = exp_of_minus_pair(fmin(v, 60.0f), -0.0f, &g.e_lo);  // t + -0 is t: no addition
  g.den = 1.0f + g.e;
  g.den_lo = (g.e - (g.den - 1.0f)) + g.e_lo;
  g.estimate = reciprocal_estimate(g.den);
  g.s = newton_reciprocal(g.den, g.estimate);
  return g;
}

// s (1 - s) as (e s) s, without cancellation.
INLINE float sigmoid_slope(sigmoid_t g) {
  return (g.e * g.s) * g.s;
}

// n + n_lo - q (den + den_lo) for q near n / den, exact but for the rounding of values far below
// q's ulp (math-inl.h's Sigmoid::Remainder). has_lo false: no n_lo (a constant once inlined).
INLINE float sigmoid_remainder(sigmoid_t g, float n, float n_lo, bool has_lo, float q) {
  float remainder = fma(-q, g.den, n);
  if (has_lo) remainder = remainder + n_lo;
  return fma(-q, g.den_lo, remainder);
}

// (n + n_lo) / (1 + e) within about 0.5 ulp plus e's error (0.3 ulp as the pair e + e_lo): n
// times the estimate corrected once by the exact remainder (math-inl.h's Sigmoid::Over). A
// non-finite n gives NaN (inf - inf in the remainder): callers take their exact path there.
INLINE float sigmoid_over(sigmoid_t g, float n, float n_lo, bool has_lo) {
  const float q = n * g.estimate;
  return fma(sigmoid_remainder(g, n, n_lo, has_lo, q), g.estimate, q);
}

// x sigmoid(v) = x / (1 + e) (math-inl.h's Sigmoid::Times), with x's sign also at x = +-0.
INLINE float sigmoid_times(sigmoid_t g, float x) {
  return copysign(sigmoid_over(g, x, 0.0f, false), x);
}

// (gv + g_lo) s (1 + c (1 - s)) (math-inl.h's Sigmoid::SlopeTimes): the corrected quotient
// (gv + g_lo) / (1 + e) left unrounded as q + remainder s, times h = 1 + c (1 - s); 1 - s
// is e s where e < 1 (no cancellation) and 1 - s elsewhere.
// 1 - s: e s where e < 1 (no cancellation), 1 - s itself elsewhere.
INLINE float sigmoid_one_minus(sigmoid_t g) {
  return g.e < 1.0f ? g.e * g.s : 1.0f - g.s;
}
INLINE float sigmoid_slope_times(sigmoid_t g, float c, float gv, float g_lo, bool has_lo) {
  const float h = fma(c, sigmoid_one_minus(g), 1.0f);
  const float q = gv * g.s;
  // the correction dropped where s is below 2^-102 (as math-inl.h: no subnormals)
  const float k = g.s < 0x1p-102f ? 0.0f : h * g.s;
  return fma(q, h, sigmoid_remainder(g, gv, g_lo, has_lo, q) * k);
}

// `value` computed from a clamped x, with x's non-finite cases restored.
INLINE float zero_at_minus_inf_nan_at_nan(float x, float value) {
  if (x < -3.4028235e38f) value = -0.0f;
  return isnan(x) ? x : value;
}

// `value` = x f(x) computed from a clamped x: 0 at x = -inf, x at +inf and NaN.
INLINE float product_at_non_finite(float x, float value) {
  return isfinite(x) ? value : (x < 0.0f ? -0.0f : x);
}

// The activations' exact paths return f(x) and, where `derivative` is not null, set *derivative
// to f'(x); with it the value is x s, one rounding more than sigmoid_times (as in math-inl.h).
// In the far-left tail (x below the activation's *_TAIL_BOUND) both are scaled by 2^128 and
// *unscale is TAIL_UNSCALE (else 1): callers multiply their result by it twice, last
// (math-inl.h's Unscale).

// silu(x) = x sigmoid(x) and its derivative s + x s (1 - s), clamped as in math-inl.h; the tail
// x < -87: x e^x and (1 + x) e^x, x clamped at -175.
#define SILU_TAIL_BOUND -87.0f
INLINE float silu(float input, float *derivative, float *unscale) {
  const float x = fmax(input, SILU_TAIL_BOUND);
  const sigmoid_t g = sigmoid_of(x);
  const bool tail = input < SILU_TAIL_BOUND;
  const float x_tail = fmax(input, -175.0f);
  const float e_tail = scaled_exp_of_minus(fmin(-x_tail, 175.0f), 0.0f);
  *unscale = tail ? TAIL_UNSCALE : 1.0f;
  const float value_tail = x_tail * e_tail;
  if (!derivative) return product_at_non_finite(input, tail ? value_tail : sigmoid_times(g, x));
  *derivative = zero_at_minus_inf_nan_at_nan(
      input, tail ? fma(x_tail, e_tail, e_tail) : fma(fmin(x, 40.0f), sigmoid_slope(g), g.s));
  return product_at_non_finite(input, tail ? value_tail : x * g.s);
}
// silu(x) and *derivative for the relaxed gradients (math-inl.h's SiluRelaxed): silu's formulas
// without its tail, x s and s + x (e s) s.
INLINE float silu_relaxed(float input, float *derivative) {
  const float x = fmax(input, SILU_TAIL_BOUND);
  const sigmoid_t g = sigmoid_of(x);
  *derivative = fma(fmin(x, 40.0f), sigmoid_slope(g), g.s);
  return x * g.s;
}

// v = 2a (x + b x^3) as every gelu_tanh path rounds it (math-inl.h's GeluTanhArgument).
INLINE float gelu_tanh_argument(float x) {
  return x * fma(x * x, INFINIOP_GELU_TANH_TWO_A * INFINIOP_GELU_TANH_B, INFINIOP_GELU_TANH_TWO_A);
}

// gelu_tanh(x) = x sigmoid(v), v = 2a (x + b x^3), and its derivative s + x v' s (1 - s); the
// tail x < -9.9: x e^v and (1 + x v') e^v, x clamped at -13.
#define GELU_TANH_TAIL_BOUND -9.9f
INLINE float gelu_tanh(float input, float *derivative, float *unscale) {
  const float two_a = INFINIOP_GELU_TANH_TWO_A;
  const float six_ab = 3.0f * (two_a * INFINIOP_GELU_TANH_B);
  const float x_low = fmax(input, -13.0f);
  const float v = gelu_tanh_argument(x_low);
  const sigmoid_t g = sigmoid_of(fmax(v, -87.0f));
  const bool tail = input < GELU_TANH_TAIL_BOUND;
  const float e_tail = scaled_exp_of_minus(fmin(-v, 175.0f), 0.0f);
  *unscale = tail ? TAIL_UNSCALE : 1.0f;
  const float value_tail = x_low * e_tail;
  if (!derivative) return product_at_non_finite(input, tail ? value_tail : sigmoid_times(g, x_low));
  const float x = fmin(x_low, 20.0f);
  const float x_dv = x * fma(x * x, six_ab, two_a);
  *derivative = zero_at_minus_inf_nan_at_nan(
      input, tail ? fma(x_dv, e_tail, e_tail) : fma(x_dv, sigmoid_slope(g), g.s));
  return product_at_non_finite(input, tail ? value_tail : x_low * g.s);
}
// gelu_tanh(x) and, where derivative is not 0, its derivative in the relaxed mode (math-inl.h's
// GeluTanhRelaxed): gelu_tanh's formulas without its tail, x s and s + x v' (e s) s.
INLINE float gelu_tanh_relaxed(float input, float *derivative) {
  const float two_a = INFINIOP_GELU_TANH_TWO_A;
  const float six_ab = 3.0f * (two_a * INFINIOP_GELU_TANH_B);
  const float x_low = fmax(input, -13.0f);
  const sigmoid_t g = sigmoid_of(fmax(gelu_tanh_argument(x_low), -87.0f));
  if (derivative) {
    const float x = fmin(x_low, 20.0f);
    *derivative = fma(x * fma(x * x, six_ab, two_a), sigmoid_slope(g), g.s);
  }
  return x_low * g.s;
}

// n / y within 0.5 ulp + 2^-27 for y > 0: reciprocal_estimate corrected once by the exact
// remainder (math-inl.h's Quotient).
INLINE float quotient(float n, float y) {
  const float r = reciprocal_estimate(y);
  const float q = n * r;
  return fma(fma(-q, y, n), r, q);
}

// log(f) + k ln2 for f = 1 + a (a exact), f + 1 = b + b_lo exactly, as math-inl.h's
// LogOfReduced (its comment has the error argument: within 0.6 ulp): log(f) = 2 s + s^3 P(s^2)
// with s = a / (f + 1) as the pair s + s_lo, k ln2_hi + 2 s rounded with its rounding caught
// (Fast2Sum), the low terms added last.
INLINE float log_of_reduced(float k, float a, float b, float b_lo) {
  const float estimate = reciprocal_estimate(b);
  const float q = a * estimate;
  const float s = fma(fma(-q, b, a), estimate, q);
  const float s_lo = fma(-s, b_lo, fma(-s, b, a)) * estimate;
  const float z = s * s;
  float p = INFINIOP_LOG_P3;
  p = fma(p, z, INFINIOP_LOG_P2);
  p = fma(p, z, INFINIOP_LOG_P1);
  p = fma(p, z, INFINIOP_LOG_P0);
  const float two_s_lo = s_lo + s_lo;
  const float c = fma(s * z, p, fma(two_s_lo, z, two_s_lo));
  const float two_s = s + s;
  const float k_hi = k * INFINIOP_LN2_HI;  // exact
  const float hi = k_hi + two_s;
  const float err = two_s - (hi - k_hi);  // exact (Fast2Sum)
  return hi + fma(k, INFINIOP_LN2_LO, c + err);
}

// log(v) for every positive v within 0.6 ulp, +inf at +inf, -inf at +-0, the quiet NaN
// 0x7fc00000 for v < 0 and NaN (math-inl.h's Log: the same integer reduction to f in
// [sqrt(1/2), sqrt(2)), subnormals scaled by 2^23 first).
INLINE float log_f32(float v) {
  const bool positive = v > 0.0f;
  float x = positive ? v : 1.0f;
  const bool subnormal = x < 0x1p-126f;
  x = subnormal ? x * 0x1p23f : x;
  const int ki = (as_int(x) - INFINIOP_LOG_SQRT_HALF_BITS) >> 23;  // arithmetic shift
  const float f = as_float(as_uint(x) - ((uint)ki << 23));
  float k = (float)ki;
  k = subnormal ? k - 23.0f : k;
  const float b = f + 1.0f;
  const float result = log_of_reduced(k, f - 1.0f, b, f - (b - 1.0f));
  const float special = v == 0.0f ? -INFINITY : CANONICAL_NAN;
  return v == INFINITY ? INFINITY : (positive ? result : special);
}

// log(1 + t) for t in [2^-25, 1] within 0.6 ulp, t itself below 2^-25 (+-0, t < 0 and NaN
// included), log(2) above 1 (math-inl.h's Log1p: t clamped at 1; f = 1 + t below 1/2, (1 + t) / 2
// from 1/2 on, f + 1 kept exactly as a pair).
INLINE float log1p_f32(float t) {
  const float x = fmin(fmax(t, 0x1p-25f), 1.0f);  // t itself returned below 2^-25
  const bool upper = x >= 0.5f;
  const float offset = upper ? 3.0f : 2.0f;
  const float scale = upper ? 0.5f : 1.0f;
  const float w = offset + x;
  const float w_lo = x - (w - offset);
  const float a = upper ? (x - 1.0f) * 0.5f : x;
  const float k = upper ? 1.0f : 0.0f;
  const float result = log_of_reduced(k, a, w * scale, w_lo * scale);
  return t >= 0x1p-25f ? result : t;
}

// softplus(x) = max(x, 0) + log1p(exp(-|x|)) within 2.2 ulp, x beyond 87, 0 below -87, NaN at
// NaN (math-inl.h's Softplus: the same operations in the same order).
INLINE float softplus_f32(float x) {
  const float a = fabs(x);
  const bool beyond = a > 87.0f;
  const float t = beyond ? 0.0f : exp_of_minus_sum(a, -0.0f);
  const float result = fmax(x, 0.0f) + log1p_f32(t);
  return isnan(x) ? x : result;
}

// sqrt(v) rounded to nearest even, as every Highway target's: the operator where the program is
// built with -cl-fp32-correctly-rounded-divide-sqrt (-DDIVIDE_OPERATOR, the routers' option where
// the device has it), else in double (a root rounded to 53 bits, then to 24, is the one rounded
// to 24), else the driver's (docs/devices.md: bits may then differ from the cpu device's).
#if defined(DIVIDE_OPERATOR) || !defined(cl_khr_fp64)
INLINE float sqrt_rn(float v) {
  return sqrt(v);
}
#else
// double for this function only: disabled again after it, so that the rest of every program
// keeps its meaning (with cl_khr_fp64 enabled an unsuffixed literal is a double); rounded.cl and
// moe_gating.cl enable it for themselves.
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
INLINE float sqrt_rn(float v) {
  return (float)sqrt((double)v);
}
#pragma OPENCL EXTENSION cl_khr_fp64 : disable
#endif

// sqrt(softplus(x)) (math-inl.h's SqrtSoftplus): the root of softplus_f32 from x = -87 on, e^(x /
// 2) on [-174, -87), 0 below, NaN at NaN.
INLINE float sqrt_softplus_f32(float x) {
  const bool tail = x < -87.0f;
  const float minus_half = x * -0.5f;
  const float e = exp_of_minus_sum(tail ? fmin(minus_half, 87.0f) : 0.0f, -0.0f);
  const float root = isnan(x) ? x : sqrt_rn(softplus_f32(x));
  return tail ? (x < -174.0f ? 0.0f : e) : root;
}

// The relaxed mode's F32 values (-DRELAXED; math-inl.h's SiluValueShort and kin): n / (1 +
// exp(-v)) as one quotient, with none of the strict paths' low parts. The same operations as the
// cpu's, so the same bits. v is clamped to [-87, 60] by the callers.
INLINE float over_one_plus_exp_relaxed(float n, float v) {
  return quotient(n, 1.0f + exp_of_minus_sum(v, -0.0f));
}
INLINE float silu_value_relaxed(float input, float g) {
  const float x = fmax(input, -87.0f);
  return over_one_plus_exp_relaxed(g * x, fmin(x, 60.0f));
}

// W = 2 + a R(a) / P(a) of gelu_erf's F = k a + W (math-inl.h's ErfW).
INLINE float erf_w(float a) {
  float r = INFINIOP_ERF_R3, p = INFINIOP_ERF_P4;
  p = fma(p, a, INFINIOP_ERF_P3);
  r = fma(r, a, INFINIOP_ERF_R2);
  p = fma(p, a, INFINIOP_ERF_P2);
  r = fma(r, a, INFINIOP_ERF_R1);
  p = fma(p, a, INFINIOP_ERF_P1);
  r = fma(r, a, INFINIOP_ERF_R0);
  p = fma(p, a, INFINIOP_ERF_P0);
  return fma(a, quotient(r, p), 2.0f);
}

// Phi(x) in the relaxed mode (math-inl.h's GeluErfCdfShort), with *x (clamped at -13.19)
// and *e = exp(-x^2 / 2): x^2 / 2 an exact pair into exp, F = k a + W one fma, T = e / F one
// quotient.
INLINE float gelu_erf_cdf_relaxed(float input, float *x, float *e) {
  *x = fmax(input, -INFINIOP_ERF_CLAMP);
  const float a = fmin(fabs(*x), INFINIOP_ERF_CLAMP);
  const float half_a = a * 0.5f;
  const float h = half_a * a;
  *e = exp_of_minus_sum(h, fma(half_a, a, -h));
  const float t = quotient(*e, fma(INFINIOP_ERF_K, a, erf_w(a)));
  return *x < 0.0f ? t : 1.0f - t;
}
// g gelu_erf(x) in the relaxed mode (math-inl.h's GeluErfValueShort).
INLINE float gelu_erf_value_relaxed(float input, float g) {
  float x, e;
  const float cdf = gelu_erf_cdf_relaxed(input, &x, &e);
  return g * x * cdf;
}
// gelu_erf(x) and *derivative for the relaxed gradients (math-inl.h's GeluErfRelaxed).
INLINE float gelu_erf_relaxed(float input, float *derivative) {
  float x, e;
  const float cdf = gelu_erf_cdf_relaxed(input, &x, &e);
  *derivative = fma(fmin(x, INFINIOP_ERF_CLAMP) * e, INFINIOP_INV_SQRT_2PI, cdf);
  return x * cdf;
}
// n / (k a + W) from F's reciprocal estimate r, within 0.5 ulp + 2^-27 (as quotient).
INLINE float gelu_erf_over_f(float n, float r, float ka, float w) {
  const float q = n * r;
  return fma(fma(-q, w, fma(-q, ka, n)), r, q);
}

// gelu_erf(x) = x Phi(x) and its derivative Phi(x) + x phi(x) from one exp, as math-inl.h's
// GeluErf: with a = |x| (clamped at 13.19 on the right), T = Phi(-a) = exp(-a^2 / 2) / F,
// F = k a + W, W = 2 + a R(a) / P(a) (scripts/fit_erf.py), a^2 / 2 as an exact pair, F kept as
// the pair (k a, W) in the quotient's remainder; the tail x < -12.9 (Phi below 2.3e-38) with
// exp scaled, x clamped at -18.7.
#define GELU_ERF_TAIL_BOUND -12.9f
INLINE float gelu_erf(float input, float *derivative, float *unscale) {
  const float clamp = INFINIOP_ERF_CLAMP;
  const bool tail = input < GELU_ERF_TAIL_BOUND;
  const float x = fmax(input, tail ? -18.7f : -clamp);
  const float a = fmin(fabs(x), tail ? 18.7f : clamp);
  const float half_a = a * 0.5f;
  const float h = half_a * a;
  const float h_lo = fma(half_a, a, -h);
  const float e = tail ? scaled_exp_of_minus(h, h_lo) : exp_of_minus_sum(h, h_lo);
  *unscale = tail ? TAIL_UNSCALE : 1.0f;
  const float ka = INFINIOP_ERF_K * a;
  const float w = erf_w(a);
  const float r = reciprocal_estimate(ka + w);
  // n / (k a + W) within 0.5 ulp + 2^-27 (as quotient)
  if (!derivative) {
    const float xe = x * e;
    const float xt = gelu_erf_over_f(xe, r, ka, w);
    return product_at_non_finite(input, x < 0.0f ? xt : x - xt);
  }
  const float t = gelu_erf_over_f(e, r, ka, w);
  const float cdf = x < 0.0f ? t : 1.0f - t;
  *derivative =
      zero_at_minus_inf_nan_at_nan(input, fma(fmin(x, clamp) * e, INFINIOP_INV_SQRT_2PI, cdf));
  return product_at_non_finite(input, x * cdf);
}

// ClippedSwiglu's clamped halves, the gate and (with want_slope) its slope, the exact path, as
// devices/cpu/clipped_swiglu.cc's ClippedGate: selects so that NaN passes the clamps; where
// alpha a < -87 (the tail) g = a e^z and its slope (1 + z) e^z scaled by 2^128 (unscale), z
// clamped at -175 with a moved to tail_a = -175 / alpha (far_left_a = -87 / alpha for the
// sigmoid's clamp; both divided on the host).
typedef struct {
  float a, b, g, slope, unscale;
} clipped_gate_t;

INLINE clipped_gate_t clipped_gate(float alpha, float limit, float a_limit, float far_left_a,
                                   float tail_a, float A, float B, bool want_slope) {
  clipped_gate_t c;
  c.a = A > a_limit ? a_limit : A;
  c.b = B > limit ? limit : (B < -limit ? -limit : B);
  const float z = alpha == 0.0f ? 0.0f : alpha * c.a;
  const bool far_left = z < -87.0f;
  const float a_clamped = far_left ? far_left_a : c.a;
  const float z_clamped = far_left ? -87.0f : z;
  const sigmoid_t g = sigmoid_of(z_clamped);
  const bool beyond = z < -175.0f;
  const float z_tail = beyond ? -175.0f : z;
  const float a_tail = beyond ? tail_a : c.a;
  const float e_tail = scaled_exp_of_minus(fmin(-z_tail, 175.0f), 0.0f);
  // beside the slope's work a s, one rounding more than sigmoid_times (as in math-inl.h)
  float gate = want_slope ? a_clamped * g.s : sigmoid_times(g, a_clamped);
  gate = far_left ? a_tail * e_tail : gate;
  const bool infinite = isinf(c.a);
  const bool minus_inf = infinite && z < 0.0f;  // an infinite a: 0 where z < 0, else a
  c.g = infinite ? (minus_inf ? copysign(0.0f, c.a) : c.a) : gate;
  c.unscale = (far_left && !infinite) ? TAIL_UNSCALE : 1.0f;
  c.slope = 0.0f;
  if (want_slope) {
    c.slope =
        far_left ? fma(z_tail, e_tail, e_tail) : fma(fmin(z_clamped, 40.0f), sigmoid_slope(g), g.s);
    c.slope = minus_inf ? -0.0f : c.slope;
  }
  return c;
}

// v times the gate, as clipped_swiglu-inl.h's ClippedGate::TimesGate: a far-left gate of a finite
// non-zero a may underflow to 0 even scaled (huge alpha moves a to the tiny tail_a), yet it is not
// 0, so an infinite v gives the infinity of sign(a) sign(v) (SEMANTICS.md).
INLINE float clipped_times_gate(clipped_gate_t c, float v) {
  return (c.g == 0.0f && isinf(v) && isfinite(c.a) && c.a != 0.0f) ? v * copysign(1.0f, c.a)
                                                                   : v * c.g;
}

// clamp_mode 1's clamp of the gate silu(A), as clipped_swiglu-inl.h's GateClamped: v limit where
// A > a_pass (silu(A) > limit), else v_gate = v g; clamp_mode 0 keeps v_gate.
INLINE float gate_clamped(int clamp_mode, float a_pass, float limit, float A, float v,
                          float v_gate) {
  return clamp_mode == 1 && A > a_pass ? v * limit : v_gate;
}

// The fast paths of the activations, for finite x (math-inl.h's SiluAt, GeluTanhAt, GeluErfAt):
// callers check the input with isfinite and their results with fast_path_holds, and take the
// functions above where either fails. `*_value(at, g)` is g act(x) and `*_slope(at, g, g_lo,
// has_lo)` is (g + g_lo) act'(x), each with the multiplier folded into the one corrected quotient,
// so that it costs no rounding of its own.

// Whether a fast path's result r stands (math-inl.h's FastPathHolds): finite, and not below
// 2^-126 in magnitude (there the pairs' low parts are subnormal and lose their bits, so the exact
// path's fewer roundings are the better ones; zeros go there too). The callers also check their
// input with isfinite and against the activation's tail bound.
INLINE bool fast_path_holds(float r) {
  return isfinite(r) && fabs(r) >= 0x1p-126f;
}

// a b exactly as the pair p + *lo.
INLINE float product_pair(float a, float b, float *lo) {
  const float p = a * b;
  *lo = fma(a, b, -p);
  return p;
}

// a + b exactly as the pair sum + *lo (Knuth's TwoSum).
INLINE float sum_pair(float a, float b, float *lo) {
  const float sum = a + b;
  const float b_virtual = sum - a;
  *lo = (a - (sum - b_virtual)) + (b - b_virtual);
  return sum;
}

// x sigmoid(v) and its derivative's form s (1 + c (1 - s)), for silu, gelu_tanh and the clipped
// gate: x the clamped input, v sigmoid's argument.
typedef struct {
  float x;
  sigmoid_t sigmoid;
} sigmoid_at_t;

// g x sigmoid(v): g x as a pair over 1 + e.
INLINE float sigmoid_at_value(sigmoid_at_t at, float g) {
  float lo;
  const float n = product_pair(g, at.x, &lo);
  return sigmoid_over(at.sigmoid, n, lo, true);
}

// silu(x) = x sigmoid(x), clamped as silu; c = x (capped at 40, as silu's derivative).
INLINE sigmoid_at_t silu_at(float input) {
  sigmoid_at_t at;
  at.x = fmax(input, -87.0f);
  at.sigmoid = sigmoid_of(at.x);
  return at;
}
INLINE float silu_at_slope(sigmoid_at_t at, float g, float g_lo, bool has_lo) {
  return sigmoid_slope_times(at.sigmoid, fmin(at.x, 40.0f), g, g_lo, has_lo);
}

// gelu_tanh(x) = x sigmoid(v), v = 2a (x + b x^3), clamped as gelu_tanh; c = x v'.
INLINE sigmoid_at_t gelu_tanh_at(float input) {
  sigmoid_at_t at;
  at.x = fmax(input, -20.0f);
  at.sigmoid = sigmoid_of(fmax(gelu_tanh_argument(at.x), -87.0f));
  return at;
}
// c = x v', v' = 2a (1 + 3 b x^2), x capped at 20.
INLINE float gelu_tanh_slope_factor(sigmoid_at_t at) {
  const float six_ab = 3.0f * INFINIOP_GELU_TANH_TWO_A * INFINIOP_GELU_TANH_B;
  const float capped = fmin(at.x, 20.0f);
  return capped * fma(capped * capped, six_ab, INFINIOP_GELU_TANH_TWO_A);
}
INLINE float gelu_tanh_at_slope(sigmoid_at_t at, float g, float g_lo, bool has_lo) {
  return sigmoid_slope_times(at.sigmoid, gelu_tanh_slope_factor(at), g, g_lo, has_lo);
}

// gelu_erf(x) = x Phi(x), clamped as gelu_erf, with Phi(x) kept as the pair cdf + cdf_lo (within
// about 0.5 u: T = e / F from e + e_lo over F = (k a + its rounding) + W, one corrected quotient
// left unrounded; 1 - T's rounding caught exactly, 1 being larger than T <= 1/2).
typedef struct {
  float x, e, e_lo, cdf, cdf_lo;
} gelu_erf_at_t;

INLINE gelu_erf_at_t gelu_erf_at(float input) {
  gelu_erf_at_t at;
  const float clamp = INFINIOP_ERF_CLAMP;
  at.x = fmax(input, -clamp);
  const float a = fmin(fabs(at.x), clamp);
  const float half_a = a * 0.5f;
  float h_lo;
  const float h = product_pair(half_a, a, &h_lo);
  at.e = exp_of_minus_pair(h, h_lo, &at.e_lo);
  float ka_lo;
  const float ka = product_pair(INFINIOP_ERF_K, a, &ka_lo);
  const float w = erf_w(a);
  // t + t_lo = (e + e_lo) / (ka + ka_lo + w): t = e / f's estimate, its remainder exact but for
  // the roundings of values far below t's ulp.
  const float estimate = reciprocal_estimate(ka + w);
  const float t = at.e * estimate;
  float remainder = fma(-t, w, fma(-t, ka, at.e));
  remainder = fma(-t, ka_lo, remainder + at.e_lo);
  const float t_lo = remainder * estimate;
  // x >= 0: 1 - t within half an ulp, its rounding (1 - cdf) - t exactly (1 >= t).
  const float upper = 1.0f - t;
  const float upper_lo = ((1.0f - upper) - t) - t_lo;
  const bool negative = at.x < 0.0f;
  at.cdf = negative ? t : upper;
  at.cdf_lo = negative ? t_lo : upper_lo;
  return at;
}

// g x Phi(x): (g x as a pair) times (cdf + cdf_lo), one rounding.
INLINE float gelu_erf_at_value(gelu_erf_at_t at, float g) {
  float n_lo;
  const float n = product_pair(g, at.x, &n_lo);
  return fma(n, at.cdf, fma(n, at.cdf_lo, n_lo * at.cdf));
}

// (g + g_lo) (Phi(x) + x phi(x)), phi(x) = e / sqrt(2 pi) with e + e_lo and the constant as
// pairs; the sum with Phi kept as a pair (it cancels near x = -0.75).
INLINE float gelu_erf_at_slope(gelu_erf_at_t at, float g, float g_lo, bool has_lo) {
  const float c_hi = INFINIOP_INV_SQRT_2PI, c_lo = INFINIOP_INV_SQRT_2PI_LO;
  const float capped = fmin(at.x, INFINIOP_ERF_CLAMP);  // x phi(x) vanishes beyond the clamp
  float m_lo;
  const float m = product_pair(capped, at.e, &m_lo);
  m_lo = fma(capped, at.e_lo, m_lo);
  float p_lo;
  const float p = product_pair(m, c_hi, &p_lo);
  p_lo = fma(m, c_lo, fma(m_lo, c_hi, p_lo));
  float sum_lo;
  const float sum = sum_pair(at.cdf, p, &sum_lo);
  sum_lo = sum_lo + (at.cdf_lo + p_lo);
  float lo = g * sum_lo;
  if (has_lo) lo = fma(g_lo, sum, lo);
  return fma(g, sum, lo);
}

// ClippedSwiglu's fast path for a finite clamped a (devices/cpu/clipped_swiglu.cc's ClippedAt):
// the gate a sigmoid(z) as silu_at's, z = alpha a; clipped_gate stays the exact path.
typedef struct {
  float a, b, b_bias, z;  // z = alpha a, clamped at -87
  bool far_left;          // alpha a < -87: the exact path's tail
  sigmoid_at_t at;
} clipped_at_t;

INLINE clipped_at_t clipped_at(float alpha, float limit, float a_limit, float bias, int clamp_mode,
                               float far_left_a, float A, float B) {
  clipped_at_t c;
  c.a = A > a_limit ? a_limit : A;
  // selects, not fmin / fmax, so that a NaN B reaches the results (and the exact path)
  c.b = B > limit ? limit : (B < -limit ? -limit : B);
  c.b_bias = clamp_mode == 1 ? c.b : c.b + bias;  // clamp_mode 1 adds no bias (a -0 b stays)
  const float z = alpha == 0.0f ? 0.0f : alpha * c.a;
  // where z < -87 (either sign of alpha) a moves to where z = -87, as in clipped_gate
  c.far_left = z < -87.0f;
  c.at.x = c.far_left ? far_left_a : c.a;
  c.z = fmax(z, -87.0f);
  c.at.sigmoid = sigmoid_of(c.z);
  return c;
}
INLINE float clipped_at_slope(clipped_at_t c, float g, float g_lo, bool has_lo) {
  return sigmoid_slope_times(c.at.sigmoid, fmin(c.z, 40.0f), g, g_lo, has_lo);
}
