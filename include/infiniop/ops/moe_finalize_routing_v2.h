// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_MOE_FINALIZE_ROUTING_V2_H
#define INFINIOP_OPS_MOE_FINALIZE_ROUTING_V2_H

#include <stdint.h>

#include "../handle.h"
#include "../tensor_descriptor.h"

/* The MoE combine: out[r] = x1[r] + x2[r] + sum_k scales[r,k] * (expanded_x[idx] + bias[e]),
 * e = expert_idx[r,k], idx = expanded_row_idx[k*R + r] (drop_pad_mode 0, 1: column layout) or
 * expanded_row_idx[r*K + k] (2, 3: row layout). Shapes: out, x1, x2 (R, H); scales, expert_idx
 * (R, K); expanded_row_idx (R*K); the two index tensors INT32 or INT64 each; scales F32 or
 * the rows' dtype; bias (E, H); expanded_x (R*K, H) in modes 0 and 2, (E, C, H) in modes 1 and 3,
 * where idx = -1 is a dropped token (a zero row; its bias is still added and scaled) and bias, if
 * given, has E rows. x1, x2, bias, scales and expert_idx may be NULL descriptors: x2 needs x1,
 * bias needs expert_idx, and without scales K = 1 with weight 1. Index values out of range are
 * BAD_PARAM with nothing written. No workspace. */
typedef struct InfiniopMoeFinalizeRoutingV2Descriptor *infiniopMoeFinalizeRoutingV2Descriptor_t;

__INFINI_C infiniStatus_t infiniopCreateMoeFinalizeRoutingV2Descriptor(
    infiniopHandle_t handle, infiniopMoeFinalizeRoutingV2Descriptor_t *desc_ptr,
    infiniopTensorDescriptor_t out_desc, infiniopTensorDescriptor_t expanded_x_desc,
    infiniopTensorDescriptor_t expanded_row_idx_desc, infiniopTensorDescriptor_t x1_desc,
    infiniopTensorDescriptor_t x2_desc, infiniopTensorDescriptor_t bias_desc,
    infiniopTensorDescriptor_t scales_desc, infiniopTensorDescriptor_t expert_idx_desc,
    int64_t drop_pad_mode);
__INFINI_C infiniStatus_t infiniopGetMoeFinalizeRoutingV2WorkspaceSize(
    infiniopMoeFinalizeRoutingV2Descriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopMoeFinalizeRoutingV2(
    infiniopMoeFinalizeRoutingV2Descriptor_t desc, void *workspace, size_t workspace_size,
    void *out, const void *expanded_x, const void *expanded_row_idx, const void *x1, const void *x2,
    const void *bias, const void *scales, const void *expert_idx, void *stream);
__INFINI_C infiniStatus_t
infiniopDestroyMoeFinalizeRoutingV2Descriptor(infiniopMoeFinalizeRoutingV2Descriptor_t desc);

#endif /* INFINIOP_OPS_MOE_FINALIZE_ROUTING_V2_H */
