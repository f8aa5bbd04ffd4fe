// SPDX-License-Identifier: Apache-2.0
// gelu and gelu' in long double, erf and tanh, with the inputs of the accuracy contract
// (accuracy.h): shared by the GeluMul and Gelu / GeluBackwardV2 tests.
#pragma once

#include <cmath>

#include "infiniop.h"

namespace infiniop_test {

// gelu, gelu' and the accuracy inputs (summed terms of gelu', exp's argument) at x.
struct GeluTruth {
  long double value, derivative;
  double derivative_terms, condition;
  double derivative_floor;  // what multiplies the clamped exp in the kernel's derivative
};

inline GeluTruth geluTruth(infiniopGeluApproximate_t approximate, float xf) {
  const long double x = xf;
  if (std::isnan(x)) return {x, x, 0, 0, 1};
  if (std::isinf(x)) return {x > 0 ? x : 0.0L, x > 0 ? 1.0L : 0.0L, 1, 0, 1};
  if (approximate == INFINIOP_GELU_APPROXIMATE_TANH) {
    const long double a = 0.797884560802865355879892119868763737L, b = 0.044715L;
    const long double v = 2 * a * (x + b * x * x * x), dv = 2 * a * (1 + 3 * b * x * x);
    const long double s = 1 / (1 + std::exp(-v)), sm = 1 / (1 + std::exp(v));
    const long double tail = x * s * sm * dv;
    const double xc = std::fmax(-20.0, std::fmin(20.0, static_cast<double>(x)));  // kernel clamp
    const double dvc = 1.5957691216057308 * (1 + 3 * 0.044715 * xc * xc);
    return {x * s, s + tail, static_cast<double>(s + std::fabs(tail)),
            std::fabs(static_cast<double>(v)), 1 + std::fabs(xc * dvc)};
  }
  const long double cdf = 0.5L * std::erfc(-x / std::sqrt(2.0L));
  const long double pdf = std::exp(-x * x / 2) / std::sqrt(2 * 3.14159265358979323846264338L);
  // Condition 0: the kernels pass x^2 / 2 to exp as an exact hi + lo pair.
  return {x * cdf, cdf + x * pdf, static_cast<double>(cdf + std::fabs(x * pdf)), 0.0,
          1 + std::fabs(static_cast<double>(x))};
}

}  // namespace infiniop_test
