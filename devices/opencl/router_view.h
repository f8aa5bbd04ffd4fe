// SPDX-License-Identifier: Apache-2.0
// A router view (ops/moe_gating.h's RouterView: the routers' and the aux loss's tensors) as an
// OpenCL kernel's (buffer, element index) pair of arguments, and the views' geometry.
#pragma once

#include <initializer_list>
#include <vector>

#include "core/dtype.h"
#include "opencl/gather.h"
#include "opencl/program.h"
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

// The views' geometry as the kernels' row_offset() reads it: per view (col_stride, ndim,
// dims[8], strides[8]), in the given order, uploaded once at descriptor creation into *buffer.
constexpr size_t kViewGeometry = 2 + 2 * moe::kRouterMaxLeading;
inline infiniStatus_t uploadViewGeometry(const char *op, infiniopHandle_t handle,
                                         std::initializer_list<const moe::RouterView *> views,
                                         cl_mem *buffer) {
  std::vector<cl_long> geometry(views.size() * kViewGeometry, 0);
  cl_long *g = geometry.data();
  for (const moe::RouterView *v : views) {
    g[0] = v->col_stride;
    g[1] = v->ndim;
    for (int d = 0; d < v->ndim; ++d) {
      g[2 + d] = static_cast<cl_long>(v->dims[d]);
      g[2 + moe::kRouterMaxLeading + d] = v->strides[d];
    }
    g += kViewGeometry;
  }
  return planBuffer(op, handle, geometry, buffer);
}

}  // namespace infiniop::opencl
