// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_MOE_EXPERT_COUNTS_H
#define INFINIOP_OPS_MOE_EXPERT_COUNTS_H

#include "../handle.h"
#include "../tensor_descriptor.h"

/* Tokens per expert from a routing (torch.bincount(expert_idx.flatten(), minlength=E)), for
 * DeepSeek-V3's auxiliary-loss-free bias update (MoeBiasUpdate). expert_idx (..., k) INT32 or
 * INT64, any strides: every element is an expert in [0, E), or E (a finished row of
 * MoeGatingTopKSoftmax: not counted); any other value is BAD_PARAM at the call, nothing written.
 * counts (E) INT32 or INT64: counts[e] = the number of elements equal to e (INT32 only where
 * expert_idx has at most 2^31 - 1 elements). Or counts (B, E), per sequence (the sequence-level
 * aux loss, MoeAuxLoss): expert_idx's R rows (its leading dims flattened; (L, B, k) in Megatron's
 * (seq, batch) order, or (T, k)) with B dividing R, counts[b, e] = the elements equal to e in the
 * rows r with r % B == b. num_experts E >= 1. Exact and deterministic (integer counting).
 * docs/moe_expert_counts.md. */
typedef struct InfiniopMoeExpertCountsDescriptor *infiniopMoeExpertCountsDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateMoeExpertCountsDescriptor(
    infiniopHandle_t handle, infiniopMoeExpertCountsDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t counts_desc, infiniopTensorDescriptor_t expert_idx_desc,
    int64_t num_experts);
__INFINI_C infiniStatus_t
infiniopGetMoeExpertCountsWorkspaceSize(infiniopMoeExpertCountsDescriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopMoeExpertCounts(infiniopMoeExpertCountsDescriptor_t desc,
                                                  void *workspace, size_t workspace_size,
                                                  void *counts, const void *expert_idx,
                                                  void *stream);
__INFINI_C infiniStatus_t
infiniopDestroyMoeExpertCountsDescriptor(infiniopMoeExpertCountsDescriptor_t desc);

#endif /* INFINIOP_OPS_MOE_EXPERT_COUNTS_H */
