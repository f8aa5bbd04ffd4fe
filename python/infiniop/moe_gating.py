# SPDX-License-Identifier: Apache-2.0
"""MoeGatingTopKSoftmax, MoeGatingTopK and their grads: the MoE routers (the gating top-k).

x (..., E) is F32, F16 or BF16, rank >= 2, any strides; its leading dims are R rows (R = 0 is
valid: nothing to do). The arithmetic is F32; y has x's dtype (rounded once at the store),
softmax_out / norm_out are F32. The index outputs (expert_idx, row_idx) are INT32 or INT64
(index_dtype; int32 by default, as torch_npu). Selection ("top-k"): by key descending; NaN keys
rank above +inf; equal keys (NaN with NaN, +0 with -0) are taken lower expert index first, so
every device selects the same experts; the k outputs are in that order, largest first.
p = softmax(x) is exp(x_j - max x) over its row sum (a fixed summation order), one F32
division; sigmoid is the library's own (finite for finite x, 0 at -inf, 1 at +inf).
docs/moe_gating_top_k_softmax.md and docs/moe_gating_top_k.md have the exact arithmetic and the
bounds.

MoeGatingTopKSoftmax (torch_npu npu_moe_gating_top_k_softmax and its V2):
    renorm 0: p = softmax(x); expert_idx = top k of p; y_i = p[expert_idx_i].
    renorm 1: expert_idx = top k of x; y = softmax of those k values (m = the largest).
    softmax_out (..., E) F32 = p (renorm 0 only: asking for it with renorm 1 is BAD_PARAM).
    row_idx (..., k): row_idx[r, i] = i * R + r (the vendor's column layout, which
        moe_finalize_routing_v2 reads in drop_pad_mode 0 and 1).
    finished (R, BOOL, x's leading shape; optional): a true row gets y = 0 and expert_idx = E
        (softmax_out and row_idx still written).
    1 <= k <= E, renorm in {0, 1}, else BAD_PARAM. A row with a NaN has p all NaN (renorm 0
    then selects experts 0..k-1); +inf in x gives NaN (inf - inf).
MoeGatingTopKSoftmaxGrad, grad_x (..., E) from grad_y (..., k) for the given expert_idx:
    renorm 0: grad_x_j = p_j (G_j - d), G_j = sum of g_i over the slots i with s_i = j,
              d = sum_i g_i p_{s_i};
    renorm 1: grad_x_j = sum over slots i with s_i = j of y_i (g_i - d), d = sum_i g_i y_i
              (y recomputed from x and the given indices); 0 for unselected experts.
    Finished rows get 0; expert_idx must be in [0, E) on the other rows (BAD_PARAM otherwise,
    nothing written); duplicate indices count per slot.

MoeGatingTopK (DeepSeek-V3's grouped router, torch_npu npu_moe_gating_top_k):
    p = softmax(x) (norm_type 0), sigmoid(x) (norm_type 1) or sqrt(softplus(x)) (norm_type 2,
    DeepSeek-V4, a library extension); v = p + bias (bias (E), x's dtype or F32, optional:
    selection only). group_count > 1: E / group_count consecutive experts per group, scored by
    their max v (group_select_mode 0), the sum of their two largest v (1) or of their
    k // k_group largest (2, Megatron-LM / TransformerEngine);
    only the top k_group groups' experts are selectable. expert_idx = top k of v among them;
    w_i = p[expert_idx_i]; y_i = (w_i / (sum w + eps)) * routed_scaling_factor.
    norm_out (..., E) F32 = p (the vendor's out_flag).
    renorm must be 0; norm_type in {0, 1, 2}; E % group_count == 0;
    1 <= k_group <= group_count; group_select_mode 1 needs groups of >= 2, mode 2 k >= k_group;
    1 <= k <= k_group * E / group_count;
    routed_scaling_factor and eps finite (rounded to F32), eps >= 0; else BAD_PARAM.
MoeGatingTopKGrad: the gradient of y w.r.t. x through the selected weights (the bias and the
    selection are not differentiated): D = sum w + eps, c = routed_scaling_factor,
    t = sum_i g_i w_i, grad_w_i = (c / D) (g_i - t / D); grad_p_j = sum over slots i with
    s_i = j of grad_w_i; sigmoid: grad_x_j = grad_p_j p_j (1 - p_j); sqrtsoftplus:
    grad_x_j = grad_p_j sigmoid(x_j) / (2 p_j); softmax:
    grad_x_j = p_j (grad_p_j - q), q = sum_i grad_w_i p_{s_i}. expert_idx in [0, E) else
    BAD_PARAM.

Validation is at creation; the grads' index checks run before any write. Errors raise
InfiniopError with the library's status and reason.
"""

