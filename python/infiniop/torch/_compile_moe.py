# SPDX-License-Identifier: Apache-2.0
"""The MoE routing operators and the routers as operators torch.compile can trace (PyTorch 2.4
on), as _compile does for the activations.

moe_init_routing_v2, moe_finalize_routing_v2, moe_gating_top_k_softmax, moe_gating_top_k and
moe_gating_weights get a fake kernel and a registered autograd formula; their library gradients
become operators of their own (torch.ops.infiniop.moe_init_routing_v2_grad,
moe_finalize_routing_v2_grad, moe_gating_top_k_softmax_grad, moe_gating_top_k_grad, which is
moe_gating_weights' too; CPU kernel: the functional API), each with a fake kernel and refusing a
second derivative. moe_expert_capacity's formula is torch.where (_capacity.kept_grad: no grad
operator, and a second derivative is torch's). The formulas are _autograd's
(finalize_grads, gating_softmax_grad_x, gating_grad_x) with the grad operators in place of the
functional calls, so a compiled graph computes eager mode's bits.

Every output size is known from the inputs' shapes and the attributes (none depends on the
routing's values), so the fake kernels allocate by the functional API's own shape rules
(expanded_shape, _forward_out_shape, _grad_shape, _topk_shape), contiguous as it allocates.
"""

import functools

import torch

import infiniop
from infiniop._operator import expanded_shape, index_dtype_of
from infiniop.moe_finalize_routing import _forward_out_shape, _grad_shape
from infiniop.moe_gating import _topk_shape

from . import _autograd, _capacity

GRAD_SCHEMAS = {
    "moe_init_routing_v2_grad": (
        "moe_init_routing_v2_grad(Tensor grad_expanded_x, Tensor expanded_row_idx, *, int top_k, "
        "int drop_pad_mode=0, int active_num=0, str device='cpu') -> Tensor"),
    "moe_finalize_routing_v2_grad": (
        "moe_finalize_routing_v2_grad(Tensor grad_y, Tensor expanded_row_idx, "
        "Tensor? expanded_x=None, Tensor? scales=None, Tensor? expert_idx=None, "
        "Tensor? bias=None, *, int drop_pad_mode=0, int active_num=0, int expert_num=0, "
        "int expert_capacity=0, str device='cpu') -> (Tensor, Tensor?)"),
    "moe_gating_top_k_softmax_grad": (
        "moe_gating_top_k_softmax_grad(Tensor grad_y, Tensor x, Tensor expert_idx, "
        "Tensor? finished=None, int renorm=0, *, str device='cpu') -> Tensor"),
    "moe_gating_top_k_grad": (
        "moe_gating_top_k_grad(Tensor grad_y, Tensor x, Tensor expert_idx, int norm_type=1, "
        "int renorm=0, float routed_scaling_factor=1.0, float eps=1e-20, *, str device='cpu') "
        "-> Tensor"),
    "moe_aux_loss_grad": (
        "moe_aux_loss_grad(Tensor grad_loss, Tensor x, Tensor tokens_per_expert, int topk, *, "
        "int score_function=0, int total_tokens=-1, float coeff=1.0, str device='cpu') "
        "-> Tensor"),
    "moe_z_loss_grad": (
        "moe_z_loss_grad(Tensor grad_loss, Tensor x, float coeff, *, str device='cpu') -> Tensor"),
}


def _finalize_grad_kernel(grad_y, expanded_row_idx, expanded_x=None, scales=None,
                          expert_idx=None, bias=None, *, drop_pad_mode=0, active_num=0,
                          expert_num=0, expert_capacity=0, device="cpu"):
    return infiniop.moe_finalize_routing_v2_grad(
        grad_y, expanded_row_idx, expanded_x, scales, expert_idx, bias,
        drop_pad_mode=drop_pad_mode, active_num=active_num, expert_num=expert_num,
        expert_capacity=expert_capacity, device=device)


def _aux_loss_grad_kernel(grad_loss, x, tokens_per_expert, topk, *, score_function=0,
                          total_tokens=-1, coeff=1.0, device="cpu"):
    return infiniop.moe_aux_loss_grad(
        grad_loss, x, tokens_per_expert, topk, score_function=score_function,
        total_tokens=None if total_tokens == -1 else total_tokens, coeff=coeff, device=device)


