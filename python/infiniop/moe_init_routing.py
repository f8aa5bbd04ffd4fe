# SPDX-License-Identifier: Apache-2.0
"""MoeInitRoutingV2 and MoeInitRoutingV2Grad: the MoE dispatch and its gradient.

R tokens, top-K experts per token, hidden size H, E experts; position p = r*K + k.
x (R, H) is F32, F16 or BF16; expert_idx (R, K) is INT32 or INT64 (torch.topk gives int64),
every value in [0, expert_num). expanded_row_idx (R*K) and the token counts (E) are each INT32
or INT64.

MoeInitRoutingV2 (forward): the positions are sorted by (expert_idx[p], p), a stable sort by
expert; s(p) is the rank of p, c_e the number of positions of expert e.
    drop_pad_mode 0 (dropless): expanded_row_idx[p] = s(p) (a permutation of [0, R*K));
        expanded_x (A, H), A = active_num if 0 < active_num < R*K else R*K, gets
        expanded_x[s(p)] = x[p // K] for s(p) < A. expert_tokens_count_or_cumsum_flag 1 / 2:
        expert_tokens_count_or_cumsum (E) = inclusive cumsum of c / c (all R*K positions).
    drop_pad_mode 1 (drop/pad): expanded_x (expert_num, expert_capacity, H); the j-th position
        of expert e goes to slot [e][j] with expanded_row_idx[p] = e*C + j while j < C, later
        ones are dropped (-1); slots no token fills are zero.
        expert_tokens_before_capacity_flag: expert_tokens_before_capacity (E) = c.
    Rows are copied bit for bit. An output its flag does not ask for is neither checked nor
    written. Out-of-range expert ids are BAD_PARAM with nothing written.

MoeInitRoutingV2Grad (the gradient of expanded_x), grad_x (R, H):
    grad_x[r] = sum over k < top_k of grad_expanded_x[expanded_row_idx[r*top_k + k]]
    summed in F32 in increasing k, rounded once; skipped indices (values >= A in mode 0, -1 in
    mode 1) add nothing. grad_expanded_x has the Init's expanded_x shape.

The pipeline: Init mode 0 pairs with moe_finalize_routing_v2 mode 2 (when A = R*K) and its
grad's mode 0 (same active_num); Init mode 1 with forward mode 3 and grad mode 1 (same
expert_num, expert_capacity).
"""

import functools
import sys

from ._dispatch import output_names, run
from ._operator import (NullableOperator, array_views, check_bool, check_int64, expanded_shape,
                        index_dtype_of, split_out)
from .core import array_view, check_out, output
from .enums import DType

__all__ = ["MoeInitRoutingQuantV2", "MoeInitRoutingV2", "MoeInitRoutingV2Grad",
           "moe_init_routing_quant_v2", "moe_init_routing_v2", "moe_init_routing_v2_grad"]


def _init_attributes(*attributes):
    """The checked attributes (a dict callers must not change), cached for hashable ones."""
    try:
        return _cached_init_attributes(*attributes)
    except TypeError:  # unhashable, or refused: checked again to raise the check's own message
        return _check_init_attributes(*attributes)


def _check_init_attributes(active_num, expert_capacity, expert_num, drop_pad_mode,
                     expert_tokens_count_or_cumsum_flag, expert_tokens_before_capacity_flag):
    return {"active_num": check_int64("active_num", active_num),
            "expert_capacity": check_int64("expert_capacity", expert_capacity),
            "expert_num": check_int64("expert_num", expert_num),
            "drop_pad_mode": check_int64("drop_pad_mode", drop_pad_mode),
            "expert_tokens_count_or_cumsum_flag": check_int64(
                "expert_tokens_count_or_cumsum_flag", expert_tokens_count_or_cumsum_flag),
            "expert_tokens_before_capacity_flag": check_bool(
                "expert_tokens_before_capacity_flag", expert_tokens_before_capacity_flag)}


# typed: True is refused where 1 is taken, so they must not share an entry.
_cached_init_attributes = functools.lru_cache(maxsize=64, typed=True)(_check_init_attributes)


