// SPDX-License-Identifier: Apache-2.0
// The elementwise family (kernels/list.h) as a host device runs it: a kernel is a function of
// host memory, run on the calling thread(s) and done on return.
#pragma once

#include <cstddef>
#include <memory>

#include "core/kernel.h"
#include "elementwise/plan.h"

namespace infiniop::family {

struct Elementwise {
  using Plan = elementwise::Plan;
  // Runs elements [begin, end) of the plan, in its iteration order: `operands` are the operand
  // base pointers (source pointer plus offset already applied), outputs first.
  using HostKernel = void(const Plan &plan, const void *attributes, char *const *operands,
                          size_t begin, size_t end);
  static infiniStatus_t hostRunner(HostKernel *kernel, const Plan &plan,
                                   std::unique_ptr<Runner> *runner);
};

}  // namespace infiniop::family
