# SPDX-License-Identifier: Apache-2.0
"""torch.autograd.Function for each forward/backward operator pair of the library.

Each Function's forward runs the library's forward operator through the functional API
(infiniop.swiglu, ...) and its backward runs the library's backward operator
(infiniop.swiglu_backward, ...). The library has no second derivatives: a backward run with
create_graph=True gives results whose own backward raises (first_order_only), whenever anything
it read requires grad, the incoming gradient or a saved input (the gradient-penalty pattern:
grad of a weight with create_graph=True, then a backward through it). torch's
once_differentiable checks the incoming gradient only, and let that pattern return a wrong
gradient silently.

Tensors: torch CPU tensors (the library stages them to other devices itself), any strides;
dtypes as the library's (float32, float16, bfloat16). Non-tensor arguments get None gradients.
"""

import functools
import math

import torch
from torch._C import _functions
from torch._C import _get_tracing_state as _tracing_state

import infiniop
from infiniop import core

__all__ = [
    "ClippedSwigluFunction",
    "GeluFunction",
    "GeluMulFunction",
    "MoeFinalizeRoutingV2Function",
    "MoeGatingTopKFunction",
    "MoeGatingTopKSoftmaxFunction",
    "MoeInitRoutingV2Function",
    "SwiGluFunction",
]


def _check_tensor(value, name, optional=False):
    """A torch.Tensor argument (messages name the user's argument)."""
    if value is None and optional:
        return None
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, not {type(value).__name__}")
    return value


def first_order_only(function):
    """A backward decorator (in place of torch's once_differentiable): the backward runs without
    autograd, and where the caller asked for a graph (create_graph=True) and anything it read
    requires grad (an incoming gradient or a saved tensor), its results carry a node whose
    backward raises a message naming `function`: a second derivative is refused, never wrong."""

    def decorate(backward):
        @functools.wraps(backward)
        def wrapper(ctx, *grads):
            with torch.no_grad():
                results = traced_calls(backward, ctx, *grads)
            if not torch.is_grad_enabled():
                return results
            read = grads + tuple(ctx.saved_tensors)
            if not any(isinstance(t, torch.Tensor) and t.requires_grad for t in read):
                return results
            error = _functions.DelayedError(
                f"infiniop.torch.{function}: no second derivative (the library has no double "
                "backward); this backward was run with create_graph=True and what it read "
                "requires grad, e.g. a gradient penalty through it. Use torch's own ops for "
                "that part of the model.".encode(), len(results))

            def detached(value):  # each result a leaf that requires grad, for DelayedError
                if value is None:
                    return None
                value = value.detach()
                value.requires_grad = True
                return value

            return error(*[detached(v) for v in results])

        return wrapper

    return decorate


def traced_calls(call, *args, **kwargs):
    """call(*args, **kwargs), the library calls inside it allowed to read a traced tensor's
    sizes: torch.jit.trace records an autograd Function (and a torch.ops.infiniop operator) as
    one call, replayed as a whole (core._traced_sizes)."""
    state = core._TRACE_RECORDED
    if state.active or _tracing_state() is None:  # not tracing: nothing to allow (cheap)
        return call(*args, **kwargs)
    state.active = True
    try:
        return call(*args, **kwargs)
    finally:
        state.active = False


def _lib(device, handle):
    return {"device": device, "handle": handle}


# --------------------------------------------------------------------------------------------
# Replays: every Function's forward (the activations', the MoE operators', the routers')

# What a forward ran with, per call signature: (forward, its inputs' (shape, strides, dtype),
# value's type, value, device) -> (the descriptor's cache key, each output's layout
# (shape, strides, dtype) or None, how many forward returned, whether as a tuple).
_REPLAYS = {}
_REPLAYS_MAX = 256


