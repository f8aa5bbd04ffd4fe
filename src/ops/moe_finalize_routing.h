// SPDX-License-Identifier: Apache-2.0
// MoeFinalizeRoutingV2 and its grad as the devices see them: validated plans (fixed at
// descriptor creation) and the data pointers of one call, whose index values have been
// range-checked on the host before a kernel runs.
#pragma once

#include <memory>

#include "kernels/host_family.h"
#include "gather/inverse.h"
#include "gather/views.h"
#include "infiniop/handle.h"

namespace infiniop::moe {

// out[r] = x1[r] + x2[r] + sum_k scales[r,k] * (expanded_x[row_index(r,k)] + bias[expert(r,k)]).
// row_index values outside [0, expanded_x.rows) are dropped tokens (-1): a zero row.
struct ForwardPlan : Plan {
  infiniDtype_t dtype = INFINI_DTYPE_INVALID;         // of the rows
  infiniDtype_t scales_dtype = INFINI_DTYPE_INVALID;  // dtype, or F32 (used unrounded)
  size_t tokens = 0, topk = 0, hidden = 0;            // R, K, H
  gather::RowView out, expanded_x, x1, x2, bias;
  gather::TableView scales;                   // absent: K = 1, weight 1
  gather::IndexView row_index, expert_index;  // (R, K); expert_index present with bias
};
struct ForwardData {
  void *out;
  const void *expanded_x, *x1, *x2, *bias, *scales;
  const void *row_index, *expert_index;  // INT32 or INT64, as their views say
};

// With i = r * K + k and d = row_index(r, k), skipped when outside [0, grad_expanded_x.rows):
//   grad_expanded_x[d] = sum over i reaching d of grad_y[r] * scales[r,k]; rows reached by none: 0
//   grad_scales[r,k] = sum_j (expanded_x[d][j] + bias[expert(r,k)][j]) * grad_y[r][j]
// expanded_x and grad_scales are present only with scales, expert_index only with bias.
struct GradPlan : Plan {
  infiniDtype_t dtype = INFINI_DTYPE_INVALID;         // of the rows
  infiniDtype_t scales_dtype = INFINI_DTYPE_INVALID;  // of scales and grad_scales: dtype or F32
  size_t tokens = 0, topk = 0, hidden = 0;
  gather::RowView grad_expanded_x, grad_y, expanded_x, bias;
  gather::TableView scales, grad_scales;
  gather::IndexView row_index, expert_index;
};
struct GradData {
  void *grad_expanded_x, *grad_scales;
  const void *grad_y, *expanded_x, *scales, *bias;
  const void *row_index, *expert_index;  // INT32 or INT64, as their views say
  void *workspace;
};

// How a descriptor runs its calls on its device, made once at descriptor creation by the device's
// kernel table. run() is called after every check of the call has
// passed, with the call's data pointers (device addresses) and `host_row_index`,
// expanded_row_idx in host memory (plan.row_index.at(host_row_index, r, k) reads it; on a
// host-memory device the data itself, elsewhere a copy). It may still fail (a pointer that is
// not device memory of the handle) but writes nothing before it has checked everything; the
// work is queued on `stream` where the device has streams.
class ForwardRunner : public Runner {
 public:
  virtual infiniStatus_t run(const ForwardData &data, const void *host_row_index,
                             void *stream) const = 0;
};
// Its workspace holds the inverse of expanded_row_idx (gather::inverseWorkspaceBytes), which
// the cpu and opencl devices build and cpu_reference does not need.
class GradRunner : public Runner {
 public:
  virtual infiniStatus_t run(const GradData &data, const void *host_row_index,
                             void *stream) const = 0;
};

}  // namespace infiniop::moe

namespace infiniop::family {

// MoeFinalizeRoutingV2 (and MoeInitRoutingV2Grad, the same with weight 1) and its grad as host
// devices run them: synchronous functions of host memory.
INFINIOP_HOST_FAMILY(MoeForward, moe::ForwardPlan, const moe::ForwardData &data);
INFINIOP_HOST_FAMILY(MoeGrad, moe::GradPlan, const moe::GradData &data);

}  // namespace infiniop::family
