# SPDX-License-Identifier: Apache-2.0
"""GeluMul and GeluMulBackward: the gated GeLU, split on the LAST dimension.

input [..., 2d] is split into x1 = input[..., :d] and x2 = input[..., d:]:
    GeluMul:         out        = gelu(x1) * x2                               ([..., d])
    GeluMulBackward: input_grad = concat(out_grad * x2 * gelu'(x1), out_grad * gelu(x1))
                                                                  (input's shape; may be input)
approximate: GeluApproximate.NONE (0, 'none', the default): gelu(x) = x Phi(x), the erf form;
GeluApproximate.TANH (1, 'tanh'): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

This module also holds _AttributeOperator, the descriptor machinery of swiglu._SplitOperator
generalized to operators whose descriptors take other attributes than one int32 `dim`, and
optional (nullable) tensors; clipped_swiglu.py builds on it too.
"""

import ctypes
import operator
from enum import IntEnum

from . import _library
from ._dispatch import output_names, run
from .core import ArrayView, TensorDescriptor, array_view, output
from .swiglu import _SplitOperator, _halved_shape

__all__ = ["GeluApproximate", "GeluMul", "GeluMulBackward", "gelu_mul", "gelu_mul_backward"]

_INT_MIN, _INT_MAX = -2 ** 31, 2 ** 31 - 1  # a C enum is int-sized

class GeluApproximate(IntEnum):
    """infiniopGeluApproximate_t."""

    NONE = 0  # gelu(x) = x Phi(x) = 0.5 x (1 + erf(x / sqrt 2))
    TANH = 1  # gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))

    @classmethod
    def parse(cls, approximate):
        """'none' | 'tanh' (any case, as torch spells them), a GeluApproximate, or a plain int.

        A plain int outside the enum is returned unchanged, so that the library (not the
        binding) rejects it with BAD_PARAM; one that a C int cannot hold raises OverflowError
        (ctypes would silently wrap it).
        """
        if isinstance(approximate, cls):
            return approximate
        if isinstance(approximate, str) and approximate in _APPROXIMATE_NAMES:
            return _APPROXIMATE_NAMES[approximate]
        if isinstance(approximate, str):
            try:
                return cls[approximate.strip().upper()]
            except KeyError:
                names = ", ".join(repr(a.name.lower()) for a in cls)
                raise ValueError(f"unknown approximate {approximate!r}; expected one of "
                                 f"{names}") from None
        if isinstance(approximate, bool):
            raise TypeError("approximate must be 'none', 'tanh' or an int, not bool")
        try:
            value = operator.index(approximate)
        except TypeError:
            raise TypeError(f"approximate must be 'none', 'tanh' or an int, not "
                            f"{type(approximate).__name__}") from None
        if not _INT_MIN <= value <= _INT_MAX:
            raise OverflowError(f"approximate {value} does not fit in a C int")
        try:
            return cls(value)
        except ValueError:
            return value


_APPROXIMATE_NAMES = {"none": GeluApproximate.NONE, "tanh": GeluApproximate.TANH}  # fast path


# --------------------------------------------------------------------------------------------
# Descriptors

class _AttributeOperator(_SplitOperator):
    """_SplitOperator for descriptors created from TensorDescriptors (outputs first, as in the C
    API) followed by attributes that subclasses define, where the tensors named in _OPTIONAL
    may be absent (None: a NULL descriptor, and then a NULL data pointer).

    Subclasses set _NAME, _ARGUMENTS, _OPTIONAL (trailing names of _ARGUMENTS),
    and _attributes(**keywords) -> ({name: checked value}, [C argument values]); the checked
    values become attributes of the descriptor object.
    """

    _OPTIONAL = ()

    @classmethod
    def _attributes(cls, **attributes):
        raise NotImplementedError

    @classmethod
    def _create_name(cls, checked):
        """The C create function for these checked attributes."""
        return f"infiniopCreate{cls._NAME}Descriptor"

    @classmethod
    def _complete(cls, tensors, what):
        """The tensor arguments, the absent optional ones as None."""
        required = len(cls._ARGUMENTS) - len(cls._OPTIONAL)
        if not required <= len(tensors) <= len(cls._ARGUMENTS):
            count = (str(required) if required == len(cls._ARGUMENTS)
                     else f"{required} to {len(cls._ARGUMENTS)}")
            raise TypeError(f"{cls.__name__}{what} takes {count} tensor arguments "
                            f"({', '.join(cls._ARGUMENTS)}), not {len(tensors)}")
        tensors = tuple(tensors) + (None,) * (len(cls._ARGUMENTS) - len(tensors))
        for tensor, name in zip(tensors[:required], cls._ARGUMENTS):
            if tensor is None:
                raise TypeError(f"{cls.__name__}{what}: {name} is required")
        return tensors

    def __init__(self, handle, *tensor_descs, **attributes):
        tensor_descs = self._complete(tensor_descs, "")
        checked, c_values = self._attributes(**attributes)
        lib = _library.get_library()
        desc = ctypes.c_void_p()
        name = self._create_name(checked)
        _library.check(getattr(lib, name)(
            handle.value, ctypes.byref(desc),
            *(None if d is None else d.value for d in tensor_descs), *c_values), name)
        for key, value in checked.items():
            setattr(self, key, value)
        self._set_created(lib, desc.value, handle, tensor_descs)

    @classmethod
    def for_arrays(cls, handle, *arrays, **attributes):
        """A descriptor for these arrays' shapes, strides and dtypes (in the C call's order;
        None or nothing for an absent optional tensor)."""
        arrays = cls._complete(arrays, ".for_arrays")
        views = [a if a is None or isinstance(a, ArrayView) else array_view(a, name)
                 for a, name in zip(arrays, cls._ARGUMENTS)]
        descs = [None if v is None else TensorDescriptor.from_array(v) for v in views]
        try:
            return cls(handle, *descs, **attributes)
        finally:  # the operator descriptor has copied them (API.md)
            for d in descs:
                if d is not None:
                    d.close()

    def _pointer(self, data, index, name):
        if self._layouts[index] is None and not (data is None or isinstance(data, int)):
            raise ValueError(f"{name}: the descriptor was created without {name}; pass None")
        return super()._pointer(data, index, name)

    def __call__(self, *data, workspace=None, workspace_size=None, stream=None):
        """Run it on pointers or arrays given in the C call's order (outputs first; an absent
        optional tensor as None or left out). Without a workspace, the handle lends one of the
        size the descriptor asks for (Handle.borrow_workspace)."""
        data = self._complete(data, "()") if len(data) < len(self._ARGUMENTS) else data
        return super().__call__(*data, workspace=workspace, workspace_size=workspace_size,
                                stream=stream)


class _GeluMulOperator(_AttributeOperator):

    @classmethod
    def _attributes(cls, *, approximate="none"):
        approximate = GeluApproximate.parse(approximate)
        return {"approximate": approximate}, [int(approximate)]


class GeluMul(_GeluMulOperator):
    """An infiniopGeluMulDescriptor_t: GeluMul(handle, out_desc, input_desc,
    approximate='none'), or GeluMul.for_arrays(handle, out, input, approximate='none'). Call it
    as op(out, input) with pointers or arrays."""

    _NAME = "GeluMul"
    _ARGUMENTS = ("out", "input")


class GeluMulBackward(_GeluMulOperator):
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
    out, out_view = output(out, input, input_view, _halved_shape(input_view.shape, -1))
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
