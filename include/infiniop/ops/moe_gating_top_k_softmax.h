// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_MOE_GATING_TOP_K_SOFTMAX_H
#define INFINIOP_OPS_MOE_GATING_TOP_K_SOFTMAX_H

#include "../handle.h"
#include "../tensor_descriptor.h"

/* The softmax router (torch_npu npu_moe_gating_top_k_softmax and its V2). x (..., E), its leading
 * dims R rows. renorm 0: p = softmax(x) over E, y and expert_idx the top k of p; renorm 1: the top
 * k of x, y their softmax over the k. Outputs: y (..., k) of x's dtype; expert_idx (..., k) INT32
 * or INT64, largest first, ties lower expert first; row_idx (..., k, nullable) INT32 or INT64,
 * row_idx[r, i] = i * R + r; softmax_out (..., E, nullable, renorm 0 only) F32, p. finished
 * (nullable) BOOL, x's leading shape: a true row gets y = 0 and expert_idx = E. 1 <= k <= E.
 * docs/moe_gating_top_k_softmax.md has the exact arithmetic. */
typedef struct InfiniopMoeGatingTopKSoftmaxDescriptor *infiniopMoeGatingTopKSoftmaxDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateMoeGatingTopKSoftmaxDescriptor(
    infiniopHandle_t handle, infiniopMoeGatingTopKSoftmaxDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t y_desc, infiniopTensorDescriptor_t expert_idx_desc,
    infiniopTensorDescriptor_t row_idx_desc /* nullable */,
    infiniopTensorDescriptor_t softmax_out_desc /* nullable */, infiniopTensorDescriptor_t x_desc,
    infiniopTensorDescriptor_t finished_desc /* nullable */, int64_t k, int64_t renorm);
__INFINI_C infiniStatus_t infiniopGetMoeGatingTopKSoftmaxWorkspaceSize(
    infiniopMoeGatingTopKSoftmaxDescriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t
infiniopMoeGatingTopKSoftmax(infiniopMoeGatingTopKSoftmaxDescriptor_t desc, void *workspace,
                             size_t workspace_size, void *y, void *expert_idx, void *row_idx,
                             void *softmax_out, const void *x, const void *finished, void *stream);
__INFINI_C infiniStatus_t
infiniopDestroyMoeGatingTopKSoftmaxDescriptor(infiniopMoeGatingTopKSoftmaxDescriptor_t desc);

#endif /* INFINIOP_OPS_MOE_GATING_TOP_K_SOFTMAX_H */
