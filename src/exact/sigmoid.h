// SPDX-License-Identifier: Apache-2.0
// sigmoid, silu and the slope of x sigmoid(x), in double, shared by the SiLU-gated reference
// functors.
#pragma once

#include <cmath>

namespace infiniop::exact {

inline double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// silu(-inf) = -0 (the limit, approached from below, as the devices give it); x * sigmoid(x)
// would be -inf * 0.
inline double silu(double x) {
  return x == -INFINITY ? -0.0 : x * sigmoid(x);
}

// d/dx (x sigmoid(x)) = s + x s (1 - s), with 1 - s = sigmoid(-x) so nothing cancels; its limits
// 0 at -inf and 1 at +inf.
inline double siluDerivative(double x) {
  if (std::isinf(x)) return x > 0 ? 1.0 : 0.0;
  const double s = sigmoid(x);
  return s + x * s * sigmoid(-x);
}

}  // namespace infiniop::exact
