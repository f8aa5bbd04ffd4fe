// GeluBackward, written straight from the formula of SEMANTICS.md, in double.
#include <algorithm>
#include <cmath>

#include "cpu_reference/elementwise.h"
#include "ops/kernels.h"

namespace infiniop::cpu_reference {
namespace {

struct GeluBackward {
  static constexpr int kOutputs = 1, kInputs = 2;  // grad_input <- (input, grad_output)

  void operator()(float &grad_input, float input, float grad_output) const {
    const double kAlpha = std::sqrt(2.0 / M_PI), kBeta = 0.044715;
    // Beyond |x| = 30 the derivative is exactly 0 or 1 in double; clamping keeps inf * 0 out
    // of the formula for huge and infinite inputs (std::clamp passes NaN through).
    const double x = std::clamp(static_cast<double>(input), -30.0, 30.0);
    const double u = kAlpha * (x + kBeta * x * x * x);
    const double t = std::tanh(u);
    const double derivative =
        0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kAlpha * (1.0 + 3.0 * kBeta * x * x);
    grad_input = static_cast<float>(grad_output * derivative);
  }
};

}  // namespace

void gelu_backward(const elementwise::Plan &plan, const void *attributes, char *const *operands) {
  runElementwise<GeluBackward>(plan, attributes, operands);
}

}  // namespace infiniop::cpu_reference