import math
import numbers

from ._dispatch import output_names, run
from ._operator import (NullableOperator, array_views, check_bool, check_int64, index_dtype_of,
                        split_out)
from .core import array_view, output

__all__ = ["MoeGatingTopK", "MoeGatingTopKGrad", "MoeGatingTopKSoftmax",
           "MoeGatingTopKSoftmaxGrad", "moe_gating_top_k", "moe_gating_top_k_grad",
           "moe_gating_top_k_softmax", "moe_gating_top_k_softmax_grad"]

DEFAULTS = {"k_group": 1, "group_count": 1, "group_select_mode": 0, "renorm": 0, "norm_type": 1,
            "routed_scaling_factor": 1.0, "eps": 1e-20}


def _check_double(name, value):
    """A real number as a Python float (the C API's double; its validity is the library's)."""
    if type(value) is not float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be a real number, not {type(value).__name__}")
        value = float(value)
    return value


def _zero_signs(attributes):
    """run()'s key_extra: -0.0 == 0.0 as a cache key, yet a routed_scaling_factor of -0.0 gives
    -0 weights where 0.0 gives +0."""
    values = (attributes["routed_scaling_factor"], attributes["eps"])
    if all(values):
        return ()
    return tuple(math.copysign(1.0, v) if v == 0 else 0.0 for v in values)


# --------------------------------------------------------------------------------------------
# Descriptors

class MoeGatingTopKSoftmax(NullableOperator):
    """An infiniopMoeGatingTopKSoftmaxDescriptor_t: MoeGatingTopKSoftmax(handle, y_desc,
    expert_idx_desc, row_idx_desc, softmax_out_desc, x_desc, finished_desc=None, k=...,
    renorm=0) (row_idx, softmax_out and finished may be None), or
    MoeGatingTopKSoftmax.for_arrays(handle, y, expert_idx, row_idx, softmax_out, x, finished,
    k=..., renorm=0). Call it as op(y, expert_idx, row_idx, softmax_out, x, finished) with
    pointers or arrays (an absent tensor as None)."""

    _NAME = "MoeGatingTopKSoftmax"
    _ARGUMENTS = ("y", "expert_idx", "row_idx", "softmax_out", "x", "finished")
    _OPTIONAL = ("row_idx", "softmax_out", "finished")
    _OUTPUTS = ("y", "expert_idx", "row_idx", "softmax_out")

    @classmethod
    def _attributes(cls, *, k, renorm=0):
        checked = {"k": check_int64("k", k), "renorm": check_int64("renorm", renorm)}
        return checked, list(checked.values())


class MoeGatingTopKSoftmaxGrad(NullableOperator):
    """An infiniopMoeGatingTopKSoftmaxGradDescriptor_t: MoeGatingTopKSoftmaxGrad(handle,
    grad_x_desc, grad_y_desc, x_desc, expert_idx_desc, finished_desc=None, renorm=0), or
    MoeGatingTopKSoftmaxGrad.for_arrays(handle, grad_x, grad_y, x, expert_idx, finished,
    renorm=0). Call it as op(grad_x, grad_y, x, expert_idx, finished)."""

    _NAME = "MoeGatingTopKSoftmaxGrad"
    _ARGUMENTS = ("grad_x", "grad_y", "x", "expert_idx", "finished")
    _OPTIONAL = ("finished",)
    _OUTPUTS = ("grad_x",)

    @classmethod
    def _attributes(cls, *, renorm=0):
        renorm = check_int64("renorm", renorm)
        return {"renorm": renorm}, [renorm]


