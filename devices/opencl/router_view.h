// SPDX-License-Identifier: Apache-2.0
// A router view (ops/moe_gating.h's RouterView: the routers' and the aux loss's tensors) as an
// OpenCL kernel's (buffer, element index) pair of arguments.
#pragma once

#include "core/dtype.h"
#include "opencl/gather.h"
#include "ops/moe_gating.h"

namespace infiniop::opencl {

struct ViewArg {
  cl_mem mem = nullptr;
  cl_ulong index = 0;
};

// v's buffer and element index for `data`; `unused` (a buffer of the call, never read) for an
// absent or empty view, since OpenCL 1.2 drivers differ on NULL buffer arguments.
inline infiniStatus_t resolveRouterView(const char *op, infiniopHandle_t handle,
                                        const moe::RouterView &v, const void *data, cl_mem unused,
                                        ViewArg *arg) {
  arg->mem = unused;
  if (!v.present || v.rows * v.cols == 0) return INFINI_STATUS_SUCCESS;
  return resolveSpan(op, handle, data, v.span, dtypeSize(v.dtype), &arg->mem, &arg->index);
}

}  // namespace infiniop::opencl
