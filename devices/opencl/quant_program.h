// SPDX-License-Identifier: Apache-2.0
// The program of a *Quant operator on OpenCL (gated_quant.cc, dequant_swiglu_quant.cc): every
// value is computed in double, so a device without cl_khr_fp64 is refused.
#pragma once

#include <initializer_list>

#include "core/dtype.h"
#include "opencl/program.h"

namespace infiniop::opencl {

// Kernel `name` of `sources` (from `common` on), built with -DEXACT_FORMULAS and storage_t
// `storage`, and its work-group size; DEVICE_TYPE_NOT_SUPPORTED without cl_khr_fp64.
infiniStatus_t quantKernel(const char *op, infiniopHandle_t handle,
                           std::initializer_list<const char *> sources, infiniDtype_t storage,
                           const char *name, KernelRef *kernel, size_t *group);

}  // namespace infiniop::opencl
