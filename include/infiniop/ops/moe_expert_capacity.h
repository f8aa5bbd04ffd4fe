// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_MOE_EXPERT_CAPACITY_H
#define INFINIOP_OPS_MOE_EXPERT_CAPACITY_H

#include "../handle.h"
#include "../tensor_descriptor.h"

/* Expert capacity with a drop policy (Megatron-LM's apply_router_token_dropping; GShard's and
 * Switch's capacity): each expert keeps at most C of the slots routed to it, the others are
 * dropped. expert_idx (..., k) INT32 or INT64, any strides: every element an expert in [0, E),
 * or E (already dropped or a finished row: stays E, takes no capacity); any other value is
 * BAD_PARAM at the call, nothing written. Slot s = r k + j (row r of the leading dims flattened,
 * column j). drop_policy 0 (position): expert e keeps its first C slots in s order, exactly the
 * ones MoeInitRoutingV2's drop_pad_mode 1 keeps at expert_capacity C. drop_policy 1
 * (probability): expert e keeps its C slots of the largest weight, ties to the lower s (a NaN
 * weight ranks first, -0 equals +0); weights is then required. kept_idx (same shape as
 * expert_idx, INT32 or INT64): expert_idx[s] where kept, E where dropped. weights_out (nullable;
 * the weights' shape and dtype, which is then required): weights[s] where kept (the same bits),
 * +0 where dropped. weights (nullable with drop_policy 0 and no weights_out): F32, F16 or BF16,
 * (..., k). num_experts E in [1, 2^24] (MoeInitRoutingV2's bound), capacity C >= 0. The
 * gradient of weights_out is grad * (kept_idx != E): zero at the dropped slots. Exact and
 * deterministic (comparisons only).
 * docs/moe_expert_capacity.md. */
typedef struct InfiniopMoeExpertCapacityDescriptor *infiniopMoeExpertCapacityDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateMoeExpertCapacityDescriptor(
    infiniopHandle_t handle, infiniopMoeExpertCapacityDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t kept_idx_desc, infiniopTensorDescriptor_t weights_out_desc,
    infiniopTensorDescriptor_t expert_idx_desc, infiniopTensorDescriptor_t weights_desc,
    int64_t num_experts, int64_t capacity, int64_t drop_policy);
__INFINI_C infiniStatus_t
infiniopGetMoeExpertCapacityWorkspaceSize(infiniopMoeExpertCapacityDescriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopMoeExpertCapacity(infiniopMoeExpertCapacityDescriptor_t desc,
                                                    void *workspace, size_t workspace_size,
                                                    void *kept_idx, void *weights_out,
                                                    const void *expert_idx, const void *weights,
                                                    void *stream);
__INFINI_C infiniStatus_t
infiniopDestroyMoeExpertCapacityDescriptor(infiniopMoeExpertCapacityDescriptor_t desc);

#endif /* INFINIOP_OPS_MOE_EXPERT_CAPACITY_H */
