// SPDX-License-Identifier: Apache-2.0
// GeLU and its derivative in double, tanh and erf forms, with their limits at +-inf.
#pragma once

#include <algorithm>
#include <cmath>

#include "exact/limits.h"

namespace infiniop::exact {

constexpr double kSqrtTwoOverPi = 0.79788456080286535588;
constexpr double kGeluTanhBeta = 0.044715;

// 0.5 (1 + tanh u) = sigmoid(2u) and 0.5 (1 - tanh u) = sigmoid(-2u): neither cancels.
// At -inf: -0, the limit from below (as the devices give it).
inline double geluTanh(double x) {
  if (x == -INFINITY) return -0.0;
  const double u = kSqrtTwoOverPi * (x + kGeluTanhBeta * x * x * x);
  return x / (1.0 + std::exp(-2.0 * u));
}

// d/dx gelu_tanh = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 b x^2).
inline double geluTanhDerivative(double input) {
  // Beyond |x| = 30 the derivative is exactly 0 or 1 in double; clamping keeps inf * 0 out
  // (std::clamp passes NaN through).
  const double x = std::clamp(input, -30.0, 30.0);
  const double u = kSqrtTwoOverPi * (x + kGeluTanhBeta * x * x * x);
  const double half_one_plus_t = 1.0 / (1.0 + std::exp(-2.0 * u));
  const double half_one_minus_t = 1.0 / (1.0 + std::exp(2.0 * u));
  return half_one_plus_t + x * (2.0 * half_one_plus_t * half_one_minus_t) * kSqrtTwoOverPi *
                               (1.0 + 3.0 * kGeluTanhBeta * x * x);
}

// Phi(x) = 0.5 erfc(-x / sqrt 2): accurate in the left tail, where 0.5 (1 + erf) cancels.
inline double normalCdf(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0));
}

inline double geluErf(double x) {
  return x == -INFINITY ? -0.0 : x * normalCdf(x);
}

// d/dx x Phi(x) = Phi(x) + x phi(x).
inline double geluErfDerivative(double x) {
  if (std::isinf(x)) return x > 0 ? 1.0 : 0.0;
  return normalCdf(x) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
}

// The activation alone: Gelu's functor (and the cpu device's oracle for its 16-bit outputs).
template <double (*Act)(double)>
struct Activated {
  static constexpr int kOutputs = 1, kInputs = 1;  // output <- input
  void operator()(double &output, float input) const { output = Act(input); }
};

// GeluBackward (tanh) and GeluBackwardV2's erf form: its functor, and the cpu and opencl devices'
// oracle for their 16-bit outputs.
template <double (*Derivative)(double)>
struct GeluBackward {
  static constexpr int kOutputs = 1, kInputs = 2;  // grad_input <- (input, grad_output)
  void operator()(double &grad_input, float input, float grad_output) const {
    // Far left the derivative underflows to 0 but is truly negative: inf * it is -inf, not NaN.
    grad_input = timesNegativeTail(grad_output, Derivative(input), input);
  }
};

}  // namespace infiniop::exact
