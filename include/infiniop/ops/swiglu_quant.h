// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_SWIGLU_QUANT_H
#define INFINIOP_OPS_SWIGLU_QUANT_H

#include "../handle.h"
#include "../tensor_descriptor.h"
#include "quant.h"

/* SwiGlu with a quantized output (CANN's SwiGluQuant, torch_npu's npu_swiglu_quant; vLLM's
 * silu_and_mul with a per-token or per-group quantization).
 * x (..., 2H), F32, F16 or BF16, any strides, rank >= 1: split on its LAST dim into x1 (first
 * half) and x2; the activation is a = silu(x1) x2 (activate_left 1, as SwiGlu) or x1 silu(x2)
 * (activate_left 0, CANN's default). z = a m with m the smooth scale of its column (smooth_scales
 * (H) F32; or (E, H) F32 with group_index (E) INT64, E >= 1: counts of rows, expert e's rows taking
 * row e; NULL: m = 1). Each row's H values form G = H / group_size groups of group_size consecutive
 * columns (group_size 0: one group per row, per-token). y (..., H), INT8 or FP8
 * (quant.h): y = z / s rounded once to nearest even, saturated, with s the group's scale.
 * scale (..., G) F32: written (INFINIOP_QUANT_DYNAMIC: s = amax / qmax rounded as scale_format
 * says, amax = max |z| over the group) or read (INFINIOP_QUANT_STATIC: any strides, a stride 0
 * broadcasts one scale). Exact: the values z are the exact real ones, not rounded activations;
 * the same bits on every device, target and thread count. With group_index, rows past the counts'
 * sum are written as 0 with a dynamic scale 0; a count below 0 or a sum above the rows is
 * BAD_PARAM at the call, nothing written. docs/swiglu_quant.md. */
typedef struct InfiniopSwiGluQuantDescriptor *infiniopSwiGluQuantDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateSwiGluQuantDescriptor(
    infiniopHandle_t handle, infiniopSwiGluQuantDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t y_desc, infiniopTensorDescriptor_t scale_desc,
    infiniopTensorDescriptor_t x_desc, infiniopTensorDescriptor_t smooth_scales_desc,
    infiniopTensorDescriptor_t group_index_desc, int32_t activate_left,
    infiniopQuantMode_t quant_mode, int64_t group_size, infiniopQuantScaleFormat_t scale_format);
__INFINI_C infiniStatus_t infiniopGetSwiGluQuantWorkspaceSize(infiniopSwiGluQuantDescriptor_t desc,
                                                              size_t *size);
__INFINI_C infiniStatus_t infiniopSwiGluQuant(infiniopSwiGluQuantDescriptor_t desc, void *workspace,
                                              size_t workspace_size, void *y, void *scale,
                                              const void *x, const void *smooth_scales,
                                              const void *group_index, void *stream);
__INFINI_C infiniStatus_t
infiniopDestroySwiGluQuantDescriptor(infiniopSwiGluQuantDescriptor_t desc);

#endif /* INFINIOP_OPS_SWIGLU_QUANT_H */
