# SPDX-License-Identifier: Apache-2.0
"""infiniop.torch: differentiable torch functions over the library's operator pairs.

    import infiniop.torch as iop
    y = iop.swiglu(x, -1)                 # backward: SwiGluBackward
    y.sum().backward()

Each function takes the arguments of the functional one of the same name in `infiniop`
(infiniop.swiglu, ...), without out=, and with `dim` allowed positionally; its forward runs the
library's forward operator and, under autograd, its backward runs the library's backward
operator (the torch.autograd.Function classes are in infiniop.torch._autograd, exported here).
There are no second derivatives: a double backward through these functions (create_graph=True,
then a backward through the gradients, as a gradient penalty does) raises a message naming the
function, never returns a wrong gradient. Under torch.jit.trace each call is recorded as one
node (prim::PythonOp), under torch.fx.symbolic_trace as one call_function node.

    swiglu(x, dim=-1)                     SwiGlu / SwiGluBackward
    gelu_mul(input, approximate='none')   GeluMul / GeluMulBackward
    gelu(input, approximate='none')       Gelu / GeluBackwardV2
    clipped_swiglu(x, dim=-1, alpha=1.702, limit=7.0, bias=1.0, interleaved=True, clamp_mode=0,
                   group_index=None)      ClippedSwiglu / ClippedSwigluBackward
    moe_init_routing_v2(x, expert_idx, expert_num=..., ...)
                                          MoeInitRoutingV2 / MoeInitRoutingV2Grad (w.r.t. x)
    moe_finalize_routing_v2(expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx,
                            drop_pad_mode=0)
                                          MoeFinalizeRoutingV2 / MoeFinalizeRoutingV2Grad
                                          (w.r.t. expanded_x, scales; x1, x2, bias in torch)
    moe_gating_top_k_softmax(x, k, finished=None, renorm=0, softmax_out=False)
                                          MoeGatingTopKSoftmax / MoeGatingTopKSoftmaxGrad
                                          (y w.r.t. x; softmax_out's gradient in torch)
    moe_gating_top_k(x, k, bias=None, k_group=1, group_count=1, group_select_mode=0,
                     renorm=0, norm_type=1, out_flag=False, routed_scaling_factor=1.0,
                     eps=1e-20)           MoeGatingTopK / MoeGatingTopKGrad (y w.r.t. x;
                                          norm_out's gradient in torch; bias none)
    moe_gating_weights(x, expert_idx, norm_type=1, renorm=0, routed_scaling_factor=1.0,
                       eps=1e-20)         MoeGatingWeights / MoeGatingTopKGrad (y w.r.t. x at
                                          a given expert_idx: replayed or hash routing)
    moe_expert_counts(expert_idx, num_experts, counts_dtype='int64', sequences=None)
                                          MoeExpertCounts (no gradient)
    moe_bias_update(bias, counts, update_rate=0.001)
                                          MoeBiasUpdate, bias in place (no gradient)
    moe_expert_capacity(expert_idx, num_experts, capacity, weights=None,
                        drop_policy='position')
                                          MoeExpertCapacity: (kept_idx, weights_out or None);
                                          weights' gradient grad * (kept_idx != E)
    moe_aux_loss(x, tokens_per_expert, topk, score_function='softmax', total_tokens=None,
                 coeff=1.0)              MoeAuxLoss / MoeAuxLossGrad (the loss, a () tensor,
                                          w.r.t. x: loss = task_loss + aux just works)
    moe_z_loss(x, coeff)                  MoeZLoss / MoeZLossGrad (the router z-loss, a 0-D
                                          float32 tensor, w.r.t. x)
    swiglu_quant(x, dtype='int8', group_size=0, scale=None, scale_format='f32',
                 smooth_scales=None, group_index=None, activate_left=True)
                                          SwiGluQuant: (y int8 / FP8, scale); no gradient
    gelu_mul_quant(x, approximate='none', ...)
                                          GeluMulQuant, as swiglu_quant
    clipped_swiglu_quant(x, alpha=1.702, limit=7.0, bias=1.0, interleaved=True, dtype='int8',
                         ...)            ClippedSwigluQuant, as swiglu_quant
    dequant_swiglu_quant(x, weight_scale=None, activation_scale=None, bias=None, ...)
                                          DequantSwigluQuant (x int32), as swiglu_quant
    moe_init_routing_quant_v2(x, expert_idx, expert_num=..., quant_mode='dynamic',
                              dtype='int8', scale=None, offset=None, ...)
                                          MoeInitRoutingQuantV2: moe_init_routing_v2's outputs
                                          with expanded_x int8 / FP8, then the dynamic scales
                                          or None; no gradient

plus torch_npu-named aliases (npu_swiglu, npu_gelu, npu_gelu_backward, npu_gelu_mul,
npu_swiglu_quant, npu_dequant_swiglu_quant, npu_clipped_swiglu, npu_moe_init_routing_v2,
npu_moe_finalize_routing, npu_moe_gating_top_k_softmax, npu_moe_gating_top_k_softmax_v2,
npu_moe_gating_top_k) with torch_npu's argument names and order, and, where torch.library
allows it, the same operators as torch.ops.infiniop.<name> (see docs/python.md, section
"infiniop.torch").

Every function also takes device= ('cpu', 'cpu_reference', 'opencl' or a Device) and handle= (an
open infiniop.Handle, which then decides the device), keywords of the functional API. Tensors are
torch CPU tensors of any strides (the library stages them to a non-host device itself).

This module imports torch; `import infiniop` alone never does.
"""