def _check_gating_attributes(k, k_group, group_count, group_select_mode, renorm, norm_type,
                             routed_scaling_factor, eps):
    return {"k": check_int64("k", k), "k_group": check_int64("k_group", k_group),
            "group_count": check_int64("group_count", group_count),
            "group_select_mode": check_int64("group_select_mode", group_select_mode),
            "renorm": check_int64("renorm", renorm),
            "norm_type": check_int64("norm_type", norm_type),
            "routed_scaling_factor": _check_double("routed_scaling_factor",
                                                   routed_scaling_factor),
            "eps": _check_double("eps", eps)}


class MoeGatingTopK(NullableOperator):
    """An infiniopMoeGatingTopKDescriptor_t: MoeGatingTopK(handle, y_desc, expert_idx_desc,
    norm_out_desc, x_desc, bias_desc=None, k=..., k_group=1, group_count=1,
    group_select_mode=0, renorm=0, norm_type=1, routed_scaling_factor=1.0, eps=1e-20)
    (norm_out and bias may be None), or MoeGatingTopK.for_arrays(handle, y, expert_idx,
    norm_out, x, bias, ...). Call it as op(y, expert_idx, norm_out, x, bias)."""

    _NAME = "MoeGatingTopK"
    _ARGUMENTS = ("y", "expert_idx", "norm_out", "x", "bias")
    _OPTIONAL = ("norm_out", "bias")
    _OUTPUTS = ("y", "expert_idx", "norm_out")

    @classmethod
    def _attributes(cls, *, k, k_group=1, group_count=1, group_select_mode=0, renorm=0,
                    norm_type=1, routed_scaling_factor=1.0, eps=1e-20):
        checked = _check_gating_attributes(k, k_group, group_count, group_select_mode, renorm,
                                           norm_type, routed_scaling_factor, eps)
        return checked, list(checked.values())  # the C order: the dict's


class MoeGatingTopKGrad(NullableOperator):
    """An infiniopMoeGatingTopKGradDescriptor_t: MoeGatingTopKGrad(handle, grad_x_desc,
    grad_y_desc, x_desc, expert_idx_desc, norm_type=1, renorm=0, routed_scaling_factor=1.0,
    eps=1e-20), or MoeGatingTopKGrad.for_arrays(handle, grad_x, grad_y, x, expert_idx, ...).
    Call it as op(grad_x, grad_y, x, expert_idx)."""

    _NAME = "MoeGatingTopKGrad"
    _ARGUMENTS = ("grad_x", "grad_y", "x", "expert_idx")
    _OUTPUTS = ("grad_x",)

    @classmethod
    def _attributes(cls, *, norm_type=1, renorm=0, routed_scaling_factor=1.0, eps=1e-20):
        checked = {"norm_type": check_int64("norm_type", norm_type),
                   "renorm": check_int64("renorm", renorm),
                   "routed_scaling_factor": _check_double("routed_scaling_factor",
                                                          routed_scaling_factor),
                   "eps": _check_double("eps", eps)}
        return checked, list(checked.values())


# --------------------------------------------------------------------------------------------
# Functions on arrays

def _topk_shape(x_view, k):
    """x's leading shape with last dim k: the shape of y and the indices. A k the library
    rejects (k < 1 or k > E: BAD_PARAM) still gets an array it can describe (never a negative or
    huge size)."""
    experts = x_view.shape[-1] if x_view.shape else 0
    return tuple(x_view.shape[:-1]) + (min(max(k, 0), experts + 1),)


