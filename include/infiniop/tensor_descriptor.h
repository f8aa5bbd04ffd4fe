// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_TENSOR_DESCRIPTOR_H
#define INFINIOP_TENSOR_DESCRIPTOR_H

#include "../infinicore.h"

typedef struct InfiniopTensorDescriptor *infiniopTensorDescriptor_t;

/* Largest rank a tensor descriptor accepts. */
#define INFINIOP_MAX_NDIM 16

/* strides are in elements; NULL means contiguous row-major. Strides may be zero (broadcast,
 * inputs only) or negative (the data pointer then points at element [0, ..., 0], as in NumPy). */
__INFINI_C infiniStatus_t infiniopCreateTensorDescriptor(infiniopTensorDescriptor_t *desc,
                                                         size_t ndim, const size_t *shape,
                                                         const ptrdiff_t *strides,
                                                         infiniDtype_t dtype);
__INFINI_C infiniStatus_t infiniopDestroyTensorDescriptor(infiniopTensorDescriptor_t desc);

#endif /* INFINIOP_TENSOR_DESCRIPTOR_H */
