# SPDX-License-Identifier: Apache-2.0
"""SwiGlu and SwiGluBackward: the gated SiLU split along one dimension.

x is split along `dim` into halves x1 (first) and x2 (second); s = sigmoid(x1):
    SwiGlu:         y = silu(x1) * x2                       (x's shape with `dim` halved)
    SwiGluBackward: x_grad = concat(y_grad * x2 * (s + x1 s (1 - s)), y_grad * x1 * s)
                                                            (x's shape; may be x itself)
"""

import ctypes
import operator

from . import _library
from ._dispatch import output_names, run
from .core import ArrayView, TensorDescriptor, array_view, contiguous_strides, output

__all__ = ["SwiGlu", "SwiGluBackward", "swiglu", "swiglu_backward"]

def _check_dim(dim, bits=32):
    """dim as a Python int that fits the C attribute (int32_t here, int64_t for ClippedSwiglu).
    Its range against the rank is the library's to check (BAD_PARAM); a value ctypes would
    silently wrap is refused here."""
    if type(dim) is not int:  # bool is refused, numpy and torch integers are taken
        if isinstance(dim, bool):
            raise TypeError("dim must be an int, not bool")
        try:
            dim = operator.index(dim)
        except TypeError:  # floats and other non-integers
            raise TypeError(f"dim must be an int, not {type(dim).__name__}") from None
    if not -2 ** (bits - 1) <= dim < 2 ** (bits - 1):
        raise OverflowError(f"dim {dim} does not fit in int{bits}_t")
    return dim


