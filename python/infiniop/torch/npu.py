# SPDX-License-Identifier: Apache-2.0
"""torch_npu-named aliases of infiniop.torch's functions: torch_npu's argument names, order and
defaults, the library's operators underneath (with autograd where infiniop.torch has it).
The mapping table is in docs/python.md, section "infiniop.torch"; what torch_npu has and the
library does not (quantization, active_expert_range, ...) raises NotImplementedError naming the
argument.

    npu_swiglu(input, dim=-1)                              -> swiglu
    npu_gelu(input, approximate='none')                    -> gelu
    npu_gelu_backward(grad_output, self, approximate='none')
                                                           -> infiniop.gelu_backward_v2
    npu_gelu_mul(input, *, approximate='none')             -> gelu_mul
    npu_swiglu_quant(x, smooth_scales=None, offsets=None, group_index=None,
                     activate_left=False, quant_mode=0, group_list_type=0, dst_type=None)
                                                           -> swiglu_quant
    npu_dequant_swiglu_quant(x, *, weight_scale=None, activation_scale=None, bias=None,
                             quant_scale=None, quant_offset=None, group_index=None,
                             activate_left=False, quant_mode=0)
                                                           -> dequant_swiglu_quant
    npu_clipped_swiglu(x, *, group_index=None, dim=-1, alpha=1.702, limit=7.0, bias=1.0,
                       interleaved=True)                   -> clipped_swiglu
    npu_moe_finalize_routing(expanded_permuted_rows, skip1, skip2, bias, scales,
                             expanded_src_to_dst_row, export_for_source_row, drop_pad_mode=0)
                                                           -> moe_finalize_routing_v2
    npu_moe_init_routing_v2(x, expert_idx, *, scale=None, offset=None, active_num=-1,
                            expert_capacity=-1, expert_num=-1, drop_pad_mode=0,
                            expert_tokens_num_type=0, expert_tokens_num_flag=False,
                            quant_mode=0, active_expert_range=[], row_idx_type=0)
                                                           -> moe_init_routing_v2 (quant_mode
                                                              1, or 0 with offset:
                                                              moe_init_routing_quant_v2)
    npu_moe_gating_top_k_softmax(x, finished=None, k=1)  -> moe_gating_top_k_softmax
                                                              (renorm 0)
    npu_moe_gating_top_k_softmax_v2(x, k, finished=None, renorm=0,
                                    output_softmax_result_flag=False)
                                                           -> moe_gating_top_k_softmax
    npu_moe_gating_top_k(x, k, *, bias=None, k_group=1, group_count=1, group_select_mode=0,
                         renorm=0, norm_type=1, out_flag=False, routed_scaling_factor=1.0,
                         eps=1e-20)                        -> moe_gating_top_k
"""

import torch

import infiniop

from . import _autograd

__all__ = ["npu_clipped_swiglu", "npu_dequant_swiglu_quant", "npu_gelu", "npu_gelu_backward",
           "npu_gelu_mul", "npu_moe_finalize_routing", "npu_moe_gating_top_k",
           "npu_moe_gating_top_k_softmax", "npu_moe_gating_top_k_softmax_v2",
           "npu_moe_init_routing_v2", "npu_swiglu", "npu_swiglu_quant"]


def _api():
    from infiniop import torch as api  # the package's functions (this module is imported by it)

    return api


def npu_swiglu(input, dim=-1, *, device="cpu", handle=None):
    """torch_npu.npu_swiglu(input, dim=-1): swiglu(input, dim)."""
    return _api().swiglu(input, dim, device=device, handle=handle)


def npu_gelu(input, approximate="none", *, device="cpu", handle=None):
    """torch_npu.npu_gelu(input, approximate='none'): gelu(input, approximate=approximate)."""
    return _api().gelu(input, approximate=approximate, device=device, handle=handle)


