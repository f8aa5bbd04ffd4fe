# SPDX-License-Identifier: Apache-2.0
"""torch.ops.infiniop.<name>: the operators registered with torch.library (torch >= 1.13).

A "DEF" library of the namespace `infiniop` defines one schema per function of infiniop.torch,
with two Python kernels each: CPU (the library's forward through the functional API, no
autograd) and Autograd (the autograd.Function of infiniop.torch, whose backward runs the
library's backward operator); on PyTorch 2.4 on every operator takes _compile's (and
_compile_moe's) fake kernels, backward operators and registered autograd instead, for
torch.compile. Schemas cannot carry an infiniop.Handle, so these take device='cpu' |
'cpu_reference' | 'opencl' as a string and use that device's default handle
(infiniop.default_handle); use the Python functions for handle=.

    torch.ops.infiniop.swiglu(Tensor x, int dim=-1, *, str device='cpu') -> Tensor
    torch.ops.infiniop.gelu(Tensor input, *, str approximate='none', str device='cpu') -> Tensor
    torch.ops.infiniop.gelu_mul(Tensor input, *, str approximate='none', str device='cpu')
    torch.ops.infiniop.clipped_swiglu(Tensor x, int dim=-1, Tensor? group_index=None, *,
        float alpha=1.702, float limit=7.0, float bias=1.0, bool interleaved=True,
        str device='cpu', int clamp_mode=0) -> Tensor
    torch.ops.infiniop.moe_init_routing_v2(Tensor x, Tensor expert_idx, *, int expert_num,
        int active_num=0, int expert_capacity=0, int drop_pad_mode=0,
        int expert_tokens_count_or_cumsum_flag=0, bool expert_tokens_before_capacity_flag=False,
        str? index_dtype=None, str device='cpu') -> (Tensor, Tensor, Tensor?, Tensor?)
    torch.ops.infiniop.moe_finalize_routing_v2(Tensor expanded_x, Tensor expanded_row_idx,
        Tensor? x1=None, Tensor? x2=None, Tensor? bias=None, Tensor? scales=None,
        Tensor? expert_idx=None, *, int drop_pad_mode=0, str device='cpu') -> Tensor
    torch.ops.infiniop.moe_gating_weights(Tensor x, Tensor expert_idx, int norm_type=1,
        int renorm=0, float routed_scaling_factor=1.0, float eps=1e-20, *, str device='cpu')
        -> Tensor   (MoeGatingTopK's weights at the given expert_idx; backward MoeGatingTopKGrad)
    torch.ops.infiniop.moe_expert_counts(Tensor expert_idx, int num_experts, *,
        str counts_dtype='int64', str device='cpu', int sequences=0) -> Tensor
        (sequences B > 0: counts (B, E) per sequence)
    torch.ops.infiniop.moe_bias_update(Tensor(a!) bias, Tensor counts,
        float update_rate=0.001, *, str device='cpu') -> ()   (bias updated in place)
    torch.ops.infiniop.moe_expert_capacity(Tensor expert_idx, int num_experts, int capacity,
        Tensor? weights=None, int drop_policy=0, *, str device='cpu') -> (Tensor, Tensor?)
        (kept_idx, weights_out or None; drop_policy 0 position, 1 probability; weights'
        gradient grad * (kept_idx != E), by torch.where)
    torch.ops.infiniop.moe_z_loss(Tensor x, float coeff, *, str device='cpu') -> Tensor

    torch.ops.infiniop.moe_aux_loss(Tensor x, Tensor tokens_per_expert, int topk, *,
        int score_function=0, int total_tokens=-1, float coeff=1.0, str device='cpu') -> Tensor
        (total_tokens -1: x's rows)
    torch.ops.infiniop.swiglu_quant(Tensor x, Tensor? scale=None, Tensor? smooth_scales=None,
        Tensor? group_index=None, *, str dtype='int8', int group_size=0, int scale_format=0,
        bool activate_left=True, str device='cpu') -> (Tensor, Tensor?)
    torch.ops.infiniop.gelu_mul_quant(<swiglu_quant's>, str approximate='none',
        str device='cpu') -> (Tensor, Tensor?)
    torch.ops.infiniop.clipped_swiglu_quant(<swiglu_quant's without activate_left>,
        float alpha=1.702, float limit=7.0, float bias=1.0, bool interleaved=True,
        str device='cpu') -> (Tensor, Tensor?)
        (y, the dynamic scale; None for a static scale, an input; dtype 'int8' or 'fp8';
        scale_format 0 F32, 1 UE8M0; no gradient: _quant)
    torch.ops.infiniop.dequant_swiglu_quant(Tensor x, Tensor? weight_scale=None,
        Tensor? activation_scale=None, Tensor? bias=None, <swiglu_quant's after x>)
        -> (Tensor, Tensor?)  (x int32; as swiglu_quant)

moe_expert_counts and moe_bias_update have no gradient: no Autograd kernel (autograd falls
through to the CPU kernel), and their fake kernels are _compile_moe's. Nor have swiglu_quant,
gelu_mul_quant, clipped_swiglu_quant and dequant_swiglu_quant (fake kernels: _quant's; from
PyTorch 2.4 a backward through them raises).

REGISTERED says whether it worked; REASON why not (an older torch without torch.library, or
the namespace already defined by someone else in this process).
"""