class MoeInitRoutingV2(NullableOperator):
    """An infiniopMoeInitRoutingV2Descriptor_t: MoeInitRoutingV2(handle, expanded_x_desc,
    expanded_row_idx_desc, expert_tokens_count_or_cumsum_desc, expert_tokens_before_capacity_desc,
    x_desc, expert_idx_desc, active_num=0, expert_capacity=0, expert_num=..., drop_pad_mode=0,
    expert_tokens_count_or_cumsum_flag=0, expert_tokens_before_capacity_flag=False) (the two
    count descriptors may be None), or MoeInitRoutingV2.for_arrays(handle, expanded_x,
    expanded_row_idx, counts, before_capacity, x, expert_idx, ...). Call it as op(expanded_x,
    expanded_row_idx, counts, before_capacity, x, expert_idx) with pointers or arrays (an absent
    count as None); on OpenCL it needs a workspace, which the call allocates when none is
    given."""

    _NAME = "MoeInitRoutingV2"
    _ARGUMENTS = ("expanded_x", "expanded_row_idx", "expert_tokens_count_or_cumsum",
                  "expert_tokens_before_capacity", "x", "expert_idx")
    _OPTIONAL = ("expert_tokens_count_or_cumsum", "expert_tokens_before_capacity")
    _OUTPUTS = ("expanded_x", "expanded_row_idx", "expert_tokens_count_or_cumsum",
                "expert_tokens_before_capacity")

    @classmethod
    def _attributes(cls, *, expert_num, active_num=0, expert_capacity=0, drop_pad_mode=0,
                    expert_tokens_count_or_cumsum_flag=0,
                    expert_tokens_before_capacity_flag=False):
        checked = _init_attributes(active_num, expert_capacity, expert_num, drop_pad_mode,
                                   expert_tokens_count_or_cumsum_flag,
                                   expert_tokens_before_capacity_flag)
        return checked, list(checked.values())  # the C order: the dict's


class MoeInitRoutingQuantV2(NullableOperator):
    """An infiniopMoeInitRoutingQuantV2Descriptor_t: MoeInitRoutingQuantV2(handle, expanded_x_desc,
    expanded_row_idx_desc, counts_desc, before_capacity_desc, dynamic_quant_scale_desc, x_desc,
    expert_idx_desc, scale_desc, offset_desc, expert_num=..., ..., quant_mode='dynamic') (the
    nullable descriptors may be None), or MoeInitRoutingQuantV2.for_arrays(handle, ...). Call it
    as op(expanded_x, expanded_row_idx, counts, before_capacity, dynamic_quant_scale, x,
    expert_idx, scale, offset) (absent ones as None or left out)."""

    _NAME = "MoeInitRoutingQuantV2"
    _ARGUMENTS = ("expanded_x", "expanded_row_idx", "expert_tokens_count_or_cumsum",
                  "expert_tokens_before_capacity", "dynamic_quant_scale", "x", "expert_idx",
                  "scale", "offset")
    _OPTIONAL = ("expert_tokens_count_or_cumsum", "expert_tokens_before_capacity",
                 "dynamic_quant_scale", "scale", "offset")
    _OUTPUTS = ("expanded_x", "expanded_row_idx", "expert_tokens_count_or_cumsum",
                "expert_tokens_before_capacity", "dynamic_quant_scale")

    @classmethod
    def _attributes(cls, *, expert_num, active_num=0, expert_capacity=0, drop_pad_mode=0,
                    expert_tokens_count_or_cumsum_flag=0,
                    expert_tokens_before_capacity_flag=False, quant_mode="dynamic"):
        from .gated_quant import QUANT_MODES, QuantMode, _parse

        checked = {**_init_attributes(active_num, expert_capacity, expert_num, drop_pad_mode,
                                      expert_tokens_count_or_cumsum_flag,
                                      expert_tokens_before_capacity_flag),
                   "quant_mode": _parse(QuantMode, quant_mode, "quant_mode", QUANT_MODES)}
        return checked, [int(v) for v in checked.values()]  # the C order: the dict's