def npu_gelu_backward(grad_output, self, approximate="none", *, device="cpu", handle=None):
    """torch_npu.npu_gelu_backward(grad_output, self, approximate='none'): grad_output *
    gelu'(self), by GeluBackwardV2 (infiniop.gelu_backward_v2; not itself differentiable)."""
    _autograd._check_tensor(grad_output, "grad_output")
    _autograd._check_tensor(self, "self")
    api = _api()
    if api._ops.COMPILABLE and api._compile.compiling():  # the functional API is not traceable
        return torch.ops.infiniop.gelu_backward_v2(
            grad_output, self, approximate=approximate,
            device=api._traced_device(device, handle))
    return infiniop.gelu_backward_v2(grad_output, self, approximate=approximate, device=device,
                                     handle=handle)


def npu_gelu_mul(input, *, approximate="none", device="cpu", handle=None):
    """torch_npu.npu_gelu_mul(input, *, approximate='none'): gelu_mul."""
    return _api().gelu_mul(input, approximate=approximate, device=device, handle=handle)


def _dst_type(dst_type):
    """torch_npu's dst_type as the library's y dtype: None or torch.int8 INT8,
    torch.float8_e4m3fn FP8 E4M3."""
    if dst_type is None or dst_type == torch.int8:
        return "int8"
    if dst_type == getattr(torch, "float8_e4m3fn", None):
        return "fp8"
    raise ValueError(f"dst_type={dst_type!r}: None or torch.int8 (INT8), or "
                     "torch.float8_e4m3fn (FP8 E4M3) are supported")


def npu_swiglu_quant(x, smooth_scales=None, offsets=None, group_index=None, activate_left=False,
                     quant_mode=0, group_list_type=0, dst_type=None, *, device="cpu",
                     handle=None):
    """torch_npu.npu_swiglu_quant(x, smooth_scales=None, offsets=None, group_index=None,
    activate_left=False, quant_mode=0, group_list_type=0, dst_type=None) -> (y, scale), on
    swiglu_quant per token (no gradient).

    quant_mode 1 (dynamic): scale (x's leading dims, no trailing 1) float32 = amax / 127 of
    each row's act * smooth_scales, y = round(act * smooth_scales / scale) (amax / 448 for
    FP8). quant_mode 0 (static): CANN's y = round(act * smooth_scales), smooth_scales the
    multiplier: the static scale 1.0 (a broadcast view of x's leading dims, returned as scale).
    group_index (E) with smooth_scales (E, H): group_list_type 0 cumsum (made counts by
    torch.diff), 1 counts; rows past the sum get 0.
    dst_type: None / torch.int8 INT8, torch.float8_e4m3fn FP8 E4M3; others ValueError.
    offsets (CANN's asymmetric zero points) are not supported: ValueError."""
    if offsets is not None:
        raise ValueError("offsets: asymmetric quantization (zero points) is not supported; the "
                         "library's INT8 and FP8 are symmetric (pass offsets=None)")
    if quant_mode not in (0, 1):
        raise ValueError(f"quant_mode={quant_mode!r}: 0 (static) or 1 (dynamic)")
    if group_list_type not in (0, 1):
        raise ValueError(f"group_list_type={group_list_type!r}: 0 (cumsum) or 1 (count)")
    dtype = _dst_type(dst_type)
    _autograd._check_tensor(x, "x")
    _autograd._check_tensor(smooth_scales, "smooth_scales", optional=True)
    _autograd._check_tensor(group_index, "group_index", optional=True)
    if group_index is not None:
        group_index = group_index.to(torch.int64)
        if group_list_type == 0:  # cumsum -> counts (the library's count mode)
            group_index = torch.diff(group_index, prepend=group_index.new_zeros(1))
    scale = None
    if quant_mode == 0:  # per token: one 1.0 broadcast to every row
        scale = torch.ones((), dtype=torch.float32).expand(*x.shape[:-1], 1)
    y, scale = _api().swiglu_quant(x, dtype=dtype, scale=scale, smooth_scales=smooth_scales,
                                   group_index=group_index, activate_left=bool(activate_left),
                                   device=device, handle=handle)
    return y, scale.squeeze(-1)  # torch_npu's scale has x's leading dims (no trailing G = 1)