import functools

import torch

import infiniop

from . import _autograd, _aux_loss, _capacity, _compile, _quant

# PyTorch 2.4 on: the activations are operators torch.compile traces (_compile); before, their
# Autograd kernels are the autograd.Functions.
COMPILABLE = hasattr(torch.library, "register_fake") and hasattr(torch.library,
                                                                 "register_autograd")

REGISTERED = False
REASON = None

_SCHEMAS = {
    "swiglu": "swiglu(Tensor x, int dim=-1, *, str device='cpu') -> Tensor",
    "gelu": "gelu(Tensor input, *, str approximate='none', str device='cpu') -> Tensor",
    "gelu_mul": "gelu_mul(Tensor input, *, str approximate='none', str device='cpu') -> Tensor",
    "clipped_swiglu": (
        "clipped_swiglu(Tensor x, int dim=-1, Tensor? group_index=None, *, float alpha=1.702, "
        "float limit=7.0, float bias=1.0, bool interleaved=True, str device='cpu', "
        "int clamp_mode=0) -> Tensor"),
    "moe_init_routing_v2": (
        "moe_init_routing_v2(Tensor x, Tensor expert_idx, *, int expert_num, int active_num=0, "
        "int expert_capacity=0, int drop_pad_mode=0, int expert_tokens_count_or_cumsum_flag=0, "
        "bool expert_tokens_before_capacity_flag=False, str? index_dtype=None, "
        "str device='cpu') -> (Tensor, Tensor, Tensor?, Tensor?)"),
    "moe_finalize_routing_v2": (
        "moe_finalize_routing_v2(Tensor expanded_x, Tensor expanded_row_idx, Tensor? x1=None, "
        "Tensor? x2=None, Tensor? bias=None, Tensor? scales=None, Tensor? expert_idx=None, *, "
        "int drop_pad_mode=0, str device='cpu') -> Tensor"),
    "moe_gating_top_k_softmax": (
        "moe_gating_top_k_softmax(Tensor x, int k, Tensor? finished=None, int renorm=0, "
        "bool softmax_out=False, *, str? index_dtype=None, str device='cpu') "
        "-> (Tensor, Tensor, Tensor, Tensor?)"),
    "moe_gating_top_k": (
        "moe_gating_top_k(Tensor x, int k, Tensor? bias=None, int k_group=1, int group_count=1, "
        "int group_select_mode=0, int renorm=0, int norm_type=1, bool out_flag=False, "
        "float routed_scaling_factor=1.0, float eps=1e-20, *, str? index_dtype=None, "
        "str device='cpu') -> (Tensor, Tensor, Tensor?)"),
    "moe_gating_weights": (
        "moe_gating_weights(Tensor x, Tensor expert_idx, int norm_type=1, int renorm=0, "
        "float routed_scaling_factor=1.0, float eps=1e-20, *, str device='cpu') -> Tensor"),
    "moe_expert_counts": (
        "moe_expert_counts(Tensor expert_idx, int num_experts, *, str counts_dtype='int64', "
        "str device='cpu', int sequences=0) -> Tensor"),
    "moe_bias_update": (
        "moe_bias_update(Tensor(a!) bias, Tensor counts, float update_rate=0.001, *, "
        "str device='cpu') -> ()"),
    "moe_expert_capacity": (
        "moe_expert_capacity(Tensor expert_idx, int num_experts, int capacity, "
        "Tensor? weights=None, int drop_policy=0, *, str device='cpu') -> (Tensor, Tensor?)"),
    "moe_aux_loss": (
        "moe_aux_loss(Tensor x, Tensor tokens_per_expert, int topk, *, int score_function=0, "
        "int total_tokens=-1, float coeff=1.0, str device='cpu') -> Tensor"),
    "moe_z_loss": "moe_z_loss(Tensor x, float coeff, *, str device='cpu') -> Tensor",
    **_quant.SCHEMAS,
}


