# SPDX-License-Identifier: Apache-2.0
"""What the operator modules share, so that none imports another: the descriptor classes
(Operator: created from tensor descriptors, outputs first, and an int32 `dim`, then run on
pointers or arrays; AttributeOperator: other attributes and optional tensors at the end;
NullableOperator: optional tensors anywhere; ApproximateOperator: GeluApproximate's), the checks
of attribute arguments, and the rules more than one module allocates outputs by (halved_shape,
expanded_shape, index_dtype_of), which infiniop.torch's fake kernels use too.
"""

import ctypes
import numbers
import operator

from . import _library
from .core import ArrayView, Closable, TensorDescriptor, array_view, contiguous_strides
from .enums import GeluApproximate

# --------------------------------------------------------------------------------------------
# Attribute checks

def check_dim(dim, bits=32):
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


def check_int64(name, value):
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


def check_real(name, value):
    """A real number as a Python float (the C API's double; its validity is the library's)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, not {type(value).__name__}")
    return float(value)


def check_bool(name, value):
    if isinstance(value, bool):
        return value
    if type(value).__module__ == "numpy" and type(value).__name__ in ("bool_", "bool"):
        return bool(value)
    raise TypeError(f"{name} must be a bool, not {type(value).__name__}")



# --------------------------------------------------------------------------------------------
# Descriptors

class Operator(Closable):
    """What SwiGlu and SwiGluBackward share: a descriptor created from TensorDescriptors (outputs
    first, as in the C API) and `dim`, then called with pointers or matching arrays."""

    _NAME = None  # 'SwiGlu' / 'SwiGluBackward': the C functions are infiniop<Verb><_NAME>...
    _ARGUMENTS = ()  # the C call's tensor argument names, outputs first

    def __init__(self, handle, *tensor_descs, dim=-1):
        if len(tensor_descs) != len(self._ARGUMENTS):
            raise TypeError(f"{type(self).__name__} takes {len(self._ARGUMENTS)} tensor "
                            f"descriptors ({', '.join(self._ARGUMENTS)}), not {len(tensor_descs)}")
        self.dim = check_dim(dim)
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


class AttributeOperator(Operator):
    """Operator for descriptors created from TensorDescriptors (outputs first, as in the C
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


class NullableOperator(AttributeOperator):
    """AttributeOperator whose optional (nullable) tensors may be anywhere in the argument
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


class ApproximateOperator(AttributeOperator):

    @classmethod
    def _attributes(cls, *, approximate="none"):
        approximate = GeluApproximate.parse(approximate)
        return {"approximate": approximate}, [int(approximate)]



# --------------------------------------------------------------------------------------------
# Shapes, arrays and index dtypes

def halved_shape(shape, dim):
    """x's shape with `dim` halved; x's shape itself where dim is out of range (the library then
    rejects dim with BAD_PARAM before it looks at any shape). An odd size is floored: the library
    rejects it with BAD_TENSOR_SHAPE before comparing y's shape."""
    ndim = len(shape)
    if not -ndim <= dim < ndim:
        return tuple(shape)
    shape = list(shape)  # a new list: a traced shape's sizes must not be halved in place
    shape[dim] = shape[dim] // 2
    return tuple(shape)


def expanded_shape(drop_pad_mode, expert_num, expert_capacity, active_num, total, hidden):
    """expanded_x's shape: (expert_num, expert_capacity, H) in drop_pad_mode 1, else (A, H),
    A = active_num if 0 < active_num < total (= R*K) else total (negative sizes made 0: the
    library rejects them): MoeInitRoutingV2's output and its grad's input; torch.compile's
    fake kernels allocate by this too."""
    if drop_pad_mode == 1:
        return (max(expert_num, 0), max(expert_capacity, 0), hidden)
    return ((active_num if 0 < active_num < total else total), hidden)


def array_views(kind, **arrays):
    """{name: ArrayView or None} of the given arrays (None stays None), all of one kind."""
    views = {name: None if a is None else array_view(a, name) for name, a in arrays.items()}
    for name, view in views.items():
        if view is not None and view.kind != kind:
            raise TypeError(f"{name} is a {view.kind} array but the others are {kind} ones; "
                            "pass arrays of one kind")
    return views


def split_out(out, count):
    """out as a list of `count` entries (None: allocate), from None or a tuple/list."""
    if out is None:
        return [None] * count
    if not isinstance(out, (tuple, list)) or len(out) > count:
        raise TypeError(f"out must be None or a tuple of at most {count} arrays (None for one "
                        "to allocate)")
    return list(out) + [None] * (count - len(out))


INDEX_NAMES = {"int32": "int32", "i32": "int32", "int64": "int64", "i64": "int64"}


def index_dtype_of(index_dtype, like, kind):
    """The dtype (of `kind`: torch or numpy) for the index outputs: like's dtype (expert_idx's)
    when index_dtype is None, else int32 / int64 given as a torch or NumPy dtype, a DType or a
    name."""
    if index_dtype is None:
        return like.dtype
    name = None
    if isinstance(index_dtype, str):
        name = INDEX_NAMES.get(index_dtype.strip().lower())
    elif hasattr(index_dtype, "name") and type(index_dtype).__name__ == "DType":
        name = {"I32": "int32", "I64": "int64"}.get(index_dtype.name)
    else:
        name = str(index_dtype).replace("torch.", "").replace("<class 'numpy.", "").rstrip("'>")
        name = INDEX_NAMES.get(name)
    if name is None:
        raise TypeError(f"index_dtype must be int32 or int64 (a torch or numpy dtype, a DType "
                        f"or a name), not {index_dtype!r}")
    if kind == "torch":
        import torch

        return getattr(torch, name)
    import numpy as np

    return np.dtype(name)
