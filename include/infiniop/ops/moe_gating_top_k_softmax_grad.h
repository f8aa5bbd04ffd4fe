// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_MOE_GATING_TOP_K_SOFTMAX_GRAD_H
#define INFINIOP_OPS_MOE_GATING_TOP_K_SOFTMAX_GRAD_H

#include "../handle.h"
#include "../tensor_descriptor.h"

/* The gradient of MoeGatingTopKSoftmax's y with respect to x, recomputing the softmax from x for
 * the given expert_idx (..., k): grad_x (..., E) from grad_y (..., k). grad_x, grad_y and x share
 * one float dtype; expert_idx INT32 or INT64, every value in [0, E) on the rows that finished
 * (nullable, BOOL) does not mark (else BAD_PARAM, nothing written); finished rows get 0. renorm as
 * the forward's. docs/moe_gating_top_k_softmax.md has the formulas. */
typedef struct InfiniopMoeGatingTopKSoftmaxGradDescriptor
    *infiniopMoeGatingTopKSoftmaxGradDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateMoeGatingTopKSoftmaxGradDescriptor(
    infiniopHandle_t handle, infiniopMoeGatingTopKSoftmaxGradDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t grad_x_desc, infiniopTensorDescriptor_t grad_y_desc,
    infiniopTensorDescriptor_t x_desc, infiniopTensorDescriptor_t expert_idx_desc,
    infiniopTensorDescriptor_t finished_desc /* nullable */, int64_t renorm);
__INFINI_C infiniStatus_t infiniopGetMoeGatingTopKSoftmaxGradWorkspaceSize(
    infiniopMoeGatingTopKSoftmaxGradDescriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopMoeGatingTopKSoftmaxGrad(
    infiniopMoeGatingTopKSoftmaxGradDescriptor_t desc, void *workspace, size_t workspace_size,
    void *grad_x, const void *grad_y, const void *x, const void *expert_idx, const void *finished,
    void *stream);
__INFINI_C infiniStatus_t infiniopDestroyMoeGatingTopKSoftmaxGradDescriptor(
    infiniopMoeGatingTopKSoftmaxGradDescriptor_t desc);

#endif /* INFINIOP_OPS_MOE_GATING_TOP_K_SOFTMAX_GRAD_H */
