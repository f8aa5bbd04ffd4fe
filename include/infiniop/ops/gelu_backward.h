// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_GELU_BACKWARD_H
#define INFINIOP_OPS_GELU_BACKWARD_H

#include "../handle.h"
#include "../tensor_descriptor.h"

/* grad_input = grad_output * d/dx gelu_tanh(input). All three tensors share shape and dtype
 * (F32, F16 or BF16); grad_input may be exactly the memory of input or of grad_output. */
typedef struct InfiniopGeluBackwardDescriptor *infiniopGeluBackwardDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateGeluBackwardDescriptor(
    infiniopHandle_t handle, infiniopGeluBackwardDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t grad_input_desc, infiniopTensorDescriptor_t input_desc,
    infiniopTensorDescriptor_t grad_output_desc);

__INFINI_C infiniStatus_t
infiniopGetGeluBackwardWorkspaceSize(infiniopGeluBackwardDescriptor_t desc, size_t *size);

__INFINI_C infiniStatus_t infiniopGeluBackward(infiniopGeluBackwardDescriptor_t desc,
                                               void *workspace, size_t workspace_size,
                                               void *grad_input, const void *input,
                                               const void *grad_output, void *stream);

__INFINI_C infiniStatus_t
infiniopDestroyGeluBackwardDescriptor(infiniopGeluBackwardDescriptor_t desc);

#endif /* INFINIOP_OPS_GELU_BACKWARD_H */
