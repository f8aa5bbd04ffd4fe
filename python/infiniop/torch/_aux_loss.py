# SPDX-License-Identifier: Apache-2.0
"""infiniop.torch.moe_aux_loss's autograd.Function: the forward is MoeAuxLoss, the backward
MoeAuxLossGrad (docs/moe_aux_loss.md). Used where torch.ops.infiniop.moe_aux_loss is not
registered with its autograd formula (PyTorch before 2.4, or a Handle given)."""

import torch

import infiniop


def grad_loss_f32(grad):
    """The loss's incoming gradient as the library takes it: a float32 tensor of shape ()."""
    return grad.detach().to(torch.float32).reshape(()).contiguous()


class MoeAuxLossFunction(torch.autograd.Function):
    """loss = MoeAuxLoss(x, tokens_per_expert); d loss / d x by MoeAuxLossGrad (no gradient for
    the counts, as in Megatron-LM, where they come from a non-differentiable top-k)."""

    @staticmethod
    def forward(ctx, x, tokens_per_expert, topk, score_function, total_tokens, coeff, device,
                handle):
        ctx.save_for_backward(x, tokens_per_expert)
        ctx.attributes = {"score_function": score_function, "total_tokens": total_tokens,
                          "coeff": coeff, "device": device, "handle": handle}
        ctx.topk = topk
        return infiniop.moe_aux_loss(x.detach(), tokens_per_expert, topk, **ctx.attributes)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_loss):
        x, counts = ctx.saved_tensors
        grad_x = None
        if ctx.needs_input_grad[0] and grad_loss is not None:
            grad_x = infiniop.moe_aux_loss_grad(grad_loss_f32(grad_loss), x.detach(), counts,
                                                ctx.topk, **ctx.attributes)
        return (grad_x,) + (None,) * 7