def _replayed(forward, inputs, value, device, handle):
    """forward(inputs, value, device, handle, record), a functional API call that allocates
    its outputs and runs one descriptor whose arguments are those outputs then `inputs` (None:
    absent), replayed where a call of the same signature ran before on the device's default
    handle: its descriptor, still in that handle's cache, launched on new outputs of the same
    layouts. The functional call's checks, names and allocations cost as much as the autograd
    Function around it (at 1x128 F32 about 4 of its 8 us): the replay skips what a signature
    that passed them once cannot fail. Anything else (a handle given, a staging device, a
    descriptor the cache dropped, torch.jit.trace) takes the functional call."""
    if handle is not None or _tracing_state() is not None:
        return traced_calls(forward, inputs, value, device, handle, None)
    described, pointers = [], []
    for t in inputs:
        view = None if t is None else core.array_view(t, "input")
        described.append(None if view is None else view[3:6])  # shape, strides, dtype
        pointers.append(None if view is None else view[2])
    signature = (forward, tuple(described), type(value), value, device)
    try:
        key, layouts, returned, as_tuple = _REPLAYS[signature]
    except (KeyError, TypeError):  # TypeError: an unhashable value or device, never replayed
        pass
    else:
        op = core.default_handle(device).cached_descriptor(key)
        if op is not None:
            outputs, launched = [], []
            for layout in layouts:
                t = None if layout is None else torch.empty_strided(layout[0], layout[1],
                                                                    dtype=layout[2])
                outputs.append(t)
                launched.append(None if t is None else t.data_ptr())
            op.launch(launched + pointers)
            return tuple(outputs[:returned]) if as_tuple else outputs[0]
    record = []
    result = forward(inputs, value, device, handle, record)
    if len(record) == 1:  # one descriptor, run on host pointers
        _remember(signature, record[0], result, len(inputs))
    return result


def _remember(signature, key, result, inputs):
    """Keep a replay of `signature` where the descriptor's arguments are the returned outputs
    (then absent ones) and the inputs."""
    as_tuple = isinstance(result, tuple)
    outputs = list(result) if as_tuple else [result]
    count = len(key[1]) - inputs  # the descriptor's outputs
    if count < len(outputs) or any(key[1][i] is not None for i in range(len(outputs), count)):
        return
    layouts = [None if t is None else (tuple(t.shape), t.stride(), t.dtype) for t in outputs]
    if len(_REPLAYS) >= _REPLAYS_MAX:
        _REPLAYS.clear()
    try:
        _REPLAYS[signature] = (key, layouts + [None] * (count - len(outputs)), len(outputs),
                               as_tuple)
    except TypeError:
        pass


# --------------------------------------------------------------------------------------------
# Elementwise / split activations

def _one_attribute_pair(name, function, forward, backward, doc):
    """A Function over one input tensor and one attribute `value`: forward(input, value, device,
    handle, record) and backward(grad, input, value, device, handle) call the functional API
    (infiniop.<function> and its backward); apply(input, value, device, handle). The forward is
    kept lean (_replayed): at 1x128 the Function's own cost is a third of the library call's."""

    def forward_(ctx, input, value, device, handle):
        ctx.options = value, device, handle
        ctx.save_for_backward(input)
        return _replayed(forward, (input,), value, device, handle)

    def backward_(ctx, grad):
        (input,) = ctx.saved_tensors
        grad_input = None
        if ctx.needs_input_grad[0]:
            grad_input = backward(grad, input, *ctx.options)
        return grad_input, None, None, None

    return type(name, (torch.autograd.Function,),
                {"__doc__": doc, "__module__": __name__, "forward": staticmethod(forward_),
                 "backward": staticmethod(first_order_only(function)(backward_))})


# The functional calls, looked up at each call (so that a patched infiniop.<name> is used).
SwiGluFunction = _one_attribute_pair(
    "SwiGluFunction", "swiglu",
    lambda inputs, dim, device, handle, record: infiniop.swiglu(
        *inputs, dim, device=device, handle=handle, _record=record),
    lambda g, x, dim, device, handle: infiniop.swiglu_backward(g, x, dim, device=device,
                                                               handle=handle),
    "y = silu(x1) * x2 (SwiGlu); backward: SwiGluBackward. apply(x, dim, device, handle).")
