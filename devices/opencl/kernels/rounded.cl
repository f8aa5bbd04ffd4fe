// SPDX-License-Identifier: Apache-2.0
// The correctly rounded 16-bit path, after math.cl: the rounding windows and the exact formulas
// in double (src/exact/'s, restated in OpenCL C) that a 16-bit output near a rounding boundary
// is taken from.

// Correctly rounded 16-bit outputs (devices/cpu/elementwise-inl.h's RoundedOnce, docs/accuracy.md):
// a functor source that defines HAS_ORACLE,
//   INLINE uint rounding_window(const float *in)  (its F32 error bound as F32 steps), and
//   INLINE double oracle(const float *in, uint16 attribute_words)
// (its cpu_reference functor, in double) has its output taken from the oracle, rounded once,
// where its F32 value lies within the window of a 16-bit rounding boundary. Double needs
// cl_khr_fp64: a device without it rounds the F32 value (docs/devices.md).
//
// The exact formulas alone are also there in an F32 program built with -DEXACT_FORMULAS (the
// *Quant operators, whose every value is computed in double); other F32 programs leave double
// off, so that no unsuffixed literal of theirs turns double.
#if (defined(STORAGE_F16) || defined(STORAGE_BF16) || defined(EXACT_FORMULAS)) && \
    defined(cl_khr_fp64)
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
// The reference formulas (src/exact/sigmoid.h, gelu.h, limits.h), in double.
INLINE double sigmoid_exact(double x) {
  return 1.0 / (1.0 + exp(-x));
}
INLINE double silu_exact(double x) {
  return x == -INFINITY ? -0.0 : x * sigmoid_exact(x);
}
INLINE double gelu_erf_exact(double x) {
  return x == -INFINITY ? -0.0 : x * (0.5 * erfc(-x / sqrt(2.0)));
}
INLINE double gelu_tanh_exact(double x) {
  const double u = 0.79788456080286535588 * (x + 0.044715 * x * x * x);
  return x == -INFINITY ? -0.0 : x / (1.0 + exp(-2.0 * u));
}
// exact/limits.h's timesNegativeTail: a negative factor that underflows is -0.
INLINE double times_negative_tail_exact(double a, double factor, double x) {
  if (factor == 0.0 && x < 0.0) return isinf(a) ? (isfinite(x) ? -a : a * factor) : a * -0.0;
  return a * factor;
}
// exact/clipped_swiglu.h's timesGate and Clipped (ClippedSwiglu's oracle; ClippedSwigluQuant's
// every value).
INLINE double times_gate_exact(double v, double g, double a) {
  if (g == 0.0 && isinf(v) && isfinite(a) && a != 0.0)
    return (a < 0.0) == (v < 0.0) ? INFINITY : -INFINITY;
  return v * g;
}
// ClippedSwiglu's clamped halves, z = alpha a and the gate a sigmoid(z), in double.
typedef struct {
  double a, b, z, g;
} clipped_exact_t;
INLINE clipped_exact_t clipped_exact(float alpha, float limit, float a_limit, float A, float B) {
  clipped_exact_t c;
  c.a = A > a_limit ? (double)a_limit : (double)A;
  c.b = B > limit ? (double)limit : (B < -limit ? -(double)limit : (double)B);
  c.z = alpha == 0.0f ? 0.0 : (double)alpha * c.a;
  c.g = c.z == -INFINITY ? copysign(0.0, c.a) : c.a * sigmoid_exact(c.z);
  return c;
}
#endif

#if (defined(STORAGE_F16) || defined(STORAGE_BF16)) && defined(cl_khr_fp64)
#define ROUND_ONCE 1

// src/core/dtype.h's roundToOddFloat: v toward zero with the last bit set where inexact, which
// rounds to F16 or BF16 as v itself does.
INLINE float round_to_odd_float(double v) {
  const float nearest = (float)v;
  if (!isfinite(v) || (double)nearest == v) return nearest;
  uint bits = as_uint(nearest);
  if (fabs((double)nearest) > fabs(v)) bits -= 1u;
  return as_float(bits | 1u);
}

// convert-inl.h's NearRoundingBoundary: BF16's boundaries are the F32 values whose low 16 bits
// are 0x8000 (and non-zero values below 2^-100 are near); F16's, those whose low 13 bits are
// 0x1000, for |v| below 2^-14 after adding 2^-14.
INLINE bool near_rounding_boundary(float v, uint window) {
#if defined(STORAGE_BF16)
  const uint bits = as_uint(v);
  const bool tiny = (bits & 0x7fffffffu) - 1u < 0x0d7fffffu;
  return tiny || ((bits + window - 0x8000u) & 0xffffu) <= 2u * window;
#else
  const float magnitude = fabs(v);
  const float shifted = magnitude < 0x1p-14f ? magnitude + 0x1p-14f : magnitude;
  return ((as_uint(shifted) + window - 0x1000u) & 0x1fffu) <= 2u * window;
#endif
}