# CPU kernels: the forward operator only.

def _swiglu_cpu(x, dim=-1, *, device="cpu"):
    return infiniop.swiglu(x, dim=dim, device=device)


def _gelu_cpu(input, *, approximate="none", device="cpu"):
    return infiniop.gelu(input, approximate=approximate, device=device)


def _gelu_mul_cpu(input, *, approximate="none", device="cpu"):
    return infiniop.gelu_mul(input, approximate=approximate, device=device)


def _clipped_swiglu_cpu(x, dim=-1, group_index=None, *, alpha=1.702, limit=7.0, bias=1.0,
                        interleaved=True, device="cpu", clamp_mode=0):
    return infiniop.clipped_swiglu(x, dim=dim, alpha=alpha, limit=limit, bias=bias,
                                   interleaved=interleaved, group_index=group_index,
                                   device=device, clamp_mode=clamp_mode)


def _init_attributes(expert_num, active_num, expert_capacity, drop_pad_mode,
                     expert_tokens_count_or_cumsum_flag, expert_tokens_before_capacity_flag):
    return {"expert_num": expert_num, "active_num": active_num,
            "expert_capacity": expert_capacity, "drop_pad_mode": drop_pad_mode,
            "expert_tokens_count_or_cumsum_flag": expert_tokens_count_or_cumsum_flag,
            "expert_tokens_before_capacity_flag": expert_tokens_before_capacity_flag}


def _moe_init_cpu(x, expert_idx, *, expert_num, active_num=0, expert_capacity=0,
                  drop_pad_mode=0, expert_tokens_count_or_cumsum_flag=0,
                  expert_tokens_before_capacity_flag=False, index_dtype=None, device="cpu"):
    return infiniop.moe_init_routing_v2(
        x, expert_idx, **_init_attributes(expert_num, active_num, expert_capacity,
                                          drop_pad_mode, expert_tokens_count_or_cumsum_flag,
                                          expert_tokens_before_capacity_flag),
        index_dtype=index_dtype, device=device)


def _moe_finalize_cpu(expanded_x, expanded_row_idx, x1=None, x2=None, bias=None, scales=None,
                      expert_idx=None, *, drop_pad_mode=0, device="cpu"):
    return infiniop.moe_finalize_routing_v2(expanded_x, expanded_row_idx, x1, x2, bias, scales,
                                            expert_idx, drop_pad_mode=drop_pad_mode,
                                            device=device)


def _gating_softmax_cpu(x, k, finished=None, renorm=0, softmax_out=False, *, index_dtype=None,
                        device="cpu"):
    outputs = infiniop.moe_gating_top_k_softmax(x, k, finished, renorm, softmax_out,
                                                index_dtype=index_dtype, device=device)
    return tuple(outputs) if softmax_out else tuple(outputs) + (None,)


