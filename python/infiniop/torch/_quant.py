# SPDX-License-Identifier: Apache-2.0
"""torch.ops.infiniop.swiglu_quant, gelu_mul_quant, clipped_swiglu_quant, dequant_swiglu_quant
and moe_init_routing_quant_v2 (the functional API's of the same names): their schemas, CPU
kernels and fake kernels, for _ops and _compile to register.

Inference operators: a quantized output has no gradient. The CPU kernel is the functional API;
on PyTorch 2.4 on, the autograd formula registered for them refuses a backward with a message
(the int8 / FP8 y is not differentiable; the float32 scale would otherwise carry a silent zero
or a fallback warning). torch.compile traces a graph's backward when it compiles it, so there
the message comes at compile time, where a returned scale that requires grad is not detached. A static scale is an input, and an operator's output may not alias
its input: the schemas return (y, None) then, and infiniop.torch's functions return the scale
given, as the functional API does.
"""

import torch

import infiniop
from infiniop._operator import expanded_shape, index_dtype_of
from infiniop.gated_quant import gated_quant_shapes, quant_dtype_name

_QUANT_ARGUMENTS = ("Tensor x, Tensor? scale=None, Tensor? smooth_scales=None, "
                    "Tensor? group_index=None, *, str dtype='int8', int group_size=0, "
                    "int scale_format=0")
_ARGUMENTS = f"{_QUANT_ARGUMENTS}, bool activate_left=True"

SCHEMAS = {
    "swiglu_quant": (f"swiglu_quant({_ARGUMENTS}, str device='cpu') -> (Tensor, Tensor?)"),
    "gelu_mul_quant": (f"gelu_mul_quant({_ARGUMENTS}, str approximate='none', "
                       "str device='cpu') -> (Tensor, Tensor?)"),
    "clipped_swiglu_quant": (f"clipped_swiglu_quant({_QUANT_ARGUMENTS}, float alpha=1.702, "
                             "float limit=7.0, float bias=1.0, bool interleaved=True, "
                             "str device='cpu') -> (Tensor, Tensor?)"),
    "dequant_swiglu_quant": ("dequant_swiglu_quant(Tensor x, Tensor? weight_scale=None, "
                             "Tensor? activation_scale=None, Tensor? bias=None, "
                             f"{_ARGUMENTS.replace('Tensor x, ', '')}, str device='cpu') "
                             "-> (Tensor, Tensor?)"),
    # quant_mode 0 static (scale, offset (1)), 1 dynamic (scale (E, H), (1, H) or None).
    "moe_init_routing_quant_v2": (
        "moe_init_routing_quant_v2(Tensor x, Tensor expert_idx, Tensor? scale=None, "
        "Tensor? offset=None, *, int expert_num, int quant_mode=1, str dtype='int8', "
        "int active_num=0, int expert_capacity=0, int drop_pad_mode=0, "
        "int expert_tokens_count_or_cumsum_flag=0, bool expert_tokens_before_capacity_flag=False, "
        "str? index_dtype=None, str device='cpu') -> (Tensor, Tensor, Tensor?, Tensor?, Tensor?)"),
}


def _swiglu_quant_cpu(x, scale=None, smooth_scales=None, group_index=None, *, dtype="int8",
                      group_size=0, scale_format=0, activate_left=True, device="cpu"):
    y, s = infiniop.swiglu_quant(x, dtype=dtype, group_size=group_size, scale=scale,
                                 scale_format=scale_format, smooth_scales=smooth_scales,
                                 group_index=group_index, activate_left=activate_left,
                                 device=device)
    return y, None if scale is not None else s


def _gelu_mul_quant_cpu(x, scale=None, smooth_scales=None, group_index=None, *, dtype="int8",
                        group_size=0, scale_format=0, activate_left=True, approximate="none",
                        device="cpu"):
    y, s = infiniop.gelu_mul_quant(x, approximate=approximate, dtype=dtype,
                                   group_size=group_size, scale=scale,
                                   scale_format=scale_format, smooth_scales=smooth_scales,
                                   group_index=group_index, activate_left=activate_left,
                                   device=device)
    return y, None if scale is not None else s


def _clipped_swiglu_quant_cpu(x, scale=None, smooth_scales=None, group_index=None, *,
                              dtype="int8", group_size=0, scale_format=0, alpha=1.702, limit=7.0,
                              bias=1.0, interleaved=True, device="cpu"):
    y, s = infiniop.clipped_swiglu_quant(x, alpha=alpha, limit=limit, bias=bias,
                                         interleaved=interleaved, dtype=dtype,
                                         group_size=group_size, scale=scale,
                                         scale_format=scale_format, smooth_scales=smooth_scales,
                                         group_index=group_index, device=device)
    return y, None if scale is not None else s


