// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_MOE_AUX_LOSS_H
#define INFINIOP_OPS_MOE_AUX_LOSS_H

#include "../handle.h"
#include "../tensor_descriptor.h"

/* The load-balancing auxiliary loss of a MoE router, fused from its logits, as Megatron-LM
 * defines it (docs/moe_aux_loss.md):
 *   loss = K * sum_t sum_e p_te * n_{b(t),e},   K = coeff * E / (topk * B * L^2),
 * p = the aux-loss scores of the logits x (T rows of E; score_function 0: softmax(x); 1:
 * sigmoid(x) / (sum_e sigmoid(x) + 1e-20); 2: sqrtsoftplus(x) normalized the same way),
 * n = tokens_per_expert.
 * - tokens_per_expert (E): the Switch / GShard loss (switch_load_balancing_loss_func): B = 1,
 *   L = total_tokens >= 1 (N, the tokens counted in n: T, or a global count across ranks).
 * - tokens_per_expert (B, E): the sequence-level loss of DeepSeek-V2/V3
 *   (sequence_load_balancing_loss_func): x's rows are (L, B) in Megatron's (seq, batch) order,
 *   row t belongs to sequence b(t) = t % B; B divides T, L = T / B, total_tokens must equal T.
 * x (..., E) F32/F16/BF16, any strides; tokens_per_expert I32 or I64, every value in
 * [0, 2^24] (checked at the call: BAD_PARAM, nothing written); loss () F32. topk >= 1, coeff
 * finite; K is computed in double at creation and rounded once to F32 (finite there).
 * Deterministic: fixed-order sums, the same bits at every target, thread count and device.
 *
 * The gradient: grad_x (x's shape and dtype) = d loss / d x * grad_loss (() F32), through the
 * score function's Jacobian; the caller adds it to the router's own gradient of the logits. */
typedef struct InfiniopMoeAuxLossDescriptor *infiniopMoeAuxLossDescriptor_t;
typedef struct InfiniopMoeAuxLossGradDescriptor *infiniopMoeAuxLossGradDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateMoeAuxLossDescriptor(
    infiniopHandle_t handle, infiniopMoeAuxLossDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t loss_desc, infiniopTensorDescriptor_t x_desc,
    infiniopTensorDescriptor_t tokens_per_expert_desc, int64_t score_function, int64_t topk,
    int64_t total_tokens, double coeff);
__INFINI_C infiniStatus_t infiniopGetMoeAuxLossWorkspaceSize(infiniopMoeAuxLossDescriptor_t desc,
                                                             size_t *size);
__INFINI_C infiniStatus_t infiniopMoeAuxLoss(infiniopMoeAuxLossDescriptor_t desc, void *workspace,
                                             size_t workspace_size, void *loss, const void *x,
                                             const void *tokens_per_expert, void *stream);
__INFINI_C infiniStatus_t infiniopDestroyMoeAuxLossDescriptor(infiniopMoeAuxLossDescriptor_t desc);

__INFINI_C infiniStatus_t infiniopCreateMoeAuxLossGradDescriptor(
    infiniopHandle_t handle, infiniopMoeAuxLossGradDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t grad_x_desc, infiniopTensorDescriptor_t grad_loss_desc,
    infiniopTensorDescriptor_t x_desc, infiniopTensorDescriptor_t tokens_per_expert_desc,
    int64_t score_function, int64_t topk, int64_t total_tokens, double coeff);
__INFINI_C infiniStatus_t
infiniopGetMoeAuxLossGradWorkspaceSize(infiniopMoeAuxLossGradDescriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopMoeAuxLossGrad(infiniopMoeAuxLossGradDescriptor_t desc,
                                                 void *workspace, size_t workspace_size,
                                                 void *grad_x, const void *grad_loss, const void *x,
                                                 const void *tokens_per_expert, void *stream);
__INFINI_C infiniStatus_t
infiniopDestroyMoeAuxLossGradDescriptor(infiniopMoeAuxLossGradDescriptor_t desc);

#endif /* INFINIOP_OPS_MOE_AUX_LOSS_H */
