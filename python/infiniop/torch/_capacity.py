# SPDX-License-Identifier: Apache-2.0
"""infiniop.torch.moe_expert_capacity's gradient and its autograd.Function (used where
torch.ops.infiniop.moe_expert_capacity is not registered with its autograd formula: PyTorch
before 2.4, or a Handle given). MoeExpertCapacity keeps or zeroes each weight, so the gradient
of weights_out in weights is grad where kept_idx != E, else 0: torch.where, exact (no
arithmetic); expert_idx gets none. docs/moe_expert_capacity.md."""

import torch

import infiniop


def kept_grad(grad_weights_out, kept_idx, num_experts):
    """d weights_out / d weights applied to grad_weights_out: the grad where the slot was kept
    (kept_idx != E), +0 where dropped (the same bits as the grad elsewhere)."""
    return torch.where(kept_idx != num_experts, grad_weights_out,
                       torch.zeros((), dtype=grad_weights_out.dtype))


class MoeExpertCapacityFunction(torch.autograd.Function):
    """(kept_idx, weights_out or None) = MoeExpertCapacity(expert_idx, weights); weights'
    gradient by kept_grad. kept_idx is an index tensor (not differentiable)."""

    @staticmethod
    def forward(ctx, expert_idx, num_experts, capacity, weights, drop_policy, device, handle):
        kept_idx, weights_out = infiniop.moe_expert_capacity(
            expert_idx, num_experts, capacity,
            weights=None if weights is None else weights.detach(), drop_policy=drop_policy,
            device=device, handle=handle)
        ctx.save_for_backward(kept_idx)
        ctx.num_experts = num_experts
        ctx.mark_non_differentiable(kept_idx)
        return kept_idx, weights_out

    @staticmethod
    def backward(ctx, _grad_kept, grad_weights_out):
        grad_weights = None
        if ctx.needs_input_grad[3] and grad_weights_out is not None:
            (kept_idx,) = ctx.saved_tensors
            grad_weights = kept_grad(grad_weights_out, kept_idx, ctx.num_experts)
        return None, None, None, grad_weights, None, None, None
