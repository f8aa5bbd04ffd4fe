// SPDX-License-Identifier: Apache-2.0
// ClippedSwiglu's long-double oracle (SEMANTICS.md "ClippedSwiglu"): y, dA and dB from the
// formulas, the masks, and the allowed errors of accuracy.h's model (clipped_swiglu_test.cc's
// file comment explains the terms). Shared by the ClippedSwiglu and far-left-tail tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "accuracy.h"
#include "silu_truth.h"

namespace infiniop_test {

struct ClippedSwigluAttrs {
  int64_t dim = -1;
  float alpha = 1.702f;
  float limit = 7.0f;
  float bias = 1.0f;
  bool interleaved = true;
  int64_t clamp_mode = 0;  // 1: min(silu(A), limit) clamp(B, -limit, limit); alpha, bias unused
};

// v * g where g = a sigmoid(alpha a) has a's sign and is never 0 for finite non-zero a, but may
// underflow in long double: an infinite v then gives an infinity of the product's sign.
inline long double timesGate(long double v, long double g, long double a) {
  if (g == 0 && std::isinf(v) && std::isfinite(a) && a != 0)
    return std::signbit(a) != std::signbit(v) ? -INFINITY : INFINITY;
  return v * g;
}

// clamp_mode 1's boundary a*: the largest float A with silu(A) <= limit in double, as
// docs/clipped_swiglu.md defines it (+inf for limit +inf), found here with silu as A / (1 + e^-A)
// (the library bisects with cpu_reference's A sigmoid(A)). Not in long double: its width differs
// (x86's 64-bit significand, AArch64's 113-bit one), and where silu(A) is within double's
// rounding of limit (limit 1e-20 at A = 2 limit) the two would place a* one float apart.
inline float gateBoundary(float limit) {
  if (std::isinf(limit)) return limit;
  static thread_local float cached_limit = NAN, cached_boundary = 0;  // the truth asks per element
  if (limit == cached_limit) return cached_boundary;
  const auto value = [](uint32_t bits) {
    float a;
    std::memcpy(&a, &bits, sizeof a);
    return a;
  };
  uint32_t below = 0, above = 0x7f800000u;  // silu(+0) <= limit < silu(+inf)
  while (above - below > 1) {
    const uint32_t middle = below + (above - below) / 2;
    const double a = value(middle);
    (a / (1 + std::exp(-a)) <= limit ? below : above) = middle;
  }
  cached_limit = limit;
  cached_boundary = value(below);
  return cached_boundary;
}

struct ClippedSwigluTruth {
  long double y, dA, dB;
  bool dA_masked, dB_masked;
  double tol_y, tol_dA, tol_dB;
};

// The oracle at one (A, B, dy). floor_weight scales the far-left floor terms of the allowed errors
// (0: without them, as the tail test asserts).
inline ClippedSwigluTruth clippedSwigluTruth(infiniDtype_t dtype, float Af, float Bf, float dyf,
                                             const ClippedSwigluAttrs &at,
                                             double floor_weight = 1.0) {
  const bool after = at.clamp_mode == 1;  // the gate's clamp, after silu, instead of A's
  const long double A = Af, B = Bf, dy = dyf, limit = at.limit, alpha = after ? 1 : at.alpha;
  // The clamps: no lower clamp on A; NaN passes through both.
  const long double a = std::isnan(A) || after ? A : std::fmin(A, limit);
  const long double b = std::isnan(B) ? B : std::fmax(-limit, std::fmin(B, limit));
  // alpha = 0 makes sigmoid(alpha a) the constant 1/2 whatever a is, infinities included.
  const long double z = alpha == 0 ? 0.0L : alpha * a;
  const long double s = sigmoidL(z), sm = sigmoidL(-z);  // sm = 1 - s without cancellation
  // lim a sigmoid(alpha a) where alpha a -> -inf is 0.
  const long double g_raw = (std::isinf(z) && z < 0) ? 0.0L : a * s;
  // clamp_mode 1: the gate clamped above at limit where A > a* (NaN passes), and no bias.
  const bool gate_clamped = after && Af > gateBoundary(at.limit);
  const long double g = gate_clamped ? limit : g_raw;
  const long double v = after ? b : b + static_cast<long double>(at.bias);
  ClippedSwigluTruth t{};
  t.y = timesGate(v, g, a);
  // d/da [a sigmoid(alpha a)] = s + z s (1 - s); its limits at z = +-inf are 1 and 0.
  long double slope = 0;
  if (std::isinf(z))
    slope = z > 0 ? 1.0L : 0.0L;
  else
    slope = s + z * s * sm;
  const long double scale = dy * v;
  t.dA_masked = after ? gate_clamped || std::isnan(A) : !(A <= limit);
  t.dB_masked = !(-limit <= B && B <= limit);
  // The slope is negative left of z = -1.28 and underflows far left: an infinite scale then gives
  // -scale.
  t.dA = t.dA_masked                                             ? 0.0L
         : (slope == 0 && std::isfinite(z) && std::isinf(scale)) ? -scale
                                                                 : scale * slope;
  t.dB = t.dB_masked ? 0.0L : timesGate(dy, g, a);

  // Accuracy: terms weighted by their sensitivity to the rounding of z (see the file comment).
  const bool finite_z = std::isfinite(z);
  const double zd = finite_z ? std::fabs(static_cast<double>(z)) : 0.0;
  const double sd = static_cast<double>(s), smd = static_cast<double>(sm);
  // At z = +-inf g is infinite or exactly 0, and the slope exactly 1 or 0.
  // A clamped gate (clamp_mode 1) is limit itself, times one rounded product.
  const double gate_terms = after && g_raw > limit ? static_cast<double>(limit)
                            : finite_z ? std::fabs(static_cast<double>(g)) * (1 + zd * smd)
                                       : 0.0;
  const double slope_terms =
      finite_z ? sd * (1 + zd * smd) + zd * sd * smd * (2 + zd * std::fabs(smd - sd))
               : static_cast<double>(slope);
  const double gate_floor = floor_weight * onePlusAbs(static_cast<double>(a));
  const double slope_floor = floor_weight * (finite_z ? 1 + zd : 1.0);
  t.tol_y = allowedError(f32_bound_u::clipped_swiglu, dtype, static_cast<double>(v), gate_terms, 0,
                         gate_floor, static_cast<double>(t.y));
  t.tol_dA = allowedError(f32_bound_u::clipped_swiglu_backward, dtype, static_cast<double>(scale),
                          slope_terms, 0, slope_floor, static_cast<double>(t.dA));
  t.tol_dB = allowedError(f32_bound_u::clipped_swiglu_backward, dtype, dyf, gate_terms, 0,
                          gate_floor, static_cast<double>(t.dB));
  return t;
}

}  // namespace infiniop_test
