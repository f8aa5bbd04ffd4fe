# SPDX-License-Identifier: Apache-2.0
"""MoeFinalizeRoutingV2 and MoeFinalizeRoutingV2Grad: the MoE combine and its gradient.

R tokens, top-K experts per token, hidden size H; K = scales.shape[1] (K = 1 without scales).
expanded_row_idx (R*K) and expert_idx (R, K) are each INT32 or INT64 (torch.topk and sort give
int64), range-checked on the full 64-bit value. Every floating tensor of a call shares one dtype
(F32, F16, BF16), with one exception: scales (and the grad's grad_scales, which always has the
dtype of scales) may be F32 while the activations are F16 or BF16 (F32 top-k weights with BF16
rows); F32 scales are used unrounded.

MoeFinalizeRoutingV2 (forward), out (R, H):
    out[r] = x1[r] + x2[r] + sum_k scales[r,k] * (expanded_x[idx] + bias[expert_idx[r,k]])
    drop_pad_mode 0, 1: idx = expanded_row_idx[k*R + r] (column layout)
                  2, 3: idx = expanded_row_idx[r*K + k] (row layout)
    expanded_x is (R*K, H) in modes 0 and 2, (E, C, H) in modes 1 and 3 (drop/pad), where
    idx = -1 is a dropped token: a zero row, its bias still added and scaled.
    x1, x2, bias, scales, expert_idx are optional: x2 needs x1, bias needs expert_idx.

MoeFinalizeRoutingV2Grad (row layout, i = r*K + k):
    grad_expanded_x[idx[i]] += grad_y[i // K] * scales[i]    (1 without scales; duplicates sum)
    grad_scales[i] = sum_j (expanded_x[idx[i]][j] + bias[expert_idx[i]][j]) * grad_y[i // K][j]
    drop_pad_mode 0: grad_expanded_x (rows, H), rows = active_num if 0 < active_num < R*K else
    R*K; index values in [rows, R*K) are skipped. drop_pad_mode 1: (expert_num, expert_capacity,
    H); -1 is skipped. Rows no index reaches are zero. expanded_x (grad_expanded_x's shape) is
    needed with scales, expert_idx with bias; without scales K = 1 and grad_scales is not
    written. The workspace holds the index inversion (the functions here allocate it).

Bad index values are BAD_PARAM with nothing written.
"""

import operator

from ._dispatch import output_names, run
from .core import array_view, check_out, output
from .gelu_mul import _AttributeOperator

__all__ = ["MoeFinalizeRoutingV2", "MoeFinalizeRoutingV2Grad", "moe_finalize_routing_v2",
           "moe_finalize_routing_v2_grad"]


def _check_int64(name, value):
    """value as a Python int that fits int64_t (its validity is the library's to check)."""
    if type(value) is not int:  # bool is refused, numpy and torch integers are taken
        if isinstance(value, bool):
            raise TypeError(f"{name} must be an int, not bool")
        try:
            value = operator.index(value)
        except TypeError:
            raise TypeError(f"{name} must be an int, not {type(value).__name__}") from None
    if not -2 ** 63 <= value < 2 ** 63:
        raise OverflowError(f"{name} {value} does not fit in int64_t")
    return value


class _MoeOperator(_AttributeOperator):
    """_AttributeOperator whose optional (nullable) tensors may be anywhere in the argument
    list, not only at its end: the tensors up to the last required one must be given
    (positionally, an optional one as None), the trailing optional ones may be left out."""

    @classmethod
    def _complete(cls, tensors, what):
        required = [i for i, name in enumerate(cls._ARGUMENTS) if name not in cls._OPTIONAL]
        least = required[-1] + 1
        if not least <= len(tensors) <= len(cls._ARGUMENTS):
            raise TypeError(f"{cls.__name__}{what} takes {least} to {len(cls._ARGUMENTS)} "
                            f"tensor arguments ({', '.join(cls._ARGUMENTS)}), not {len(tensors)}")
        tensors = tuple(tensors) + (None,) * (len(cls._ARGUMENTS) - len(tensors))
        for i in required:
            if tensors[i] is None:
                raise TypeError(f"{cls.__name__}{what}: {cls._ARGUMENTS[i]} is required")
        return tensors


class MoeFinalizeRoutingV2(_MoeOperator):
    """An infiniopMoeFinalizeRoutingV2Descriptor_t: MoeFinalizeRoutingV2(handle, out_desc,
    expanded_x_desc, expanded_row_idx_desc, x1_desc=None, x2_desc=None, bias_desc=None,
    scales_desc=None, expert_idx_desc=None, drop_pad_mode=0), or
    MoeFinalizeRoutingV2.for_arrays(handle, out, expanded_x, expanded_row_idx, ...). Call it as
    op(out, expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx) with pointers or
    arrays (an absent tensor as None, trailing ones may be left out)."""

    _NAME = "MoeFinalizeRoutingV2"
    _ARGUMENTS = ("out", "expanded_x", "expanded_row_idx", "x1", "x2", "bias", "scales",
                  "expert_idx")
    _OPTIONAL = ("x1", "x2", "bias", "scales", "expert_idx")
    _OUTPUTS = ("out",)

    @classmethod
    def _attributes(cls, *, drop_pad_mode=0):
        mode = _check_int64("drop_pad_mode", drop_pad_mode)
        return {"drop_pad_mode": mode}, [mode]


