// SPDX-License-Identifier: Apache-2.0
// GeluMul and GeluMulBackward (erf and tanh): the gated activation with gelu.
#include "cpu_reference/elementwise.h"
#include "exact/gated.h"
#include "exact/gelu.h"
#include "kernels/list.h"

namespace infiniop::cpu_reference {

using namespace exact;  // the double formulas (src/exact), shared with the cpu device's oracles

INFINIOP_REFERENCE_KERNEL(gelu_mul_erf, Gated<geluErf>)
INFINIOP_REFERENCE_KERNEL(gelu_mul_tanh, Gated<geluTanh>)
INFINIOP_REFERENCE_KERNEL(gelu_mul_backward_erf, GatedBackward<geluErf, geluErfDerivative>)
INFINIOP_REFERENCE_KERNEL(gelu_mul_backward_tanh, GatedBackward<geluTanh, geluTanhDerivative>)

}  // namespace infiniop::cpu_reference