# CPU kernels of the grad operators: the functional API (whose keywords the schemas keep).
GRAD_KERNELS = {
    "moe_init_routing_v2_grad": infiniop.moe_init_routing_v2_grad,
    "moe_finalize_routing_v2_grad": _finalize_grad_kernel,
    "moe_gating_top_k_softmax_grad": infiniop.moe_gating_top_k_softmax_grad,
    "moe_gating_top_k_grad": infiniop.moe_gating_top_k_grad,
    "moe_aux_loss_grad": _aux_loss_grad_kernel,
    "moe_z_loss_grad": infiniop.moe_z_loss_grad,
}


# Fake kernels: the outputs as the functional API allocates them (contiguous).

def _dense(like, shape, dtype=None):
    return like.new_empty(shape, dtype=dtype)


def _fake_init(x, expert_idx, *, expert_num, active_num=0, expert_capacity=0, drop_pad_mode=0,
               expert_tokens_count_or_cumsum_flag=0, expert_tokens_before_capacity_flag=False,
               index_dtype=None, device="cpu"):
    total = expert_idx.numel()
    index = index_dtype_of(index_dtype, expert_idx, "torch")
    expanded_x = _dense(x, expanded_shape(drop_pad_mode, expert_num, expert_capacity,
                                           active_num, total, x.shape[-1]))
    counts = before = None
    if drop_pad_mode == 0 and expert_tokens_count_or_cumsum_flag in (1, 2):
        counts = _dense(expert_idx, (expert_num,), index)
    if drop_pad_mode == 1 and expert_tokens_before_capacity_flag:
        before = _dense(expert_idx, (expert_num,), index)
    return expanded_x, _dense(expert_idx, (total,), index), counts, before


def _shape_or_none(t):
    return None if t is None else t.shape


def _fake_finalize(expanded_x, expanded_row_idx, x1=None, x2=None, bias=None, scales=None,
                   expert_idx=None, *, drop_pad_mode=0, device="cpu"):
    return _dense(expanded_x, _forward_out_shape(expanded_x.shape, _shape_or_none(scales),
                                                 _shape_or_none(x1), expanded_row_idx.numel()))


def _router_outputs(x, k, index_dtype, want_last):
    index = index_dtype_of("int32" if index_dtype is None else index_dtype, None, "torch")
    shape = _topk_shape(x, k)
    last = _dense(x, x.shape, torch.float32) if want_last else None
    return _dense(x, shape), _dense(x, shape, index), last


def _fake_gating_softmax(x, k, finished=None, renorm=0, softmax_out=False, *, index_dtype=None,
                         device="cpu"):
    y, expert_idx, soft = _router_outputs(x, k, index_dtype, softmax_out)
    return y, expert_idx, torch.empty_like(expert_idx), soft


def _fake_gating(x, k, bias=None, k_group=1, group_count=1, group_select_mode=0, renorm=0,
                 norm_type=1, out_flag=False, routed_scaling_factor=1.0, eps=1e-20, *,
                 index_dtype=None, device="cpu"):
    return _router_outputs(x, k, index_dtype, out_flag)


def _fake_init_grad(grad_expanded_x, expanded_row_idx, *, top_k, drop_pad_mode=0, active_num=0,
                    device="cpu"):
    rows = expanded_row_idx.numel() // top_k if top_k > 0 else 0
    return _dense(grad_expanded_x, (rows, grad_expanded_x.shape[-1]))


def _fake_finalize_grad(grad_y, expanded_row_idx, expanded_x=None, scales=None, expert_idx=None,
                        bias=None, *, drop_pad_mode=0, active_num=0, expert_num=0,
                        expert_capacity=0, device="cpu"):
    grad_expanded_x = _dense(grad_y, _grad_shape(
        grad_y.shape, expanded_row_idx.numel(), drop_pad_mode=drop_pad_mode,
        active_num=active_num, expert_num=expert_num, expert_capacity=expert_capacity))
    return grad_expanded_x, None if scales is None else _dense(scales, scales.shape)


def _fake_like_x(grad_y, x, *args, **kwargs):
    return _dense(x, x.shape)


def _fake_gating_weights(x, expert_idx, *args, **kwargs):
    return _dense(x, expert_idx.shape)


def _fake_expert_counts(expert_idx, num_experts, *, counts_dtype="int64", device="cpu",
                        sequences=0):
    dtype = index_dtype_of(counts_dtype, None, "torch")
    shape = (max(num_experts, 0),)
    return expert_idx.new_empty((sequences,) + shape if sequences else shape, dtype=dtype)


def _fake_bias_update(bias, counts, update_rate=0.001, *, device="cpu"):
    return None


def _fake_expert_capacity(expert_idx, num_experts, capacity, weights=None, drop_policy=0, *,
                          device="cpu"):
    return (_dense(expert_idx, expert_idx.shape),
            None if weights is None else _dense(weights, weights.shape))


