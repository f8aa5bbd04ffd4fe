// SPDX-License-Identifier: Apache-2.0
// Limits the reference formulas must respect (SEMANTICS.md: an infinity times a finite non-zero
// factor is an infinity of the product's sign).
#pragma once

#include <cmath>

namespace infiniop::exact {

// a * factor(x), for factors (silu, silu', gelu', the gate's slope) that are negative and never 0
// for finite x < 0 (left of their zero), yet underflow to 0 in double far left: there the factor
// is -0, as the devices give its limit (so the product's zero has the exact product's sign, as
// correct rounding makes it), and an infinite `a` gives -a, not NaN (at x = -inf it is NaN).
inline double timesNegativeTail(double a, double factor, double x) {
  if (factor == 0.0 && x < 0) {
    if (std::isinf(a)) return std::isfinite(x) ? -a : a * factor;
    return a * -0.0;
  }
  return a * factor;
}

}  // namespace infiniop::exact