import torch as _torch
import torch.fx as _fx

import infiniop as _infiniop
from infiniop._operator import check_bool as _check_bool
from infiniop.clipped_swiglu import _check_real
from infiniop.moe_aux_loss import score_function_code as _score_function_code

from ._aux_loss import MoeAuxLossFunction as _MoeAuxLossFunction
from ._capacity import MoeExpertCapacityFunction as _MoeExpertCapacityFunction
from ._autograd import (
    ClippedSwigluFunction,
    GeluFunction,
    GeluMulFunction,
    MoeFinalizeRoutingV2Function,
    MoeGatingTopKFunction,
    MoeGatingTopKSoftmaxFunction,
    MoeGatingWeightsFunction,
    MoeInitRoutingV2Function,
    MoeZLossFunction,
    SwiGluFunction,
    _check_tensor,
)

__all__ = [
    "ClippedSwigluFunction",
    "GeluFunction",
    "GeluMulFunction",
    "MoeFinalizeRoutingV2Function",
    "MoeGatingTopKFunction",
    "MoeGatingTopKSoftmaxFunction",
    "MoeGatingWeightsFunction",
    "MoeInitRoutingV2Function",
    "MoeZLossFunction",
    "SwiGluFunction",
    "clipped_swiglu",
    "clipped_swiglu_quant",
    "dequant_swiglu_quant",
    "gelu",
    "gelu_mul",
    "gelu_mul_quant",
    "moe_aux_loss",
    "moe_bias_update",
    "moe_expert_capacity",
    "moe_expert_counts",
    "moe_finalize_routing_v2",
    "moe_gating_top_k",
    "moe_gating_top_k_softmax",
    "moe_gating_weights",
    "moe_init_routing_quant_v2",
    "moe_init_routing_v2",
    "moe_z_loss",
    "npu_clipped_swiglu",
    "npu_dequant_swiglu_quant",
    "npu_gelu",
    "npu_gelu_backward",
    "npu_gelu_mul",
    "npu_moe_finalize_routing",
    "npu_moe_gating_top_k",
    "npu_moe_gating_top_k_softmax",
    "npu_moe_gating_top_k_softmax_v2",
    "npu_moe_init_routing_v2",
    "npu_swiglu",
    "npu_swiglu_quant",
    "swiglu",
    "swiglu_quant",
]


