# SPDX-License-Identifier: Apache-2.0
"""GeluBackward: grad_input = grad_output * d/dx gelu_tanh(input); and gelu_backward(), aten's
gelu_backward(grad_output, input, *, approximate='none'), which runs it for 'tanh' and
GeluBackwardV2 for 'none' (the erf form)."""

from ._dispatch import output_names, run
from ._operator import AttributeOperator
from .core import array_view, output
from .gelu import GeluBackwardV2
from .enums import GeluApproximate

__all__ = ["GeluBackward", "gelu_backward"]


class GeluBackward(AttributeOperator):
    """An infiniopGeluBackwardDescriptor_t (the tanh form, no attributes).

    Built from three TensorDescriptors (grad_input, input, grad_output: outputs first, as in
    the C API) or, with for_arrays(), from the arrays themselves. Call it with data pointers
    (ints) or with arrays whose layout matches the descriptors.
    """

    _NAME = "GeluBackward"
    _ARGUMENTS = ("grad_input", "input", "grad_output")

    @classmethod
    def _attributes(cls):
        return {}, []

    def __call__(self, grad_input, input, grad_output, workspace=None, workspace_size=None,
                 stream=None):
        """Run it on pointers or matching arrays (the workspace may be given positionally)."""
        super().__call__(grad_input, input, grad_output, workspace=workspace,
                         workspace_size=workspace_size, stream=stream)


def gelu_backward(grad_output, input, *, approximate="none", device="cpu", out=None,
                  handle=None, _stage=None):
    """grad_input = grad_output * gelu'(input), as aten's
    gelu_backward(grad_output, input, approximate=approximate): 'none' (the default, as aten's)
    is the erf form (GeluBackwardV2), 'tanh' the tanh form (GeluBackward; GeluBackwardV2's tanh
    gives the same bits). Before 0.2.0 this function was always the tanh form.

    grad_output, input: NumPy arrays (float32, float16) or torch CPU tensors (float32, float16,
    bfloat16) of one kind, any strides (broadcast and negative included). out: where to write,
    allocated like grad_output when None; it may be the very object passed as input or
    grad_output (in place). device: 'cpu', 'cpu_reference', 'opencl' (or 'opencl:1'), a
    torch.device or a Device; ignored when a Handle is given. Returns out. Raises InfiniopError
    with the library's status and reason.
    """
    approximate = GeluApproximate.parse(approximate)
    grad_output_view = array_view(grad_output, "grad_output")
    input_view = array_view(input, "input")
    if grad_output_view.kind != input_view.kind:
        raise TypeError(f"grad_output is a {grad_output_view.kind} array but input is a "
                        f"{input_view.kind} one; pass two of one kind")
    names = output_names(out, "grad_output", "grad_input")
    out, out_view = output(out, grad_output, grad_output_view)
    views = [out_view, input_view, grad_output_view]
    if approximate == GeluApproximate.TANH:
        run(GeluBackward, views, {}, device, handle, _stage, names=names)
    else:  # 'none', and values the library itself refuses (BAD_PARAM)
        run(GeluBackwardV2, views, {"approximate": approximate}, device, handle, _stage,
            names=names)
    return out
