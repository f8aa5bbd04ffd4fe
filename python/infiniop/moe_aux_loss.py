# SPDX-License-Identifier: Apache-2.0
"""MoeAuxLoss and MoeAuxLossGrad: the load-balancing auxiliary loss of a MoE router, fused from
its logits, as Megatron-LM defines it (docs/moe_aux_loss.md).

loss = K * sum_t sum_e p[t, e] * n[b(t), e],  K = coeff * E / (topk * B * L**2), where p are the
aux-loss scores of the logits x (T rows of E): score_function "softmax" (0): softmax(x);
"sigmoid" (1): sigmoid(x) / (sum_e sigmoid(x) + 1e-20), Megatron's
compute_routing_scores_for_aux_loss; "sqrtsoftplus" (2, DeepSeek-V4): sqrt(softplus(x))
normalized the same way (a library extension); n = tokens_per_expert.
  - tokens_per_expert (E,): the Switch / GShard loss (switch_load_balancing_loss_func): B = 1,
    L = total_tokens (default T; a global count across ranks may be given).
  - tokens_per_expert (B, E): the sequence-level loss of DeepSeek-V2/V3
    (sequence_load_balancing_loss_func): x's rows in Megatron's (seq, batch) order, row t in
    sequence t % B; B divides T, L = T / B, total_tokens must be T.
Counts int32 or int64 in [0, 2^24] (BAD_PARAM at the call, nothing written); x float32, float16
or bfloat16; the loss float32 with shape (). Fixed-order sums: the same bits on every device,
Highway target and thread count.

MoeAuxLossGrad: grad_x (x's shape and dtype) = grad_loss * d loss / d x, to be added to the
router's own gradient of the logits.

Errors raise InfiniopError with the library's status and reason.
"""

import numbers

from ._dispatch import output_names, run
from ._operator import AttributeOperator, array_views, check_int64
from .core import array_view, output

__all__ = ["MoeAuxLoss", "MoeAuxLossGrad", "moe_aux_loss", "moe_aux_loss_grad"]

SCORE_FUNCTIONS = {"softmax": 0, "sigmoid": 1, "sqrtsoftplus": 2}


def score_function_code(score_function):
    """score_function as the C API's int64: a name (softmax, sigmoid, sqrtsoftplus) or its
    number."""
    if isinstance(score_function, str):
        key = score_function.strip().lower()
        if key not in SCORE_FUNCTIONS:
            raise ValueError(f"score_function {score_function!r} is not one of "
                             f"{', '.join(SCORE_FUNCTIONS)}")
        return SCORE_FUNCTIONS[key]
    return check_int64("score_function", score_function)


def _check_double(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, not {type(value).__name__}")
    return float(value)


class _AuxLossOperator(AttributeOperator):
    @classmethod
    def _attributes(cls, *, score_function, topk, total_tokens, coeff):
        score = score_function_code(score_function)
        topk = check_int64("topk", topk)
        total_tokens = check_int64("total_tokens", total_tokens)
        coeff = _check_double("coeff", coeff)
        return ({"score_function": score, "topk": topk, "total_tokens": total_tokens,
                 "coeff": coeff}, [score, topk, total_tokens, coeff])


class MoeAuxLoss(_AuxLossOperator):
    """An infiniopMoeAuxLossDescriptor_t: MoeAuxLoss(handle, loss_desc, x_desc,
    tokens_per_expert_desc, score_function=..., topk=..., total_tokens=..., coeff=...), or
    MoeAuxLoss.for_arrays(handle, loss, x, tokens_per_expert, ...). Call it as
    op(loss, x, tokens_per_expert)."""

    _NAME = "MoeAuxLoss"
    _ARGUMENTS = ("loss", "x", "tokens_per_expert")
    _OUTPUTS = ("loss",)


class MoeAuxLossGrad(_AuxLossOperator):
    """An infiniopMoeAuxLossGradDescriptor_t: MoeAuxLossGrad(handle, grad_x_desc,
    grad_loss_desc, x_desc, tokens_per_expert_desc, ...). Call it as
    op(grad_x, grad_loss, x, tokens_per_expert)."""

    _NAME = "MoeAuxLossGrad"
    _ARGUMENTS = ("grad_x", "grad_loss", "x", "tokens_per_expert")
    _OUTPUTS = ("grad_x",)


def _rows(view):
    rows = 1
    for d in view.shape[:-1]:
        rows *= d
    return rows


def _attributes(x_view, score_function, topk, total_tokens, coeff):
    if total_tokens is None:
        total_tokens = _rows(x_view)
    return MoeAuxLoss._attributes(score_function=score_function, topk=topk,
                                  total_tokens=total_tokens, coeff=coeff)[0]


def moe_aux_loss(x, tokens_per_expert, topk, *, score_function="softmax", total_tokens=None,
                 coeff=1.0, device="cpu", out=None, handle=None, _stage=None):
    """The aux loss (a float32 scalar of shape ()) of router logits x (..., E) and
    tokens_per_expert (E,) or (B, E) (see the module docstring). total_tokens: N of the Switch
    loss (default: x's rows); with (B, E) counts it must be x's rows. NumPy arrays or torch CPU
    tensors of one kind. out: a float32 array of shape () to write, allocated when None.
    device: 'cpu', 'cpu_reference', 'opencl' or a Device; ignored when a Handle is given."""
    view = array_view(x, "x")
    c_view = array_views(view.kind, tokens_per_expert=tokens_per_expert)["tokens_per_expert"]
    attributes = _attributes(view, score_function, topk, total_tokens, coeff)
    f32 = _float32(view.kind)
    names = output_names(out, "x", "loss")
    out, out_view = output(out, x, view, (), f32, "out")
    run(MoeAuxLoss, [out_view, view, c_view], attributes, device, handle, _stage, names=names)
    return out


def moe_aux_loss_grad(grad_loss, x, tokens_per_expert, topk, *, score_function="softmax",
                      total_tokens=None, coeff=1.0, device="cpu", out=None, handle=None,
                      _stage=None):
    """grad_x (x's shape and dtype) = grad_loss * d moe_aux_loss / d x. grad_loss: a float32
    array of shape (). The other arguments as moe_aux_loss()."""
    view = array_view(x, "x")
    views = array_views(view.kind, grad_loss=grad_loss, tokens_per_expert=tokens_per_expert)
    attributes = _attributes(view, score_function, topk, total_tokens, coeff)
    names = output_names(out, "x", "grad_x")
    out, out_view = output(out, x, view, None, None, "out")
    run(MoeAuxLossGrad, [out_view, views["grad_loss"], view, views["tokens_per_expert"]],
        attributes, device, handle, _stage, names=names)
    return out


def _float32(kind):
    if kind == "torch":
        import torch

        return torch.float32
    import numpy as np

    return np.float32