def _not_tensors(function, args, kwargs, tensors, results=1):
    """The slow path of a call whose tensor arguments are not all tensors (the callers test that
    first, so a plain call costs nothing here). Under torch.fx.symbolic_trace (an argument is a
    Proxy) the call is recorded as one call_function node, run as a whole when the GraphModule
    runs (`results` > 1: a tuple of that many getitems, so that it can be unpacked); otherwise
    the TypeError of the first of `tensors` ((value, name, optional)) that is not a tensor."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, _fx.Proxy):
            node = value.tracer.create_proxy("call_function", function, args, kwargs)
            return node if results == 1 else tuple(node[i] for i in range(results))
    for value, name, optional in tensors:
        _check_tensor(value, name, optional)
    raise AssertionError(f"{function.__name__}: every tensor argument passed its check")


def _traced_device(device, handle):
    """The device string of torch.ops.infiniop's schemas, for a call torch.compile traces: a
    handle cannot go into a graph (use device=), a torch.device becomes its 'type:index'."""
    if handle is not None:
        raise ValueError("handle= cannot be traced by torch.compile: pass device= instead "
                         "(the operators then use that device's default handle)")
    if isinstance(device, _torch.device):
        return device.type if device.index is None else f"{device.type}:{device.index}"
    if not isinstance(device, str):
        raise ValueError(f"device={device!r} cannot be traced by torch.compile: pass a string "
                         "('cpu', 'cpu_reference', 'opencl:0') or a torch.device")
    return device


def _traced_index_dtype(index_dtype):
    """index_dtype as torch.ops.infiniop's schemas take it: None or a name ('int32')."""
    if index_dtype is None or isinstance(index_dtype, str):
        return index_dtype
    return str(index_dtype).replace("torch.", "")  # torch.int64 -> 'int64'


def swiglu(x, dim=-1, *, device="cpu", handle=None):
    """y = silu(x1) * x2, x1 and x2 the halves of x along `dim` (infiniop.swiglu), with
    autograd: x's gradient by SwiGluBackward."""
    if not isinstance(x, _torch.Tensor):
        return _not_tensors(swiglu, (x, dim), {"device": device, "handle": handle},
                            ((x, "x", False),))
    if _ops.COMPILABLE and _compile.compiling():
        return _torch.ops.infiniop.swiglu(x, dim, device=_traced_device(device, handle))
    return SwiGluFunction.apply(x, dim, device, handle)


def gelu_mul(input, *, approximate="none", device="cpu", handle=None):
    """out = gelu(x1) * x2 on input's last dimension (infiniop.gelu_mul), with autograd:
    input's gradient by GeluMulBackward."""
    if not isinstance(input, _torch.Tensor):
        return _not_tensors(gelu_mul, (input,), {"approximate": approximate, "device": device,
                                                 "handle": handle}, ((input, "input", False),))
    if _ops.COMPILABLE and _compile.compiling():
        return _torch.ops.infiniop.gelu_mul(input, approximate=approximate,
                                            device=_traced_device(device, handle))
    return GeluMulFunction.apply(input, approximate, device, handle)


def gelu(input, *, approximate="none", device="cpu", handle=None):
    """output = gelu(input), as torch.nn.functional.gelu (infiniop.gelu), with autograd:
    input's gradient by GeluBackwardV2 with the same approximate."""
    if not isinstance(input, _torch.Tensor):
        return _not_tensors(gelu, (input,), {"approximate": approximate, "device": device,
                                             "handle": handle}, ((input, "input", False),))
    if _ops.COMPILABLE and _compile.compiling():
        return _torch.ops.infiniop.gelu(input, approximate=approximate,
                                        device=_traced_device(device, handle))
    return GeluFunction.apply(input, approximate, device, handle)


def clipped_swiglu(x, dim=-1, *, alpha=1.702, limit=7.0, bias=1.0, interleaved=True,
                   group_index=None, device="cpu", handle=None, clamp_mode=0):
    """The clipped SwiGLU of GPT-OSS (infiniop.clipped_swiglu; clamp_mode=1: min(silu(A),
    limit) clamp(B), aclnnClippedSwigluV2's), with autograd: x's gradient by
    ClippedSwigluBackward (rows beyond group_index's sum get 0); group_index is not
    differentiable."""
    if not isinstance(x, _torch.Tensor) or isinstance(group_index, _fx.Proxy):
        return _not_tensors(
            clipped_swiglu, (x, dim),
            {"alpha": alpha, "limit": limit, "bias": bias, "interleaved": interleaved,
             "group_index": group_index, "device": device, "handle": handle,
             "clamp_mode": clamp_mode}, ((x, "x", False),))
    if _ops.COMPILABLE and _compile.compiling():
        return _torch.ops.infiniop.clipped_swiglu(
            x, dim, alpha=alpha, limit=limit, bias=bias, interleaved=interleaved,
            group_index=group_index, device=_traced_device(device, handle), clamp_mode=clamp_mode)
    return ClippedSwigluFunction.apply(x, dim, alpha, limit, bias, interleaved, group_index,
                                       device, handle, clamp_mode)


