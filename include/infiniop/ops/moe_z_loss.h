// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_MOE_Z_LOSS_H
#define INFINIOP_OPS_MOE_Z_LOSS_H

#include "../handle.h"
#include "../tensor_descriptor.h"

/* The router z-loss of ST-MoE as Megatron-LM's z_loss_func defines it:
 * loss = coeff * mean_t (logsumexp_e x_te)^2 over the T rows of the router logits x (..., E)
 * (rank >= 2, E >= 1, T = the product of the leading dims, any strides), F32, F16 or BF16.
 * loss is a 0-D F32 tensor. T = 0 gives loss +0. Exact F32 arithmetic, the same bits on every
 * device, target and thread count; docs/moe_z_loss.md has the order of operations and the bound.
 * coeff must be finite in F32 and coeff / T finite and, unless 0, normal in F32. No padding mask:
 * pass the valid rows only. */
typedef struct InfiniopMoeZLossDescriptor *infiniopMoeZLossDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateMoeZLossDescriptor(infiniopHandle_t handle,
                                                           infiniopMoeZLossDescriptor_t *desc_ptr,
                                                           infiniopTensorDescriptor_t loss_desc,
                                                           infiniopTensorDescriptor_t x_desc,
                                                           double coeff);
__INFINI_C infiniStatus_t infiniopGetMoeZLossWorkspaceSize(infiniopMoeZLossDescriptor_t desc,
                                                           size_t *size);
__INFINI_C infiniStatus_t infiniopMoeZLoss(infiniopMoeZLossDescriptor_t desc, void *workspace,
                                           size_t workspace_size, void *loss, const void *x,
                                           void *stream);
__INFINI_C infiniStatus_t infiniopDestroyMoeZLossDescriptor(infiniopMoeZLossDescriptor_t desc);

/* The gradient of MoeZLoss: grad_x_te = g * (2 coeff / T) * lse_t * softmax(x_t)_e, g = grad_loss
 * (a 0-D F32 tensor), grad_x of x's shape and dtype (any strides, written whole). */
typedef struct InfiniopMoeZLossGradDescriptor *infiniopMoeZLossGradDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateMoeZLossGradDescriptor(
    infiniopHandle_t handle, infiniopMoeZLossGradDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t grad_x_desc, infiniopTensorDescriptor_t grad_loss_desc,
    infiniopTensorDescriptor_t x_desc, double coeff);
__INFINI_C infiniStatus_t
infiniopGetMoeZLossGradWorkspaceSize(infiniopMoeZLossGradDescriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopMoeZLossGrad(infiniopMoeZLossGradDescriptor_t desc,
                                               void *workspace, size_t workspace_size, void *grad_x,
                                               const void *grad_loss, const void *x, void *stream);
__INFINI_C infiniStatus_t
infiniopDestroyMoeZLossGradDescriptor(infiniopMoeZLossGradDescriptor_t desc);

#endif /* INFINIOP_OPS_MOE_Z_LOSS_H */
