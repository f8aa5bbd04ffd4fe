// SwiGlu and SwiGluBackward: the gated activation with silu, in double.
#include <cmath>

#include "cpu_reference/elementwise.h"
#include "cpu_reference/gated.h"
#include "ops/kernels.h"

namespace infiniop::cpu_reference {
namespace {

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// silu(-inf) = 0 (the limit); x * sigmoid(x) would be -inf * 0.
double silu(double x) {
  return x == -INFINITY ? 0.0 : x * sigmoid(x);
}

// silu'(x) = s + x s (1 - s), with 1 - s = sigmoid(-x) so nothing cancels; 0 at -inf, 1 at +inf.
double siluDerivative(double x) {
  if (std::isinf(x)) return x > 0 ? 1.0 : 0.0;
  const double s = sigmoid(x);
  return s + x * s * sigmoid(-x);
}

}  // namespace

INFINIOP_REFERENCE_KERNEL(swiglu, Gated<silu>)

INFINIOP_REFERENCE_KERNEL(swiglu_backward, GatedBackward<silu, siluDerivative>)

}  // namespace infiniop::cpu_reference