def moe_init_routing_v2(x, expert_idx, *, expert_num, active_num=0, expert_capacity=0,
                        drop_pad_mode=0, expert_tokens_count_or_cumsum_flag=0,
                        expert_tokens_before_capacity_flag=False, index_dtype=None,
                        device="cpu", handle=None):
    """(expanded_x, expanded_row_idx, expert_tokens_count_or_cumsum or None,
    expert_tokens_before_capacity or None), as infiniop.moe_init_routing_v2, with autograd:
    x's gradient through expanded_x by MoeInitRoutingV2Grad. expanded_row_idx and the counts
    are not differentiable (marked so); expert_idx gets no gradient."""
    attributes = {"expert_num": expert_num, "active_num": active_num,
                  "expert_capacity": expert_capacity, "drop_pad_mode": drop_pad_mode,
                  "expert_tokens_count_or_cumsum_flag": expert_tokens_count_or_cumsum_flag,
                  "expert_tokens_before_capacity_flag": expert_tokens_before_capacity_flag}
    if not isinstance(x, _torch.Tensor) or not isinstance(expert_idx, _torch.Tensor):
        return _not_tensors(moe_init_routing_v2, (x, expert_idx),
                            {**attributes, "index_dtype": index_dtype, "device": device,
                             "handle": handle},
                            ((x, "x", False), (expert_idx, "expert_idx", False)), results=4)
    if _ops.COMPILABLE and _compile.compiling():
        return _torch.ops.infiniop.moe_init_routing_v2(
            x, expert_idx, **attributes, index_dtype=_traced_index_dtype(index_dtype),
            device=_traced_device(device, handle))
    return MoeInitRoutingV2Function.apply(x, expert_idx, attributes, index_dtype, device,
                                          handle)


def moe_finalize_routing_v2(expanded_x, expanded_row_idx, x1=None, x2=None, bias=None,
                            scales=None, expert_idx=None, *, drop_pad_mode=0, device="cpu",
                            handle=None):
    """out = x1 + x2 + sum_k scales[:, k] * (expanded_x[idx] + bias[expert_idx[:, k]]), as
    infiniop.moe_finalize_routing_v2 (every drop_pad_mode 0..3), with autograd: expanded_x and
    scales by MoeFinalizeRoutingV2Grad; x1 and x2 get grad_out; bias gets
    sum over the pairs routed to each expert of scales * grad_out (torch ops: the library has
    no operator for it). The index tensors get no gradient."""
    optional = (x1, x2, bias, scales, expert_idx)
    if not (isinstance(expanded_x, _torch.Tensor) and isinstance(expanded_row_idx, _torch.Tensor)
            and all(t is None or isinstance(t, _torch.Tensor) for t in optional)):
        return _not_tensors(
            moe_finalize_routing_v2, (expanded_x, expanded_row_idx, *optional),
            {"drop_pad_mode": drop_pad_mode, "device": device, "handle": handle},
            ((expanded_x, "expanded_x", False), (expanded_row_idx, "expanded_row_idx", False),
             *zip(optional, ("x1", "x2", "bias", "scales", "expert_idx"), (True,) * 5)))
    if _ops.autocast_cpu_enabled():  # as torch.ops.infiniop's AutocastCPU kernel
        expanded_x, x1, x2, bias, scales = _ops.promoted_finalize(expanded_x, x1, x2, bias,
                                                                  scales)
    if _ops.COMPILABLE and _compile.compiling():
        return _torch.ops.infiniop.moe_finalize_routing_v2(
            expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx,
            drop_pad_mode=drop_pad_mode, device=_traced_device(device, handle))
    return MoeFinalizeRoutingV2Function.apply(expanded_x, expanded_row_idx, x1, x2, bias,
                                              scales, expert_idx, drop_pad_mode, device, handle)


