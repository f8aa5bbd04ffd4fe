// SPDX-License-Identifier: Apache-2.0
// ClippedSwiglu and ClippedSwigluBackward in double, straight from SEMANTICS.md:
//   a = min(A, limit), b = clamp(B, -limit, limit), z = alpha a, g = a sigmoid(z),
//   y = g (b + bias);  dA = dy (b + bias) g'(a) [A <= limit],  dB = dy g [-limit <= B <= limit],
// with g'(a) = s + z s (1 - s). clamp_mode 1 (the descriptor made alpha 1 and a_limit +inf): the
// gate g = silu(A) is clamped instead, to limit where A > a_pass (silu(A) > limit), and bias is
// not added: y = min(g, limit) b, dA = dy b g'(A) [A <= a_pass], dB = dy min(g, limit) [...].
// The clamps pass NaN; the masks are selects, as in PyTorch's autograd of clamp, so a masked-out
// gradient is exactly 0. The functors of cpu_reference, and the cpu device's oracle for its
// 16-bit outputs.
#pragma once

#include <cmath>

#include "exact/limits.h"
#include "exact/sigmoid.h"
#include "ops/clipped_swiglu.h"

namespace infiniop::exact {

// v * g for the gate g = a sigmoid(z), which has a's sign and is never 0 for finite non-zero a,
// yet may underflow to 0 in double: an infinite v then gives an infinity.
inline double timesGate(double v, double g, double a) {
  if (g == 0.0 && std::isinf(v) && std::isfinite(a) && a != 0.0)
    return (a < 0) == (v < 0) ? INFINITY : -INFINITY;
  return v * g;
}

struct Clipped {
  double a, b, z, g;  // clamped halves, alpha a, the gate

  Clipped(const ClippedSwigluAttributes &at, float A, float B) {
    const double limit = at.limit;
    a = A > at.a_limit ? at.a_limit : A;
    b = B > limit ? limit : (B < -limit ? -limit : B);
    z = at.alpha == 0.0f ? 0.0 : at.alpha * a;  // alpha 0: z = 0 even for infinite a
    // the limit of a sigmoid(alpha a) there: a zero of a's sign (approached from a's side)
    g = z == -INFINITY ? std::copysign(0.0, a) : a * sigmoid(z);
  }

  // g'(a) = s + z s (1 - s): the slope of z sigmoid(z), taken at z.
  double slope() const { return siluDerivative(z); }
};

// clamp_mode 0's value of (A, B) from A's gate g (Clipped's double, e.g. tabulated by A's bits):
// ClippedSwiglu's clamps and timesGate on the same doubles.
inline double clippedFromGate(const ClippedSwigluAttributes &at, float A, float B, double g) {
  const double limit = at.limit;
  const double a = A > at.a_limit ? at.a_limit : A;
  const double b = B > limit ? limit : (B < -limit ? -limit : B);
  return timesGate(b + at.bias, g, a);
}

struct ClippedSwiglu : ClippedSwigluAttributes {
  static constexpr int kOutputs = 1, kInputs = 2;  // y <- (A, B)
  void operator()(double &y, float A, float B) const {
    const Clipped c(*this, A, B);
    if (clamp_mode == 1)
      y = A > a_pass ? double{limit} * c.b : timesGate(c.b, c.g, c.a);
    else
      y = timesGate(c.b + bias, c.g, c.a);
  }
};

struct ClippedSwigluBackward : ClippedSwigluAttributes {
  static constexpr int kOutputs = 2, kInputs = 3;  // (dA, dB) <- (dy, A, B)
  void operator()(double &dA, double &dB, float dy, float A, float B) const {
    const Clipped c(*this, A, B);
    const double scale = clamp_mode == 1 ? dy * c.b : dy * (c.b + bias);
    const double gate = clamp_mode == 1 && A > a_pass ? double{limit} : c.g;
    dA = A <= a_pass ? timesNegativeTail(scale, c.slope(), c.z) : 0.0;
    dB = -limit <= B && B <= limit ? timesGate(dy, gate, c.a) : 0.0;
  }
};

static_assert(sizeof(ClippedSwiglu) == sizeof(ClippedSwigluAttributes));
static_assert(sizeof(ClippedSwigluBackward) == sizeof(ClippedSwigluAttributes));

}  // namespace infiniop::exact
