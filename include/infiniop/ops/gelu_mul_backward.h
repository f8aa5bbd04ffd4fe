// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_GELU_MUL_BACKWARD_H
#define INFINIOP_OPS_GELU_MUL_BACKWARD_H

#include "gelu_mul.h"

/* input_grad = concat(out_grad * x2 * gelu'(x1), out_grad * gelu(x1)) on the last dim, with x1,
 * x2 the halves of input and gelu' of the chosen approximation (erf: Phi(x) + x phi(x)).
 * input_grad has input's shape and may be exactly input's memory. */
typedef struct InfiniopGeluMulBackwardDescriptor *infiniopGeluMulBackwardDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateGeluMulBackwardDescriptor(
    infiniopHandle_t handle, infiniopGeluMulBackwardDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t input_grad_desc, infiniopTensorDescriptor_t out_grad_desc,
    infiniopTensorDescriptor_t input_desc, infiniopGeluApproximate_t approximate);
__INFINI_C infiniStatus_t
infiniopGetGeluMulBackwardWorkspaceSize(infiniopGeluMulBackwardDescriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopGeluMulBackward(infiniopGeluMulBackwardDescriptor_t desc,
                                                  void *workspace, size_t workspace_size,
                                                  void *input_grad, const void *out_grad,
                                                  const void *input, void *stream);
__INFINI_C infiniStatus_t
infiniopDestroyGeluMulBackwardDescriptor(infiniopGeluMulBackwardDescriptor_t desc);

#endif /* INFINIOP_OPS_GELU_MUL_BACKWARD_H */
