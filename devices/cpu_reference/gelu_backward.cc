// GeluBackward, written straight from the formula of SEMANTICS.md, in double.
#include <algorithm>
#include <cmath>

#include "cpu_reference/elementwise.h"
#include "cpu_reference/limits.h"
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
    // 0.5 (1 + tanh u) and 0.5 (1 - tanh u), each as a sigmoid so neither cancels; then
    // 0.5 (1 - tanh^2 u) = 2 * sigmoid(2u) * sigmoid(-2u).
    const double half_one_plus_t = 1.0 / (1.0 + std::exp(-2.0 * u));
    const double half_one_minus_t = 1.0 / (1.0 + std::exp(2.0 * u));
    const double derivative = half_one_plus_t + x * (2.0 * half_one_plus_t * half_one_minus_t) *
                                                    kAlpha * (1.0 + 3.0 * kBeta * x * x);
    // Far left the derivative underflows to 0 but is truly negative: inf * it is -inf, not NaN.
    grad_input = static_cast<float>(timesNegativeTail(grad_output, derivative, input));
  }
};

}  // namespace

void gelu_backward(const elementwise::Plan &plan, const void *attributes, char *const *operands) {
  runElementwise<GeluBackward>(plan, attributes, operands);
}

}  // namespace infiniop::cpu_reference
