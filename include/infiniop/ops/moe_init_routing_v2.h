// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_MOE_INIT_ROUTING_V2_H
#define INFINIOP_OPS_MOE_INIT_ROUTING_V2_H

#include <stdbool.h>
#include <stdint.h>

#include "../handle.h"
#include "../tensor_descriptor.h"

/* The dispatch half of a MoE layer (the forward of MoeFinalizeRoutingV2's combine). x is (R, H),
 * expert_idx (R, K), every value in [0, expert_num); position p = r*K + k.
 * The positions are sorted by (expert, p), a stable counting sort: s(p) is p's rank, c_e the
 * number of positions of expert e.
 * drop_pad_mode 0 (dropless): expanded_row_idx[p] = s(p); expanded_x is (A, H) with
 *   A = active_num if 0 < active_num < R*K, else R*K, and expanded_x[s(p)] = x[r] for s(p) < A.
 *   expert_tokens_count_or_cumsum_flag 1 / 2: expert_tokens_count_or_cumsum (E) gets the
 *   inclusive cumsum of c / c.
 * drop_pad_mode 1 (drop/pad): expanded_x is (expert_num, expert_capacity, H); the j-th position
 *   of expert e goes to slot [e][j] and expanded_row_idx[p] = e*C + j while j < C; later ones are
 *   dropped (-1). Unfilled slots are zero. expert_tokens_before_capacity_flag: that output (E)
 *   gets c.
 * Rows are copied bit for bit; index tensors and counts are INT32 or INT64 each. An output its flag
 * does not ask for may be NULL and is not written. Out-of-range expert ids are BAD_PARAM with
 * nothing written. No workspace on CPU devices; on OpenCL it stages the sorted indices. */
typedef struct InfiniopMoeInitRoutingV2Descriptor *infiniopMoeInitRoutingV2Descriptor_t;

__INFINI_C infiniStatus_t infiniopCreateMoeInitRoutingV2Descriptor(
    infiniopHandle_t handle, infiniopMoeInitRoutingV2Descriptor_t *desc_ptr,
    infiniopTensorDescriptor_t expanded_x, infiniopTensorDescriptor_t expanded_row_idx,
    infiniopTensorDescriptor_t expert_tokens_count_or_cumsum /* nullable */,
    infiniopTensorDescriptor_t expert_tokens_before_capacity /* nullable */,
    infiniopTensorDescriptor_t x, infiniopTensorDescriptor_t expert_idx, int64_t active_num,
    int64_t expert_capacity, int64_t expert_num, int64_t drop_pad_mode,
    int64_t expert_tokens_count_or_cumsum_flag, bool expert_tokens_before_capacity_flag);
__INFINI_C infiniStatus_t
infiniopGetMoeInitRoutingV2WorkspaceSize(infiniopMoeInitRoutingV2Descriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopMoeInitRoutingV2(
    infiniopMoeInitRoutingV2Descriptor_t desc, void *workspace, size_t workspace_size,
    void *expanded_x, void *expanded_row_idx, void *expert_tokens_count_or_cumsum,
    void *expert_tokens_before_capacity, const void *x, const void *expert_idx, void *stream);
__INFINI_C infiniStatus_t
infiniopDestroyMoeInitRoutingV2Descriptor(infiniopMoeInitRoutingV2Descriptor_t desc);

#endif /* INFINIOP_OPS_MOE_INIT_ROUTING_V2_H */
