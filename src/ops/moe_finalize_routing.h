// MoeFinalizeRoutingV2 and its grad as the devices see them: validated plans (fixed at
// descriptor creation) and the data pointers of one call, whose index values have been
// range-checked on the host before a kernel runs.
#pragma once

#include "gather/inverse.h"
#include "gather/views.h"

namespace infiniop::moe {

// out[r] = x1[r] + x2[r] + sum_k scales[r,k] * (expanded_x[row_index(r,k)] + bias[expert(r,k)]).
// row_index values outside [0, expanded_x.rows) are dropped tokens (-1): a zero row.
struct ForwardPlan {
  infiniDtype_t dtype = INFINI_DTYPE_INVALID;
  size_t tokens = 0, topk = 0, hidden = 0;  // R, K, H
  gather::RowView out, expanded_x, x1, x2, bias;
  gather::TableView scales;                   // absent: K = 1, weight 1
  gather::IndexView row_index, expert_index;  // (R, K); expert_index present with bias
};
struct ForwardData {
  void *out;
  const void *expanded_x, *x1, *x2, *bias, *scales;
  const int32_t *row_index, *expert_index;
};

// With i = r * K + k and d = row_index(r, k), skipped when outside [0, grad_expanded_x.rows):
//   grad_expanded_x[d] = sum over i reaching d of grad_y[r] * scales[r,k]; rows reached by none: 0
//   grad_scales[r,k] = sum_j (expanded_x[d][j] + bias[expert(r,k)][j]) * grad_y[r][j]
// expanded_x and grad_scales are present only with scales, expert_index only with bias.
struct GradPlan {
  infiniDtype_t dtype = INFINI_DTYPE_INVALID;
  size_t tokens = 0, topk = 0, hidden = 0;
  gather::RowView grad_expanded_x, grad_y, expanded_x, bias;
  gather::TableView scales, grad_scales;
  gather::IndexView row_index, expert_index;
  size_t workspace_size = 0;  // what the device kernel needs (the cpu's index inversion)
};
struct GradData {
  void *grad_expanded_x, *grad_scales;
  const void *grad_y, *expanded_x, *scales, *bias;
  const int32_t *row_index, *expert_index;
  void *workspace;
};

using ForwardKernel = void (*)(const ForwardPlan &plan, const ForwardData &data);
using GradKernel = void (*)(const GradPlan &plan, const GradData &data);

}  // namespace infiniop::moe

namespace infiniop::cpu_reference {
void moeFinalizeRouting(const moe::ForwardPlan &plan, const moe::ForwardData &data);
void moeFinalizeRoutingGrad(const moe::GradPlan &plan, const moe::GradData &data);
}  // namespace infiniop::cpu_reference
#if INFINIOP_WITH_CPU
namespace infiniop::cpu {
void moeFinalizeRouting(const moe::ForwardPlan &plan, const moe::ForwardData &data);
void moeFinalizeRoutingGrad(const moe::GradPlan &plan, const moe::GradData &data);
}  // namespace infiniop::cpu
#endif
