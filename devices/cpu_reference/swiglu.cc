// SwiGlu and SwiGluBackward, written straight from SEMANTICS.md, in double.
#include <algorithm>
#include <cmath>

#include "cpu_reference/elementwise.h"
#include "cpu_reference/limits.h"
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

struct SwiGlu {
  static constexpr int kOutputs = 1, kInputs = 2;  // y <- (x1, x2)
  void operator()(float &y, float x1, float x2) const {
    y = static_cast<float>(timesNegativeTail(x2, silu(x1), x1));
  }
};

struct SwiGluBackward {
  static constexpr int kOutputs = 2, kInputs = 3;  // (x_grad1, x_grad2) <- (y_grad, x1, x2)
  void operator()(float &x_grad1, float &x_grad2, float y_grad, float x1, float x2) const {
    const double dy = y_grad;
    x_grad1 = static_cast<float>(timesNegativeTail(dy * x2, siluDerivative(x1), x1));
    x_grad2 = static_cast<float>(timesNegativeTail(dy, silu(x1), x1));
  }
};

}  // namespace

void swiglu(const elementwise::Plan &plan, const void *attributes, char *const *operands) {
  runElementwise<SwiGlu>(plan, attributes, operands);
}

void swiglu_backward(const elementwise::Plan &plan, const void *attributes, char *const *operands) {
  runElementwise<SwiGluBackward>(plan, attributes, operands);
}

}  // namespace infiniop::cpu_reference
