# SPDX-License-Identifier: Apache-2.0
"""GeluMul and GeluMulBackward: the gated GeLU, split on the LAST dimension.

input [..., 2d] is split into x1 = input[..., :d] and x2 = input[..., d:]:
    GeluMul:         out        = gelu(x1) * x2                               ([..., d])
    GeluMulBackward: input_grad = concat(out_grad * x2 * gelu'(x1), out_grad * gelu(x1))
                                                                  (input's shape; may be input)
approximate: GeluApproximate.NONE (0, 'none', the default): gelu(x) = x Phi(x), the erf form;
GeluApproximate.TANH (1, 'tanh'): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

GeluApproximate is in enums.py (re-exported here), the descriptor classes in _operator.py.
"""

from ._dispatch import output_names, run
from ._operator import ApproximateOperator, halved_shape
from .core import array_view, output
from .enums import GeluApproximate

__all__ = ["GeluApproximate", "GeluMul", "GeluMulBackward", "gelu_mul", "gelu_mul_backward"]

# --------------------------------------------------------------------------------------------
# Descriptors

class GeluMul(ApproximateOperator):
    """An infiniopGeluMulDescriptor_t: GeluMul(handle, out_desc, input_desc,
    approximate='none'), or GeluMul.for_arrays(handle, out, input, approximate='none'). Call it
    as op(out, input) with pointers or arrays."""

    _NAME = "GeluMul"
    _ARGUMENTS = ("out", "input")


class GeluMulBackward(ApproximateOperator):
    """An infiniopGeluMulBackwardDescriptor_t: GeluMulBackward(handle, input_grad_desc,
    out_grad_desc, input_desc, approximate='none'), or GeluMulBackward.for_arrays(handle,
    input_grad, out_grad, input, approximate='none'). Call it as op(input_grad, out_grad, input)
    with pointers or arrays."""

    _NAME = "GeluMulBackward"
    _ARGUMENTS = ("input_grad", "out_grad", "input")


# --------------------------------------------------------------------------------------------
# Functions on arrays

def gelu_mul(input, *, approximate="none", device="cpu", out=None, handle=None, _stage=None,
             _record=None):
    """out = gelu(x1) * x2, with x1, x2 the first and second halves of input's LAST dimension,
    as torch_npu.npu_gelu_mul(input, approximate=approximate).

    input: a NumPy array (float32, float16) or a torch CPU tensor (float32, float16, bfloat16),
    rank >= 1, even last dimension, any strides. approximate: 'none' (erf, the default) or
    'tanh', a GeluApproximate, or an int (other values are the library's BAD_PARAM). out: where
    to write, of input's shape with the last dimension halved, any strides; allocated contiguous
    when None. device: 'cpu', 'cpu_reference', 'opencl' or a Device; ignored when a Handle is
    given. Returns out. Raises InfiniopError with the library's status and reason
    (BAD_TENSOR_SHAPE for an odd last dimension or a wrong out shape, BAD_TENSOR_DTYPE, ...).
    """
    approximate = GeluApproximate.parse(approximate)
    input_view = array_view(input, "input")
    names = output_names(out, "input", "out")
    out, out_view = output(out, input, input_view, halved_shape(input_view.shape, -1))
    run(GeluMul, [out_view, input_view], {"approximate": approximate}, device, handle, _stage,
        names=names, record=_record)
    return out


def gelu_mul_backward(out_grad, input, *, approximate="none", device="cpu", out=None,
                      handle=None, _stage=None):
    """input_grad = concat(out_grad * x2 * gelu'(x1), out_grad * gelu(x1)) on the last
    dimension: the gradient of gelu_mul(input, approximate=approximate) for the upstream
    gradient out_grad.

    out_grad (input's shape with the last dimension halved) and input: NumPy arrays (float32,
    float16) or torch CPU tensors (float32, float16, bfloat16) of one kind, any strides. out:
    where to write, of input's shape, allocated like input when None; it may be the very object
    passed as input (in place). approximate, device, handle: as in gelu_mul(). Returns out.
    Raises InfiniopError as gelu_mul() does.
    """
    approximate = GeluApproximate.parse(approximate)
    out_grad_view = array_view(out_grad, "out_grad")
    input_view = array_view(input, "input")
    if out_grad_view.kind != input_view.kind:
        raise TypeError(f"out_grad is a {out_grad_view.kind} array but input is a "
                        f"{input_view.kind} one; pass two of one kind")
    names = output_names(out, "input", "input_grad")
    out, out_view = output(out, input, input_view)
    run(GeluMulBackward, [out_view, out_grad_view, input_view], {"approximate": approximate},
        device, handle, _stage, names=names)
    return out