def _shared_row(t):
    """torch_npu's (1, N) per-group tensor of one group as the library's shared (N) one."""
    return t.reshape(-1) if t is not None and t.dim() == 2 and t.shape[0] == 1 else t


def npu_dequant_swiglu_quant(x, *, weight_scale=None, activation_scale=None, bias=None,
                             quant_scale=None, quant_offset=None, group_index=None,
                             activate_left=False, quant_mode=0, device="cpu", handle=None):
    """torch_npu.npu_dequant_swiglu_quant(x, *, weight_scale=None, activation_scale=None,
    bias=None, quant_scale=None, quant_offset=None, group_index=None, activate_left=False,
    quant_mode=0) -> (y, scale), on dequant_swiglu_quant per token, INT8 (no gradient).

    x (TokensNum, 2H) int32; weight_scale (2H), (1, 2H) or (groupNum, 2H) float32 with
    group_index; activation_scale (TokensNum) or (TokensNum, 1) float32; bias (2H) or
    (groupNum, 2H) float32, float16, bfloat16 or int32; quant_scale (H), (1, H) or (groupNum, H)
    float32, the smooth scales (CANN's multiplier in both modes); group_index (groupNum) counts
    (torch_npu's count mode; rows past their sum get 0). quant_mode 1 (dynamic): scale
    (TokensNum) = amax / 127 of each row's values; 0 (static): CANN's y = round(z *
    quant_scale), the library's static scale 1.0, returned as ones. None for weight_scale or
    activation_scale means 1 (torch_npu requires both for int32 x). quant_offset (asymmetric
    zero points) is not supported: NotImplementedError."""
    if quant_offset is not None:
        raise NotImplementedError("quant_offset: asymmetric quantization (zero points) is not "
                                  "supported; the library's INT8 is symmetric (pass "
                                  "quant_offset=None)")
    if quant_mode not in (0, 1):
        raise ValueError(f"quant_mode={quant_mode!r}: 0 (static) or 1 (dynamic)")
    _autograd._check_tensor(x, "x")
    for value, name in ((weight_scale, "weight_scale"), (activation_scale, "activation_scale"),
                        (bias, "bias"), (quant_scale, "quant_scale"),
                        (group_index, "group_index")):
        _autograd._check_tensor(value, name, optional=True)
    if group_index is not None:
        group_index = group_index.to(torch.int64)
    scale = None
    if quant_mode == 0:  # per token: one 1.0 broadcast to every row
        scale = torch.ones((), dtype=torch.float32).expand(*x.shape[:-1], 1)
    y, scale = _api().dequant_swiglu_quant(
        x, weight_scale=_shared_row(weight_scale), activation_scale=activation_scale,
        bias=_shared_row(bias), scale=scale, smooth_scales=_shared_row(quant_scale),
        group_index=group_index, activate_left=bool(activate_left), device=device, handle=handle)
    return y, scale.squeeze(-1)  # torch_npu's scale has x's leading dims (no trailing G = 1)


def npu_clipped_swiglu(x, *, group_index=None, dim=-1, alpha=1.702, limit=7.0, bias=1.0,
                       interleaved=True, device="cpu", handle=None):
    """torch_npu.npu_clipped_swiglu(x, *, group_index=None, dim=-1, alpha=1.702, limit=7.0,
    bias=1.0, interleaved=True): clipped_swiglu."""
    return _api().clipped_swiglu(x, dim, alpha=alpha, limit=limit, bias=bias,
                                 interleaved=interleaved, group_index=group_index,
                                 device=device, handle=handle)


