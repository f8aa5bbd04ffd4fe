// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_MOE_FINALIZE_ROUTING_V2_GRAD_H
#define INFINIOP_OPS_MOE_FINALIZE_ROUTING_V2_GRAD_H

#include <stdint.h>

#include "../handle.h"
#include "../tensor_descriptor.h"

/* The gradient of MoeFinalizeRoutingV2 (row layout, i = r*K + k):
 *   grad_expanded_x[idx[i]] += grad_y[i / K] * scales[i]   (1 without scales; duplicates sum)
 *   grad_scales[i] = sum_j (expanded_x[idx[i]][j] + bias[expert_idx[i]][j]) * grad_y[i / K][j]
 * drop_pad_mode 0: grad_expanded_x is (rows, H), rows = active_num if 0 < active_num < R*K else
 * R*K; index values in [rows, R*K) are skipped. drop_pad_mode 1: (expert_num, expert_capacity, H);
 * -1 is skipped. Rows no index reaches are zero. expanded_x has grad_expanded_x's shape and is
 * needed with scales; bias (expert_num rows in mode 1) needs expert_idx; without scales K = 1 and
 * grad_scales is not written. Bad index values are BAD_PARAM with nothing written. The result is
 * the same, bit for bit, for any thread count. The workspace holds the index inversion. */
typedef struct InfiniopMoeFinalizeRoutingV2GradDescriptor
    *infiniopMoeFinalizeRoutingV2GradDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateMoeFinalizeRoutingV2GradDescriptor(
    infiniopHandle_t handle, infiniopMoeFinalizeRoutingV2GradDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t grad_expanded_x_desc,
    infiniopTensorDescriptor_t grad_scales_desc /* nullable */,
    infiniopTensorDescriptor_t grad_y_desc, infiniopTensorDescriptor_t expanded_row_idx_desc,
    infiniopTensorDescriptor_t expanded_x_desc, infiniopTensorDescriptor_t scales_desc,
    infiniopTensorDescriptor_t expert_idx_desc, infiniopTensorDescriptor_t bias_desc,
    int64_t drop_pad_mode, int64_t active_num, int64_t expert_num, int64_t expert_capacity);
__INFINI_C infiniStatus_t infiniopGetMoeFinalizeRoutingV2GradWorkspaceSize(
    infiniopMoeFinalizeRoutingV2GradDescriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopMoeFinalizeRoutingV2Grad(
    infiniopMoeFinalizeRoutingV2GradDescriptor_t desc, void *workspace, size_t workspace_size,
    void *grad_expanded_x, void *grad_scales, const void *grad_y, const void *expanded_row_idx,
    const void *expanded_x, const void *scales, const void *expert_idx, const void *bias,
    void *stream);
__INFINI_C infiniStatus_t infiniopDestroyMoeFinalizeRoutingV2GradDescriptor(
    infiniopMoeFinalizeRoutingV2GradDescriptor_t desc);

#endif /* INFINIOP_OPS_MOE_FINALIZE_ROUTING_V2_GRAD_H */