def moe_gating_top_k_softmax(x, k, finished=None, renorm=0, softmax_out=False, *,
                             index_dtype="int32", device="cpu", handle=None):
    """(y, expert_idx, row_idx), or (y, expert_idx, row_idx, softmax_out) with
    softmax_out=True, as infiniop.moe_gating_top_k_softmax, with autograd: y's gradient with
    respect to x by MoeGatingTopKSoftmaxGrad for the selected experts (finished rows: 0),
    softmax_out's in torch. expert_idx and row_idx are not differentiable (marked so)."""
    if not isinstance(x, _torch.Tensor) or isinstance(finished, _fx.Proxy):
        return _not_tensors(
            moe_gating_top_k_softmax, (x, k, finished, renorm, softmax_out),
            {"index_dtype": index_dtype, "device": device, "handle": handle},
            ((x, "x", False), (finished, "finished", True)), results=4 if softmax_out else 3)
    _check_tensor(finished, "finished", optional=True)
    if _ops.COMPILABLE and _compile.compiling():
        outputs = _torch.ops.infiniop.moe_gating_top_k_softmax(
            x, k, finished, renorm, softmax_out, index_dtype=_traced_index_dtype(index_dtype),
            device=_traced_device(device, handle))
    else:
        outputs = MoeGatingTopKSoftmaxFunction.apply(x, k, finished, renorm, softmax_out,
                                                     index_dtype, device, handle)
    return outputs if softmax_out else outputs[:3]


def moe_gating_top_k(x, k, bias=None, k_group=1, group_count=1, group_select_mode=0, renorm=0,
                     norm_type=1, out_flag=False, routed_scaling_factor=1.0, eps=1e-20, *,
                     index_dtype="int32", device="cpu", handle=None):
    """(y, expert_idx, norm_out or None), as infiniop.moe_gating_top_k (DeepSeek-V3's grouped
    router), with autograd: y's gradient with respect to x by MoeGatingTopKGrad through the
    selected weights, norm_out's in torch; bias and the selection are not differentiated
    (bias gets no gradient), expert_idx is marked not differentiable."""
    attributes = {"k_group": k_group, "group_count": group_count,
                  "group_select_mode": group_select_mode, "renorm": renorm,
                  "norm_type": norm_type, "routed_scaling_factor": routed_scaling_factor,
                  "eps": eps}
    if not isinstance(x, _torch.Tensor) or isinstance(bias, _fx.Proxy):
        return _not_tensors(
            moe_gating_top_k, (x, k, bias),
            {**attributes, "out_flag": out_flag, "index_dtype": index_dtype, "device": device,
             "handle": handle}, ((x, "x", False), (bias, "bias", True)), results=3)
    _check_tensor(bias, "bias", optional=True)
    if _ops.COMPILABLE and _compile.compiling():
        return _torch.ops.infiniop.moe_gating_top_k(
            x, k, bias, **attributes, out_flag=out_flag,
            index_dtype=_traced_index_dtype(index_dtype), device=_traced_device(device, handle))
    return MoeGatingTopKFunction.apply(x, k, bias, attributes, out_flag, index_dtype, device,
                                       handle)


def moe_gating_weights(x, expert_idx, norm_type=1, renorm=0, routed_scaling_factor=1.0,
                       eps=1e-20, *, device="cpu", handle=None):
    """y (..., k), as infiniop.moe_gating_weights (MoeGatingTopK's weights for a given
    expert_idx: a replayed routing, or hash routing's tid2eid[token_ids]), with autograd: y's
    gradient with respect to x by MoeGatingTopKGrad at the same expert_idx; expert_idx gets
    none."""
    attributes = {"norm_type": norm_type, "renorm": renorm,
                  "routed_scaling_factor": routed_scaling_factor, "eps": eps}
    if not isinstance(x, _torch.Tensor) or not isinstance(expert_idx, _torch.Tensor):
        return _not_tensors(moe_gating_weights, (x, expert_idx),
                            {**attributes, "device": device, "handle": handle},
                            ((x, "x", False), (expert_idx, "expert_idx", False)))
    if _ops.COMPILABLE and _compile.compiling():
        return _torch.ops.infiniop.moe_gating_weights(x, expert_idx, **attributes,
                                                      device=_traced_device(device, handle))
    return MoeGatingWeightsFunction.apply(x, expert_idx, attributes, device, handle)


def moe_expert_counts(expert_idx, num_experts, *, counts_dtype="int64", sequences=None,
                      device="cpu", handle=None):
    """counts (num_experts,) int64 (or counts_dtype int32): tokens per expert of expert_idx, as
    infiniop.moe_expert_counts (torch.bincount(expert_idx.flatten(), minlength=num_experts),
    the value num_experts, a finished row, not counted); (sequences, num_experts) per sequence
    where sequences is given (row r in sequence r % sequences). Not differentiable."""
    _check_tensor(expert_idx, "expert_idx")
    if _ops.COMPILABLE and _compile.compiling():
        return _torch.ops.infiniop.moe_expert_counts(
            expert_idx, num_experts, counts_dtype=_traced_index_dtype(counts_dtype),
            device=_traced_device(device, handle), sequences=sequences or 0)
    return _infiniop.moe_expert_counts(expert_idx, num_experts, counts_dtype=counts_dtype,
                                       sequences=sequences, device=device, handle=handle)


