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
INLINE float8 load8(const __global storage_t *p, ulong i) {
  float8 v;
  for (int l = 0; l < 8; ++l) ((float *)&v)[l] = load_value(p, i + l);
  return v;
}
INLINE void store8(__global storage_t *p, ulong i, float8 v) {
  for (int l = 0; l < 8; ++l) p[i + l] = bf16_from_f32(((float *)&v)[l]);
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

// exp(max(a, -87)) for a <= 0: a normal F32 in [1.6e-38, 1], within 1 ulp (see math-inl.h).
INLINE float exp_non_positive(float a) {
  a = fmax(a, -87.0f);
  const float shifter = 12582912.0f;  // 1.5 * 2^23: the sum's low bits are round(a / ln2)
  const float n_plus_shifter = fma(a, 1.44269504088896341f, shifter);
  const float n = n_plus_shifter - shifter;
  float r = fma(n, -0.693145751953125f, a);
  r = fma(n, -1.428606765330187e-6f, r);
  float q = 0.0013933645095676184f;
  q = fma(q, r, 0.008363175205886364f);
  q = fma(q, r, 0.04166646674275398f);
  q = fma(q, r, 0.16666576266288757f);
  q = fma(q, r, 0.5f);
  const float p = fma(r, fma(r, q, 1.0f), 1.0f);
  return p * as_float((as_int(n_plus_shifter) << 23) + (127 << 23));
}

// 1 / y for a positive normal y within about 1 ulp whatever the driver's division accuracy
// (OpenCL 1.2 allows 2.5 ulp): one Newton step after the division.
INLINE float reciprocal(float y) {
  const float estimate = 1.0f / y;
  return fma(estimate, fma(-y, estimate, 1.0f), estimate);
}

// (n + n_lo) / (den + den_lo) to about 0.5 ulp, r ~ 1 / den: n r corrected by the exact
// remainder (see math-inl.h's Quotient).
INLINE float quotient(float n, float n_lo, float den, float den_lo, float r) {
  const float q = n * r;
  const float remainder = fma(-q, den_lo, fma(-q, den, n) + n_lo);
  return fma(remainder, r, q);
}

// x sigmoid(v), *s = sigmoid(v) and *slope = s (1 - s), none with cancellation; sigmoid(0) is
// exactly 1/2 and sigmoid is exactly 1 where that is the rounded value (see math-inl.h's
// TimesSigmoid).
INLINE float times_sigmoid(float x, float v, float *s, float *slope) {
  const float e = exp_non_positive(-fabs(v));
  const float den = 1.0f + e;
  const float den_lo = e - (den - 1.0f);  // exact: 1 >= e
  const float r = reciprocal(den);
  const float big = quotient(1.0f, 0.0f, den, den_lo, r);
  const float small = quotient(e, 0.0f, den, den_lo, r);
  const bool negative = v < 0.0f;
  *s = negative ? small : big;
  *slope = big * small;
  const float xe = x * e;
  const float n = negative ? xe : x;
  const float n_lo = negative ? fma(x, e, -xe) : 0.0f;
  return isinf(x) ? x * *s : quotient(n, n_lo, den, den_lo, r);
}

// `value` computed from a clamped x, with x's non-finite cases restored.
INLINE float zero_at_minus_inf_nan_at_nan(float x, float value) {
  if (x < -3.4028235e38f) value = 0.0f;
  return isnan(x) ? x : value;
}

// silu(x) = x sigmoid(x) and its derivative s + x s (1 - s), clamped as in math-inl.h.
INLINE float silu(float input, float *derivative) {
  const float x = fmax(input, -87.0f);
  float s, slope;
  const float value = times_sigmoid(x, x, &s, &slope);
  const float capped = fmin(x, 40.0f);
  *derivative = zero_at_minus_inf_nan_at_nan(input, fma(capped, slope, s));
  return zero_at_minus_inf_nan_at_nan(input, value);
}

// gelu_tanh(x) = x sigmoid(v), v = 2a (x + b x^3), and its derivative s + x v' s (1 - s).
INLINE float gelu_tanh(float input, float *derivative) {
  const float two_a = 1.5957691216057308f;  // 2 sqrt(2/pi)
  const float two_ab = two_a * 0.044715f;
  const float six_ab = 3.0f * two_ab;
  const float x_low = fmax(input, -20.0f);
  const float v = x_low * fma(x_low * x_low, two_ab, two_a);
  float s, slope;
  const float value = times_sigmoid(x_low, v, &s, &slope);
  const float x = fmin(x_low, 20.0f);
  const float dv = fma(x * x, six_ab, two_a);
  *derivative = zero_at_minus_inf_nan_at_nan(input, fma(x * dv, slope, s));
  return zero_at_minus_inf_nan_at_nan(input, value);
}

// gelu_erf(x) = x Phi(x) and its derivative Phi(x) + x phi(x); Phi from Numerical Recipes'
// erfc fit (relative error < 1.2e-7), as in math-inl.h.
INLINE float gelu_erf(float input, float *derivative) {
  const float x_low = fmax(input, -20.0f);
  const float x = fmin(x_low, 20.0f);
  const float z = fabs(x) * 0.70710678118654752f;
  const float z2 = z * z;
  const float t = reciprocal(fma(z, 0.5f, 1.0f));
  float p = 0.17087277f;
  p = fma(p, t, -0.82215223f);
  p = fma(p, t, 1.48851587f);
  p = fma(p, t, -1.13520398f);
  p = fma(p, t, 0.27886807f);
  p = fma(p, t, -0.18628806f);
  p = fma(p, t, 0.09678418f);
  p = fma(p, t, 0.37409196f);
  p = fma(p, t, 1.00002368f);
  p = fma(p, t, -1.26551223f);
  const float half_erfc = t * 0.5f * exp_non_positive(p - z2);
  const float cdf = x < 0.0f ? half_erfc : 1.0f - half_erfc;
  const float pdf = exp_non_positive(-z2) * 0.3989422804014327f;
  *derivative = zero_at_minus_inf_nan_at_nan(input, fma(x, pdf, cdf));
  return zero_at_minus_inf_nan_at_nan(input, x_low * cdf);
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
  float s, slope_of_sigmoid;
  const float gate = times_sigmoid(a_clamped, z_clamped, &s, &slope_of_sigmoid);
  const bool minus_inf = isinf(c.a) && z < 0.0f;  // only an infinite a has g = 0
  c.g = minus_inf ? 0.0f : gate;
  c.slope = 0.0f;
  if (want_slope) c.slope = minus_inf ? 0.0f : fma(fmin(z_clamped, 40.0f), slope_of_sigmoid, s);
  return c;
}