// The windows in F32 steps, 2K + 2 for a bound of K u |value| (2K steps, a step in the binade
// below being half as large, plus one for a subnormal's absolute 2^-149 and one to spare): silu
// K = 4, gelu_erf 5, and gelu_tanh per lane: K = 9 + 6 |v| for x < 0 (v taken at x clamped at
// -13, as the tail does), 9 elsewhere.
#define SILU_WINDOW 10u
#define GELU_ERF_WINDOW 12u
INLINE uint gelu_tanh_window(float input) {
  const float v = gelu_tanh_argument(fmax(input, -13.0f));
  return input < 0.0f ? (uint)fma(fabs(v), 12.0f, 21.0f) : 21u;
}

// The backward operators' oracles (cpu_reference/sigmoid.h, gelu.h), in double (ClippedSwiglu's
// are above).
INLINE double silu_derivative_exact(double x) {
  if (isinf(x)) return x > 0.0 ? 1.0 : 0.0;
  const double s = sigmoid_exact(x);
  return s + x * s * sigmoid_exact(-x);
}
INLINE double gelu_erf_derivative_exact(double x) {
  if (isinf(x)) return x > 0.0 ? 1.0 : 0.0;
  return 0.5 * erfc(-x / sqrt(2.0)) + x * exp(-0.5 * x * x) / sqrt(6.283185307179586);
}
INLINE double gelu_tanh_derivative_exact(double input) {
  // clamped at +-30 as std::clamp does, NaN passing
  const double x = input < -30.0 ? -30.0 : (input > 30.0 ? 30.0 : input);
  const double k = 0.79788456080286535588, b = 0.044715;
  const double u = k * (x + b * x * x * x);
  const double half_one_plus_t = 1.0 / (1.0 + exp(-2.0 * u));
  const double half_one_minus_t = 1.0 / (1.0 + exp(2.0 * u));
  return half_one_plus_t +
         x * (2.0 * half_one_plus_t * half_one_minus_t) * k * (1.0 + 3.0 * b * x * x);
}
// convert-inl.h's NearRoundingBoundaryWithin: a 16-bit rounding boundary within `bound_u` u
// (u = 2^-24, the output's absolute error bound) of v, computed without subnormals (BF16: on the
// magnitude scaled by 2^24, an F32 subnormal near unless an exact zero with a zero bound; F16: v
// taken at least 2^-126); a NaN v or bound, and a BF16 |v| from 2^104 on, are near.
INLINE bool near_within(float v, float bound_u) {
  const uint bits = as_uint(fabs(v));
#if defined(STORAGE_BF16)
  if (bits < 0x00800000u) return bits != 0u || bound_u > 0.0f;
  const float scaled = as_float(bits) * 0x1p24f;
  const uint below = as_uint(scaled) & 0xffff0000u;
  const float midpoint = as_float(below | 0x8000u), under = as_float(below - 0x8000u);
  return !(fabs(scaled - midpoint) > bound_u) || !(scaled - under > bound_u);
#else
  const float magnitude = as_float(max(bits, 0x00800000u));
  const bool small = magnitude < 0x1p-14f;
  const float shifted = small ? magnitude + 0x1p-14f : magnitude;
  const float widened = small ? bound_u + 0x1p-14f : bound_u;
  const uint below = as_uint(shifted) & 0xffffe000u;
  const float midpoint = as_float(below | 0x1000u), under = as_float(below - 0x1000u);
  return !(fabs(shifted - midpoint) * 0x1p24f > widened) ||
         (!small && !((shifted - under) * 0x1p24f > widened));
#endif
}

// math-inl.h's ErrorBound, in u: 2K terms (1 + c), `terms` already times |scale| (no floor: the
// exact path's lanes, where it counts, are always near here).
INLINE float error_bound(float k, float terms, float c) {
  return terms * (2.0f * k) * (1.0f + c);
}
// The terms of sigmoid_slope_times, s (1 + |c| (1 - s)), and the condition of a sigmoid to a
// rounding of its argument v, |v| min(1, (1 - s) (1 + |c|)) (math-inl.h's Sigmoid).
INLINE float sigmoid_slope_terms(sigmoid_t g, float c) {
  return g.s * (fabs(c) * sigmoid_one_minus(g) + 1.0f);
}
INLINE float sigmoid_argument_condition(sigmoid_t g, float v, float c) {
  const float one_minus_s = sigmoid_one_minus(g);
  return fabs(v) * fmin(1.0f, fabs(c) * one_minus_s + one_minus_s);
}
// gelu_tanh's condition (its argument v rounded, 6u).
INLINE float gelu_tanh_condition(sigmoid_at_t at) {
  return sigmoid_argument_condition(at.sigmoid, gelu_tanh_argument(at.x),
                                    gelu_tanh_slope_factor(at));
}
// gelu_erf's slope terms Phi + |x phi|.
INLINE float gelu_erf_slope_terms(gelu_erf_at_t at) {
  const float capped = fmin(at.x, INFINIOP_ERF_CLAMP);
  return at.cdf + fabs(capped * at.e * INFINIOP_INV_SQRT_2PI);
}
#endif
