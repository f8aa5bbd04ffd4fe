# SPDX-License-Identifier: Apache-2.0
"""ClippedSwiglu and ClippedSwigluBackward: the clipped SwiGLU of GPT-OSS, with MoE row groups.

x is viewed as [pre, L] around `dim`: pre = prod(shape[:dim]), L = shape[dim] * prod(shape[dim+1:])
(shape[dim] even). Each merged row is split into A and B: interleaved=True: A = row[0::2],
B = row[1::2] (pairs of flat elements of the merged row); interleaved=False: A = row[:L/2],
B = row[L/2:]. With a = min(A, limit), b = clamp(B, -limit, limit), s = sigmoid(alpha a):
    ClippedSwiglu:         y = a * s * (b + bias)      (x's shape with `dim` halved; flat row p
                                                        of y is the results of merged row p)
    ClippedSwigluBackward: dA = y_grad * (b + bias) * s * (1 + alpha a (1 - s)) * [A <= limit]
                           dB = y_grad * a * s * [-limit <= B <= limit]
                           x_grad = dA, dB merged back exactly as x was split (x's shape)
clamp_mode=1 (aclnnClippedSwigluV2) clamps after the activation instead, and ignores alpha and
bias (still validated): with g = silu(A) = A sigmoid(A), s = sigmoid(A),
    ClippedSwiglu:         y = min(g, limit) * b
    ClippedSwigluBackward: dA = y_grad * b * s * (1 + A (1 - s)) * [g <= limit]
                           dB = y_grad * min(g, limit) * [-limit <= B <= limit]
(the clamp decided exactly: g in double against limit). clamp_mode 0, the default, is the
operator above; others are BAD_PARAM.
group_index (optional, INT64, 1-D) holds per-group row COUNTS: only the first min(sum, pre) rows
are computed, the rest of y (or x_grad) is zero-filled; a negative count is BAD_PARAM.
limit > 0 (+inf: no clipping); alpha and bias finite. The attributes are float32 in the C API.
"""

import math
import numbers

from ._dispatch import output_names, run
from ._operator import AttributeOperator, check_bool, check_dim, check_int64, halved_shape
from .core import array_view, output

__all__ = ["ClippedSwiglu", "ClippedSwigluBackward", "clipped_swiglu", "clipped_swiglu_backward"]

# The vendor API's defaults (aclnnClippedSwiglu).
DEFAULTS = {"dim": -1, "alpha": 1.702, "limit": 7.0, "bias": 1.0, "interleaved": True,
            "clamp_mode": 0}

# The smallest magnitude that rounds to a float32 infinity: (2 - 2^-24) 2^127.
_FLOAT32_OVERFLOW = 2.0 ** 128 - 2.0 ** 103


def _check_real(name, value):
    """A real number as a Python float. Its validity (finite, limit > 0) is the library's to
    check. The C API takes float32: a value that rounds beyond float32's range is made the
    infinity it rounds to here (converting it is undefined behaviour in C); smaller ones are
    rounded by ctypes."""
    if type(value) is not float:  # a float skips the (slow) abstract-class check
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be a real number, not {type(value).__name__}")
        value = float(value)
    if math.isfinite(value) and abs(value) >= _FLOAT32_OVERFLOW:
        value = math.copysign(math.inf, value)
    return value


def _zero_signs(attributes):
    """run()'s key_extra: -0.0 == 0.0 (one cache key), yet a bias of -0.0 gives -0 results where
    0.0 gives +0; so a zero attribute's sign is part of the key (nothing else is needed)."""
    if attributes["alpha"] and attributes["limit"] and attributes["bias"]:
        return ()
    return tuple(math.copysign(1.0, attributes[k]) for k in ("alpha", "limit", "bias"))


def _check_attributes(dim, alpha, limit, bias, interleaved, clamp_mode=0):
    return {"dim": check_dim(dim, bits=64), "alpha": _check_real("alpha", alpha),
            "limit": _check_real("limit", limit), "bias": _check_real("bias", bias),
            "interleaved": check_bool("interleaved", interleaved),
            "clamp_mode": check_int64("clamp_mode", clamp_mode)}


def _group_index_view(group_index):
    """None, or an ArrayView of group_index: a NumPy array or torch tensor (any kind, whatever
    x's), or a list/tuple of ints (made an int64 array). Other dtypes are described faithfully
    and rejected by the library (BAD_TENSOR_DTYPE)."""
    if group_index is None:
        return None
    if isinstance(group_index, (list, tuple)):
        import numpy as np

        group_index = np.asarray(group_index, dtype=np.int64)
    return array_view(group_index, "group_index")


class _ClippedSwigluOperator(AttributeOperator):
    _OPTIONAL = ("group_index",)

    @classmethod
    def _attributes(cls, *, dim=DEFAULTS["dim"], alpha=DEFAULTS["alpha"],
                    limit=DEFAULTS["limit"], bias=DEFAULTS["bias"],
                    interleaved=DEFAULTS["interleaved"], clamp_mode=DEFAULTS["clamp_mode"]):
        checked = _check_attributes(dim, alpha, limit, bias, interleaved, clamp_mode)
        names = ("dim", "alpha", "limit", "bias", "interleaved")
        if checked["clamp_mode"] != 0:
            names += ("clamp_mode",)
        return checked, [checked[k] for k in names]

    @classmethod
    def _create_name(cls, checked):
        """clamp_mode 0: the original create function; any other: its V2 (which checks it)."""
        return f"infiniopCreate{cls._NAME}{'V2' if checked['clamp_mode'] else ''}Descriptor"


