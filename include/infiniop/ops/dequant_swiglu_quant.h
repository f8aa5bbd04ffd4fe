// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_DEQUANT_SWIGLU_QUANT_H
#define INFINIOP_OPS_DEQUANT_SWIGLU_QUANT_H

#include "../handle.h"
#include "../tensor_descriptor.h"
#include "quant.h"

/* The activation between a W8A8 MoE layer's two matmuls (CANN's DequantSwigluQuant, torch_npu's
 * npu_dequant_swiglu_quant): x (..., 2H) INT32, the first matmul's accumulators, any strides,
 * rank >= 1. Each is dequantized in double,
 *   d = ((x + bias_i) w) s_a + bias_f,
 * w = weight_scale[c] ((2H) F32: the weight's per-channel scale; NULL: 1), s_a =
 * activation_scale[row] ((..., 1) or (...) F32, x's leading dims: the activation's per-token
 * scale; NULL: 1), bias (2H; NULL: none) added to the accumulator where it is INT32 (bias_i) and
 * after the scales where it is F32, F16 or BF16 (bias_f), each operation one double rounding, in
 * that order. d is then split on its last dim into d1 (first half) and d2, and
 * z = silu(d1) d2 m (activate_left 1) or d1 silu(d2) m (activate_left 0, CANN's default), m the
 * smooth scale of its column (CANN's quant_scale). With group_index (E) (a MoE layer's grouped
 * matmul: expert e's rows are the next group_index[e] rows), weight_scale and bias may also be
 * (E, 2H), expert e's rows taking row e, as smooth_scales (E, H) do. y, scale, smooth_scales,
 * group_index, quant_mode, group_size and scale_format, and every rule on them, are SwiGluQuant's
 * (swiglu_quant.h): y = z / s rounded once and saturated, the values z the float64 ones of the
 * formula. docs/dequant_swiglu_quant.md. */
typedef struct InfiniopDequantSwigluQuantDescriptor *infiniopDequantSwigluQuantDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateDequantSwigluQuantDescriptor(
    infiniopHandle_t handle, infiniopDequantSwigluQuantDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t y_desc, infiniopTensorDescriptor_t scale_desc,
    infiniopTensorDescriptor_t x_desc, infiniopTensorDescriptor_t weight_scale_desc,
    infiniopTensorDescriptor_t activation_scale_desc, infiniopTensorDescriptor_t bias_desc,
    infiniopTensorDescriptor_t smooth_scales_desc, infiniopTensorDescriptor_t group_index_desc,
    int32_t activate_left, infiniopQuantMode_t quant_mode, int64_t group_size,
    infiniopQuantScaleFormat_t scale_format);
__INFINI_C infiniStatus_t infiniopGetDequantSwigluQuantWorkspaceSize(
    infiniopDequantSwigluQuantDescriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopDequantSwigluQuant(
    infiniopDequantSwigluQuantDescriptor_t desc, void *workspace, size_t workspace_size, void *y,
    void *scale, const void *x, const void *weight_scale, const void *activation_scale,
    const void *bias, const void *smooth_scales, const void *group_index, void *stream);
__INFINI_C infiniStatus_t
infiniopDestroyDequantSwigluQuantDescriptor(infiniopDequantSwigluQuantDescriptor_t desc);

#endif /* INFINIOP_OPS_DEQUANT_SWIGLU_QUANT_H */
