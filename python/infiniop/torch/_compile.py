# SPDX-License-Identifier: Apache-2.0
"""The activations as operators torch.compile can trace (PyTorch 2.4 on: torch.library's
register_fake and register_autograd).

For swiglu, gelu, gelu_mul and clipped_swiglu, _ops registers these in place of the Python
Autograd kernel of PyTorch 1.x: each backward is an operator of its own
(torch.ops.infiniop.swiglu_backward, gelu_backward_v2, gelu_mul_backward,
clipped_swiglu_backward; CPU kernel: the functional API), every operator has a fake kernel (its
output's shape, dtype and strides, as the functional API allocates it: a split operator's output
contiguous, a same-shape one torch.empty_like of the input), and the forward's autograd formula
calls the backward operator. Dynamo then records each call as one node, AOTAutograd traces the
backward through the backward operator, and the compiled graph calls the same library functions
as eager mode: the same bits. The backward operators refuse a second derivative, as
_autograd.first_order_only does in eager mode.

infiniop.torch's functions call these operators while torch.compile traces them
(compiling()); in eager mode they keep their autograd.Function (no dispatcher in the way).
"""

import torch

import infiniop
from infiniop._operator import halved_shape

from . import _compile_moe, _quant

BACKWARD_SCHEMAS = {
    "swiglu_backward": (
        "swiglu_backward(Tensor y_grad, Tensor x, int dim=-1, *, str device='cpu') -> Tensor"),
    "gelu_backward_v2": (
        "gelu_backward_v2(Tensor grad_output, Tensor input, *, str approximate='none', "
        "str device='cpu') -> Tensor"),
    "gelu_mul_backward": (
        "gelu_mul_backward(Tensor out_grad, Tensor input, *, str approximate='none', "
        "str device='cpu') -> Tensor"),
    "clipped_swiglu_backward": (
        "clipped_swiglu_backward(Tensor y_grad, Tensor x, int dim=-1, Tensor? group_index=None, "
        "*, float alpha=1.702, float limit=7.0, float bias=1.0, bool interleaved=True, "
        "str device='cpu', int clamp_mode=0) -> Tensor"),
}


def compiling():
    """Whether torch.compile (Dynamo) is tracing the caller (never, on a torch without it)."""
    compiler = getattr(torch, "compiler", None)
    return compiler is not None and hasattr(compiler, "is_compiling") and compiler.is_compiling()


# CPU kernels of the backward operators: the functional API.

def _swiglu_backward(y_grad, x, dim=-1, *, device="cpu"):
    return infiniop.swiglu_backward(y_grad, x, dim, device=device)


def _gelu_backward_v2(grad_output, input, *, approximate="none", device="cpu"):
    return infiniop.gelu_backward_v2(grad_output, input, approximate=approximate, device=device)


def _gelu_mul_backward(out_grad, input, *, approximate="none", device="cpu"):
    return infiniop.gelu_mul_backward(out_grad, input, approximate=approximate, device=device)


def _clipped_swiglu_backward(y_grad, x, dim=-1, group_index=None, *, alpha=1.702, limit=7.0,
                             bias=1.0, interleaved=True, device="cpu", clamp_mode=0):
    return infiniop.clipped_swiglu_backward(y_grad, x, dim, alpha=alpha, limit=limit, bias=bias,
                                            interleaved=interleaved, group_index=group_index,
                                            device=device, clamp_mode=clamp_mode)


BACKWARD_KERNELS = {
    "swiglu_backward": _swiglu_backward,
    "gelu_backward_v2": _gelu_backward_v2,
    "gelu_mul_backward": _gelu_mul_backward,
    "clipped_swiglu_backward": _clipped_swiglu_backward,
}


# Fake kernels: the output as the functional API allocates it.

def _halved(x, dim):  # the split operators' output, as infiniop.swiglu allocates it
    return x.new_empty(halved_shape(tuple(x.shape), dim))


