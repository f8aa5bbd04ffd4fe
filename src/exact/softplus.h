// SPDX-License-Identifier: Apache-2.0
// softplus, sqrt(softplus) (DeepSeek-V4's router score) and its slope, in double: the oracle of
// the F32 Softplus and SqrtSoftplus (devices/cpu/math-inl.h, devices/opencl/kernels/math.cl) and
// cpu_reference's router.
#pragma once

#include <algorithm>
#include <cmath>

namespace infiniop::exact {

// max(x, 0) + log1p(exp(-|x|)): no overflow at +large x, no cancellation at -large x; +inf at
// +inf, 0 at -inf, NaN at NaN.
inline double softplus(double x) {
  if (std::isnan(x)) return x;
  return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x)));
}

// sqrt(softplus(x)): e^(x / 2) where softplus underflows in double (x < -700: the two differ by a
// factor 1 - e^x / 4).
inline double sqrtSoftplus(double x) {
  return x < -700 ? std::exp(0.5 * x) : std::sqrt(softplus(x));
}

// d/dx sqrt(softplus(x)) = sigmoid(x) / (2 sqrt(softplus(x))), sigmoid(x) = 1 / (1 + e^-x) with
// nothing cancelling; e^(x / 2) / 2 where softplus underflows (x < -700); 0 at +-inf.
inline double sqrtSoftplusSlope(double x) {
  if (std::isinf(x)) return 0.0;
  if (x < -700) return 0.5 * std::exp(0.5 * x);
  return 1.0 / (1.0 + std::exp(-x)) / (2.0 * std::sqrt(softplus(x)));
}

}  // namespace infiniop::exact
