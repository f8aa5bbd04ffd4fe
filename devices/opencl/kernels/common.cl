// SPDX-License-Identifier: Apache-2.0
// Shared by every OpenCL program: the storage dtype chosen by the build options (-DSTORAGE_F32,
// -DSTORAGE_F16 or -DSTORAGE_BF16), its loads and stores (one element, or 8 consecutive ones as
// a float8), and the F32 maths of the activations, ported from devices/cpu/math-inl.h so that
// both devices round the same way. OpenCL 1.2 C, no extension:
// F16 and BF16 are `ushort` bits converted here, round to nearest even, NaN kept quiet, exactly
// as src/core/dtype.h does it.

// Contraction would change the results per driver; every fused multiply-add here is an fma().
#pragma OPENCL FP_CONTRACT OFF

// Every helper is inlined, whatever the driver's cost model says: a functor left as a call
// keeps its in/out arrays in memory, and PoCL then vectorizes nothing across work-items.
#define INLINE inline __attribute__((always_inline))

#if defined(STORAGE_F32)
typedef float storage_t;
INLINE float load_value(const __global storage_t *p, ulong i) {
  return p[i];
}
INLINE void store_value(__global storage_t *p, ulong i, float v) {
  p[i] = v;
}
INLINE float8 load8(const __global storage_t *p, ulong i) {
  return vload8(0, p + i);
}
INLINE void store8(__global storage_t *p, ulong i, float8 v) {
  vstore8(v, 0, p + i);
}
#elif defined(STORAGE_BF16)
typedef ushort storage_t;
INLINE float load_value(const __global storage_t *p, ulong i) {
  return as_float((uint)p[i] << 16);
}
// Branch-free (a select), so that PoCL vectorizes the store across work-items.
INLINE ushort bf16_from_f32(float f) {
  const uint u = as_uint(f);
  const uint rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint quiet_nan = (u >> 16) | 0x40u;
  return (ushort)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}
INLINE void store_value(__global storage_t *p, ulong i, float v) {
  p[i] = bf16_from_f32(v);
}
// One vector load and widening shift (the per-lane loop ran the MoE forward at 0.5x the cpu
// device); the store stays a loop, which PoCL turns into better code than convert_ushort8.
INLINE float8 load8(const __global storage_t *p, ulong i) {
  return as_float8(convert_uint8(vload8(0, p + i)) << 16);
}
INLINE void store8(__global storage_t *p, ulong i, float8 v) {
  for (int l = 0; l < 8; ++l) p[i + l] = bf16_from_f32(((float *)&v)[l]);
}
#elif defined(STORAGE_F16) && defined(__F16C__)
typedef ushort storage_t;
// x86 with F16C (PoCL on the CPU): the compiler's _Float16 conversions, one vcvtph2ps or
// vcvtps2ph per 8 work-items, exact, round to nearest even. The bit code below is long enough
// that clang's SLP vectorizer packs two operands' conversions into 2-lane vectors, which PoCL
// then cannot vectorize across work-items (F16 ran 4-12x slower than the cpu device).
// The load also quiets a signaling NaN, which no result can show: F32 arithmetic quiets it, and
// every store writes a NaN as 0x7e00 and its sign.
INLINE float load_value(const __global storage_t *p, ulong i) {
  return (float)((const __global _Float16 *)p)[i];
}
INLINE void store_value(__global storage_t *p, ulong i, float v) {
  const ushort bits = as_ushort((_Float16)v);
  p[i] = isnan(v) ? (bits & 0x8000u) | 0x7e00u : bits;
}
INLINE float8 load8(const __global storage_t *p, ulong i) {
  float8 v;
  for (int l = 0; l < 8; ++l) ((float *)&v)[l] = load_value(p, i + l);
  return v;
}
INLINE void store8(__global storage_t *p, ulong i, float8 v) {
  for (int l = 0; l < 8; ++l) store_value(p, i + l, ((float *)&v)[l]);
}
#elif defined(STORAGE_F16)
typedef ushort storage_t;
// Both conversions are branch-free (selects) so that PoCL vectorizes them across work-items.
INLINE float load_value(const __global storage_t *p, ulong i) {
  const uint h = p[i];
  const uint sign = (h & 0x8000u) << 16;
  const uint exponent = (h >> 10) & 0x1fu;
  const uint mantissa = h & 0x3ffu;
  const float normal = as_float(((exponent + 112u) << 23) | (mantissa << 13));
  const float inf_or_nan = as_float(0x7f800000u | (mantissa << 13));
  const float subnormal = (float)mantissa * 0x1p-24f;  // or zero; exact
  float magnitude = exponent == 0x1fu ? inf_or_nan : normal;
  magnitude = exponent == 0u ? subnormal : magnitude;
  return as_float(as_uint(magnitude) | sign);
}
INLINE ushort f16_from_f32(float f) {
  const uint u = as_uint(f);
  const uint sign = (u >> 16) & 0x8000u;
  const uint a = u & 0x7fffffffu;
  const uint normal = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
  // Below 2^-14 (F16 subnormal or zero): adding 0.5 rounds at 2^-24, nearest even.
  const uint subnormal = as_uint(as_float(a) + 0.5f) - as_uint(0.5f);
  uint bits = a < 0x38800000u ? subnormal : normal;
  bits = a >= 0x477ff000u ? 0x7c00u : bits;  // rounds to >= 65520: infinity
  bits = a > 0x7f800000u ? 0x7e00u : bits;   // NaN, quiet
  return (ushort)(sign | bits);
}
INLINE void store_value(__global storage_t *p, ulong i, float v) {
  p[i] = f16_from_f32(v);
}
INLINE float8 load8(const __global storage_t *p, ulong i) {
  return vload_half8(0, (const __global half *)(p + i));  // exact; core OpenCL 1.2
}
INLINE void store8(__global storage_t *p, ulong i, float8 v) {
  for (int l = 0; l < 8; ++l) p[i + l] = f16_from_f32(((float *)&v)[l]);
}
#else
#error "build with -DSTORAGE_F32, -DSTORAGE_F16 or -DSTORAGE_BF16"
#endif

