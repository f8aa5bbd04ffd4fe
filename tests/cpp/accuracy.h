// SPDX-License-Identifier: Apache-2.0
// The accuracy contract shared by the split-activation tests: a float64-or-better truth, an
// allowed error built from the terms the kernel sums, and the limits at infinities.
#pragma once

#include <cmath>
#include <string>

#include "accuracy_bounds.h"
#include "tensor_buffer.h"

namespace infiniop_test {

// a * factor, where factor (silu, gelu or a derivative at a finite x < 0) is a negative number
// that underflows: an infinite `a` gives -a, as SEMANTICS.md's limits require, not NaN.
inline long double timesTail(long double a, long double factor, float x) {
  if (factor == 0 && std::isinf(a) && std::isfinite(x) && x < 0) return -a;
  return a * factor;
}

// The operator's F32 bound, bound_u u (u = 2^-24; tests/accuracy_bounds.json) times the summed
// terms, widened by `condition` (the |argument| of an exp that the kernel rounds to F32 first);
// 2^-125 * floor_factor where the kernels clamp exp at exp(-87) (far left
// the activations are tiny negative numbers; floor_factor bounds what multiplies that exp, e.g.
// 1 + |x|); one F32 subnormal quantum; and for F16/BF16 one rounding of the output.
inline double allowedError(double bound_u, infiniDtype_t dtype, double scale, double terms,
                           double condition, double floor_factor, double truth) {
  double e =
      std::fabs(scale) * (bound_u * 0x1p-24 * terms * (1 + condition) + 0x1p-125 * floor_factor) +
      0x1p-149;
  if (dtype != INFINI_DTYPE_F32) e += ulpOf(dtype, std::fabs(truth));
  return e;
}

// "" when `got` meets the truth within `tolerance`; else why not.
std::string compareToTruth(infiniDtype_t dtype, float got, long double truth_l, double tolerance);

// 1 + |x| for finite x, 1 otherwise: the usual floor factor.
inline double onePlusAbs(double x) {
  return std::isfinite(x) ? 1 + std::fabs(x) : 1.0;
}

}  // namespace infiniop_test