def moe_aux_loss(x, tokens_per_expert, topk, *, score_function="softmax", total_tokens=None,
                 coeff=1.0, device="cpu", handle=None):
    """The load-balancing aux loss (a float32 tensor of shape ()) of router logits x, as
    infiniop.moe_aux_loss (Megatron-LM's switch_load_balancing_loss_func with
    tokens_per_expert (E,), sequence_load_balancing_loss_func with (B, E)); differentiable in x
    (MoeAuxLossGrad), so `loss = task_loss + aux` adds its gradient to the router's."""
    _check_tensor(x, "x")
    _check_tensor(tokens_per_expert, "tokens_per_expert")
    score = _score_function_code(score_function)
    if (handle is None and _ops.REGISTERED and _ops.COMPILABLE
            and isinstance(device, (str, _torch.device))):
        return _torch.ops.infiniop.moe_aux_loss(
            x, tokens_per_expert, topk, score_function=score,
            total_tokens=-1 if total_tokens is None else total_tokens, coeff=coeff,
            device=_traced_device(device, handle))
    return _MoeAuxLossFunction.apply(x, tokens_per_expert, topk, score, total_tokens, coeff,
                                     device, handle)


def moe_expert_capacity(expert_idx, num_experts, capacity, *, weights=None,
                        drop_policy="position", device="cpu", handle=None):
    """(kept_idx, weights_out or None), as infiniop.moe_expert_capacity (each expert keeps at
    most `capacity` of its slots, by position or by the largest weight; dropped slots get
    num_experts and weight +0), with autograd: weights' gradient is grad * (kept_idx != E)
    (torch.where, exact); expert_idx gets none, kept_idx is not differentiable."""
    _check_tensor(expert_idx, "expert_idx")
    _check_tensor(weights, "weights", optional=True)
    policy = _infiniop.moe_capacity.drop_policy_code(drop_policy)
    if (handle is None and _ops.REGISTERED and _ops.COMPILABLE
            and isinstance(device, (str, _torch.device))):
        return _torch.ops.infiniop.moe_expert_capacity(
            expert_idx, num_experts, capacity, weights, policy,
            device=_traced_device(device, handle))
    return _MoeExpertCapacityFunction.apply(expert_idx, num_experts, capacity, weights, policy,
                                            device, handle)


def moe_bias_update(bias, counts, update_rate=0.001, *, device="cpu", handle=None):
    """bias, updated in place as infiniop.moe_bias_update (DeepSeek-V3's auxiliary-loss-free
    balancing: bias[e] += update_rate * sign(mean(counts) - counts[e]), the mean compared
    exactly). Not differentiable: it runs without autograd, as the update of a buffer."""
    _check_tensor(bias, "bias")
    _check_tensor(counts, "counts")
    if _ops.COMPILABLE and _compile.compiling():
        _torch.ops.infiniop.moe_bias_update(bias, counts, update_rate,
                                            device=_traced_device(device, handle))
        return bias
    with _torch.no_grad():
        _infiniop.moe_bias_update(bias, counts, update_rate, device=device, handle=handle)
    return bias


def _activate_left(value):
    """The schemas' bool activate_left (True / False, 1 / 0)."""
    if value in (0, 1):  # True and False too
        return bool(value)
    raise ValueError(f"activate_left={value!r}: True (act(x1) * x2) or False (x1 * act(x2))")


