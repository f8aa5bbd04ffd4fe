// SPDX-License-Identifier: Apache-2.0
// GeluBackward (tanh) and GeluBackwardV2's erf form, from the formulas of SEMANTICS.md, in double.
#include "cpu_reference/elementwise.h"
#include "exact/gelu.h"
#include "kernels/list.h"

namespace infiniop::cpu_reference {

using namespace exact;  // the double formulas (src/exact), shared with the cpu device's oracles

INFINIOP_REFERENCE_KERNEL(gelu_backward, GeluBackward<geluTanhDerivative>)
INFINIOP_REFERENCE_KERNEL(gelu_backward_erf, GeluBackward<geluErfDerivative>)

}  // namespace infiniop::cpu_reference