class MoeFinalizeRoutingV2Grad(_MoeOperator):
    """An infiniopMoeFinalizeRoutingV2GradDescriptor_t: MoeFinalizeRoutingV2Grad(handle,
    grad_expanded_x_desc, grad_scales_desc, grad_y_desc, expanded_row_idx_desc,
    expanded_x_desc=None, scales_desc=None, expert_idx_desc=None, bias_desc=None,
    drop_pad_mode=0, active_num=0, expert_num=0, expert_capacity=0) (grad_scales_desc may be
    None), or MoeFinalizeRoutingV2Grad.for_arrays(handle, grad_expanded_x, grad_scales, grad_y,
    expanded_row_idx, ...). Call it as op(grad_expanded_x, grad_scales, grad_y,
    expanded_row_idx, expanded_x, scales, expert_idx, bias); it needs a workspace
    (workspace_size), which the call allocates when none is given."""

    _NAME = "MoeFinalizeRoutingV2Grad"
    _ARGUMENTS = ("grad_expanded_x", "grad_scales", "grad_y", "expanded_row_idx", "expanded_x",
                  "scales", "expert_idx", "bias")
    _OPTIONAL = ("grad_scales", "expanded_x", "scales", "expert_idx", "bias")
    _OUTPUTS = ("grad_expanded_x", "grad_scales")

    @classmethod
    def _attributes(cls, *, drop_pad_mode=0, active_num=0, expert_num=0, expert_capacity=0):
        checked = {"drop_pad_mode": _check_int64("drop_pad_mode", drop_pad_mode),
                   "active_num": _check_int64("active_num", active_num),
                   "expert_num": _check_int64("expert_num", expert_num),
                   "expert_capacity": _check_int64("expert_capacity", expert_capacity)}
        return checked, list(checked.values())


def _expanded_shape(drop_pad_mode, expert_num, expert_capacity, active_num, total, hidden):
    """expanded_x's shape: (expert_num, expert_capacity, H) in drop_pad_mode 1, else (A, H),
    A = active_num if 0 < active_num < total (= R*K) else total (negative sizes made 0: the
    library rejects them): MoeInitRoutingV2's output and its grad's input; torch.compile's
    fake kernels allocate by this too."""
    if drop_pad_mode == 1:
        return (max(expert_num, 0), max(expert_capacity, 0), hidden)
    return ((active_num if 0 < active_num < total else total), hidden)


def _views(kind, **arrays):
    """{name: ArrayView or None} of the given arrays (None stays None), all of one kind."""
    views = {name: None if a is None else array_view(a, name) for name, a in arrays.items()}
    for name, view in views.items():
        if view is not None and view.kind != kind:
            raise TypeError(f"{name} is a {view.kind} array but the others are {kind} ones; "
                            "pass arrays of one kind")
    return views


def moe_finalize_routing_v2(expanded_x, expanded_row_idx, x1=None, x2=None, bias=None,
                            scales=None, expert_idx=None, *, drop_pad_mode=0, device="cpu",
                            out=None, handle=None, _stage=None, _record=None):
    """out = x1 + x2 + sum_k scales[:, k] * (expanded_x[idx] + bias[expert_idx[:, k]]), as
    torch_npu.npu_moe_finalize_routing (see the module docstring for idx and the modes).

    expanded_x: (R*K, H) in drop_pad_mode 0 and 2, (E, C, H) in 1 and 3; expanded_row_idx
    (R*K) int32 or int64; x1, x2 (R, H); bias (E, H); scales (R, K); expert_idx (R, K) int32 or
    int64. NumPy arrays or torch CPU tensors of one kind (float32, float16, bfloat16 for the
    floating ones, one dtype, except that scales may be float32 with float16 / bfloat16
    activations), any strides. x1, x2, bias, scales, expert_idx may be None (x2 needs x1, bias
    needs expert_idx). out: where to write, (R, H), any strides; allocated contiguous with
    expanded_x's dtype when None.
    device: 'cpu', 'cpu_reference', 'opencl' or a Device; ignored when a Handle is given.
    Returns out. Raises InfiniopError with the library's status and reason (BAD_PARAM for a bad
    mode, a missing companion tensor or an index value out of range, BAD_TENSOR_SHAPE,
    BAD_TENSOR_DTYPE, BAD_TENSOR_STRIDES for an output overlapping an input).
    """
    attributes = {"drop_pad_mode": _check_int64("drop_pad_mode", drop_pad_mode)}
    x_view = array_view(expanded_x, "expanded_x")
    views = _views(x_view.kind, expanded_row_idx=expanded_row_idx, x1=x1, x2=x2, bias=bias,
                   scales=scales, expert_idx=expert_idx)
    names = output_names(out, "expanded_x", "out")
    out, out_view = output(out, expanded_x, x_view, _forward_out_shape(
        x_view.shape, *[None if views[n] is None else views[n].shape for n in ("scales", "x1")],
        views["expanded_row_idx"].numel))
    run(MoeFinalizeRoutingV2,
        [out_view, x_view, views["expanded_row_idx"], views["x1"], views["x2"], views["bias"],
         views["scales"], views["expert_idx"]], attributes, device, handle, _stage, names=names,
        record=_record)
    return out