def _gated_quant(function, operator, x, scale, smooth_scales, group_index, attributes, device,
                 handle, inputs=None):
    """inputs: the operator's own optional tensors, by name, in its schema's order before scale
    (dequant_swiglu_quant's weight_scale, activation_scale, bias)."""
    inputs = inputs or {}
    _check_tensor(x, "x")
    for value, name in ((scale, "scale"), (smooth_scales, "smooth_scales"),
                        (group_index, "group_index"), *((v, n) for n, v in inputs.items())):
        _check_tensor(value, name, optional=True)
    if (handle is None and _ops.REGISTERED and _ops.COMPILABLE
            and isinstance(device, (str, _torch.device))):
        attributes = {**attributes,
                      "dtype": _infiniop.gated_quant.quant_dtype_name(attributes["dtype"]),
                      "scale_format": int(_infiniop.gated_quant.scale_format_code(
                          attributes["scale_format"]))}
        if "activate_left" in attributes:  # not ClippedSwigluQuant's
            attributes["activate_left"] = _activate_left(attributes["activate_left"])
        y, s = getattr(_torch.ops.infiniop, operator)(
            x, *inputs.values(), scale, smooth_scales, group_index, **attributes,
            device=_traced_device(device, handle))
        return y, scale if scale is not None else s
    # no gradient: the outputs come from the library, outside autograd
    return function(x.detach(), scale=scale, smooth_scales=smooth_scales,
                    group_index=group_index, **inputs, **attributes, device=device,
                    handle=handle)


def swiglu_quant(x, *, dtype="int8", group_size=0, scale=None, scale_format="f32",
                 smooth_scales=None, group_index=None, activate_left=True, device="cpu",
                 handle=None):
    """(y, scale), as infiniop.swiglu_quant (y = the quantized silu(x1) * x2 * m; dynamic scales
    when scale is None, else the static scale given, returned as given), as
    torch.ops.infiniop.swiglu_quant where torch.library allows it (torch.compile traces it). An
    inference operator: no gradient (from PyTorch 2.4 a backward through the returned scale
    raises)."""
    attributes = {"dtype": dtype, "group_size": group_size, "scale_format": scale_format,
                  "activate_left": activate_left}
    return _gated_quant(_infiniop.swiglu_quant, "swiglu_quant", x, scale, smooth_scales,
                        group_index, attributes, device, handle)


def gelu_mul_quant(x, *, approximate="none", dtype="int8", group_size=0, scale=None,
                   scale_format="f32", smooth_scales=None, group_index=None, activate_left=True,
                   device="cpu", handle=None):
    """(y, scale), as infiniop.gelu_mul_quant (swiglu_quant with gelu, approximate 'none' or
    'tanh'); no gradient, as swiglu_quant."""
    if _ops.REGISTERED and _ops.COMPILABLE and handle is None:  # the schema's str
        parsed = _infiniop.GeluApproximate.parse(approximate)
        approximate = (parsed.name.lower() if isinstance(parsed, _infiniop.GeluApproximate)
                       else str(parsed))
    attributes = {"approximate": approximate, "dtype": dtype, "group_size": group_size,
                  "scale_format": scale_format, "activate_left": activate_left}
    return _gated_quant(_infiniop.gelu_mul_quant, "gelu_mul_quant", x, scale, smooth_scales,
                        group_index, attributes, device, handle)


def clipped_swiglu_quant(x, *, alpha=1.702, limit=7.0, bias=1.0, interleaved=True, dtype="int8",
                         group_size=0, scale=None, scale_format="f32", smooth_scales=None,
                         group_index=None, device="cpu", handle=None):
    """(y, scale), as infiniop.clipped_swiglu_quant (swiglu_quant with ClippedSwiglu's gate,
    clamp_mode 0); no gradient, as swiglu_quant."""
    if _ops.REGISTERED and _ops.COMPILABLE and handle is None:  # the schema's floats and bool
        alpha, limit, bias = (_check_real(n, v) for n, v in
                              (("alpha", alpha), ("limit", limit), ("bias", bias)))
        interleaved = _check_bool("interleaved", interleaved)
    attributes = {"alpha": alpha, "limit": limit, "bias": bias, "interleaved": interleaved,
                  "dtype": dtype, "group_size": group_size, "scale_format": scale_format}
    return _gated_quant(_infiniop.clipped_swiglu_quant, "clipped_swiglu_quant", x, scale,
                        smooth_scales, group_index, attributes, device, handle)


def dequant_swiglu_quant(x, *, weight_scale=None, activation_scale=None, bias=None, dtype="int8",
                         group_size=0, scale=None, scale_format="f32", smooth_scales=None,
                         group_index=None, activate_left=True, device="cpu", handle=None):
    """(y, scale), as infiniop.dequant_swiglu_quant (swiglu_quant of the INT32 accumulators x
    dequantized: ((x + bias) * weight_scale) * activation_scale (+ bias)), as
    torch.ops.infiniop.dequant_swiglu_quant where torch.library allows it; no gradient, as
    swiglu_quant."""
    attributes = {"dtype": dtype, "group_size": group_size, "scale_format": scale_format,
                  "activate_left": activate_left}
    return _gated_quant(_infiniop.dequant_swiglu_quant, "dequant_swiglu_quant", x, scale,
                        smooth_scales, group_index, attributes, device, handle,
                        inputs={"weight_scale": weight_scale,
                                "activation_scale": activation_scale, "bias": bias})


