// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_SWIGLU_BACKWARD_H
#define INFINIOP_OPS_SWIGLU_BACKWARD_H

#include "../handle.h"
#include "../tensor_descriptor.h"

/* With x1, x2 the halves of x along `dim` and s = sigmoid(x1):
 *   x_grad1 = y_grad * x2 * (s + x1 s (1 - s)),  x_grad2 = y_grad * x1 * s,
 * x_grad = concat(x_grad1, x_grad2) along dim (x's shape); y_grad has x's shape, dim halved.
 * x_grad may be exactly the memory of x. */
typedef struct InfiniopSwiGluBackwardDescriptor *infiniopSwiGluBackwardDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateSwiGluBackwardDescriptor(
    infiniopHandle_t handle, infiniopSwiGluBackwardDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t x_grad_desc, infiniopTensorDescriptor_t y_grad_desc,
    infiniopTensorDescriptor_t x_desc, int32_t dim);
__INFINI_C infiniStatus_t
infiniopGetSwiGluBackwardWorkspaceSize(infiniopSwiGluBackwardDescriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopSwiGluBackward(infiniopSwiGluBackwardDescriptor_t desc,
                                                 void *workspace, size_t workspace_size,
                                                 void *x_grad, const void *y_grad, const void *x,
                                                 void *stream);
__INFINI_C infiniStatus_t
infiniopDestroySwiGluBackwardDescriptor(infiniopSwiGluBackwardDescriptor_t desc);

#endif /* INFINIOP_OPS_SWIGLU_BACKWARD_H */
