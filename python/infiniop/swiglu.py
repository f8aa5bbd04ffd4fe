# SPDX-License-Identifier: Apache-2.0
"""SwiGlu and SwiGluBackward: the gated SiLU split along one dimension.

x is split along `dim` into halves x1 (first) and x2 (second); s = sigmoid(x1):
    SwiGlu:         y = silu(x1) * x2                       (x's shape with `dim` halved)
    SwiGluBackward: x_grad = concat(y_grad * x2 * (s + x1 s (1 - s)), y_grad * x1 * s)
                                                            (x's shape; may be x itself)
"""

from ._dispatch import output_names, run
from ._operator import Operator, check_dim, halved_shape
from .core import array_view, output

__all__ = ["SwiGlu", "SwiGluBackward", "swiglu", "swiglu_backward"]

class SwiGlu(Operator):
    """An infiniopSwiGluDescriptor_t: SwiGlu(handle, y_desc, x_desc, dim=-1), or
    SwiGlu.for_arrays(handle, y, x, dim=-1). Call it as op(y, x) with pointers or arrays."""

    _NAME = "SwiGlu"
    _ARGUMENTS = ("y", "x")


class SwiGluBackward(Operator):
    """An infiniopSwiGluBackwardDescriptor_t: SwiGluBackward(handle, x_grad_desc, y_grad_desc,
    x_desc, dim=-1), or SwiGluBackward.for_arrays(handle, x_grad, y_grad, x, dim=-1). Call it as
    op(x_grad, y_grad, x) with pointers or arrays."""

    _NAME = "SwiGluBackward"
    _ARGUMENTS = ("x_grad", "y_grad", "x")


# --------------------------------------------------------------------------------------------
# Functions on arrays

def swiglu(x, dim=-1, *, device="cpu", out=None, handle=None, _stage=None, _record=None):
    """y = silu(x1) * x2, with x1, x2 the first and second halves of x along `dim`.

    x: a NumPy array (float32, float16) or a torch CPU tensor (float32, float16, bfloat16), any
    strides. dim: in [-x.ndim, x.ndim - 1]; x.shape[dim] must be even. out: where to write, of
    x's shape with `dim` halved, any strides; allocated contiguous when None. device: 'cpu',
    'cpu_reference', 'opencl' or a Device; ignored when a Handle is given. Returns out. Raises
    InfiniopError with the library's status and reason (BAD_PARAM for dim, BAD_TENSOR_SHAPE for
    an odd split or a wrong out shape).
    """
    dim = check_dim(dim)
    x_view = array_view(x, "x")
    names = output_names(out, "x", "y")
    out, out_view = output(out, x, x_view, halved_shape(x_view.shape, dim))
    run(SwiGlu, [out_view, x_view], {"dim": dim}, device, handle, _stage, names=names,
        record=_record)
    return out


def swiglu_backward(y_grad, x, dim=-1, *, device="cpu", out=None, handle=None, _stage=None):
    """x_grad = concat(y_grad * x2 * silu'(x1), y_grad * silu(x1)) along `dim`, the gradient of
    swiglu(x, dim=dim) for the upstream gradient y_grad.

    y_grad (x's shape with `dim` halved) and x: NumPy arrays (float32, float16) or torch CPU
    tensors (float32, float16, bfloat16) of one kind, any strides. out: where to write, of x's
    shape, allocated like x when None; it may be the very object passed as x (in place).
    device, handle: as in swiglu(). Returns out. Raises InfiniopError as swiglu() does.
    """
    dim = check_dim(dim)
    y_grad_view = array_view(y_grad, "y_grad")
    x_view = array_view(x, "x")
    if y_grad_view.kind != x_view.kind:
        raise TypeError(f"y_grad is a {y_grad_view.kind} array but x is a {x_view.kind} one; "
                        "pass two of one kind")
    names = output_names(out, "x", "x_grad")
    out, out_view = output(out, x, x_view)
    run(SwiGluBackward, [out_view, y_grad_view, x_view], {"dim": dim}, device, handle, _stage,
        names=names)
    return out