class ClippedSwiglu(_ClippedSwigluOperator):
    """An infiniopClippedSwigluDescriptor_t: ClippedSwiglu(handle, y_desc, x_desc,
    group_index_desc=None, dim=-1, alpha=1.702, limit=7.0, bias=1.0, interleaved=True,
    clamp_mode=0), or
    ClippedSwiglu.for_arrays(handle, y, x, group_index=None, ...). Call it as
    op(y, x[, group_index]) with pointers or arrays (group_index None or left out when the
    descriptor has none)."""

    _NAME = "ClippedSwiglu"
    _ARGUMENTS = ("y", "x", "group_index")


class ClippedSwigluBackward(_ClippedSwigluOperator):
    """An infiniopClippedSwigluBackwardDescriptor_t: ClippedSwigluBackward(handle, x_grad_desc,
    y_grad_desc, x_desc, group_index_desc=None, dim=-1, alpha=1.702, limit=7.0, bias=1.0,
    interleaved=True, clamp_mode=0), or ClippedSwigluBackward.for_arrays(handle, x_grad, y_grad, x,
    group_index=None, ...). Call it as op(x_grad, y_grad, x[, group_index])."""

    _NAME = "ClippedSwigluBackward"
    _ARGUMENTS = ("x_grad", "y_grad", "x", "group_index")


# --------------------------------------------------------------------------------------------
# Functions on arrays

def clipped_swiglu(x, dim=-1, *, alpha=1.702, limit=7.0, bias=1.0, interleaved=True,
                   group_index=None, device="cpu", out=None, handle=None, clamp_mode=0,
                   _stage=None, _record=None):
    """y = a * sigmoid(alpha a) * (b + bias), a = min(A, limit), b = clamp(B, -limit, limit),
    A and B the two halves of each row of x merged around `dim` (see the module docstring);
    clamp_mode=1: y = min(silu(A), limit) * b (alpha and bias unused).

    x: a NumPy array (float32, float16) or a torch CPU tensor (float32, float16, bfloat16), any
    strides. dim: in [-x.ndim, x.ndim - 1]; x.shape[dim] must be even. alpha, limit, bias:
    real numbers, passed as float32 (limit > 0, +inf for no clipping; alpha, bias finite).
    interleaved: bool. clamp_mode: 0 or 1 (an int). group_index: None, or per-group row counts
    (int64 1-D NumPy array, torch tensor or list): only the first min(sum, pre) rows are
    computed, the others are zero. out:
    where to write, of x's shape with `dim` halved, any strides; allocated contiguous when None.
    device: 'cpu', 'cpu_reference', 'opencl' or a Device; ignored when a Handle is given.
    Returns out. Raises InfiniopError with the library's status and reason (BAD_PARAM for dim,
    the attributes or a negative count; BAD_TENSOR_SHAPE for an odd split, a wrong out shape or
    a group_index that is not 1-D; BAD_TENSOR_DTYPE, ...).
    """
    attributes = _check_attributes(dim, alpha, limit, bias, interleaved, clamp_mode)
    x_view = array_view(x, "x")
    group_view = _group_index_view(group_index)
    names = output_names(out, "x", "y")
    out, out_view = output(out, x, x_view, halved_shape(x_view.shape, attributes["dim"]))
    run(ClippedSwiglu, [out_view, x_view, group_view], attributes, device, handle, _stage,
        _zero_signs(attributes), names=names, record=_record)
    return out


def clipped_swiglu_backward(y_grad, x, dim=-1, *, alpha=1.702, limit=7.0, bias=1.0,
                            interleaved=True, group_index=None, device="cpu", out=None,
                            handle=None, clamp_mode=0, _stage=None):
    """x_grad, the gradient of clipped_swiglu(x, ...) with the same attributes and group_index
    for the upstream gradient y_grad (see the module docstring for the formulas).

    y_grad (x's shape with `dim` halved) and x: NumPy arrays (float32, float16) or torch CPU
    tensors (float32, float16, bfloat16) of one kind, any strides. out: where to write, of x's
    shape, allocated like x when None; it may be the very object passed as x (in place). The
    other arguments are as in clipped_swiglu(). Returns out. Raises InfiniopError likewise.
    """
    attributes = _check_attributes(dim, alpha, limit, bias, interleaved, clamp_mode)
    y_grad_view = array_view(y_grad, "y_grad")
    x_view = array_view(x, "x")
    if y_grad_view.kind != x_view.kind:
        raise TypeError(f"y_grad is a {y_grad_view.kind} array but x is a {x_view.kind} one; "
                        "pass two of one kind")
    group_view = _group_index_view(group_index)
    names = output_names(out, "x", "x_grad")
    out, out_view = output(out, x, x_view)
    run(ClippedSwigluBackward, [out_view, y_grad_view, x_view, group_view], attributes,
        device, handle, _stage, _zero_signs(attributes), names=names)
    return out