def _forward_out_shape(x_shape, scales_shape, x1_shape, index_numel):
    """(R, H): R from scales, else x1, else expanded_row_idx (K = 1); H from expanded_x. Shapes
    that do not fit are the library's to reject, so any guess will do for them. torch.compile's
    fake kernel allocates by this too."""
    hidden = x_shape[-1] if x_shape else 0
    if scales_shape:
        return scales_shape[0], hidden
    if x1_shape:
        return x1_shape[0], hidden
    return index_numel, hidden


def moe_finalize_routing_v2_grad(grad_y, expanded_row_idx, expanded_x=None, scales=None,
                                 expert_idx=None, bias=None, *, drop_pad_mode=0, active_num=0,
                                 expert_num=0, expert_capacity=0, device="cpu",
                                 grad_expanded_x=None, grad_scales=None, handle=None,
                                 _stage=None):
    """(grad_expanded_x, grad_scales): the gradients of moe_finalize_routing_v2 with respect to
    expanded_x and scales for the upstream gradient grad_y, in the row layout (see the module
    docstring).

    grad_y (R, H); expanded_row_idx (R*K) int32 or int64; expanded_x of grad_expanded_x's shape
    (needed with scales); scales (R, K); expert_idx (R, K) int32 or int64 (needed with bias);
    bias (E, H). NumPy arrays or torch CPU tensors of one kind, floating ones of one dtype
    (scales may be float32 with float16 / bfloat16 activations), any strides.
    drop_pad_mode 0: grad_expanded_x is (rows, H), rows = active_num if 0 < active_num < R*K
    else R*K; 1: (expert_num, expert_capacity, H). grad_expanded_x, grad_scales: where to write
    (any strides), allocated contiguous when None, grad_expanded_x with grad_y's dtype and
    grad_scales (R, K) with the dtype of scales, allocated only with scales (without scales it
    is returned None, or as given, untouched). device, handle: as in moe_finalize_routing_v2().
    Raises InfiniopError with the library's status and reason.
    """
    attributes = MoeFinalizeRoutingV2Grad._attributes(
        drop_pad_mode=drop_pad_mode, active_num=active_num, expert_num=expert_num,
        expert_capacity=expert_capacity)[0]
    g_view = array_view(grad_y, "grad_y")
    views = _views(g_view.kind, expanded_row_idx=expanded_row_idx, expanded_x=expanded_x,
                   scales=scales, expert_idx=expert_idx, bias=bias)
    names = (output_names(grad_expanded_x, "grad_y", "grad_expanded_x", out_name="grad_expanded_x")
             + output_names(grad_scales, "scales", "grad_scales", out_name="grad_scales"))
    grad_expanded_x, gx_view = output(
        grad_expanded_x, grad_y, g_view,
        None if grad_expanded_x is not None else _grad_shape(
            g_view.shape, views["expanded_row_idx"].numel, **attributes), name="grad_expanded_x")
    if grad_scales is not None:
        gs_view = check_out(grad_scales, g_view.kind, "grad_scales")
    elif views["scales"] is not None:
        grad_scales, gs_view = output(None, scales, views["scales"], views["scales"].shape)
    else:
        gs_view = None
    run(MoeFinalizeRoutingV2Grad,
         [gx_view, gs_view, g_view, views["expanded_row_idx"], views["expanded_x"],
          views["scales"], views["expert_idx"], views["bias"]], attributes, device, handle,
         _stage, names=names)
    return grad_expanded_x, grad_scales


def _grad_shape(g_shape, index_numel, *, drop_pad_mode, active_num, expert_num,
                expert_capacity):
    """grad_expanded_x's shape from the attributes: (rows, H) in mode 0, (expert_num,
    expert_capacity, H) in mode 1 (negative counts made 0: the library rejects them); the
    Init's expanded_x shape (torch.compile's fake kernel allocates by this too)."""
    return _expanded_shape(drop_pad_mode, expert_num, expert_capacity, active_num, index_numel,
                           g_shape[-1] if g_shape else 0)
