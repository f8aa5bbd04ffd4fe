// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_MOE_INIT_ROUTING_V2_GRAD_H
#define INFINIOP_OPS_MOE_INIT_ROUTING_V2_GRAD_H

#include <stdint.h>

#include "../handle.h"
#include "../tensor_descriptor.h"

/* The gradient of MoeInitRoutingV2's expanded_x:
 *   grad_x[r] = sum over k < top_k of grad_expanded_x[expanded_row_idx[r*top_k + k]]
 * summed in F32 at least (cpu, opencl: in increasing k; cpu_reference: in double) and rounded once
 * to the dtype; the same bits on every call and thread count.
 * grad_x is (R, H); expanded_row_idx (R*top_k, INT32 or INT64) as the Init wrote it.
 * drop_pad_mode 0: grad_expanded_x is (A, H), A = active_num if 0 < active_num < R*top_k, else
 * R*top_k; index values must be in [0, R*top_k) and those >= A add nothing. drop_pad_mode 1:
 * (E, C, H); values in [-1, E*C), -1 adding nothing. Bad values are BAD_PARAM with nothing
 * written. No workspace. */
typedef struct InfiniopMoeInitRoutingV2GradDescriptor *infiniopMoeInitRoutingV2GradDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateMoeInitRoutingV2GradDescriptor(
    infiniopHandle_t handle, infiniopMoeInitRoutingV2GradDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t grad_x, infiniopTensorDescriptor_t grad_expanded_x,
    infiniopTensorDescriptor_t expanded_row_idx, int64_t top_k, int64_t drop_pad_mode,
    int64_t active_num);
__INFINI_C infiniStatus_t infiniopGetMoeInitRoutingV2GradWorkspaceSize(
    infiniopMoeInitRoutingV2GradDescriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopMoeInitRoutingV2Grad(
    infiniopMoeInitRoutingV2GradDescriptor_t desc, void *workspace, size_t workspace_size,
    void *grad_x, const void *grad_expanded_x, const void *expanded_row_idx, void *stream);
__INFINI_C infiniStatus_t
infiniopDestroyMoeInitRoutingV2GradDescriptor(infiniopMoeInitRoutingV2GradDescriptor_t desc);

#endif /* INFINIOP_OPS_MOE_INIT_ROUTING_V2_GRAD_H */