class _SplitOperator:
    """What SwiGlu and SwiGluBackward share: a descriptor created from TensorDescriptors (outputs
    first, as in the C API) and `dim`, then called with pointers or matching arrays."""

    _NAME = None  # 'SwiGlu' / 'SwiGluBackward': the C functions are infiniop<Verb><_NAME>...
    _ARGUMENTS = ()  # the C call's tensor argument names, outputs first

    def __init__(self, handle, *tensor_descs, dim=-1):
        if len(tensor_descs) != len(self._ARGUMENTS):
            raise TypeError(f"{type(self).__name__} takes {len(self._ARGUMENTS)} tensor "
                            f"descriptors ({', '.join(self._ARGUMENTS)}), not {len(tensor_descs)}")
        self.dim = _check_dim(dim)
        lib = _library.get_library()
        desc = ctypes.c_void_p()
        name = f"infiniopCreate{self._NAME}Descriptor"
        _library.check(getattr(lib, name)(handle.value, ctypes.byref(desc),
                                          *(d.value for d in tensor_descs), self.dim), name)
        self._set_created(lib, desc.value, handle, tensor_descs)

    def _set_created(self, lib, raw, handle, tensor_descs):
        self._lib = lib
        self._raw = raw
        self.handle = handle  # the descriptor must not outlive its handle
        # The descriptor copies what it needs; these only let __call__ check arrays passed in.
        self._layouts = tuple(None if d is None else (d.shape, d.strides, d.dtype)
                              for d in tensor_descs)
        self._calculate = getattr(lib, f"infiniop{self._NAME}")
        self._workspace_bytes = None  # asked once, on the first launch()

    @classmethod
    def for_arrays(cls, handle, *arrays, dim=-1):
        """A descriptor for these arrays' shapes, strides and dtypes (in the C call's order)."""
        if len(arrays) != len(cls._ARGUMENTS):
            raise TypeError(f"{cls.__name__}.for_arrays takes {len(cls._ARGUMENTS)} arrays "
                            f"({', '.join(cls._ARGUMENTS)}), not {len(arrays)}")
        views = [a if isinstance(a, ArrayView) else array_view(a, name)
                 for a, name in zip(arrays, cls._ARGUMENTS)]
        descs = [TensorDescriptor.from_array(v) for v in views]
        try:
            return cls(handle, *descs, dim=dim)
        finally:  # the operator descriptor has copied them (API.md)
            for d in descs:
                d.close()

    @property
    def value(self):
        if self._raw is None:
            raise ValueError(f"the {self._NAME} descriptor is closed")
        return self._raw

    @property
    def workspace_size(self):
        size = ctypes.c_size_t()
        name = f"infiniopGet{self._NAME}WorkspaceSize"
        _library.check(getattr(self._lib, name)(self.value, ctypes.byref(size)), name)
        return size.value

    def _pointer(self, data, index, name):
        """A data argument as a pointer: an int (device pointer), None (NULL) or an array."""
        if data is None or isinstance(data, int):
            return data
        view = data if isinstance(data, ArrayView) else array_view(data, name)
        shape, strides, dtype = self._layouts[index]
        expected_strides = strides if strides is not None else contiguous_strides(shape)
        # The stride of a size-1 dimension is never used, so it need not match.
        same_strides = all(size == 1 or a == b
                           for size, a, b in zip(shape, view.strides, expected_strides))
        if (view.shape, view.dtype) != (shape, dtype) or not same_strides:
            raise ValueError(f"{name}: array (shape {view.shape}, strides {view.strides}, "
                             f"{view.dtype.name}) does not match the descriptor (shape {shape}, "
                             f"strides {expected_strides}, {getattr(dtype, 'name', dtype)})")
        return view.ptr

    def __call__(self, *data, workspace=None, workspace_size=None, stream=None):
        """Run it on pointers or arrays given in the C call's order (outputs first). Without a
        workspace, the handle lends one of the size the descriptor asks for (Handle.borrow_workspace)."""
        if len(data) != len(self._ARGUMENTS):
            raise TypeError(f"{type(self).__name__}() takes {len(self._ARGUMENTS)} data "
                            f"arguments ({', '.join(self._ARGUMENTS)}), not {len(data)}")
        pointers = [self._pointer(d, i, n)
                    for i, (d, n) in enumerate(zip(data, self._ARGUMENTS))]
        if workspace is None:
            self.launch(pointers, stream)
            return
        size = workspace_size if workspace_size is not None else 0
        _library.check(self._calculate(self.value, workspace, size, *pointers, stream),
                       f"infiniop{self._NAME}")

    def launch(self, pointers, stream=None):
        """The C call on raw pointers (the C call's order), with a workspace borrowed from the
        handle (Handle.borrow_workspace) when the descriptor asks for one."""
        size = self._workspace_bytes
        if size is None:
            size = self._workspace_bytes = self.workspace_size
        if not size:
            status = self._calculate(self.value, None, 0, *pointers, stream)
            if status:
                _library.check(status, f"infiniop{self._NAME}")
            return
        workspace = self.handle.borrow_workspace(size)
        try:
            status = self._calculate(self.value, workspace[1], size, *pointers, stream)
            if status:  # checked before the workspace goes back: freeing it resets the message
                _library.check(status, f"infiniop{self._NAME}")
        finally:
            self.handle.give_back_workspace(workspace)

    def close(self):
        raw, self._raw = getattr(self, "_raw", None), None
        if raw is not None:
            name = f"infiniopDestroy{self._NAME}Descriptor"
            _library.check(getattr(self._lib, name)(raw), name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class SwiGlu(_SplitOperator):
    """An infiniopSwiGluDescriptor_t: SwiGlu(handle, y_desc, x_desc, dim=-1), or
    SwiGlu.for_arrays(handle, y, x, dim=-1). Call it as op(y, x) with pointers or arrays."""

    _NAME = "SwiGlu"
    _ARGUMENTS = ("y", "x")


class SwiGluBackward(_SplitOperator):
    """An infiniopSwiGluBackwardDescriptor_t: SwiGluBackward(handle, x_grad_desc, y_grad_desc,
    x_desc, dim=-1), or SwiGluBackward.for_arrays(handle, x_grad, y_grad, x, dim=-1). Call it as
    op(x_grad, y_grad, x) with pointers or arrays."""

    _NAME = "SwiGluBackward"
    _ARGUMENTS = ("x_grad", "y_grad", "x")


# --------------------------------------------------------------------------------------------
# Functions on arrays

def _halved_shape(shape, dim):
    """x's shape with `dim` halved; x's shape itself where dim is out of range (the library then
    rejects dim with BAD_PARAM before it looks at any shape). An odd size is floored: the library
    rejects it with BAD_TENSOR_SHAPE before comparing y's shape."""
    ndim = len(shape)
    if not -ndim <= dim < ndim:
        return tuple(shape)
    shape = list(shape)  # a new list: a traced shape's sizes must not be halved in place
    shape[dim] = shape[dim] // 2
    return tuple(shape)


def swiglu(x, dim=-1, *, device="cpu", out=None, handle=None, _stage=None, _record=None):
    """y = silu(x1) * x2, with x1, x2 the first and second halves of x along `dim`.

    x: a NumPy array (float32, float16) or a torch CPU tensor (float32, float16, bfloat16), any
    strides. dim: in [-x.ndim, x.ndim - 1]; x.shape[dim] must be even. out: where to write, of
    x's shape with `dim` halved, any strides; allocated contiguous when None. device: 'cpu',
    'cpu_reference', 'opencl' or a Device; ignored when a Handle is given. Returns out. Raises
    InfiniopError with the library's status and reason (BAD_PARAM for dim, BAD_TENSOR_SHAPE for
    an odd split or a wrong out shape).
    """
    dim = _check_dim(dim)
    x_view = array_view(x, "x")
    names = output_names(out, "x", "y")
    out, out_view = output(out, x, x_view, _halved_shape(x_view.shape, dim))
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
    dim = _check_dim(dim)
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