def _router_outputs(cls, x, x_view, k, index_dtype, out, want_last):
    """([arrays], [views], run()'s names) of a router's outputs (cls._OUTPUTS): y (x's dtype)
    and the indices (index_dtype; int32 when None) of x's leading shape with last dim k, and
    the last one (softmax_out / norm_out: float32 of x's shape) when want_last or given in
    out; an output neither asked for nor given is None."""
    index_dtype = index_dtype_of("int32" if index_dtype is None else index_dtype, None,
                               x_view.kind)
    count = len(cls._OUTPUTS)
    given = split_out(out, count)
    shape = _topk_shape(x_view, k)
    arrays, views, names = [], [], []
    for index, c_name in enumerate(cls._OUTPUTS):
        name = f"out[{index}]"
        if index == count - 1:
            if not want_last and given[index] is None:
                arrays.append(None)
                views.append(None)
                continue
            array, view = output(given[index], x, x_view, x_view.shape,
                                 _float32(x_view.kind), name)
        else:
            array, view = output(given[index], x, x_view, shape,
                                 None if index == 0 else index_dtype, name)
        arrays.append(array)
        views.append(view)
        names += output_names(given[index], "x", c_name, out_name=name)
    return arrays, views, names


def moe_gating_top_k_softmax(x, k, finished=None, renorm=0, softmax_out=False, *,
                             index_dtype="int32", device="cpu", out=None, handle=None,
                             _stage=None, _record=None):
    """(y, expert_idx, row_idx), or (y, expert_idx, row_idx, softmax_out) with
    softmax_out=True: the softmax router (see the module docstring), as
    torch_npu.npu_moe_gating_top_k_softmax (renorm 0) and its V2 (renorm 0 or 1).

    x (..., E), rank >= 2: float32, float16, bfloat16 (numpy: float32, float16); finished:
    None or a bool array of x's leading shape. NumPy arrays or torch CPU tensors of one kind,
    any strides. y (..., k) has x's dtype; expert_idx and row_idx (..., k) index_dtype (int32,
    the default, or int64: a torch or NumPy dtype, a DType or a name); softmax_out (..., E)
    float32, renorm 0 only. out: None, or a tuple (y, expert_idx, row_idx, softmax_out) of
    where to write (any strides; None entries, or a shorter tuple, are allocated contiguous; a
    softmax_out given there is written even without softmax_out=True). device: 'cpu',
    'cpu_reference', 'opencl' or a Device; ignored when a Handle is given. Raises InfiniopError
    with the library's status and reason (BAD_PARAM for k outside [1, E], renorm not 0 or 1,
    softmax_out with renorm 1; BAD_TENSOR_SHAPE, BAD_TENSOR_DTYPE, BAD_TENSOR_STRIDES for
    outputs overlapping).
    """
    attributes = MoeGatingTopKSoftmax._attributes(k=k, renorm=renorm)[0]
    want_softmax = check_bool("softmax_out", softmax_out)
    x_view = array_view(x, "x")
    f_view = array_views(x_view.kind, finished=finished)["finished"]
    arrays, views, names = _router_outputs(MoeGatingTopKSoftmax, x, x_view, attributes["k"],
                                           index_dtype, out, want_softmax)
    run(MoeGatingTopKSoftmax, views + [x_view, f_view], attributes, device, handle, _stage,
        names=names, record=_record)
    return tuple(arrays) if want_softmax else tuple(arrays[:3])


def _float32(kind):
    if kind == "torch":
        import torch

        return torch.float32
    import numpy as np

    return np.dtype(np.float32)


def moe_gating_top_k_softmax_grad(grad_y, x, expert_idx, finished=None, renorm=0, *,
                                  device="cpu", out=None, handle=None, _stage=None):
    """grad_x (..., E): the gradient of moe_gating_top_k_softmax's y with respect to x for the
    given expert_idx (see the module docstring); finished rows get 0.

    grad_y (..., k) and x (..., E) of one dtype (float32, float16, bfloat16); expert_idx
    (..., k) int32 or int64, values in [0, E) on rows finished does not mark; finished: None or
    bool of x's leading shape. NumPy arrays or torch CPU tensors of one kind, any strides. out:
    where to write, x's shape, any strides; allocated contiguous like x when None. device,
    handle: as in moe_gating_top_k_softmax(). Returns out. Raises InfiniopError (BAD_PARAM for
    an index out of range, nothing written; BAD_TENSOR_SHAPE, BAD_TENSOR_DTYPE, ...).
    """
    attributes = MoeGatingTopKSoftmaxGrad._attributes(renorm=renorm)[0]
    g_view = array_view(grad_y, "grad_y")
    views = array_views(g_view.kind, x=x, expert_idx=expert_idx, finished=finished)
    names = output_names(out, "x", "grad_x")
    out, out_view = output(out, x, views["x"], views["x"].shape, name="out")
    run(MoeGatingTopKSoftmaxGrad,
        [out_view, g_view, views["x"], views["expert_idx"], views["finished"]], attributes,
        device, handle, _stage, names=names)
    return out


