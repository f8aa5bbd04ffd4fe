// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_MOE_GATING_TOP_K_GRAD_H
#define INFINIOP_OPS_MOE_GATING_TOP_K_GRAD_H

#include "../handle.h"
#include "../tensor_descriptor.h"

/* The gradient of MoeGatingTopK's y with respect to x through the selected weights (the bias and
 * the selection are not differentiated, as in DeepSeek-V3), recomputing p from x for the given
 * expert_idx (..., k): grad_x (..., E) from grad_y (..., k). grad_x, grad_y and x share one float
 * dtype; expert_idx INT32 or INT64 with every value in [0, E) (else BAD_PARAM, nothing written).
 * norm_type, renorm, routed_scaling_factor and eps as the forward's.
 * docs/moe_gating_top_k.md has the formulas. */
typedef struct InfiniopMoeGatingTopKGradDescriptor *infiniopMoeGatingTopKGradDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateMoeGatingTopKGradDescriptor(
    infiniopHandle_t handle, infiniopMoeGatingTopKGradDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t grad_x_desc, infiniopTensorDescriptor_t grad_y_desc,
    infiniopTensorDescriptor_t x_desc, infiniopTensorDescriptor_t expert_idx_desc,
    int64_t norm_type, int64_t renorm, double routed_scaling_factor, double eps);
__INFINI_C infiniStatus_t
infiniopGetMoeGatingTopKGradWorkspaceSize(infiniopMoeGatingTopKGradDescriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopMoeGatingTopKGrad(infiniopMoeGatingTopKGradDescriptor_t desc,
                                                    void *workspace, size_t workspace_size,
                                                    void *grad_x, const void *grad_y, const void *x,
                                                    const void *expert_idx, void *stream);
__INFINI_C infiniStatus_t
infiniopDestroyMoeGatingTopKGradDescriptor(infiniopMoeGatingTopKGradDescriptor_t desc);

#endif /* INFINIOP_OPS_MOE_GATING_TOP_K_GRAD_H */
