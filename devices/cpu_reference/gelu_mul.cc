// GeluMul and GeluMulBackward (erf and tanh): the gated activation with gelu.
#include "cpu_reference/elementwise.h"
#include "cpu_reference/gated.h"
#include "cpu_reference/gelu.h"
#include "ops/kernels.h"

namespace infiniop::cpu_reference {

void gelu_mul_erf(const elementwise::Plan &plan, const void *attributes, char *const *operands) {
  runElementwise<Gated<geluErf>>(plan, attributes, operands);
}
void gelu_mul_tanh(const elementwise::Plan &plan, const void *attributes, char *const *operands) {
  runElementwise<Gated<geluTanh>>(plan, attributes, operands);
}
void gelu_mul_backward_erf(const elementwise::Plan &plan, const void *attributes,
                           char *const *operands) {
  runElementwise<GatedBackward<geluErf, geluErfDerivative>>(plan, attributes, operands);
}
void gelu_mul_backward_tanh(const elementwise::Plan &plan, const void *attributes,
                            char *const *operands) {
  runElementwise<GatedBackward<geluTanh, geluTanhDerivative>>(plan, attributes, operands);
}

}  // namespace infiniop::cpu_reference