def moe_gating_top_k(x, k, bias=None, k_group=1, group_count=1, group_select_mode=0, renorm=0,
                     norm_type=1, out_flag=False, routed_scaling_factor=1.0, eps=1e-20, *,
                     index_dtype="int32", device="cpu", out=None, handle=None, _stage=None,
                     _record=None):
    """(y, expert_idx, norm_out or None): DeepSeek-V3's grouped router (see the module
    docstring), as torch_npu.npu_moe_gating_top_k.

    x (..., E), rank >= 2: float32, float16, bfloat16; bias: None or (E,) of x's dtype or
    float32 (selection only). NumPy arrays or torch CPU tensors of one kind, any strides.
    y (..., k) has x's dtype, expert_idx (..., k) index_dtype (int32 by default, or int64);
    out_flag True also returns norm_out (..., E) float32 = p. out: None, or a tuple (y,
    expert_idx, norm_out) of where to write (a norm_out given there is written even without
    out_flag). device, handle: as in moe_gating_top_k_softmax(). Raises InfiniopError with the
    library's status and reason (BAD_PARAM for a bad attribute: see the module docstring).
    """
    attributes = _check_gating_attributes(k, k_group, group_count, group_select_mode, renorm,
                                          norm_type, routed_scaling_factor, eps)
    out_flag = check_bool("out_flag", out_flag)
    x_view = array_view(x, "x")
    b_view = array_views(x_view.kind, bias=bias)["bias"]
    arrays, views, names = _router_outputs(MoeGatingTopK, x, x_view, attributes["k"],
                                           index_dtype, out, out_flag)
    run(MoeGatingTopK, views + [x_view, b_view], attributes, device, handle, _stage,
        key_extra=_zero_signs(attributes), names=names, record=_record)
    return tuple(arrays)


def moe_gating_top_k_grad(grad_y, x, expert_idx, norm_type=1, renorm=0,
                          routed_scaling_factor=1.0, eps=1e-20, *, device="cpu", out=None,
                          handle=None, _stage=None):
    """grad_x (..., E): the gradient of moe_gating_top_k's y with respect to x through the
    selected weights, for the given expert_idx (the bias and the selection are not
    differentiated; see the module docstring).

    grad_y (..., k) and x (..., E) of one dtype (float32, float16, bfloat16); expert_idx
    (..., k) int32 or int64, values in [0, E). norm_type, renorm, routed_scaling_factor, eps:
    the forward's. out: where to write, x's shape, any strides; allocated contiguous like x
    when None. device, handle: as in moe_gating_top_k_softmax(). Returns out. Raises
    InfiniopError (BAD_PARAM for an index out of range or a bad attribute, nothing written).
    """
    attributes = MoeGatingTopKGrad._attributes(norm_type=norm_type, renorm=renorm,
                                               routed_scaling_factor=routed_scaling_factor,
                                               eps=eps)[0]
    g_view = array_view(grad_y, "grad_y")
    views = array_views(g_view.kind, x=x, expert_idx=expert_idx)
    names = output_names(out, "x", "grad_x")
    out, out_view = output(out, x, views["x"], views["x"].shape, name="out")
    run(MoeGatingTopKGrad, [out_view, g_view, views["x"], views["expert_idx"]], attributes,
        device, handle, _stage, key_extra=_zero_signs(attributes), names=names)
    return out
