// SPDX-License-Identifier: Apache-2.0
// The opencl device's kernel table, from kernels/list.h: family F's runner factory is
// make<F>Runner (a RunnerFactory, core/kernel.h), defined in this folder's file of the family
// (elementwise.cc, moe_finalize_routing.cc, ...), which finds the kernel's program by
// plan.kernel. A new kernel of a family, or a new family's factory, changes neither this file
// nor device.cc.
#pragma once

#include <memory>

#include "core/error.h"
#include "core/kernel.h"
#include "kernels/list.h"

#define INFINIOP_OPENCL_FACTORY_DECLARE(Family, name)                                            \
  infiniStatus_t make##Family##Runner(const char *op, infiniopHandle_t handle, const Plan &plan, \
                                      std::unique_ptr<Runner> *runner);
#define INFINIOP_OPENCL_FACTORY_ENTRY(Family, name) &make##Family##Runner,

namespace infiniop::opencl {
INFINIOP_KERNELS(INFINIOP_OPENCL_FACTORY_DECLARE)

// What every factory ends with: the runner handed out once its init() (its programs, what the
// plan uploads) has succeeded, else nothing and init's status.
template <class R>
infiniStatus_t initialized(std::unique_ptr<R> made, std::unique_ptr<Runner> *runner) {
  INFINIOP_CHECK(made->init());
  *runner = std::move(made);
  return INFINI_STATUS_SUCCESS;
}
}  // namespace infiniop::opencl
