// SPDX-License-Identifier: Apache-2.0
// Gelu (erf and tanh): the activation alone, in double.
#include "cpu_reference/elementwise.h"
#include "exact/gelu.h"
#include "kernels/list.h"

namespace infiniop::cpu_reference {

using namespace exact;  // the double formulas (src/exact), shared with the cpu device's oracles

INFINIOP_REFERENCE_KERNEL(gelu_erf, Activated<geluErf>)
INFINIOP_REFERENCE_KERNEL(gelu_tanh, Activated<geluTanh>)

}  // namespace infiniop::cpu_reference