def _dequant_swiglu_quant_cpu(x, weight_scale=None, activation_scale=None, bias=None, scale=None,
                              smooth_scales=None, group_index=None, *, dtype="int8", group_size=0,
                              scale_format=0, activate_left=True, device="cpu"):
    y, s = infiniop.dequant_swiglu_quant(
        x, weight_scale=weight_scale, activation_scale=activation_scale, bias=bias, dtype=dtype,
        group_size=group_size, scale=scale, scale_format=scale_format,
        smooth_scales=smooth_scales, group_index=group_index, activate_left=activate_left,
        device=device)
    return y, None if scale is not None else s


def _moe_init_routing_quant_cpu(x, expert_idx, scale=None, offset=None, *, expert_num,
                                quant_mode=1, dtype="int8", active_num=0, expert_capacity=0,
                                drop_pad_mode=0, expert_tokens_count_or_cumsum_flag=0,
                                expert_tokens_before_capacity_flag=False, index_dtype=None,
                                device="cpu"):
    return infiniop.moe_init_routing_quant_v2(
        x, expert_idx, expert_num=expert_num, quant_mode=quant_mode, dtype=dtype, scale=scale,
        offset=offset, active_num=active_num, expert_capacity=expert_capacity,
        drop_pad_mode=drop_pad_mode,
        expert_tokens_count_or_cumsum_flag=expert_tokens_count_or_cumsum_flag,
        expert_tokens_before_capacity_flag=expert_tokens_before_capacity_flag,
        index_dtype=index_dtype, device=device)


KERNELS = {"swiglu_quant": _swiglu_quant_cpu, "gelu_mul_quant": _gelu_mul_quant_cpu,
           "clipped_swiglu_quant": _clipped_swiglu_quant_cpu,
           "dequant_swiglu_quant": _dequant_swiglu_quant_cpu,
           "moe_init_routing_quant_v2": _moe_init_routing_quant_cpu}


def _fake(x, scale=None, smooth_scales=None, group_index=None, *, dtype="int8", group_size=0,
          **_):
    """y and the dynamic scale as the functional API allocates them (contiguous); y's dtype:
    int8, or torch.float8_e4m3fn (the fake kernels exist from PyTorch 2.4, which has it)."""
    y_shape, scale_shape = gated_quant_shapes(tuple(x.shape), group_size)
    y_dtype = torch.int8 if quant_dtype_name(dtype) == "int8" else torch.float8_e4m3fn
    y = x.new_empty(y_shape, dtype=y_dtype)
    return y, None if scale is not None else x.new_empty(scale_shape, dtype=torch.float32)


def _dequant_fake(x, weight_scale=None, activation_scale=None, bias=None, scale=None,
                  smooth_scales=None, group_index=None, *, dtype="int8", group_size=0, **_):
    return _fake(x, scale, smooth_scales, group_index, dtype=dtype, group_size=group_size)


def _fake_init_quant(x, expert_idx, scale=None, offset=None, *, expert_num, quant_mode=1,
                     dtype="int8", active_num=0, expert_capacity=0, drop_pad_mode=0,
                     expert_tokens_count_or_cumsum_flag=0,
                     expert_tokens_before_capacity_flag=False, index_dtype=None, **_):
    """The outputs as the functional API allocates them (contiguous)."""
    total = expert_idx.numel()
    index = index_dtype_of(index_dtype, expert_idx, "torch")
    shape = expanded_shape(drop_pad_mode, expert_num, expert_capacity, active_num, total,
                           x.shape[-1])
    y_dtype = torch.int8 if quant_dtype_name(dtype) == "int8" else torch.float8_e4m3fn
    counts = before = scales = None
    if drop_pad_mode == 0 and expert_tokens_count_or_cumsum_flag in (1, 2):
        counts = expert_idx.new_empty((expert_num,), dtype=index)
    if drop_pad_mode == 1 and expert_tokens_before_capacity_flag:
        before = expert_idx.new_empty((expert_num,), dtype=index)
    if quant_mode == 1:
        scales = x.new_empty(shape[:-1], dtype=torch.float32)
    return (x.new_empty(shape, dtype=y_dtype), expert_idx.new_empty((total,), dtype=index),
            counts, before, scales)


FAKE = {"swiglu_quant": _fake, "gelu_mul_quant": _fake, "clipped_swiglu_quant": _fake,
        "dequant_swiglu_quant": _dequant_fake, "moe_init_routing_quant_v2": _fake_init_quant}


def no_gradient(name):
    """The autograd formula of a quantizing operator: a backward through it raises."""

    def backward(ctx, *grads):
        raise RuntimeError(
            f"infiniop.torch.{name}: no gradient (a quantizing inference operator: y is int8 or "
            "FP8, and its scale has no derivative the library computes); a backward reached it "
            "through the float32 scale it returned. Detach the scale (scale.detach()) or "
            "quantize outside the differentiated graph.")

    return backward
