# SPDX-License-Identifier: Apache-2.0
"""Gelu and GeluBackwardV2: GeLU and its gradient, elementwise.

    Gelu:           output     = gelu(input)                       (input's shape; may be input)
    GeluBackwardV2: grad_input = grad_output * gelu'(input)        (may be input or grad_output)

approximate: GeluApproximate.NONE (0, 'none', the default): gelu(x) = x Phi(x), gelu'(x) =
Phi(x) + x phi(x); GeluApproximate.TANH (1, 'tanh'): the tanh form, whose gradient is exactly
GeluBackward's. As torch.nn.functional.gelu and aten.gelu_backward(..., approximate=...).
"""

from ._dispatch import output_names, run
from ._operator import ApproximateOperator
from .core import array_view, output
from .enums import GeluApproximate

__all__ = ["Gelu", "GeluBackwardV2", "gelu", "gelu_backward_v2"]


class Gelu(ApproximateOperator):
    """An infiniopGeluDescriptor_t: Gelu(handle, output_desc, input_desc, approximate='none'), or
    Gelu.for_arrays(handle, output, input, approximate='none'). Call it as op(output, input)
    with pointers or arrays."""

    _NAME = "Gelu"
    _ARGUMENTS = ("output", "input")


class GeluBackwardV2(ApproximateOperator):
    """An infiniopGeluBackwardV2Descriptor_t: GeluBackwardV2(handle, grad_input_desc, input_desc,
    grad_output_desc, approximate='none'), or GeluBackwardV2.for_arrays(handle, grad_input,
    input, grad_output, approximate='none'). Call it as op(grad_input, input, grad_output) with
    pointers or arrays."""

    _NAME = "GeluBackwardV2"
    _ARGUMENTS = ("grad_input", "input", "grad_output")


def gelu(input, *, approximate="none", device="cpu", out=None, handle=None, _stage=None,
         _record=None):
    """output = gelu(input), as torch.nn.functional.gelu(input, approximate=approximate).

    input: a NumPy array (float32, float16) or a torch CPU tensor (float32, float16, bfloat16),
    any strides (broadcast and negative included). approximate: 'none' (erf, the default) or
    'tanh', a GeluApproximate, or an int (other values are the library's BAD_PARAM). out: where
    to write, of input's shape, allocated like input when None; it may be the very object passed
    as input (in place). device: 'cpu', 'cpu_reference', 'opencl' or a Device; ignored when a
    Handle is given. Returns out. Raises InfiniopError with the library's status and reason.
    """
    approximate = GeluApproximate.parse(approximate)
    input_view = array_view(input, "input")
    names = output_names(out, "input", "output")
    out, out_view = output(out, input, input_view)
    run(Gelu, [out_view, input_view], {"approximate": approximate}, device, handle, _stage,
        names=names, record=_record)
    return out


def gelu_backward_v2(grad_output, input, *, approximate="none", device="cpu", out=None,
                     handle=None, _stage=None):
    """grad_input = grad_output * gelu'(input), as torch's
    gelu_backward(grad_output, input, approximate=approximate); 'tanh' is gelu_backward().

    grad_output, input: NumPy arrays (float32, float16) or torch CPU tensors (float32, float16,
    bfloat16) of one kind and shape, any strides (broadcast and negative included). out: where
    to write, allocated like grad_output when None; it may be the very object passed as input or
    grad_output (in place). approximate, device, handle: as in gelu(). Returns out. Raises
    InfiniopError as gelu() does.
    """
    approximate = GeluApproximate.parse(approximate)
    grad_output_view = array_view(grad_output, "grad_output")
    input_view = array_view(input, "input")
    if grad_output_view.kind != input_view.kind:
        raise TypeError(f"grad_output is a {grad_output_view.kind} array but input is a "
                        f"{input_view.kind} one; pass two of one kind")
    names = output_names(out, "grad_output", "grad_input")
    out, out_view = output(out, grad_output, grad_output_view)
    run(GeluBackwardV2, [out_view, input_view, grad_output_view], {"approximate": approximate},
        device, handle, _stage, names=names)
    return out
