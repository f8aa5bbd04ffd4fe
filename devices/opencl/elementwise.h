// SPDX-License-Identifier: Apache-2.0
// The elementwise framework on OpenCL: the host half (src/elementwise/) plans, this runs the plan
// with devices/opencl/kernels/elementwise.cl compiled around the operator's functor source.
#pragma once

#include <memory>

#include "elementwise/runner.h"
#include "infiniop/handle.h"

namespace infiniop::opencl {

// Builds (or takes from the handle's cache) the program of `functor_source` for the plan's dtype
// and creates its kernels.
infiniStatus_t makeElementwiseRunner(const char *op, infiniopHandle_t handle,
                                     const char *functor_source, const elementwise::Plan &plan,
                                     std::unique_ptr<elementwise::Runner> *runner);

// The build options that select a storage dtype in storage.cl (-DSTORAGE_F32, ...).
const char *storageOption(infiniDtype_t dtype);

}  // namespace infiniop::opencl