def _fake_aux_loss(x, tokens_per_expert, topk, *, score_function=0, total_tokens=-1,
                   coeff=1.0, device="cpu"):
    return x.new_empty((), dtype=torch.float32)


def _fake_aux_loss_grad(grad_loss, x, *args, **kwargs):
    return _dense(x, x.shape)


def _fake_z_loss(x, coeff, *, device="cpu"):
    return x.new_empty((), dtype=torch.float32)


def _fake_z_loss_grad(grad_loss, x, coeff, *, device="cpu"):
    return _dense(x, x.shape)


FAKE = {
    "moe_aux_loss": _fake_aux_loss,
    "moe_aux_loss_grad": _fake_aux_loss_grad,
    "moe_z_loss": _fake_z_loss,
    "moe_z_loss_grad": _fake_z_loss_grad,
    "moe_expert_counts": _fake_expert_counts,
    "moe_bias_update": _fake_bias_update,
    "moe_expert_capacity": _fake_expert_capacity,
    "moe_init_routing_v2": _fake_init,
    "moe_finalize_routing_v2": _fake_finalize,
    "moe_gating_top_k_softmax": _fake_gating_softmax,
    "moe_gating_top_k": _fake_gating,
    "moe_gating_weights": _fake_gating_weights,
    "moe_init_routing_v2_grad": _fake_init_grad,
    "moe_finalize_routing_v2_grad": _fake_finalize_grad,
    "moe_gating_top_k_softmax_grad": _fake_like_x,
    "moe_gating_top_k_grad": _fake_like_x,
}


# Autograd: setup_context keeps what _autograd's Function keeps; backward runs its formula with
# the grad operators.

def _setup_init(ctx, inputs, keyword_only_inputs, output):
    x, expert_idx = inputs
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(output[1])  # expanded_row_idx
    ctx.top_k = expert_idx.shape[-1] if expert_idx.dim() else 1
    ctx.attributes = {name: keyword_only_inputs[name]
                      for name in ("drop_pad_mode", "active_num", "device")}


def _backward_init(ctx, grad_expanded_x, *unused):
    grad_x = None
    if ctx.needs_input_grad[0] and grad_expanded_x is not None:
        (row_idx,) = ctx.saved_tensors
        grad_x = torch.ops.infiniop.moe_init_routing_v2_grad(grad_expanded_x, row_idx,
                                                             top_k=ctx.top_k, **ctx.attributes)
    return grad_x, None


def _setup_finalize(ctx, inputs, keyword_only_inputs, output):
    expanded_x, row_idx, x1, x2, bias, scales, expert_idx = inputs
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(expanded_x, row_idx, bias, scales, expert_idx)
    ctx.dtypes = tuple(None if t is None else t.dtype for t in (x1, x2, bias))
    ctx.drop_pad_mode = keyword_only_inputs["drop_pad_mode"]
    ctx.device = keyword_only_inputs["device"]


def _backward_finalize(ctx, grad_out):
    if grad_out is None:
        return (None,) * 7
    return _autograd.finalize_grads(
        grad_out, *ctx.saved_tensors, ctx.needs_input_grad, ctx.drop_pad_mode, ctx.dtypes,
        functools.partial(torch.ops.infiniop.moe_finalize_routing_v2_grad, device=ctx.device))


def _setup_gating_softmax(ctx, inputs, keyword_only_inputs, output):
    x, k, finished, renorm, softmax_out = inputs
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(x, output[1], finished, output[3])
    ctx.renorm = renorm
    ctx.device = keyword_only_inputs["device"]


def _backward_gating_softmax(ctx, grad_y, _grad_idx, _grad_row, grad_soft):
    grad_x = None
    if ctx.needs_input_grad[0]:
        grad_x = _autograd.gating_softmax_grad_x(
            grad_y, grad_soft, *ctx.saved_tensors,
            functools.partial(torch.ops.infiniop.moe_gating_top_k_softmax_grad,
                              renorm=ctx.renorm, device=ctx.device))
    return (grad_x,) + (None,) * 4


_GATING_GRAD_ATTRIBUTES = ("norm_type", "renorm", "routed_scaling_factor", "eps")


def _setup_gating(ctx, inputs, keyword_only_inputs, output):
    names = ("x", "k", "bias", "k_group", "group_count", "group_select_mode", "renorm",
             "norm_type", "out_flag", "routed_scaling_factor", "eps")
    values = dict(zip(names, inputs))
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(values["x"], output[1], output[2])
    ctx.attributes = {name: values[name] for name in _GATING_GRAD_ATTRIBUTES}
    ctx.device = keyword_only_inputs["device"]