class MoeInitRoutingV2Grad(NullableOperator):
    """An infiniopMoeInitRoutingV2GradDescriptor_t: MoeInitRoutingV2Grad(handle, grad_x_desc,
    grad_expanded_x_desc, expanded_row_idx_desc, top_k=..., drop_pad_mode=0, active_num=0), or
    MoeInitRoutingV2Grad.for_arrays(handle, grad_x, grad_expanded_x, expanded_row_idx, ...).
    Call it as op(grad_x, grad_expanded_x, expanded_row_idx) with pointers or arrays."""

    _NAME = "MoeInitRoutingV2Grad"
    _ARGUMENTS = ("grad_x", "grad_expanded_x", "expanded_row_idx")
    _OUTPUTS = ("grad_x",)

    @classmethod
    def _attributes(cls, *, top_k, drop_pad_mode=0, active_num=0):
        checked = {"top_k": check_int64("top_k", top_k),
                   "drop_pad_mode": check_int64("drop_pad_mode", drop_pad_mode),
                   "active_num": check_int64("active_num", active_num)}
        return checked, list(checked.values())


# --------------------------------------------------------------------------------------------
# Functions on arrays

# The inputs moe_init_routing_v2 allocates its outputs like (the dtype of each is that input's,
# or index_dtype).
_OUTPUT_LIKE = ("x", "expert_idx", "expert_idx", "expert_idx")


def moe_init_routing_v2(x, expert_idx, *, expert_num, active_num=0, expert_capacity=0,
                        drop_pad_mode=0, expert_tokens_count_or_cumsum_flag=0,
                        expert_tokens_before_capacity_flag=False, index_dtype=None,
                        device="cpu", out=None, handle=None, _stage=None, _record=None):
    """(expanded_x, expanded_row_idx, expert_tokens_count_or_cumsum or None,
    expert_tokens_before_capacity or None): the MoE dispatch of x by expert_idx (see the
    module docstring), as torch_npu.npu_moe_init_routing_v2.

    x (R, H): float32, float16, bfloat16 (numpy: float32, float16); expert_idx (R, K): int32 or
    int64, values in [0, expert_num). NumPy arrays or torch CPU tensors of one kind, any
    strides. drop_pad_mode 0: expanded_x (A, H), A = active_num if 0 < active_num < R*K else
    R*K; expert_tokens_count_or_cumsum_flag 1 (cumsum) / 2 (count) returns the (E,) counts.
    drop_pad_mode 1: expanded_x (expert_num, expert_capacity, H); expert_tokens_before_capacity_flag
    True returns the (E,) counts before the capacity cut. An output its flag does not ask for is
    returned None (or as given in out, untouched).
    index_dtype: the dtype of expanded_row_idx and of the counts: None (the default) follows
    expert_idx's dtype (int64 after torch.topk), or int32 / int64 as a torch or NumPy dtype, a
    DType or a name. out: None, or a tuple (expanded_x, expanded_row_idx, counts,
    before_capacity) of where to write (any strides; None entries, or a shorter tuple, are
    allocated contiguous). device: 'cpu', 'cpu_reference', 'opencl' or a Device; ignored when a
    Handle is given. Raises InfiniopError with the library's status and reason (BAD_PARAM for a
    bad mode, flag, expert_num, expert_capacity or active_num or an expert id out of range,
    BAD_TENSOR_SHAPE, BAD_TENSOR_DTYPE, BAD_TENSOR_STRIDES for outputs overlapping).
    """
    attributes = _init_attributes(active_num, expert_capacity, expert_num, drop_pad_mode,
                                  expert_tokens_count_or_cumsum_flag,
                                  expert_tokens_before_capacity_flag)
    x_view = array_view(x, "x")
    idx_view = array_views(x_view.kind, expert_idx=expert_idx)["expert_idx"]
    index_dtype = index_dtype_of(index_dtype, expert_idx, x_view.kind)
    expanded_x, row_idx, counts, before = split_out(out, 4)
    hidden = x_view.shape[-1] if x_view.shape else 0
    total = idx_view.numel
    mode = attributes["drop_pad_mode"]
    experts = max(attributes["expert_num"], 0)
    if expanded_x is None:
        shape = expanded_shape(mode, experts, attributes["expert_capacity"],
                                attributes["active_num"], total, hidden)
        expanded_x, expanded_view = output(None, x, x_view, shape)
    else:
        expanded_view = check_out(expanded_x, x_view.kind, "out[0]")
    row_idx, row_view = output(row_idx, expert_idx, idx_view, (total,), index_dtype, "out[1]")
    if counts is not None or (mode == 0
                              and attributes["expert_tokens_count_or_cumsum_flag"] in (1, 2)):
        counts, counts_view = output(counts, expert_idx, idx_view, (experts,), index_dtype,
                                     "out[2]")
    else:
        counts_view = None
    if before is not None or (mode == 1 and attributes["expert_tokens_before_capacity_flag"]):
        before, before_view = output(before, expert_idx, idx_view, (experts,), index_dtype,
                                     "out[3]")
    else:
        before_view = None
    views = [expanded_view, row_view, counts_view, before_view]
    given = split_out(out, 4)
    names = []
    for index, (c_name, like) in enumerate(zip(MoeInitRoutingV2._OUTPUTS, _OUTPUT_LIKE)):
        names += output_names(given[index], like, c_name, out_name=f"out[{index}]")
    run(MoeInitRoutingV2, views + [x_view, idx_view], attributes, device, handle, _stage,
        names=names, record=_record)
    return expanded_x, row_idx, counts, before