GeluMulFunction = _one_attribute_pair(
    "GeluMulFunction", "gelu_mul",
    lambda inputs, approximate, device, handle, record: infiniop.gelu_mul(
        *inputs, approximate=approximate, device=device, handle=handle, _record=record),
    lambda g, x, approximate, device, handle: infiniop.gelu_mul_backward(
        g, x, approximate=approximate, device=device, handle=handle),
    "out = gelu(x1) * x2 on the last dimension (GeluMul); backward: GeluMulBackward. "
    "apply(input, approximate, device, handle).")
GeluFunction = _one_attribute_pair(
    "GeluFunction", "gelu",
    lambda inputs, approximate, device, handle, record: infiniop.gelu(
        *inputs, approximate=approximate, device=device, handle=handle, _record=record),
    lambda g, x, approximate, device, handle: infiniop.gelu_backward_v2(
        g, x, approximate=approximate, device=device, handle=handle),
    "output = gelu(input) (Gelu); backward: GeluBackwardV2 (erf or tanh, as the forward). "
    "apply(input, approximate, device, handle).")


class ClippedSwigluFunction(torch.autograd.Function):
    """The clipped SwiGLU (ClippedSwiglu); backward: ClippedSwigluBackward.
    apply(x, dim, alpha, limit, bias, interleaved, group_index, device, handle[, clamp_mode]);
    group_index (row counts) is not differentiable; clamp_mode 0 when left out."""

    @staticmethod
    def forward(ctx, x, dim, alpha, limit, bias, interleaved, group_index, device, handle,
                clamp_mode=0):
        ctx.attributes = {"dim": dim, "alpha": alpha, "limit": limit, "bias": bias,
                          "interleaved": interleaved, "clamp_mode": clamp_mode}
        ctx.lib = _lib(device, handle)
        if isinstance(group_index, torch.Tensor):  # saved: an in-place change is detected
            ctx.save_for_backward(x, group_index)
        else:  # None or a list of counts
            ctx.group_index = group_index
            ctx.save_for_backward(x)
        if group_index is None:
            return _replayed(_clipped_swiglu, (x, None), _typed(ctx.attributes), device, handle)
        return traced_calls(infiniop.clipped_swiglu, x, group_index=group_index,
                           **ctx.attributes, **ctx.lib)

    @staticmethod
    @first_order_only("clipped_swiglu")
    def backward(ctx, grad_y):
        x, *group_index = ctx.saved_tensors
        group_index = group_index[0] if group_index else ctx.group_index
        grad_x = None
        if ctx.needs_input_grad[0]:
            grad_x = infiniop.clipped_swiglu_backward(grad_y, x, group_index=group_index,
                                                      **ctx.attributes, **ctx.lib)
        return (grad_x,) + (None,) * 9  # a trailing None past apply's arguments is dropped


def _typed(attributes):
    """attributes as a replay signature's value: their names, and each value typed (True is
    not 1) and each float with its sign (-0.0 is not 0.0: descriptors tell them apart)."""
    return tuple(attributes), tuple([(v, type(v), math.copysign(1.0, v) if type(v) is float
                                      else None) for v in attributes.values()])


def _untyped(typed):
    names, values = typed
    return {name: value[0] for name, value in zip(names, values)}


def _clipped_swiglu(inputs, typed, device, handle, record):
    return infiniop.clipped_swiglu(inputs[0], **_untyped(typed), device=device, handle=handle,
                                   _record=record)


# --------------------------------------------------------------------------------------------
# MoE routing

def _moe_init(inputs, value, device, handle, record):
    typed, index_dtype = value
    return infiniop.moe_init_routing_v2(*inputs, **_untyped(typed), index_dtype=index_dtype,
                                        device=device, handle=handle, _record=record)


