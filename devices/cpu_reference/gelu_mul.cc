// GeluMul and GeluMulBackward (erf and tanh), from SEMANTICS.md, in double.
#include "cpu_reference/elementwise.h"
#include "cpu_reference/gelu.h"
#include "cpu_reference/limits.h"
#include "ops/kernels.h"

namespace infiniop::cpu_reference {
namespace {

template <double (*Gelu)(double)>
struct GeluMul {
  static constexpr int kOutputs = 1, kInputs = 2;  // out <- (x1, x2)
  void operator()(float &out, float x1, float x2) const {
    out = static_cast<float>(timesNegativeTail(x2, Gelu(x1), x1));
  }
};

template <double (*Gelu)(double), double (*Derivative)(double)>
struct GeluMulBackward {
  static constexpr int kOutputs = 2, kInputs = 3;  // (grad1, grad2) <- (out_grad, x1, x2)
  void operator()(float &grad1, float &grad2, float out_grad, float x1, float x2) const {
    const double dy = out_grad;
    grad1 = static_cast<float>(timesNegativeTail(dy * x2, Derivative(x1), x1));
    grad2 = static_cast<float>(timesNegativeTail(dy, Gelu(x1), x1));
  }
};

}  // namespace

void gelu_mul_erf(const elementwise::Plan &plan, const void *attributes, char *const *operands) {
  runElementwise<GeluMul<geluErf>>(plan, attributes, operands);
}
void gelu_mul_tanh(const elementwise::Plan &plan, const void *attributes, char *const *operands) {
  runElementwise<GeluMul<geluTanh>>(plan, attributes, operands);
}
void gelu_mul_backward_erf(const elementwise::Plan &plan, const void *attributes,
                           char *const *operands) {
  runElementwise<GeluMulBackward<geluErf, geluErfDerivative>>(plan, attributes, operands);
}
void gelu_mul_backward_tanh(const elementwise::Plan &plan, const void *attributes,
                            char *const *operands) {
  runElementwise<GeluMulBackward<geluTanh, geluTanhDerivative>>(plan, attributes, operands);
}

}  // namespace infiniop::cpu_reference
