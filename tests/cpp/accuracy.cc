// SPDX-License-Identifier: Apache-2.0
// accuracy.h's comparison (its messages), compiled once into the test support library
// (tests/CMakeLists.txt).
#include "accuracy.h"

namespace infiniop_test {

std::string compareToTruth(infiniDtype_t dtype, float got, long double truth_l, double tolerance) {
  const double truth = static_cast<double>(truth_l);
  if (std::isnan(truth)) return std::isnan(got) ? "" : "expected NaN";
  if (std::isinf(truth) || roundsToInfinity(dtype, truth)) {
    const double expected = std::copysign(INFINITY, truth);
    return got == expected ? "" : "expected " + std::to_string(expected);
  }
  if (!std::isfinite(got)) return "got non-finite";
  const double error = std::fabs(got - truth);
  if (error <= tolerance) return "";
  return "error " + std::to_string(error / ulpOf(dtype, std::fabs(truth))) + " ulp > " +
         std::to_string(tolerance / ulpOf(dtype, std::fabs(truth))) + " ulp, truth " +
         std::to_string(truth);
}

}  // namespace infiniop_test