def _moe_finalize(inputs, drop_pad_mode, device, handle, record):
    return infiniop.moe_finalize_routing_v2(*inputs, drop_pad_mode=drop_pad_mode, device=device,
                                            handle=handle, _record=record)


def _gating_softmax(inputs, typed, device, handle, record):
    a = _untyped(typed)
    return infiniop.moe_gating_top_k_softmax(
        inputs[0], a["k"], inputs[1], a["renorm"], a["softmax_out"],
        index_dtype=a["index_dtype"], device=device, handle=handle, _record=record)


def _gating(inputs, typed, device, handle, record):
    a = _untyped(typed)
    k, out_flag, index_dtype = a.pop("k"), a.pop("out_flag"), a.pop("index_dtype")
    return infiniop.moe_gating_top_k(inputs[0], k, inputs[1], **a, out_flag=out_flag,
                                     index_dtype=index_dtype, device=device, handle=handle,
                                     _record=record)


def _gating_weights(inputs, attributes, device, handle, record):
    return infiniop.moe_gating_weights(*inputs, **attributes, device=device, handle=handle)


class MoeInitRoutingV2Function(torch.autograd.Function):
    """(expanded_x, expanded_row_idx, expert_tokens_count_or_cumsum, expert_tokens_before_capacity)
    of MoeInitRoutingV2, differentiable with respect to x through expanded_x (backward:
    MoeInitRoutingV2Grad); the index and count outputs are not differentiable.
    apply(x, expert_idx, attributes (dict), index_dtype, device, handle)."""

    @staticmethod
    def forward(ctx, x, expert_idx, attributes, index_dtype, device, handle):
        ctx.lib = _lib(device, handle)
        ctx.set_materialize_grads(False)
        outputs = _replayed(_moe_init, (x, expert_idx), (_typed(attributes), index_dtype),
                            device, handle)
        expanded_x, row_idx, counts, before = outputs
        ctx.top_k = expert_idx.shape[-1] if expert_idx.dim() else 1
        ctx.drop_pad_mode = attributes["drop_pad_mode"]
        ctx.active_num = attributes["active_num"]
        ctx.mark_non_differentiable(*(t for t in (row_idx, counts, before) if t is not None))
        ctx.save_for_backward(row_idx)
        return expanded_x, row_idx, counts, before

    @staticmethod
    @first_order_only("moe_init_routing_v2")
    def backward(ctx, grad_expanded_x, *unused):
        grad_x = None
        if ctx.needs_input_grad[0] and grad_expanded_x is not None:
            (row_idx,) = ctx.saved_tensors
            grad_x = infiniop.moe_init_routing_v2_grad(
                grad_expanded_x, row_idx, top_k=ctx.top_k, drop_pad_mode=ctx.drop_pad_mode,
                active_num=ctx.active_num, **ctx.lib)
        return grad_x, None, None, None, None, None


class MoeFinalizeRoutingV2Function(torch.autograd.Function):
    """out of MoeFinalizeRoutingV2, differentiable with respect to expanded_x and scales
    (backward: MoeFinalizeRoutingV2Grad, in its row layout: the column layout of modes 0 and 1
    is transposed for it), x1 and x2 (their gradient is grad_out itself) and bias (its gradient,
    which the library has no operator for, is summed with torch: grad_bias[e] = sum over the
    (r, k) with expert_idx[r, k] = e of scales[r, k] * grad_out[r], in float32).
    apply(expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx, drop_pad_mode,
    device, handle)."""

    @staticmethod
    def forward(ctx, expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx,
                drop_pad_mode, device, handle):
        ctx.lib = _lib(device, handle)
        ctx.set_materialize_grads(False)
        ctx.drop_pad_mode = drop_pad_mode
        ctx.dtypes = tuple(None if t is None else t.dtype for t in (x1, x2, bias))
        ctx.save_for_backward(expanded_x, expanded_row_idx, bias, scales, expert_idx)
        return _replayed(_moe_finalize, (expanded_x, expanded_row_idx, x1, x2, bias, scales,
                                         expert_idx), drop_pad_mode, device, handle)

    @staticmethod
    @first_order_only("moe_finalize_routing_v2")
    def backward(ctx, grad_out):
        if grad_out is None:
            return (None,) * 10
        grads = finalize_grads(grad_out, *ctx.saved_tensors, ctx.needs_input_grad[:7],
                               ctx.drop_pad_mode, ctx.dtypes,
                               functools.partial(infiniop.moe_finalize_routing_v2_grad,
                                                 **ctx.lib))
        return grads + (None,) * 3


