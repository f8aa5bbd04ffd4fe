// SPDX-License-Identifier: Apache-2.0
// ClippedSwiglu and ClippedSwigluBackward on cpu_reference (clipped_swiglu.h's functors).
#include "exact/clipped_swiglu.h"

#include "cpu_reference/elementwise.h"
#include "kernels/list.h"

namespace infiniop::cpu_reference {

using namespace exact;  // the double formulas (src/exact), shared with the cpu device's oracles

INFINIOP_REFERENCE_KERNEL(clipped_swiglu, ClippedSwiglu)
INFINIOP_REFERENCE_KERNEL(clipped_swiglu_backward, ClippedSwigluBackward)

}  // namespace infiniop::cpu_reference