FAKE = {
    "swiglu": lambda x, dim=-1, **_: _halved(x, dim),
    "gelu": lambda input, **_: torch.empty_like(input),
    "gelu_mul": lambda input, **_: _halved(input, -1),
    "clipped_swiglu": lambda x, dim=-1, group_index=None, **_: _halved(x, dim),
    "swiglu_backward": lambda y_grad, x, dim=-1, **_: torch.empty_like(x),
    "gelu_backward_v2": lambda grad_output, input, **_: torch.empty_like(input),
    "gelu_mul_backward": lambda out_grad, input, **_: torch.empty_like(input),
    "clipped_swiglu_backward": lambda y_grad, x, dim=-1, group_index=None, **_: (
        torch.empty_like(x)),
}


# Autograd: the forward saves its input and its arguments; the backward calls the backward
# operator with them.

def _setup(ctx, inputs, keyword_only_inputs, output):
    ctx.is_tensor = [isinstance(v, torch.Tensor) for v in inputs]  # x, group_index
    ctx.save_for_backward(*[v for v, tensor in zip(inputs, ctx.is_tensor) if tensor])
    ctx.others = [None if tensor else v for v, tensor in zip(inputs, ctx.is_tensor)]  # dim
    ctx.keywords = dict(keyword_only_inputs)


def _backward_of(operator):
    def backward(ctx, grad):
        saved = iter(ctx.saved_tensors)
        inputs = [next(saved) if tensor else v for tensor, v in zip(ctx.is_tensor, ctx.others)]
        grad_x = None
        if ctx.needs_input_grad[0]:
            grad_x = getattr(torch.ops.infiniop, operator)(grad, *inputs, **ctx.keywords)
        return (grad_x,) + (None,) * (len(inputs) - 1)

    return backward


def _refused(function):
    """The autograd formula of a backward operator: a second derivative is refused, naming the
    function (as _autograd.first_order_only does in eager mode)."""

    def backward(ctx, *grads):
        raise RuntimeError(
            f"infiniop.torch.{function}: no second derivative (the library has no double "
            "backward); this backward was run with create_graph=True and what it read requires "
            "grad, e.g. a gradient penalty through it. Use torch's own ops for that part of the "
            "model.")

    return backward


def _nothing_saved(ctx, inputs, keyword_only_inputs, output):
    pass


FORWARD_BACKWARD = {
    "swiglu": "swiglu_backward",
    "gelu": "gelu_backward_v2",
    "gelu_mul": "gelu_mul_backward",
    "clipped_swiglu": "clipped_swiglu_backward",
}


# The forward operators whose autograd formula register() registers (_ops gives the others,
# and these before PyTorch 2.4, the autograd.Functions as Autograd kernels).
REGISTERED_AUTOGRAD = (*FORWARD_BACKWARD, *_compile_moe.AUTOGRAD)


def register(library):
    """Define the backward operators on `library` (the "infiniop" DEF library of _ops) with
    their CPU kernels, then every operator's fake kernel and autograd formula (the MoE ones:
    _compile_moe)."""
    for schemas, kernels in ((BACKWARD_SCHEMAS, BACKWARD_KERNELS),
                             (_compile_moe.GRAD_SCHEMAS, _compile_moe.GRAD_KERNELS)):
        for name, schema in schemas.items():
            library.define(schema)
            library.impl(name, kernels[name], "CPU")
    for name, fake in {**FAKE, **_compile_moe.FAKE, **_quant.FAKE}.items():
        torch.library.register_fake(f"infiniop::{name}", fake, lib=library)
    for name in _quant.FAKE:  # inference operators: a backward through them is refused
        torch.library.register_autograd(f"infiniop::{name}", _quant.no_gradient(name),
                                        setup_context=_nothing_saved, lib=library)
    autograd = {forward: (backward, _setup, _backward_of(backward))
                for forward, backward in FORWARD_BACKWARD.items()}
    for forward, (backward, setup, formula) in {**autograd, **_compile_moe.AUTOGRAD}.items():
        torch.library.register_autograd(f"infiniop::{forward}", formula, setup_context=setup,
                                        lib=library)
        if backward is None or backward in _compile_moe.SHARED_BACKWARDS.get(forward, ()):
            continue  # none (torch ops), or another forward's, whose refusal is registered there
        torch.library.register_autograd(f"infiniop::{backward}", _refused(forward),
                                        setup_context=_nothing_saved, lib=library)
