// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_SWIGLU_H
#define INFINIOP_OPS_SWIGLU_H

#include "../handle.h"
#include "../tensor_descriptor.h"

/* y = silu(x1) * x2, where x1 and x2 are the first and second halves of x along `dim`
 * (dim in [-ndim, ndim-1], x.shape[dim] even); y has x's shape with `dim` halved. */
typedef struct InfiniopSwiGluDescriptor *infiniopSwiGluDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateSwiGluDescriptor(infiniopHandle_t handle,
                                                         infiniopSwiGluDescriptor_t *desc_ptr,
                                                         infiniopTensorDescriptor_t y_desc,
                                                         infiniopTensorDescriptor_t x_desc,
                                                         int32_t dim);
__INFINI_C infiniStatus_t infiniopGetSwiGluWorkspaceSize(infiniopSwiGluDescriptor_t desc,
                                                         size_t *size);
__INFINI_C infiniStatus_t infiniopSwiGlu(infiniopSwiGluDescriptor_t desc, void *workspace,
                                         size_t workspace_size, void *y, const void *x,
                                         void *stream);
__INFINI_C infiniStatus_t infiniopDestroySwiGluDescriptor(infiniopSwiGluDescriptor_t desc);

#endif /* INFINIOP_OPS_SWIGLU_H */
