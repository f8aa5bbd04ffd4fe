// SPDX-License-Identifier: Apache-2.0
// SwiGlu and SwiGluBackward: the gated activation with silu, in double.
#include "cpu_reference/elementwise.h"
#include "cpu_reference/gated.h"
#include "cpu_reference/sigmoid.h"
#include "ops/kernels.h"

namespace infiniop::cpu_reference {

INFINIOP_REFERENCE_KERNEL(swiglu, Gated<silu>)

INFINIOP_REFERENCE_KERNEL(swiglu_backward, GatedBackward<silu, siluDerivative>)

}  // namespace infiniop::cpu_reference