def _as_array(value, like_view, like, name):
    """A static scale or offset: an array as given, or a number as a (1,) float32 array of
    like's kind."""
    if value is None or hasattr(value, "shape"):
        return value
    if like_view.kind == "torch":
        return sys.modules["torch"].tensor([float(value)], dtype=sys.modules["torch"].float32)
    import numpy as np

    return np.array([float(value)], dtype=np.float32)


def moe_init_routing_quant_v2(x, expert_idx, *, expert_num, quant_mode="dynamic", dtype="int8",
                              scale=None, offset=None, active_num=0, expert_capacity=0,
                              drop_pad_mode=0, expert_tokens_count_or_cumsum_flag=0,
                              expert_tokens_before_capacity_flag=False, index_dtype=None,
                              device="cpu", out=None, handle=None, _stage=None):
    """(expanded_x, expanded_row_idx, counts or None, before_capacity or None,
    dynamic_quant_scale or None): moe_init_routing_v2 with expanded_x quantized per row
    (MoeInitRoutingQuantV2, docs/moe_init_routing_quant.md; CANN's aclnnMoeInitRoutingQuantV2).

    The routing outputs and every attribute are moe_init_routing_v2's. quant_mode 'static' (0):
    expanded_x = round(v * scale + offset), scale and offset (1,) float32 (or numbers), in
    float64 with one rounding for the sum; dynamic_quant_scale is None. 'dynamic' (1, the
    default): z = v * m, m = scale[e] (scale (expert_num, H) float32), scale[0] ((1, H)) or 1
    (scale None; offset must be None); each expanded row's scale s = amax / qmax of its exact |z|
    rounded to F32 (at least 2^-126; a NaN in the row gives NaN) is returned as
    dynamic_quant_scale ((A,) dropless, (expert_num, expert_capacity) drop/pad; unfilled slots 0)
    and expanded_x = round(z / s). Bytes rounded once to nearest even and saturated: dtype int8
    (qmax 127) or FP8 E4M3 ('fp8', torch.float8_e4m3fn, qmax 448; uint8 bytes where PyTorch has
    no float8, and for NumPy). Exact: the same bytes and scales on every device. out: None or a
    tuple (expanded_x, expanded_row_idx, counts, before_capacity, dynamic_quant_scale) of where
    to write (None entries allocated). index_dtype, device, handle: as moe_init_routing_v2.
    """
    from .gated_quant import QuantMode, _array_dtype, quant_dtype

    attributes = MoeInitRoutingQuantV2._attributes(
        expert_num=expert_num, active_num=active_num, expert_capacity=expert_capacity,
        drop_pad_mode=drop_pad_mode,
        expert_tokens_count_or_cumsum_flag=expert_tokens_count_or_cumsum_flag,
        expert_tokens_before_capacity_flag=expert_tokens_before_capacity_flag,
        quant_mode=quant_mode)[0]
    code = quant_dtype(dtype)
    x_view = array_view(x, "x")
    scale = _as_array(scale, x_view, x, "scale")
    offset = _as_array(offset, x_view, x, "offset")
    views = array_views(x_view.kind, expert_idx=expert_idx, scale=scale, offset=offset)
    idx_view = views["expert_idx"]
    index_dtype = index_dtype_of(index_dtype, expert_idx, x_view.kind)
    expanded_x, row_idx, counts, before, dynamic_scale = split_out(out, 5)
    hidden = x_view.shape[-1] if x_view.shape else 0
    total = idx_view.numel
    mode = attributes["drop_pad_mode"]
    experts = max(attributes["expert_num"], 0)
    shape = expanded_shape(mode, experts, attributes["expert_capacity"], attributes["active_num"],
                           total, hidden)
    expanded_x, expanded_view = output(expanded_x, x, x_view, shape,
                                       _array_dtype(code, x_view.kind), "out[0]")
    if code == DType.F8 and expanded_view.dtype == DType.U8:  # FP8's raw bytes
        expanded_view = expanded_view._replace(dtype=DType.F8)
    row_idx, row_view = output(row_idx, expert_idx, idx_view, (total,), index_dtype, "out[1]")
    counts_view = before_view = scale_view = None
    if counts is not None or (mode == 0
                              and attributes["expert_tokens_count_or_cumsum_flag"] in (1, 2)):
        counts, counts_view = output(counts, expert_idx, idx_view, (experts,), index_dtype,
                                     "out[2]")
    if before is not None or (mode == 1 and attributes["expert_tokens_before_capacity_flag"]):
        before, before_view = output(before, expert_idx, idx_view, (experts,), index_dtype,
                                     "out[3]")
    if dynamic_scale is not None or attributes["quant_mode"] == QuantMode.DYNAMIC:
        f32 = sys.modules["torch"].float32 if x_view.kind == "torch" else "float32"
        dynamic_scale, scale_view = output(dynamic_scale, x, x_view, shape[:-1], f32, "out[4]")
    given = split_out(out, 5)
    names = []
    for index, (c_name, like) in enumerate(zip(MoeInitRoutingQuantV2._OUTPUTS,
                                               _OUTPUT_LIKE + ("x",))):
        names += output_names(given[index], like, c_name, out_name=f"out[{index}]")
    run(MoeInitRoutingQuantV2,
        [expanded_view, row_view, counts_view, before_view, scale_view, x_view, idx_view,
         views["scale"], views["offset"]], attributes, device, handle, _stage, names=names)
    return expanded_x, row_idx, counts, before, dynamic_scale


