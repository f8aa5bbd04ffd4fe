// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_CLIPPED_SWIGLU_QUANT_H
#define INFINIOP_OPS_CLIPPED_SWIGLU_QUANT_H

#include <stdbool.h>

#include "../handle.h"
#include "../tensor_descriptor.h"
#include "quant.h"

/* GPT-OSS's clipped SwiGLU (clipped_swiglu.h, clamp_mode 0) with a quantized output: SwiGluQuant
 * (swiglu_quant.h) with the clipped gate. x (..., 2H) is split on its LAST dim into A and B
 * (interleaved: A = x[..., 0::2], B = x[..., 1::2]; else A the first half, B the second), and
 *   a = min(A, limit), b = clamp(B, -limit, limit), z = a sigmoid(alpha a) (b + bias) m,
 * m the smooth scale of its column (as SwiGluQuant's). y, scale, smooth_scales, group_index,
 * quant_mode, group_size and scale_format, and every rule on them, are SwiGluQuant's; alpha,
 * limit (> 0, +inf: no clipping) and bias (finite) are ClippedSwiglu's. docs/swiglu_quant.md. */
typedef struct InfiniopClippedSwigluQuantDescriptor *infiniopClippedSwigluQuantDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateClippedSwigluQuantDescriptor(
    infiniopHandle_t handle, infiniopClippedSwigluQuantDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t y_desc, infiniopTensorDescriptor_t scale_desc,
    infiniopTensorDescriptor_t x_desc, infiniopTensorDescriptor_t smooth_scales_desc,
    infiniopTensorDescriptor_t group_index_desc, float alpha, float limit, float bias,
    bool interleaved, infiniopQuantMode_t quant_mode, int64_t group_size,
    infiniopQuantScaleFormat_t scale_format);
__INFINI_C infiniStatus_t infiniopGetClippedSwigluQuantWorkspaceSize(
    infiniopClippedSwigluQuantDescriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopClippedSwigluQuant(infiniopClippedSwigluQuantDescriptor_t desc,
                                                     void *workspace, size_t workspace_size,
                                                     void *y, void *scale, const void *x,
                                                     const void *smooth_scales,
                                                     const void *group_index, void *stream);
__INFINI_C infiniStatus_t
infiniopDestroyClippedSwigluQuantDescriptor(infiniopClippedSwigluQuantDescriptor_t desc);

#endif /* INFINIOP_OPS_CLIPPED_SWIGLU_QUANT_H */
