// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_GELU_H
#define INFINIOP_OPS_GELU_H

#include "gelu_mul.h" /* infiniopGeluApproximate_t */

/* output = gelu(input), of the chosen approximation (= torch.nn.functional.gelu). Both tensors
 * share shape and dtype (F32, F16 or BF16); output may be exactly the memory of input. */
typedef struct InfiniopGeluDescriptor *infiniopGeluDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateGeluDescriptor(infiniopHandle_t handle,
                                                       infiniopGeluDescriptor_t *desc_ptr,
                                                       infiniopTensorDescriptor_t output_desc,
                                                       infiniopTensorDescriptor_t input_desc,
                                                       infiniopGeluApproximate_t approximate);
__INFINI_C infiniStatus_t infiniopGetGeluWorkspaceSize(infiniopGeluDescriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopGelu(infiniopGeluDescriptor_t desc, void *workspace,
                                       size_t workspace_size, void *output, const void *input,
                                       void *stream);
__INFINI_C infiniStatus_t infiniopDestroyGeluDescriptor(infiniopGeluDescriptor_t desc);

#endif /* INFINIOP_OPS_GELU_H */
