// SPDX-License-Identifier: Apache-2.0
// How an elementwise descriptor runs one plan on its device: made once at creation (an OpenCL
// runner builds or fetches its program and uploads the plan then), and run by each calculate.
#pragma once

#include <memory>

#include "elementwise/plan.h"
#include "infiniop/handle.h"

namespace infiniop::elementwise {

class Runner {
 public:
  virtual ~Runner() = default;
  // Computes elements [begin, end) of the plan, in its iteration order, or with `zero_fill`
  // sets the outputs there to 0. `operands` are device addresses (source pointer plus offset),
  // outputs first. Host devices finish before returning; OpenCL enqueues on `stream`'s queue.
  // Every argument is checked before anything is written.
  virtual infiniStatus_t run(const void *attributes, char *const *operands, size_t begin,
                             size_t end, bool zero_fill, void *stream) const = 0;
};

// The runner of `kernels` for `plan` (copied) on the handle's device, which has one (create
// checks that first).
infiniStatus_t makeRunner(const char *op, infiniopHandle_t handle, const KernelTable &kernels,
                          const Plan &plan, std::unique_ptr<Runner> *runner);

// Whether `kernels` has an entry for `device`.
bool hasKernel(const KernelTable &kernels, infiniDevice_t device);

}  // namespace infiniop::elementwise
