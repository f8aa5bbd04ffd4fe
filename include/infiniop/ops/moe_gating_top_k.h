// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_MOE_GATING_TOP_K_H
#define INFINIOP_OPS_MOE_GATING_TOP_K_H

#include "../handle.h"
#include "../tensor_descriptor.h"

/* The grouped router of DeepSeek-V3 (torch_npu npu_moe_gating_top_k; attributes in the vendor's
 * order). x (..., E): p = softmax(x) (norm_type 0) or sigmoid(x) (1); v = p + bias (bias (E),
 * nullable, x's dtype or F32, for selection only); with group_count > 1 the experts form
 * group_count groups of E / group_count, scored by their max v (group_select_mode 0) or the sum
 * of their two largest (1), and only the top k_group groups' experts are selectable; expert_idx
 * (..., k, INT32 or INT64) the top k of v among them, largest first, ties lower expert first;
 * y (..., k, x's dtype) = p[expert_idx] / (sum of those + eps) * routed_scaling_factor;
 * norm_out (..., E, nullable: the vendor's out_flag) F32, p. renorm must be 0 (the vendor's only
 * mode: normalize, then select). docs/moe_gating_top_k.md has the exact arithmetic. */
typedef struct InfiniopMoeGatingTopKDescriptor *infiniopMoeGatingTopKDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateMoeGatingTopKDescriptor(
    infiniopHandle_t handle, infiniopMoeGatingTopKDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t y_desc, infiniopTensorDescriptor_t expert_idx_desc,
    infiniopTensorDescriptor_t norm_out_desc /* nullable */, infiniopTensorDescriptor_t x_desc,
    infiniopTensorDescriptor_t bias_desc /* nullable */, int64_t k, int64_t k_group,
    int64_t group_count, int64_t group_select_mode, int64_t renorm, int64_t norm_type,
    double routed_scaling_factor, double eps);
__INFINI_C infiniStatus_t
infiniopGetMoeGatingTopKWorkspaceSize(infiniopMoeGatingTopKDescriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopMoeGatingTopK(infiniopMoeGatingTopKDescriptor_t desc,
                                                void *workspace, size_t workspace_size, void *y,
                                                void *expert_idx, void *norm_out, const void *x,
                                                const void *bias, void *stream);
__INFINI_C infiniStatus_t
infiniopDestroyMoeGatingTopKDescriptor(infiniopMoeGatingTopKDescriptor_t desc);

#endif /* INFINIOP_OPS_MOE_GATING_TOP_K_H */
