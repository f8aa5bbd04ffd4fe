// SPDX-License-Identifier: Apache-2.0
// SwiGlu and SwiGluBackward: the gated activation with silu, in double.
#include "cpu_reference/elementwise.h"
#include "exact/gated.h"
#include "exact/sigmoid.h"
#include "kernels/list.h"

namespace infiniop::cpu_reference {

using namespace exact;  // the double formulas (src/exact), shared with the cpu device's oracles

INFINIOP_REFERENCE_KERNEL(swiglu, Gated<silu>)

INFINIOP_REFERENCE_KERNEL(swiglu_backward, GatedBackward<silu, siluDerivative>)

}  // namespace infiniop::cpu_reference