def finalize_grads(grad_out, expanded_x, row_idx, bias, scales, expert_idx, need, mode, dtypes,
                   finalize_grad):
    """The gradients of MoeFinalizeRoutingV2's inputs (expanded_x, expanded_row_idx, x1, x2,
    bias, scales, expert_idx) for grad_out, None where `need` (their needs_input_grad) is false:
    expanded_x and scales by `finalize_grad` (MoeFinalizeRoutingV2Grad: the functional API in
    eager mode, its torch.ops operator under torch.compile), x1 and x2 grad_out in their
    `dtypes`, bias by _bias_grad."""
    grads = [None] * 7
    if need[0] or need[5]:  # expanded_x, scales: MoeFinalizeRoutingV2Grad
        rows = grad_out.shape[0]
        k = scales.shape[1] if scales is not None else 1
        if mode in (0, 1):  # column layout -> the grad's row layout
            row_idx = row_idx.reshape(k, rows).t().reshape(-1)
        grad_mode = 1 if mode in (1, 3) else 0
        shape = {}
        if grad_mode == 1:
            shape = {"expert_num": expanded_x.shape[0], "expert_capacity": expanded_x.shape[1]}
        grad_expanded_x, grad_scales = finalize_grad(
            grad_out, row_idx, expanded_x if scales is not None else None, scales,
            expert_idx if bias is not None else None, bias, drop_pad_mode=grad_mode, **shape)
        grads[0] = grad_expanded_x if need[0] else None
        grads[5] = grad_scales if need[5] else None
    for i, dtype in ((2, dtypes[0]), (3, dtypes[1])):  # x1, x2
        if need[i]:
            grads[i] = grad_out.to(dtype)
    if need[4]:  # bias
        grads[4] = _bias_grad(grad_out, scales, expert_idx, bias)
    return tuple(grads)


def _bias_grad(grad_out, scales, expert_idx, bias):
    """grad_bias[e] = sum over (r, k) with expert_idx[r, k] = e of scales[r, k] * grad_out[r]
    (every pair counts, dropped tokens too: the forward adds their bias), summed in float32."""
    rows, hidden = grad_out.shape
    g = grad_out.float()
    if scales is None:
        contributions = g.unsqueeze(1)  # K = 1
    else:
        contributions = scales.float().unsqueeze(-1) * g.unsqueeze(1)  # (R, K, H)
    grad = torch.zeros(bias.shape, dtype=torch.float32)
    grad.index_add_(0, expert_idx.reshape(-1).long(), contributions.reshape(-1, hidden))
    return grad.to(bias.dtype)


# --------------------------------------------------------------------------------------------
# MoE routers (gating top-k)

def _softmax_grad(grad_p, p):
    """The gradient through p = softmax(x) on the last dim, in float32 (torch ops: the softmax
    output's own gradient, which the library has no operator for)."""
    g, p = grad_p.float(), p.float()
    return p * (g - (g * p).sum(-1, keepdim=True))


def _add_grad(total, extra, like):
    """total + extra (either may be None), in like's dtype."""
    if extra is None:
        return total
    extra = extra.to(like.dtype)
    return extra if total is None else total + extra