def _gating_attributes(k_group, group_count, group_select_mode, renorm, norm_type,
                       routed_scaling_factor, eps):
    return {"k_group": k_group, "group_count": group_count,
            "group_select_mode": group_select_mode, "renorm": renorm, "norm_type": norm_type,
            "routed_scaling_factor": routed_scaling_factor, "eps": eps}


def _gating_cpu(x, k, bias=None, k_group=1, group_count=1, group_select_mode=0, renorm=0,
                norm_type=1, out_flag=False, routed_scaling_factor=1.0, eps=1e-20, *,
                index_dtype=None, device="cpu"):
    return infiniop.moe_gating_top_k(x, k, bias, **_gating_attributes(
        k_group, group_count, group_select_mode, renorm, norm_type, routed_scaling_factor, eps),
        out_flag=out_flag, index_dtype=index_dtype, device=device)


# Autograd kernels: the autograd.Functions (their forward calls the library directly).

def _expert_counts_cpu(expert_idx, num_experts, *, counts_dtype="int64", device="cpu",
                       sequences=0):
    return infiniop.moe_expert_counts(expert_idx, num_experts, counts_dtype=counts_dtype,
                                      sequences=sequences or None, device=device)


def _bias_update_cpu(bias, counts, update_rate=0.001, *, device="cpu"):
    infiniop.moe_bias_update(bias, counts, update_rate, device=device)


def _expert_capacity_cpu(expert_idx, num_experts, capacity, weights=None, drop_policy=0, *,
                         device="cpu"):
    return infiniop.moe_expert_capacity(expert_idx, num_experts, capacity, weights=weights,
                                        drop_policy=drop_policy, device=device)


def _expert_capacity_autograd(expert_idx, num_experts, capacity, weights=None, drop_policy=0, *,
                              device="cpu"):
    return _capacity.MoeExpertCapacityFunction.apply(expert_idx, num_experts, capacity, weights,
                                                     drop_policy, device, None)


def _aux_loss_total(total_tokens):
    """The schemas' total_tokens: -1 for the functional API's None (x's rows)."""
    return None if total_tokens == -1 else total_tokens


def _aux_loss_cpu(x, tokens_per_expert, topk, *, score_function=0, total_tokens=-1, coeff=1.0,
                  device="cpu"):
    return infiniop.moe_aux_loss(x, tokens_per_expert, topk, score_function=score_function,
                                 total_tokens=_aux_loss_total(total_tokens), coeff=coeff,
                                 device=device)


def _aux_loss_autograd(x, tokens_per_expert, topk, *, score_function=0, total_tokens=-1,
                       coeff=1.0, device="cpu"):
    return _aux_loss.MoeAuxLossFunction.apply(x, tokens_per_expert, topk, score_function,
                                              _aux_loss_total(total_tokens), coeff, device, None)


def _z_loss_cpu(x, coeff, *, device="cpu"):
    return infiniop.moe_z_loss(x, coeff, device=device)


def _z_loss_autograd(x, coeff, *, device="cpu"):
    return _autograd.MoeZLossFunction.apply(x, coeff, device, None)


def _swiglu_autograd(x, dim=-1, *, device="cpu"):
    return _autograd.SwiGluFunction.apply(x, dim, device, None)


def _gelu_autograd(input, *, approximate="none", device="cpu"):
    return _autograd.GeluFunction.apply(input, approximate, device, None)


def _gelu_mul_autograd(input, *, approximate="none", device="cpu"):
    return _autograd.GeluMulFunction.apply(input, approximate, device, None)


def _clipped_swiglu_autograd(x, dim=-1, group_index=None, *, alpha=1.702, limit=7.0, bias=1.0,
                             interleaved=True, device="cpu", clamp_mode=0):
    return _autograd.ClippedSwigluFunction.apply(x, dim, alpha, limit, bias, interleaved,
                                                 group_index, device, None, clamp_mode)


