// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_GELU_MUL_QUANT_H
#define INFINIOP_OPS_GELU_MUL_QUANT_H

#include "../handle.h"
#include "../tensor_descriptor.h"
#include "gelu_mul.h"
#include "quant.h"

/* GeluMul with a quantized output (vLLM's gelu_and_mul / gelu_tanh_and_mul with a per-token or
 * per-group quantization): SwiGluQuant (swiglu_quant.h) with gelu for silu, a = gelu(x1) x2
 * (activate_left 1, as GeluMul) or x1 gelu(x2) (activate_left 0), gelu's form given by
 * approximate (gelu_mul.h). Every tensor, attribute and rule is SwiGluQuant's.
 * docs/swiglu_quant.md. */
typedef struct InfiniopGeluMulQuantDescriptor *infiniopGeluMulQuantDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateGeluMulQuantDescriptor(
    infiniopHandle_t handle, infiniopGeluMulQuantDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t y_desc, infiniopTensorDescriptor_t scale_desc,
    infiniopTensorDescriptor_t x_desc, infiniopTensorDescriptor_t smooth_scales_desc,
    infiniopTensorDescriptor_t group_index_desc, infiniopGeluApproximate_t approximate,
    int32_t activate_left, infiniopQuantMode_t quant_mode, int64_t group_size,
    infiniopQuantScaleFormat_t scale_format);
__INFINI_C infiniStatus_t
infiniopGetGeluMulQuantWorkspaceSize(infiniopGeluMulQuantDescriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopGeluMulQuant(infiniopGeluMulQuantDescriptor_t desc,
                                               void *workspace, size_t workspace_size, void *y,
                                               void *scale, const void *x,
                                               const void *smooth_scales, const void *group_index,
                                               void *stream);
__INFINI_C infiniStatus_t
infiniopDestroyGeluMulQuantDescriptor(infiniopGeluMulQuantDescriptor_t desc);

#endif /* INFINIOP_OPS_GELU_MUL_QUANT_H */
