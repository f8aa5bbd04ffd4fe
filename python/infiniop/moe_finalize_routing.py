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

from ._dispatch import output_names, run
from ._operator import NullableOperator, array_views, check_int64, expanded_shape
from .core import array_view, check_out, output

__all__ = ["MoeFinalizeRoutingV2", "MoeFinalizeRoutingV2Grad", "moe_finalize_routing_v2",
           "moe_finalize_routing_v2_grad"]


class MoeFinalizeRoutingV2(NullableOperator):
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
        mode = check_int64("drop_pad_mode", drop_pad_mode)
        return {"drop_pad_mode": mode}, [mode]


class MoeFinalizeRoutingV2Grad(NullableOperator):
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
        checked = {"drop_pad_mode": check_int64("drop_pad_mode", drop_pad_mode),
                   "active_num": check_int64("active_num", active_num),
                   "expert_num": check_int64("expert_num", expert_num),
                   "expert_capacity": check_int64("expert_capacity", expert_capacity)}
        return checked, list(checked.values())


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
    attributes = {"drop_pad_mode": check_int64("drop_pad_mode", drop_pad_mode)}
    x_view = array_view(expanded_x, "expanded_x")
    views = array_views(x_view.kind, expanded_row_idx=expanded_row_idx, x1=x1, x2=x2, bias=bias,
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
    views = array_views(g_view.kind, expanded_row_idx=expanded_row_idx, expanded_x=expanded_x,
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
    return expanded_shape(drop_pad_mode, expert_num, expert_capacity, active_num, index_numel,
                           g_shape[-1] if g_shape else 0)