class MoeGatingTopKSoftmaxFunction(torch.autograd.Function):
    """(y, expert_idx, row_idx, softmax_out or None) of MoeGatingTopKSoftmax, y differentiable
    with respect to x (backward: MoeGatingTopKSoftmaxGrad for the selected expert_idx; finished
    rows get 0), softmax_out (p) too (its gradient p (g - sum g p) in torch, float32); the
    index outputs are not differentiable, finished gets no gradient.
    apply(x, k, finished, renorm, softmax_out (bool), index_dtype, device, handle)."""

    @staticmethod
    def forward(ctx, x, k, finished, renorm, softmax_out, index_dtype, device, handle):
        ctx.lib = _lib(device, handle)
        ctx.renorm = renorm
        ctx.set_materialize_grads(False)
        outputs = _replayed(_gating_softmax, (x, finished),
                            _typed({"k": k, "renorm": renorm, "softmax_out": softmax_out,
                                    "index_dtype": index_dtype}), device, handle)
        y, expert_idx, row_idx = outputs[:3]
        soft = outputs[3] if softmax_out else None
        ctx.mark_non_differentiable(expert_idx, row_idx)
        ctx.save_for_backward(x, expert_idx, finished, soft)
        return y, expert_idx, row_idx, soft

    @staticmethod
    @first_order_only("moe_gating_top_k_softmax")
    def backward(ctx, grad_y, _grad_idx, _grad_row, grad_soft):
        grad_x = None
        if ctx.needs_input_grad[0]:
            grad_x = gating_softmax_grad_x(
                grad_y, grad_soft, *ctx.saved_tensors,
                functools.partial(infiniop.moe_gating_top_k_softmax_grad, renorm=ctx.renorm,
                                  **ctx.lib))
        return (grad_x,) + (None,) * 7


def gating_softmax_grad_x(grad_y, grad_soft, x, expert_idx, finished, soft, softmax_grad):
    """x's gradient from y's (by `softmax_grad`: MoeGatingTopKSoftmaxGrad, the functional API
    or its operator) and softmax_out's (torch), either None; zeros when both are."""
    grad_x = None
    if grad_y is not None:
        grad_x = softmax_grad(grad_y, x, expert_idx, finished)
    if grad_soft is not None:
        grad_x = _add_grad(grad_x, _softmax_grad(grad_soft, soft), x)
    return torch.zeros_like(x) if grad_x is None else grad_x


class MoeGatingTopKFunction(torch.autograd.Function):
    """(y, expert_idx, norm_out or None) of MoeGatingTopK, y differentiable with respect to x
    through the selected weights (backward: MoeGatingTopKGrad; the bias and the selection are
    not differentiated, as DeepSeek-V3 trains its bias outside autograd), norm_out (p) too (its
    gradient in torch, float32: softmax's, or g p (1 - p) for sigmoid); expert_idx is not
    differentiable, bias gets no gradient.
    apply(x, k, bias, attributes (dict: k_group, group_count, group_select_mode, renorm,
    norm_type, routed_scaling_factor, eps), out_flag, index_dtype, device, handle)."""

    @staticmethod
    def forward(ctx, x, k, bias, attributes, out_flag, index_dtype, device, handle):
        ctx.lib = _lib(device, handle)
        ctx.attributes = attributes
        ctx.set_materialize_grads(False)
        y, expert_idx, norm = _replayed(
            _gating, (x, bias), _typed({**attributes, "k": k, "out_flag": out_flag,
                                        "index_dtype": index_dtype}), device, handle)
        ctx.mark_non_differentiable(expert_idx)
        ctx.save_for_backward(x, expert_idx, norm)
        return y, expert_idx, norm

    @staticmethod
    @first_order_only("moe_gating_top_k")
    def backward(ctx, grad_y, _grad_idx, grad_norm):
        grad_x = None
        if ctx.needs_input_grad[0]:
            a = ctx.attributes
            grad_x = gating_grad_x(
                grad_y, grad_norm, *ctx.saved_tensors, a["norm_type"],
                functools.partial(infiniop.moe_gating_top_k_grad, norm_type=a["norm_type"],
                                  renorm=a["renorm"],
                                  routed_scaling_factor=a["routed_scaling_factor"], eps=a["eps"],
                                  **ctx.lib))
        return (grad_x,) + (None,) * 7


