// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_MOE_GATING_WEIGHTS_H
#define INFINIOP_OPS_MOE_GATING_WEIGHTS_H

#include "../handle.h"
#include "../tensor_descriptor.h"

/* MoeGatingTopK's weights for a routing the caller gives (a replayed routing, as Megatron-LM's
 * RouterReplay, or hash routing, expert_idx = tid2eid[token_ids]): y (..., k) of x's dtype from
 * x (..., E) F32, F16 or BF16 and expert_idx (..., k) INT32 or INT64, every value in [0, E) (else
 * BAD_PARAM at the call, nothing written; duplicates allowed, each slot counts).
 * y_i = p[s_i] / (sum_i p[s_i] + eps) * routed_scaling_factor with p and the rounding of
 * MoeGatingTopK's forward: with expert_idx = MoeGatingTopK's selection, y has its y's bits.
 * norm_type, renorm, routed_scaling_factor and eps as MoeGatingTopKGrad's, which is the gradient
 * of y. docs/moe_gating_weights.md has the formulas. */
typedef struct InfiniopMoeGatingWeightsDescriptor *infiniopMoeGatingWeightsDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateMoeGatingWeightsDescriptor(
    infiniopHandle_t handle, infiniopMoeGatingWeightsDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t y_desc, infiniopTensorDescriptor_t x_desc,
    infiniopTensorDescriptor_t expert_idx_desc, int64_t norm_type, int64_t renorm,
    double routed_scaling_factor, double eps);
__INFINI_C infiniStatus_t
infiniopGetMoeGatingWeightsWorkspaceSize(infiniopMoeGatingWeightsDescriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopMoeGatingWeights(infiniopMoeGatingWeightsDescriptor_t desc,
                                                   void *workspace, size_t workspace_size, void *y,
                                                   const void *x, const void *expert_idx,
                                                   void *stream);
__INFINI_C infiniStatus_t
infiniopDestroyMoeGatingWeightsDescriptor(infiniopMoeGatingWeightsDescriptor_t desc);

#endif /* INFINIOP_OPS_MOE_GATING_WEIGHTS_H */
