// SPDX-License-Identifier: Apache-2.0
// Limits the reference formulas must respect (SEMANTICS.md: an infinity times a finite non-zero
// factor is an infinity of the product's sign).
#pragma once

#include <cmath>

namespace infiniop::cpu_reference {

// a * factor(x), for factors (silu, silu', gelu') that are negative and never 0 for finite
// x < 0, yet underflow to 0 in double far left: an infinite `a` then gives -a, not NaN.
inline double timesNegativeTail(double a, double factor, double x) {
  if (factor == 0.0 && std::isinf(a) && std::isfinite(x) && x < 0) return -a;
  return a * factor;
}

}  // namespace infiniop::cpu_reference