def _moe_init_autograd(x, expert_idx, *, expert_num, active_num=0, expert_capacity=0,
                       drop_pad_mode=0, expert_tokens_count_or_cumsum_flag=0,
                       expert_tokens_before_capacity_flag=False, index_dtype=None,
                       device="cpu"):
    attributes = _init_attributes(expert_num, active_num, expert_capacity, drop_pad_mode,
                                  expert_tokens_count_or_cumsum_flag,
                                  expert_tokens_before_capacity_flag)
    return _autograd.MoeInitRoutingV2Function.apply(x, expert_idx, attributes, index_dtype,
                                                    device, None)


def _moe_finalize_autograd(expanded_x, expanded_row_idx, x1=None, x2=None, bias=None,
                           scales=None, expert_idx=None, *, drop_pad_mode=0, device="cpu"):
    return _autograd.MoeFinalizeRoutingV2Function.apply(
        expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx, drop_pad_mode, device,
        None)


def _gating_softmax_autograd(x, k, finished=None, renorm=0, softmax_out=False, *,
                             index_dtype=None, device="cpu"):
    return _autograd.MoeGatingTopKSoftmaxFunction.apply(x, k, finished, renorm, softmax_out,
                                                        index_dtype, device, None)


def _gating_autograd(x, k, bias=None, k_group=1, group_count=1, group_select_mode=0, renorm=0,
                     norm_type=1, out_flag=False, routed_scaling_factor=1.0, eps=1e-20, *,
                     index_dtype=None, device="cpu"):
    return _autograd.MoeGatingTopKFunction.apply(x, k, bias, _gating_attributes(
        k_group, group_count, group_select_mode, renorm, norm_type, routed_scaling_factor, eps),
        out_flag, index_dtype, device, None)


def _gating_weights_cpu(x, expert_idx, norm_type=1, renorm=0, routed_scaling_factor=1.0,
                        eps=1e-20, *, device="cpu"):
    return infiniop.moe_gating_weights(x, expert_idx, norm_type, renorm, routed_scaling_factor,
                                       eps, device=device)


def _gating_weights_autograd(x, expert_idx, norm_type=1, renorm=0, routed_scaling_factor=1.0,
                             eps=1e-20, *, device="cpu"):
    return _autograd.MoeGatingWeightsFunction.apply(
        x, expert_idx, {"norm_type": norm_type, "renorm": renorm,
                        "routed_scaling_factor": routed_scaling_factor, "eps": eps},
        device, None)


_KERNELS = {
    "swiglu": (_swiglu_cpu, _swiglu_autograd),
    "gelu": (_gelu_cpu, _gelu_autograd),
    "gelu_mul": (_gelu_mul_cpu, _gelu_mul_autograd),
    "clipped_swiglu": (_clipped_swiglu_cpu, _clipped_swiglu_autograd),
    "moe_init_routing_v2": (_moe_init_cpu, _moe_init_autograd),
    "moe_finalize_routing_v2": (_moe_finalize_cpu, _moe_finalize_autograd),
    "moe_gating_top_k_softmax": (_gating_softmax_cpu, _gating_softmax_autograd),
    "moe_gating_top_k": (_gating_cpu, _gating_autograd),
    "moe_gating_weights": (_gating_weights_cpu, _gating_weights_autograd),
    "moe_expert_counts": (_expert_counts_cpu, None),
    "moe_bias_update": (_bias_update_cpu, None),
    "moe_expert_capacity": (_expert_capacity_cpu, _expert_capacity_autograd),
    "moe_aux_loss": (_aux_loss_cpu, _aux_loss_autograd),
    "moe_z_loss": (_z_loss_cpu, _z_loss_autograd),
    # inference operators: no Autograd kernel (from PyTorch 2.4 a formula that refuses, _compile)
    **{name: (kernel, None) for name, kernel in _quant.KERNELS.items()},
}

def _traced(kernel):
    """A CPU kernel whose library calls may read a traced tensor's sizes: torch.jit.trace
    records the operator itself (infiniop::<name>), replayed as a whole."""
    return functools.wraps(kernel)(lambda *args, **kwargs: _autograd.traced_calls(
        kernel, *args, **kwargs))