def moe_init_routing_v2_grad(grad_expanded_x, expanded_row_idx, *, top_k, drop_pad_mode=0,
                             active_num=0, device="cpu", out=None, handle=None, _stage=None):
    """grad_x (R, H): the gradient of moe_init_routing_v2's expanded_x with respect to x,
    grad_x[r] = sum_k grad_expanded_x[expanded_row_idx[r*top_k + k]] (skipped indices add 0).

    grad_expanded_x: (A, H) in drop_pad_mode 0 (A from active_num as in the Init), (E, C, H)
    in drop_pad_mode 1; float32, float16, bfloat16. expanded_row_idx (R*top_k): int32 or int64,
    as the Init wrote it. NumPy arrays or torch CPU tensors of one kind, any strides. out: where
    to write, (R, H), R = expanded_row_idx.size // top_k, any strides; allocated contiguous like
    grad_expanded_x when None. device, handle: as in moe_init_routing_v2(). Returns out. Raises
    InfiniopError with the library's status and reason (BAD_PARAM for top_k <= 0, a bad mode,
    active_num < 0 in mode 0 or an index value out of range; BAD_TENSOR_SHAPE, ...).
    """
    attributes = MoeInitRoutingV2Grad._attributes(top_k=top_k, drop_pad_mode=drop_pad_mode,
                                                  active_num=active_num)[0]
    g_view = array_view(grad_expanded_x, "grad_expanded_x")
    idx_view = array_views(g_view.kind, expanded_row_idx=expanded_row_idx)["expanded_row_idx"]
    names = output_names(out, "grad_expanded_x", "grad_x")
    if out is None:
        hidden = g_view.shape[-1] if g_view.shape else 0
        k = attributes["top_k"]
        rows = idx_view.numel // k if k > 0 else 0  # top_k <= 0: the library's BAD_PARAM
        out, out_view = output(None, grad_expanded_x, g_view, (rows, hidden))
    else:
        out_view = check_out(out, g_view.kind)
    run(MoeInitRoutingV2Grad, [out_view, g_view, idx_view], attributes, device, handle, _stage,
        names=names)
    return out