def moe_init_routing_quant_v2(x, expert_idx, *, expert_num, quant_mode="dynamic", dtype="int8",
                              scale=None, offset=None, active_num=0, expert_capacity=0,
                              drop_pad_mode=0, expert_tokens_count_or_cumsum_flag=0,
                              expert_tokens_before_capacity_flag=False, index_dtype=None,
                              device="cpu", handle=None):
    """(expanded_x, expanded_row_idx, counts or None, before_capacity or None,
    dynamic_quant_scale or None), as infiniop.moe_init_routing_quant_v2 (moe_init_routing_v2
    with expanded_x quantized per row), as torch.ops.infiniop.moe_init_routing_quant_v2 where
    torch.library allows it (torch.compile traces it). An inference operator: no gradient."""
    _check_tensor(x, "x")
    _check_tensor(expert_idx, "expert_idx")
    for value, name in ((scale, "scale"), (offset, "offset")):
        if not isinstance(value, (int, float)):
            _check_tensor(value, name, optional=True)
    attributes = {"expert_num": expert_num, "active_num": active_num,
                  "expert_capacity": expert_capacity, "drop_pad_mode": drop_pad_mode,
                  "expert_tokens_count_or_cumsum_flag": expert_tokens_count_or_cumsum_flag,
                  "expert_tokens_before_capacity_flag": expert_tokens_before_capacity_flag}
    tensors = all(v is None or isinstance(v, _torch.Tensor) for v in (scale, offset))
    if (handle is None and tensors and _ops.REGISTERED and _ops.COMPILABLE
            and isinstance(device, (str, _torch.device))):
        gq = _infiniop.gated_quant
        mode = int(gq._parse(gq.QuantMode, quant_mode, "quant_mode", gq.QUANT_MODES))
        return _torch.ops.infiniop.moe_init_routing_quant_v2(
            x, expert_idx, scale, offset, **attributes, quant_mode=mode,
            dtype=gq.quant_dtype_name(dtype), index_dtype=_traced_index_dtype(index_dtype),
            device=_traced_device(device, handle))
    # no gradient: the outputs come from the library, outside autograd
    return _infiniop.moe_init_routing_quant_v2(
        x.detach(), expert_idx, **attributes, quant_mode=quant_mode, dtype=dtype, scale=scale,
        offset=offset, index_dtype=index_dtype, device=device, handle=handle)


from .npu import (  # noqa: E402  (the aliases build on the functions above)
    npu_clipped_swiglu,
    npu_dequant_swiglu_quant,
    npu_gelu,
    npu_gelu_backward,
    npu_gelu_mul,
    npu_moe_finalize_routing,
    npu_moe_gating_top_k,
    npu_moe_gating_top_k_softmax,
    npu_moe_gating_top_k_softmax_v2,
    npu_moe_init_routing_v2,
    npu_swiglu,
    npu_swiglu_quant,
)
from . import _compile, _ops  # noqa: E402,F401  (torch.ops.infiniop.*, where torch.library allows it)
from . import moe  # noqa: E402,F401


def moe_z_loss(x, coeff, *, device="cpu", handle=None):
    """The router z-loss coeff * mean_t logsumexp(x_t)^2 of x (..., E) (Megatron-LM's
    z_loss_func), a 0-D float32 tensor, as infiniop.moe_z_loss, with autograd: x's gradient by
    MoeZLossGrad. loss = task_loss + moe_z_loss(logits, 1e-3) just works."""
    if not isinstance(x, _torch.Tensor):
        return _not_tensors(moe_z_loss, (x, coeff), {"device": device, "handle": handle},
                            ((x, "x", False),))
    if _ops.COMPILABLE and _compile.compiling():
        return _torch.ops.infiniop.moe_z_loss(x, float(coeff),
                                              device=_traced_device(device, handle))
    return MoeZLossFunction.apply(x, coeff, device, handle)