// exp(-(a + lo)) for a in [-87, 87] (callers clamp) and lo below half an ulp of a: a normal F32
// within 1 ulp (math-inl.h's ExpOfMinus; the constants are devices/math_constants.h's, embedded
// in front of this file).
INLINE float exp_of_minus_sum(float a, float lo) {
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
  const float p = fma(-t, fma(-t, q, 1.0f), 1.0f);
  return p * as_float(as_uint(n_plus_shifter) << 23);
}

// exp(-a): t + -0 is t for every t, so the compiler drops the addition.
INLINE float exp_of_minus(float a) {
  return exp_of_minus_sum(a, -0.0f);
}

// sigmoid(v) = 1 / (1 + e), e = exp(-v), for v >= -87 (callers clamp), clamped at 87 here
// (math-inl.h's Sigmoid). The driver's division (OpenCL 1.2 allows 2.5 ulp) is the estimate;
// s is one Newton step on it, so s(0) = 1/2 and s = 1 wherever 1 is the rounded value.
typedef struct {
  float e, den, estimate, s;
} sigmoid_t;

// 1 / y from an estimate r by one Newton step whose residual 1 - y r is an fma.
INLINE float newton_reciprocal(float y, float r) {
  return fma(r, fma(-y, r, 1.0f), r);
}

INLINE sigmoid_t sigmoid_of(float v) {
  sigmoid_t g;
  g.e = exp_of_minus(fmin(v, 87.0f));
  g.den = 1.0f + g.e;
  g.estimate = 1.0f / g.den;
  g.s = newton_reciprocal(g.den, g.estimate);
  return g;
}

// s (1 - s) as (e s) s, without cancellation.
INLINE float sigmoid_slope(sigmoid_t g) {
  return (g.e * g.s) * g.s;
}

// x sigmoid(v) = x / (1 + e) to about 0.5 ulp plus e's error: 1 + e as den + den_lo, x times
// the estimate corrected once by the exact remainder (math-inl.h's Sigmoid::Times). NaN for
// x = +-inf: the callers restore the limits.
INLINE float sigmoid_times(sigmoid_t g, float x) {
  const float den_lo = g.e - (g.den - 1.0f);
  const float q = x * g.estimate;
  const float remainder = fma(-q, den_lo, fma(-q, g.den, x));
  return fma(remainder, g.estimate, q);
}

// `value` computed from a clamped x, with x's non-finite cases restored.
INLINE float zero_at_minus_inf_nan_at_nan(float x, float value) {
  if (x < -3.4028235e38f) value = 0.0f;
  return isnan(x) ? x : value;
}

// `value` = x f(x) computed from a clamped x: 0 at x = -inf, x at +inf and NaN.
INLINE float product_at_non_finite(float x, float value) {
  return isfinite(x) ? value : (x < 0.0f ? 0.0f : x);
}

// The activations return f(x) and, where `derivative` is not null, set *derivative to f'(x);
// with it the value is x s, one rounding more than sigmoid_times (as in math-inl.h).

// silu(x) = x sigmoid(x) and its derivative s + x s (1 - s), clamped as in math-inl.h.
INLINE float silu(float input, float *derivative) {
  const float x = fmax(input, -87.0f);
  const sigmoid_t g = sigmoid_of(x);
  if (!derivative) return product_at_non_finite(input, sigmoid_times(g, x));
  *derivative = zero_at_minus_inf_nan_at_nan(input, fma(fmin(x, 40.0f), sigmoid_slope(g), g.s));
  return product_at_non_finite(input, x * g.s);
}

