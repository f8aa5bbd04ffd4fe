// SPDX-License-Identifier: Apache-2.0
// The elementwise family (kernels/list.h) as a host device runs it: a kernel is a function of
// host memory, run on the calling thread(s) and done on return.
#pragma once

#include <cstddef>
#include <memory>

#include "kernels/host_family.h"
#include "elementwise/plan.h"

namespace infiniop::family {

// A host kernel runs elements [begin, end) of the plan, in its iteration order: `operands` are
// the operand base pointers (source pointer plus offset already applied), outputs first.
INFINIOP_HOST_FAMILY(Elementwise, elementwise::Plan, const void *attributes, char *const *operands,
                     size_t begin, size_t end);

}  // namespace infiniop::family