def _autocast(name):
    """The AutocastCPU kernel of operator `name`, as PyTorch's own activations behave under
    torch.autocast("cpu"): the operator runs in its inputs' dtype (it is not one autocast
    lowers), with autocast off below it. Where an operator takes several floating tensors of
    dtypes autocast made differ (MoeFinalizeRoutingV2: expanded_x from a lowered matmul, x1 a
    float32 residual), they are made acceptable first (_PROMOTED)."""
    operator = getattr(torch.ops.infiniop, name)
    promoted = _PROMOTED.get(name)

    def kernel(*args, **kwargs):
        if promoted:
            args, kwargs = _promote(args, kwargs, *promoted)
        with torch.autocast("cpu", enabled=False):
            return operator(*args, **kwargs)

    return kernel


def autocast_cpu_enabled():
    """Whether torch.autocast("cpu") is on (PyTorch 2 asks by device; 1.x has its own call)."""
    try:
        return torch.is_autocast_enabled("cpu")
    except TypeError:
        return torch.is_autocast_cpu_enabled()


def _floating(t):
    return isinstance(t, torch.Tensor) and t.is_floating_point()


def promoted_finalize(expanded_x, x1, x2, bias, scales):
    """MoeFinalizeRoutingV2's floating inputs as autocast may leave them (expanded_x from a
    lowered matmul, x1 a float32 residual, scales from a lowered softmax), made acceptable to the
    library as autocast's "promote" ops (cat, stack, index_put) would: expanded_x, x1, x2 and
    bias cast to their widest dtype where they differ, and scales to it where scales is neither
    that nor float32 (float32 scales are the library's with 16-bit activations: they stay)."""
    values = (expanded_x, x1, x2, bias)
    dtypes = {t.dtype for t in values if _floating(t)}
    if not dtypes:
        return values + (scales,)
    dtype = functools.reduce(torch.promote_types, dtypes)
    values = tuple(t.to(dtype) if _floating(t) and t.dtype != dtype else t for t in values)
    if _floating(scales) and scales.dtype not in (dtype, torch.float32):
        scales = scales.to(dtype)
    return values + (scales,)


# Per operator whose floating inputs autocast may leave in dtypes the library does not take
# together: those arguments (position, name) and the function that makes them acceptable.
_PROMOTED = {"moe_finalize_routing_v2": (((0, "expanded_x"), (2, "x1"), (3, "x2"), (4, "bias"),
                                          (5, "scales")), promoted_finalize)}


def _promote(args, kwargs, arguments, promote):
    """args, kwargs with `arguments` replaced by promote(*their values) (None where absent)."""
    args = list(args)
    values = [args[position] if position < len(args) else kwargs.get(name)
              for position, name in arguments]
    for (position, name), value, new in zip(arguments, values, promote(*values)):
        if new is not value:
            if position < len(args):
                args[position] = new
            else:
                kwargs[name] = new
    return tuple(args), kwargs


_LIBRARY = None  # kept alive: the registrations last as long as the Library object


def _register():
    global _LIBRARY, REGISTERED, REASON
    library_class = getattr(getattr(torch, "library", None), "Library", None)
    if library_class is None:
        REASON = f"torch {torch.__version__} has no torch.library.Library"
        return
    try:
        library = library_class("infiniop", "DEF")
        for name, schema in _SCHEMAS.items():
            library.define(schema)
            cpu, autograd = _KERNELS[name]
            library.impl(name, _traced(cpu), "CPU")
            if autograd is not None and not (COMPILABLE and name in _compile.REGISTERED_AUTOGRAD):
                library.impl(name, autograd, "Autograd")
            library.impl(name, _autocast(name), "AutocastCPU")
        if COMPILABLE:
            _compile.register(library)
    except (RuntimeError, ValueError, TypeError) as error:  # e.g. the namespace is taken
        REASON = f"torch.library registration failed: {error}"
        return
    _LIBRARY = library
    REGISTERED = True


_register()