// gelu_tanh(x) = x sigmoid(v), v = 2a (x + b x^3), and its derivative s + x v' s (1 - s).
INLINE float gelu_tanh(float input, float *derivative) {
  const float two_a = INFINIOP_GELU_TANH_TWO_A;
  const float two_ab = two_a * INFINIOP_GELU_TANH_B;
  const float six_ab = 3.0f * two_ab;
  const float x_low = fmax(input, -20.0f);
  const float v = x_low * fma(x_low * x_low, two_ab, two_a);
  const sigmoid_t g = sigmoid_of(fmax(v, -87.0f));
  if (!derivative) return product_at_non_finite(input, sigmoid_times(g, x_low));
  const float x = fmin(x_low, 20.0f);
  const float dv = fma(x * x, six_ab, two_a);
  *derivative = zero_at_minus_inf_nan_at_nan(input, fma(x * dv, sigmoid_slope(g), g.s));
  return product_at_non_finite(input, x_low * g.s);
}

// n / y within 0.5 ulp + 2^-27 for y > 0: the driver's division (OpenCL 1.2 allows 2.5 ulp) as
// the estimate r, corrected once by the exact remainder (math-inl.h's Quotient).
INLINE float quotient(float n, float y) {
  const float r = 1.0f / y;
  const float q = n * r;
  return fma(fma(-q, y, n), r, q);
}

// gelu_erf(x) = x Phi(x) and its derivative Phi(x) + x phi(x) from one exp, as math-inl.h's
// GeluErf: with a = |x| (clamped at 13.19), T = Phi(-a) = exp(-a^2 / 2) / F,
// F = k a + W, W = 2 + a R(a) / P(a) (scripts/fit_erf.py), a^2 / 2 as an exact pair, F kept as
// the pair (k a, W) in the quotient's remainder.
INLINE float gelu_erf_over_f(float n, float ka, float w) {
  const float r = 1.0f / (ka + w);
  const float q = n * r;
  return fma(fma(-q, w, fma(-q, ka, n)), r, q);
}

INLINE float gelu_erf(float input, float *derivative) {
  const float clamp = INFINIOP_ERF_CLAMP;
  const float x = fmax(input, -clamp);
  const float a = fmin(fabs(x), clamp);
  const float half_a = a * 0.5f;
  const float h = half_a * a;
  const float e = exp_of_minus_sum(h, fma(half_a, a, -h));
  float s = INFINIOP_ERF_R3, p = INFINIOP_ERF_P4;
  p = fma(p, a, INFINIOP_ERF_P3);
  s = fma(s, a, INFINIOP_ERF_R2);
  p = fma(p, a, INFINIOP_ERF_P2);
  s = fma(s, a, INFINIOP_ERF_R1);
  p = fma(p, a, INFINIOP_ERF_P1);
  s = fma(s, a, INFINIOP_ERF_R0);
  p = fma(p, a, INFINIOP_ERF_P0);
  const float ka = INFINIOP_ERF_K * a;
  const float w = fma(a, quotient(s, p), 2.0f);
  if (!derivative) {
    const float xt = gelu_erf_over_f(x * e, ka, w);
    return product_at_non_finite(input, x < 0.0f ? xt : x - xt);
  }
  const float t = gelu_erf_over_f(e, ka, w);
  const float cdf = x < 0.0f ? t : 1.0f - t;
  *derivative =
      zero_at_minus_inf_nan_at_nan(input, fma(fmin(x, clamp) * e, INFINIOP_INV_SQRT_2PI, cdf));
  return product_at_non_finite(input, x * cdf);
}

// ClippedSwiglu's clamped halves, the gate and (with want_slope) its slope, as
// devices/cpu/clipped_swiglu.cc computes them: selects so that NaN passes the clamps; where alpha a
// < -87 (sigmoid's exp is clamped there) a moves to where it is -87, keeping g tiny instead of
// growing with |a|.
typedef struct {
  float a, b, g, slope;
} clipped_gate_t;

INLINE clipped_gate_t clipped_gate(float alpha, float limit, float A, float B, bool want_slope) {
  clipped_gate_t c;
  c.a = A > limit ? limit : A;
  c.b = B > limit ? limit : (B < -limit ? -limit : B);
  const float z = alpha == 0.0f ? 0.0f : alpha * c.a;
  const bool far_left = z < -87.0f;
  const float a_clamped = far_left ? (alpha == 0.0f ? 0.0f : -87.0f / alpha) : c.a;
  const float z_clamped = far_left ? -87.0f : z;
  const sigmoid_t g = sigmoid_of(z_clamped);
  // beside the slope's work a s, one rounding more than sigmoid_times (as in math-inl.h)
  const float gate = want_slope ? a_clamped * g.s : sigmoid_times(g, a_clamped);
  const bool minus_inf = isinf(c.a) && z < 0.0f;  // an infinite a: 0 where z < 0, else a
  c.g = isinf(c.a) ? (minus_inf ? 0.0f : c.a) : gate;
  c.slope = 0.0f;
  if (want_slope) c.slope = minus_inf ? 0.0f : fma(fmin(z_clamped, 40.0f), sigmoid_slope(g), g.s);
  return c;
}