def npu_moe_finalize_routing(expanded_permuted_rows, skip1, skip2, bias, scales,
                             expanded_src_to_dst_row, export_for_source_row, drop_pad_mode=0,
                             *, device="cpu", handle=None):
    """torch_npu.npu_moe_finalize_routing(expanded_permuted_rows, skip1, skip2, bias, scales,
    expanded_src_to_dst_row, export_for_source_row, drop_pad_mode=0):
    moe_finalize_routing_v2(expanded_x=expanded_permuted_rows,
    expanded_row_idx=expanded_src_to_dst_row, x1=skip1, x2=skip2, bias=bias, scales=scales,
    expert_idx=export_for_source_row, drop_pad_mode=drop_pad_mode). skip2 alone (skip1 None)
    is added as the only residual. drop_pad_mode None means 0."""
    if skip1 is None and skip2 is not None:
        skip1, skip2 = skip2, None
    if drop_pad_mode is None:
        drop_pad_mode = 0
    for value, name in ((expanded_permuted_rows, "expanded_permuted_rows"),
                        (expanded_src_to_dst_row, "expanded_src_to_dst_row")):
        _autograd._check_tensor(value, name)
    for value, name in ((skip1, "skip1"), (skip2, "skip2"), (bias, "bias"), (scales, "scales"),
                        (export_for_source_row, "export_for_source_row")):
        _autograd._check_tensor(value, name, optional=True)
    return _api().moe_finalize_routing_v2(
        expanded_permuted_rows, expanded_src_to_dst_row, skip1, skip2, bias, scales,
        export_for_source_row, drop_pad_mode=drop_pad_mode, device=device, handle=handle)


def _key_value(counts, expert_num):
    """torch_npu's key_value layout (expert_tokens_num_type 2): (expert_num, 2) int64 rows
    (expert, count) for the experts with a non-zero count, in expert order, then zero rows."""
    counts = counts.to(torch.int64)
    # the busy experts first, each group in expert order (a stable sort: no size depends on
    # the data, so torch.compile keeps it in the graph, where nonzero would break it)
    order = torch.sort((counts == 0).to(torch.int8), stable=True).indices
    sorted_counts = counts[order]
    busy = sorted_counts != 0
    return torch.stack([torch.where(busy, order, torch.zeros_like(order)), sorted_counts], 1)


