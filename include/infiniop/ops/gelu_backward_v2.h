// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_GELU_BACKWARD_V2_H
#define INFINIOP_OPS_GELU_BACKWARD_V2_H

#include "gelu_mul.h" /* infiniopGeluApproximate_t */

/* grad_input = grad_output * gelu'(input), gelu' of the chosen approximation (erf: Phi(x) +
 * x phi(x); TANH: exactly GeluBackward). All three tensors share shape and dtype (F32, F16 or
 * BF16); grad_input may be exactly the memory of input or of grad_output. */
typedef struct InfiniopGeluBackwardV2Descriptor *infiniopGeluBackwardV2Descriptor_t;

__INFINI_C infiniStatus_t infiniopCreateGeluBackwardV2Descriptor(
    infiniopHandle_t handle, infiniopGeluBackwardV2Descriptor_t *desc_ptr,
    infiniopTensorDescriptor_t grad_input_desc, infiniopTensorDescriptor_t input_desc,
    infiniopTensorDescriptor_t grad_output_desc, infiniopGeluApproximate_t approximate);
__INFINI_C infiniStatus_t
infiniopGetGeluBackwardV2WorkspaceSize(infiniopGeluBackwardV2Descriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopGeluBackwardV2(infiniopGeluBackwardV2Descriptor_t desc,
                                                 void *workspace, size_t workspace_size,
                                                 void *grad_input, const void *input,
                                                 const void *grad_output, void *stream);
__INFINI_C infiniStatus_t
infiniopDestroyGeluBackwardV2Descriptor(infiniopGeluBackwardV2Descriptor_t desc);

#endif /* INFINIOP_OPS_GELU_BACKWARD_V2_H */