class MoeGatingWeightsFunction(torch.autograd.Function):
    """y of MoeGatingWeights (MoeGatingTopK's weights for the given expert_idx: a replayed or
    hash routing), differentiable with respect to x (backward: MoeGatingTopKGrad at the same
    expert_idx); expert_idx gets no gradient.
    apply(x, expert_idx, attributes (dict: norm_type, renorm, routed_scaling_factor, eps),
    device, handle)."""

    @staticmethod
    def forward(ctx, x, expert_idx, attributes, device, handle):
        ctx.lib = _lib(device, handle)
        ctx.attributes = attributes
        ctx.set_materialize_grads(False)
        y = traced_calls(_gating_weights, (x, expert_idx), attributes, device, handle, None)
        ctx.save_for_backward(x, expert_idx)
        return y

    @staticmethod
    @first_order_only("moe_gating_weights")
    def backward(ctx, grad_y):
        grad_x = None
        if ctx.needs_input_grad[0] and grad_y is not None:
            x, expert_idx = ctx.saved_tensors
            grad_x = infiniop.moe_gating_top_k_grad(grad_y, x, expert_idx, **ctx.attributes,
                                                    **ctx.lib)
        return grad_x, None, None, None, None


def gating_grad_x(grad_y, grad_norm, x, expert_idx, norm, norm_type, gating_grad):
    """x's gradient from y's (by `gating_grad`: MoeGatingTopKGrad, the functional API or its
    operator) and norm_out's (torch: softmax's for norm_type 0, g p (1 - p) for sigmoid,
    g sigmoid(x) / (2 p) for sqrtsoftplus, g p / 2 below x = -87 as the library's slope), either
    None; zeros when both are."""
    grad_x = None
    if grad_y is not None:
        grad_x = gating_grad(grad_y, x, expert_idx)
    if grad_norm is not None:
        if norm_type == 0:
            extra = _softmax_grad(grad_norm, norm)
        elif norm_type == 1:
            extra = grad_norm.float() * norm * (1 - norm)
        else:
            xf = x.float()
            slope = torch.where(xf < -87, torch.where(xf < -172, 0.0, norm * 0.5),
                                torch.sigmoid(xf) / (norm + norm))
            extra = grad_norm.float() * slope
        grad_x = _add_grad(grad_x, extra, x)
    return torch.zeros_like(x) if grad_x is None else grad_x


class MoeZLossFunction(torch.autograd.Function):
    """The router z-loss of MoeZLoss (a 0-D float32 tensor), differentiable with respect to x
    (backward: MoeZLossGrad with the loss's gradient). apply(x, coeff, device, handle)."""

    @staticmethod
    def forward(ctx, x, coeff, device, handle):
        ctx.lib = _lib(device, handle)
        ctx.coeff = coeff
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x)
        return infiniop.moe_z_loss(x, coeff, **ctx.lib)

    @staticmethod
    @first_order_only("moe_z_loss")
    def backward(ctx, grad_loss):
        grad_x = None
        if ctx.needs_input_grad[0] and grad_loss is not None:
            (x,) = ctx.saved_tensors
            grad_x = z_loss_grad_x(grad_loss, x, functools.partial(
                infiniop.moe_z_loss_grad, coeff=ctx.coeff, **ctx.lib))
        return grad_x, None, None, None


def z_loss_grad_x(grad_loss, x, z_loss_grad):
    """x's gradient from the loss's (by `z_loss_grad`: MoeZLossGrad, the functional API or its
    operator), grad_loss made the 0-D float32 tensor the operator takes."""
    return z_loss_grad(grad_loss.reshape(()).to(torch.float32), x)