def npu_moe_init_routing_v2(x, expert_idx, *, scale=None, offset=None, active_num=-1,
                            expert_capacity=-1, expert_num=-1, drop_pad_mode=0,
                            expert_tokens_num_type=0, expert_tokens_num_flag=False,
                            quant_mode=0, active_expert_range=(), row_idx_type=0,
                            device="cpu", handle=None):
    """torch_npu.npu_moe_init_routing_v2(x, expert_idx, *, ...) -> (expanded_x, expanded_row_idx,
    expert_token_cumsum_or_count, expanded_scale), on moe_init_routing_v2 (expanded_x is
    differentiable with respect to x) or, quantized, moe_init_routing_quant_v2 (no gradient).

    active_num -1 (or >= R*K): every row, the library's 0. expert_capacity -1: 0 (dropless).
    expert_num: required (torch_npu's -1 has no meaning here). expert_tokens_num_flag True
    returns the per-expert token numbers, int64: expert_tokens_num_type 0 cumsum, 1 count,
    2 key_value ((expert_num, 2) rows (expert, count) of the busy experts, then zeros); in
    drop_pad_mode 1 they are the counts before the capacity cut. Without the flag that output is
    None. row_idx_type 1: expanded_row_idx is the scatter index (expanded_x[idx[p]] = x[p // K],
    the library's, what moe_finalize_routing_v2 and npu_moe_finalize_routing read); 0 (torch_npu's
    default): the gather index (expanded_x[i] = x[idx[i] // K]), its inverse permutation, dropless
    only.
    quant_mode (torch_npu's: -1 none, 0 static, 1 dynamic; its default 0, which its current
    versions do not support, keeps the unquantized behaviour for a call without offset):
    -1, or 0 without offset: not quantized; scale (R,) float32 gives expanded_scale[i] =
        scale[source row of i] (dropless; not differentiable); None without scale.
    0 with offset: static, expanded_x int8 = round(x * scale + offset) (scale and offset (1,)
        float32, float64 arithmetic); expanded_scale None.
    1: dynamic, expanded_x int8 = round(x * m / s) with m = scale[expert] (scale (E, H) or
        (1, H) float32; None: 1), s = amax / 127 of each expanded row (offset must be None);
        expanded_scale the s of each expanded row, (A,) or, in drop_pad_mode 1, (E * C,) with 0
        for the unfilled slots.
    Not supported (NotImplementedError): active_expert_range other than [] or [0, expert_num],
    row_idx_type 0 or an unquantized scale with drop_pad_mode 1, other quant_mode values.
    """
    if quant_mode not in (-1, 0, 1):
        raise NotImplementedError(f"quant_mode={quant_mode!r}: -1 (none), 0 (static: scale and "
                                  "offset) or 1 (dynamic) are supported")
    quant = {1: "dynamic", 0: "static" if offset is not None else None}.get(quant_mode)
    if quant_mode == -1 and offset is not None:
        raise ValueError("offset is read in quant_mode 0 (static) only")
    if isinstance(expert_num, int) and not isinstance(expert_num, bool) and expert_num == -1:
        raise ValueError("expert_num: the number of experts is required (torch_npu's default -1 "
                         "is not supported)")
    if list(active_expert_range) not in ([], [0, expert_num]):
        raise NotImplementedError(f"active_expert_range={list(active_expert_range)!r}: only [] "
                                  f"or [0, expert_num] (all experts) is supported")
    if row_idx_type not in (0, 1):
        raise ValueError(f"row_idx_type={row_idx_type!r}: 0 (gather) or 1 (scatter)")
    if expert_tokens_num_type not in (0, 1, 2):
        raise ValueError(f"expert_tokens_num_type={expert_tokens_num_type!r}: 0 (cumsum), "
                         "1 (count) or 2 (key_value)")
    _autograd._check_tensor(x, "x")
    _autograd._check_tensor(expert_idx, "expert_idx")
    _autograd._check_tensor(scale, "scale", optional=True)
    _autograd._check_tensor(offset, "offset", optional=True)
    if drop_pad_mode == 1 and (row_idx_type == 0 or (scale is not None and quant is None)):
        what = "row_idx_type=0 (gather)" if row_idx_type == 0 else "an unquantized scale"
        raise NotImplementedError(f"{what} is supported in drop_pad_mode 0 only")
    total = expert_idx.numel()
    if active_num == -1 or (isinstance(active_num, int) and active_num >= total):
        active_num = 0
    if expert_capacity == -1:
        expert_capacity = 0
    flags = {}
    if expert_tokens_num_flag:
        if drop_pad_mode == 1:
            flags["expert_tokens_before_capacity_flag"] = True
        else:  # the library's flag: 1 cumsum, 2 count
            flags["expert_tokens_count_or_cumsum_flag"] = 1 if expert_tokens_num_type == 0 else 2
    if quant is None:
        expanded_x, row_idx, counts, before = _api().moe_init_routing_v2(
            x, expert_idx, expert_num=expert_num, active_num=active_num,
            expert_capacity=expert_capacity, drop_pad_mode=drop_pad_mode, **flags, device=device,
            handle=handle)
    else:
        expanded_x, row_idx, counts, before, dynamic_scale = _api().moe_init_routing_quant_v2(
            x, expert_idx, expert_num=expert_num, quant_mode=quant, dtype="int8", scale=scale,
            offset=offset, active_num=active_num, expert_capacity=expert_capacity,
            drop_pad_mode=drop_pad_mode, **flags, device=device, handle=handle)
    numbers = None
    if expert_tokens_num_flag:
        numbers = (before if drop_pad_mode == 1 else counts).to(torch.int64)
        if drop_pad_mode == 1 and expert_tokens_num_type == 0:
            numbers = torch.cumsum(numbers, 0)
        if expert_tokens_num_type == 2:  # from the counts (the library's flag 2 in mode 0)
            numbers = _key_value(numbers, expert_num)
    expanded_scale = None
    if quant == "dynamic":
        expanded_scale = dynamic_scale.reshape(-1)
    elif scale is not None and quant is None:
        with torch.no_grad():
            k = expert_idx.shape[-1] if expert_idx.dim() else 1
            expanded_scale = torch.empty(total, dtype=scale.dtype)
            expanded_scale[row_idx.long()] = scale.reshape(-1).repeat_interleave(k)
    if row_idx_type == 0:
        gather = torch.empty_like(row_idx)
        gather[row_idx.long()] = torch.arange(total, dtype=row_idx.dtype)
        row_idx = gather
    return expanded_x, row_idx, numbers, expanded_scale


