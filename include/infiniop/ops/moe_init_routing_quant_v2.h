// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_MOE_INIT_ROUTING_QUANT_V2_H
#define INFINIOP_OPS_MOE_INIT_ROUTING_QUANT_V2_H

#include <stdbool.h>
#include <stdint.h>

#include "../handle.h"
#include "../tensor_descriptor.h"
#include "quant.h"

/* MoeInitRoutingV2 (moe_init_routing_v2.h) with expanded_x quantized (CANN's
 * MoeInitRoutingQuantV2, torch_npu's npu_moe_init_routing_v2 with a quant_mode). Every routing
 * output, attribute and rule is MoeInitRoutingV2's; expanded_x is INT8 or FP8 (quant.h) and each
 * of its rows, an expanded copy of x's row r for expert e, is quantized from x's F32 values v:
 * - INFINIOP_QUANT_STATIC: y = v scale + offset (the vendor's multiplier form), scale and offset
 *   (1) F32, required, in double (the product exact, one rounding for the sum), rounded once to
 *   nearest even and saturated; dynamic_quant_scale is not used (NULL).
 * - INFINIOP_QUANT_DYNAMIC: z = v m with m = scale[e][c] (scale (E, H) F32), scale[0][c] (scale
 *   (1, H)) or 1 (scale NULL); offset must be NULL. dynamic_quant_scale (the expanded rows: (A)
 *   dropless, (expert_num, expert_capacity) drop/pad) F32 gets each row's s = amax / qmax of its
 *   exact |z| as SwiGluQuant's per-token scales (F32 rounding, at least 2^-126), and y = z / s
 *   rounded once and saturated. An unfilled drop/pad slot is zeros with scale 0.
 * docs/moe_init_routing_quant.md. */
typedef struct InfiniopMoeInitRoutingQuantV2Descriptor *infiniopMoeInitRoutingQuantV2Descriptor_t;

__INFINI_C infiniStatus_t infiniopCreateMoeInitRoutingQuantV2Descriptor(
    infiniopHandle_t handle, infiniopMoeInitRoutingQuantV2Descriptor_t *desc_ptr,
    infiniopTensorDescriptor_t expanded_x, infiniopTensorDescriptor_t expanded_row_idx,
    infiniopTensorDescriptor_t expert_tokens_count_or_cumsum /* nullable */,
    infiniopTensorDescriptor_t expert_tokens_before_capacity /* nullable */,
    infiniopTensorDescriptor_t dynamic_quant_scale /* nullable: static */,
    infiniopTensorDescriptor_t x, infiniopTensorDescriptor_t expert_idx,
    infiniopTensorDescriptor_t scale /* nullable: dynamic */,
    infiniopTensorDescriptor_t offset /* nullable: dynamic */, int64_t active_num,
    int64_t expert_capacity, int64_t expert_num, int64_t drop_pad_mode,
    int64_t expert_tokens_count_or_cumsum_flag, bool expert_tokens_before_capacity_flag,
    infiniopQuantMode_t quant_mode);
__INFINI_C infiniStatus_t infiniopGetMoeInitRoutingQuantV2WorkspaceSize(
    infiniopMoeInitRoutingQuantV2Descriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopMoeInitRoutingQuantV2(
    infiniopMoeInitRoutingQuantV2Descriptor_t desc, void *workspace, size_t workspace_size,
    void *expanded_x, void *expanded_row_idx, void *expert_tokens_count_or_cumsum,
    void *expert_tokens_before_capacity, void *dynamic_quant_scale, const void *x,
    const void *expert_idx, const void *scale, const void *offset, void *stream);
__INFINI_C infiniStatus_t
infiniopDestroyMoeInitRoutingQuantV2Descriptor(infiniopMoeInitRoutingQuantV2Descriptor_t desc);

#endif /* INFINIOP_OPS_MOE_INIT_ROUTING_QUANT_V2_H */
