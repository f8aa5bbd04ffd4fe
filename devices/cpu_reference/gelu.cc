// SPDX-License-Identifier: Apache-2.0
// Gelu (erf and tanh): the activation alone, in double.
#include "cpu_reference/elementwise.h"
#include "cpu_reference/gelu.h"
#include "ops/kernels.h"

namespace infiniop::cpu_reference {

INFINIOP_REFERENCE_KERNEL(gelu_erf, Activated<geluErf>)
INFINIOP_REFERENCE_KERNEL(gelu_tanh, Activated<geluTanh>)

}  // namespace infiniop::cpu_reference