def npu_moe_gating_top_k_softmax(x, finished=None, k=1, *, device="cpu", handle=None):
    """torch_npu.npu_moe_gating_top_k_softmax(x, finished=None, k=1) -> (y, expert_idx,
    row_idx): moe_gating_top_k_softmax(x, k, finished) with renorm 0 (softmax, then top-k);
    expert_idx and row_idx int32, as torch_npu's; y differentiable with respect to x."""
    _autograd._check_tensor(x, "x")
    _autograd._check_tensor(finished, "finished", optional=True)
    return _api().moe_gating_top_k_softmax(x, k, finished, 0, index_dtype=torch.int32,
                                           device=device, handle=handle)


def npu_moe_gating_top_k_softmax_v2(x, k, finished=None, renorm=0,
                                    output_softmax_result_flag=False, *, device="cpu",
                                    handle=None):
    """torch_npu.npu_moe_gating_top_k_softmax_v2(x, k, finished=None, renorm=0,
    output_softmax_result_flag=False) -> (y, expert_idx, softmax_result): renorm 0: softmax,
    then top-k; 1: top-k, then the softmax of the k. softmax_result (float32, x's shape) is
    returned with output_softmax_result_flag and renorm 0; otherwise None (with renorm 1 the
    vendor ignores the flag, as here). expert_idx int32."""
    _autograd._check_tensor(x, "x")
    _autograd._check_tensor(finished, "finished", optional=True)
    flag = bool(output_softmax_result_flag) and renorm == 0
    outputs = _api().moe_gating_top_k_softmax(x, k, finished, renorm, flag,
                                              index_dtype=torch.int32, device=device,
                                              handle=handle)
    return outputs[0], outputs[1], outputs[3] if flag else None


def npu_moe_gating_top_k(x, k, *, bias=None, k_group=1, group_count=1, group_select_mode=0,
                         renorm=0, norm_type=1, out_flag=False, routed_scaling_factor=1.0,
                         eps=1e-20, device="cpu", handle=None):
    """torch_npu.npu_moe_gating_top_k(x, k, *, bias=None, k_group=1, group_count=1,
    group_select_mode=0, renorm=0, norm_type=1, out_flag=False, routed_scaling_factor=1.0,
    eps=1e-20) -> (y, expert_idx, out): moe_gating_top_k with the same attributes; out is
    norm_out (float32, x's shape) with out_flag, else None; expert_idx int32. y differentiable
    with respect to x (not bias)."""
    _autograd._check_tensor(x, "x")
    _autograd._check_tensor(bias, "bias", optional=True)
    return _api().moe_gating_top_k(
        x, k, bias, k_group, group_count, group_select_mode, renorm, norm_type, out_flag,
        routed_scaling_factor, eps, index_dtype=torch.int32, device=device, handle=handle)
