// SPDX-License-Identifier: Apache-2.0
// sigmoid, silu and silu' in long double, with the accuracy inputs of accuracy.h: shared by the
// SwiGlu, ClippedSwiglu and far-left-tail tests.
#pragma once

#include <cmath>

namespace infiniop_test {

inline long double sigmoidL(long double x) {
  return 1.0L / (1.0L + std::exp(-x));
}
inline long double siluL(long double x) {
  return x == -INFINITY ? 0.0L : x * sigmoidL(x);
}
inline long double siluDerivativeL(long double x) {
  if (std::isinf(x)) return x > 0 ? 1.0L : 0.0L;  // the limits
  return sigmoidL(x) + x * sigmoidL(x) * sigmoidL(-x);
}
// The magnitudes silu' sums, s + |x s (1 - s)| (its limits 1 and 0 at +-inf).
inline double siluDerivativeTerms(float x) {
  if (!std::isfinite(x)) return static_cast<double>(siluDerivativeL(x));
  const long double s = sigmoidL(x);
  return static_cast<double>(s + std::fabs(x * s * sigmoidL(-x)));
}

}  // namespace infiniop_test
