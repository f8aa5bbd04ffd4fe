// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_GELU_MUL_H
#define INFINIOP_OPS_GELU_MUL_H

#include "../handle.h"
#include "../tensor_descriptor.h"

typedef enum {
  INFINIOP_GELU_APPROXIMATE_NONE = 0, /* gelu(x) = x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) */
  INFINIOP_GELU_APPROXIMATE_TANH =
      1, /* gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
} infiniopGeluApproximate_t;

/* input [..., 2d] is split on its LAST dim into x1 = input[..., :d], x2 = input[..., d:];
 * out [..., d] = gelu(x1) * x2. Rank >= 1, last dim even. */
typedef struct InfiniopGeluMulDescriptor *infiniopGeluMulDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateGeluMulDescriptor(infiniopHandle_t handle,
                                                          infiniopGeluMulDescriptor_t *desc_ptr,
                                                          infiniopTensorDescriptor_t out_desc,
                                                          infiniopTensorDescriptor_t input_desc,
                                                          infiniopGeluApproximate_t approximate);
__INFINI_C infiniStatus_t infiniopGetGeluMulWorkspaceSize(infiniopGeluMulDescriptor_t desc,
                                                          size_t *size);
__INFINI_C infiniStatus_t infiniopGeluMul(infiniopGeluMulDescriptor_t desc, void *workspace,
                                          size_t workspace_size, void *out, const void *input,
                                          void *stream);
__INFINI_C infiniStatus_t infiniopDestroyGeluMulDescriptor(infiniopGeluMulDescriptor_t desc);

#endif /* INFINIOP_OPS_GELU_MUL_H */
