// SPDX-License-Identifier: Apache-2.0
// GeluBackward (tanh) and GeluBackwardV2's erf form, from the formulas of SEMANTICS.md, in double.
#include "cpu_reference/elementwise.h"
#include "cpu_reference/gelu.h"
#include "cpu_reference/limits.h"
#include "ops/kernels.h"

namespace infiniop::cpu_reference {
namespace {

template <double (*Derivative)(double)>
struct GeluBackward {
  static constexpr int kOutputs = 1, kInputs = 2;  // grad_input <- (input, grad_output)

  void operator()(double &grad_input, float input, float grad_output) const {
    // Far left the derivative underflows to 0 but is truly negative: inf * it is -inf, not NaN.
    grad_input = timesNegativeTail(grad_output, Derivative(input), input);
  }
};

}  // namespace

INFINIOP_REFERENCE_KERNEL(gelu_backward, GeluBackward<geluTanhDerivative>)
INFINIOP_REFERENCE_KERNEL(gelu_backward_erf, GeluBackward<geluErfDerivative>)

}  // namespace infiniop::cpu_reference