def _backward_gating(ctx, grad_y, _grad_idx, grad_norm):
    grad_x = None
    if ctx.needs_input_grad[0]:
        grad_x = _autograd.gating_grad_x(
            grad_y, grad_norm, *ctx.saved_tensors, ctx.attributes["norm_type"],
            functools.partial(torch.ops.infiniop.moe_gating_top_k_grad, **ctx.attributes,
                              device=ctx.device))
    return (grad_x,) + (None,) * 10


def _setup_gating_weights(ctx, inputs, keyword_only_inputs, output):
    x, expert_idx = inputs[:2]
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(x, expert_idx)
    ctx.attributes = dict(zip(_GATING_GRAD_ATTRIBUTES, inputs[2:]))
    ctx.device = keyword_only_inputs["device"]


def _backward_gating_weights(ctx, grad_y):
    grad_x = None
    if ctx.needs_input_grad[0] and grad_y is not None:
        x, expert_idx = ctx.saved_tensors
        grad_x = torch.ops.infiniop.moe_gating_top_k_grad(grad_y, x, expert_idx,
                                                          **ctx.attributes, device=ctx.device)
    return (grad_x,) + (None,) * 5


def _setup_aux_loss(ctx, inputs, keyword_only_inputs, output):
    x, tokens_per_expert, topk = inputs
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(x, tokens_per_expert)
    ctx.topk = topk
    ctx.attributes = {name: keyword_only_inputs[name]
                      for name in ("score_function", "total_tokens", "coeff", "device")}


def _backward_aux_loss(ctx, grad_loss):
    grad_x = None
    if ctx.needs_input_grad[0] and grad_loss is not None:
        x, counts = ctx.saved_tensors
        grad_x = torch.ops.infiniop.moe_aux_loss_grad(
            grad_loss.to(torch.float32).reshape(()).contiguous(), x, counts, ctx.topk,
            **ctx.attributes)
    return grad_x, None, None


def _setup_z_loss(ctx, inputs, keyword_only_inputs, output):
    x, coeff = inputs
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(x)
    ctx.coeff = coeff
    ctx.device = keyword_only_inputs["device"]


def _backward_z_loss(ctx, grad_loss):
    grad_x = None
    if ctx.needs_input_grad[0] and grad_loss is not None:
        (x,) = ctx.saved_tensors
        grad_x = _autograd.z_loss_grad_x(grad_loss, x, functools.partial(
            torch.ops.infiniop.moe_z_loss_grad, coeff=ctx.coeff, device=ctx.device))
    return grad_x, None


def _setup_expert_capacity(ctx, inputs, keyword_only_inputs, output):
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(output[0])  # kept_idx
    ctx.num_experts = inputs[1]


def _backward_expert_capacity(ctx, _grad_kept, grad_weights_out):
    grad_weights = None
    if ctx.needs_input_grad[3] and grad_weights_out is not None:
        (kept_idx,) = ctx.saved_tensors
        grad_weights = _capacity.kept_grad(grad_weights_out, kept_idx, ctx.num_experts)
    return None, None, None, grad_weights, None


# forward operator -> (its grad operator, setup_context, backward); None: the formula is torch
# ops (MoeExpertCapacity's torch.where), no grad operator of the library.

AUTOGRAD = {
    "moe_init_routing_v2": ("moe_init_routing_v2_grad", _setup_init, _backward_init),
    "moe_finalize_routing_v2": ("moe_finalize_routing_v2_grad", _setup_finalize,
                                _backward_finalize),
    "moe_gating_top_k_softmax": ("moe_gating_top_k_softmax_grad", _setup_gating_softmax,
                                 _backward_gating_softmax),
    "moe_gating_top_k": ("moe_gating_top_k_grad", _setup_gating, _backward_gating),
    "moe_gating_weights": ("moe_gating_top_k_grad", _setup_gating_weights,
                           _backward_gating_weights),
    "moe_aux_loss": ("moe_aux_loss_grad", _setup_aux_loss, _backward_aux_loss),
    "moe_z_loss": ("moe_z_loss_grad", _setup_z_loss, _backward_z_loss),
    "moe_expert_capacity": (None, _setup_expert_capacity, _backward_expert_capacity),
}
# forward operator -> the grad operators of AUTOGRAD that another forward's entry defines (and
# refuses a second derivative of): MoeGatingWeights' gradient is MoeGatingTopKGrad.
SHARED_BACKWARDS = {"moe_gating_weights": ("moe_gating_top_k_grad",)}
