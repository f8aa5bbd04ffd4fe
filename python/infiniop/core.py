# SPDX-License-Identifier: Apache-2.0
"""Handle, TensorDescriptor, and the adaptation of NumPy arrays and torch tensors to the C API."""

import ctypes
import functools
import sys
import threading
import warnings
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import NamedTuple

from . import _library
from .enums import Device, DType

__all__ = ["Handle", "TensorDescriptor", "ArrayView", "array_view", "cpu_isa_name", "DeviceInfo",
           "devices", "device_info", "default_handle", "parse_device"]


def cpu_isa_name():
    """The SIMD target the cpu device dispatches to ('AVX3', 'AVX2', ...): for diagnostics."""
    return _library._decode(_library.get_library().infiniopCpuIsaName())


class Closable:
    """What owns a library object: close() on leaving a with-block and when collected (a
    finalizer never raises, e.g. at interpreter exit). Handle, TensorDescriptor and the
    operator descriptors (_operator.Operator) are Closable."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


@dataclass(frozen=True)
class DeviceInfo:
    """A device type of this build, as the library describes it (infiniopGetDeviceInfo)."""

    device: object  # a Device, or a plain int for a type newer than this binding
    name: str  # 'cpu', 'opencl', 'cpu_reference', ...
    count: int  # device ids [0, count) can be opened here; 0 when none (no driver)
    host_memory: bool  # device pointers are host pointers: no staging needed


def _as_device(value):
    try:
        return Device(value)
    except ValueError:
        return int(value)


def _query_info(lib, device):
    info = _library.DeviceInfoStruct()
    _library.check(lib.infiniopGetDeviceInfo(int(device), ctypes.byref(info)),
                   "infiniopGetDeviceInfo")
    return DeviceInfo(_as_device(int(device)), _library._decode(info.name), info.count,
                      bool(info.host_memory))


_DEVICES = {}  # id(library) -> [DeviceInfo]: a build's devices do not change while it is loaded


def devices():
    """The device types built into the library, in infiniDevice_t order, as DeviceInfo: the
    library's own list (infiniopGetDeviceTypes), never a copy kept here. Asked once per loaded
    library (counting OpenCL devices walks the driver's platforms)."""
    lib = _library.get_library()
    if id(lib) not in _DEVICES:
        count = ctypes.c_int()
        _library.check(lib.infiniopGetDeviceTypes(None, 0, ctypes.byref(count)),
                       "infiniopGetDeviceTypes")
        types = (ctypes.c_int * count.value)()
        _library.check(lib.infiniopGetDeviceTypes(types, count.value, ctypes.byref(count)),
                       "infiniopGetDeviceTypes")
        _DEVICES[id(lib)] = [_query_info(lib, t) for t in types]
    return list(_DEVICES[id(lib)])


def device_info(device):
    """DeviceInfo of one device type (a Device, its name or int); InfiniopError
    DEVICE_TYPE_NOT_SUPPORTED, with the library's reason, for one this build lacks."""
    device = _device_type(device)
    for info in devices():
        if int(info.device) == int(device):
            return info
    return _query_info(_library.get_library(), device)  # raises with the library's reason


# --------------------------------------------------------------------------------------------
# Arrays

class ArrayView(NamedTuple):
    """What the C API needs to know about one array: where element [0, ..., 0] is, its shape,
    its strides in elements (may be 0 or negative) and its dtype. A NamedTuple: made on every
    call of every function, so it must be cheap."""

    obj: object  # the array itself, kept alive while the view is used
    kind: str  # 'numpy' or 'torch'
    ptr: int
    shape: tuple
    strides: tuple
    dtype: DType
    itemsize: int

    @property
    def numel(self):
        n = 1
        for size in self.shape:
            n *= size
        return n

    def element_span(self):
        """(lowest, highest) element offsets from ptr that the array touches; None if empty."""
        if self.numel == 0:
            return None
        lowest = highest = 0
        for size, stride in zip(self.shape, self.strides):
            reach = (size - 1) * stride
            if reach < 0:
                lowest += reach
            else:
                highest += reach
        return lowest, highest

    def byte_range(self):
        """[start, end) host addresses of the bytes the array touches; None if empty."""
        span = self.element_span()
        if span is None:
            return None
        return self.ptr + span[0] * self.itemsize, self.ptr + (span[1] + 1) * self.itemsize


@functools.lru_cache(maxsize=None)
def _numpy_dtypes():
    import numpy as np

    return {
        np.dtype(np.float16): DType.F16,
        np.dtype(np.float32): DType.F32,
        np.dtype(np.float64): DType.F64,
        np.dtype(np.int8): DType.I8,
        np.dtype(np.int16): DType.I16,
        np.dtype(np.int32): DType.I32,
        np.dtype(np.int64): DType.I64,
        np.dtype(np.uint8): DType.U8,
        np.dtype(np.uint16): DType.U16,
        np.dtype(np.uint32): DType.U32,
        np.dtype(np.uint64): DType.U64,
        np.dtype(np.bool_): DType.BOOL,
    }


_TORCH_DTYPES = {}  # torch dtype -> (DType, element size), filled on first use


def _torch_dtypes(torch):
    if not _TORCH_DTYPES:
        known = {dtype: (ours, torch.empty((), dtype=dtype).element_size())
                 for dtype, ours in ((torch.float16, DType.F16), (torch.bfloat16, DType.BF16),
                                     (torch.float32, DType.F32), (torch.float64, DType.F64),
                                     (torch.int8, DType.I8), (torch.int16, DType.I16),
                                     (torch.int32, DType.I32), (torch.int64, DType.I64),
                                     (torch.uint8, DType.U8), (torch.bool, DType.BOOL))}
        # FP8 E4M3 (OCP e4m3fn) is the library's F8 (ops/quant.h); PyTorch has it from 2.1.
        if hasattr(torch, "float8_e4m3fn"):
            known[torch.float8_e4m3fn] = (DType.F8, 1)
        _TORCH_DTYPES.update(known)  # at once: another thread never sees it half filled
    return _TORCH_DTYPES


_new_view = tuple.__new__


def _refuse_tensor(obj, name, torch):
    if obj.layout != torch.strided:
        raise TypeError(f"{name}: only strided torch tensors are supported, not {obj.layout}")
    if not obj.is_cpu:
        raise ValueError(f"{name}: torch tensor is on {obj.device}; host (cpu) memory is "
                         "required (the binding stages it to the device itself)")
    raise TypeError(f"{name}: torch dtype {obj.dtype} has no infiniDtype_t")


def _traced_sizes(shape, name):
    """A tensor's shape as ints under torch.jit.trace, where its sizes are 0-dim tensors (what
    the trace records). Only the autograd functions of infiniop.torch (and torch.ops.infiniop)
    are recorded in a trace, as one call each; a call of the functional API would be left out
    of it, the trace replaying a stale output, so it is refused here."""
    torch = sys.modules["torch"]
    if not _TRACE_RECORDED.active:
        raise RuntimeError(
            f"{name}: infiniop's functional API cannot be traced (torch.jit.trace would not "
            "record the library call); use infiniop.torch.<function> or "
            "torch.ops.infiniop.<function>, which a trace records as one call")
    with warnings.catch_warnings():  # the values are read at each replayed call: no staleness
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        return tuple(int(size) for size in shape)


class _TraceRecorded(threading.local):
    """Set while an infiniop.torch autograd function runs: a trace records that function as
    one call (prim::PythonOp), so the library calls inside it may read traced sizes."""

    active = False


_TRACE_RECORDED = _TraceRecorded()


def array_view(obj, name="array"):
    """An ArrayView of a NumPy ndarray or a torch tensor (host memory, strided layout).

    Dtypes the library does not support (F64, integers) are still described, so that the library
    itself answers BAD_TENSOR_DTYPE; dtypes with no infiniDtype_t at all raise TypeError.
    """
    torch = sys.modules.get("torch")  # only a caller that imported torch can pass a tensor
    if torch is not None and isinstance(obj, torch.Tensor):
        known = (_TORCH_DTYPES or _torch_dtypes(torch)).get(obj.dtype)
        if known is None or not obj.is_cpu or obj.layout != torch.strided:
            _refuse_tensor(obj, name, torch)
        # tuple.__new__ skips the NamedTuple's Python-level __new__: this runs on every call.
        shape = tuple(obj.shape)
        if shape and type(shape[0]) is not int:  # traced: see _traced_sizes
            shape = _traced_sizes(shape, name)
        return _new_view(ArrayView, (obj, "torch", obj.data_ptr(), shape, obj.stride(),
                                     known[0], known[1]))

    import numpy as np

    if isinstance(obj, np.ndarray):
        if not obj.dtype.isnative:
            raise TypeError(f"{name}: non-native byte order {obj.dtype.str} is not supported")
        dtype = _numpy_dtypes().get(obj.dtype)
        if dtype is None:
            raise TypeError(f"{name}: numpy dtype {obj.dtype} has no infiniDtype_t")
        itemsize = obj.itemsize
        if any(s % itemsize for s in obj.strides):
            raise ValueError(f"{name}: byte strides {obj.strides} are not multiples of the "
                             f"element size {itemsize}")
        # ctypes.data is the address of element [0, ..., 0] even for negative strides, which is
        # exactly the C API's convention.
        return ArrayView(obj, "numpy", obj.ctypes.data, tuple(obj.shape),
                         tuple(s // itemsize for s in obj.strides), dtype, itemsize)
    fx = getattr(torch, "fx", None) if torch is not None else None
    if fx is not None and isinstance(obj, fx.Proxy):
        raise TypeError(f"{name}: a torch.fx Proxy: infiniop's functional API cannot be traced "
                        "by torch.fx.symbolic_trace; use infiniop.torch.<function>, which fx "
                        "records as one call")
    raise TypeError(f"{name}: expected a numpy.ndarray or a torch.Tensor, "
                    f"not {type(obj).__name__}")


# --------------------------------------------------------------------------------------------
# Handle

_PARSED_DEVICES = {}  # what parse_device() said for each (hashable) value seen


def parse_device(device, name="device"):
    """(device type, device id) from a device name ('cpu', 'cpu_reference', 'opencl'), a
    'type:index' string ('opencl:0'), a torch.device (its type and index), a Device or an int.
    The type is a Device, or a plain int for one newer than this binding (the library's name
    list, then Device.parse)."""
    key = type(device), device  # typed: True and 1.0 must not pass as 1
    try:
        return _PARSED_DEVICES[key]
    except (KeyError, TypeError):  # TypeError: unhashable, parsed below (and refused)
        pass
    parsed = _parse_device(device, name)
    if len(_PARSED_DEVICES) < 64:
        _PARSED_DEVICES[key] = parsed
    return parsed


def _parse_device(device, name):
    index = 0
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(device, torch.device):
        device, index = device.type, 0 if device.index is None else device.index
    elif isinstance(device, str) and ":" in device:
        device, _, text = device.partition(":")
        try:
            index = int(text)
        except ValueError:
            raise ValueError(f"{name}: the index of {device}:{text} is not an int") from None
    if index < 0:
        raise ValueError(f"{name}: device index {index} is negative")
    try:
        return _device_type(device), index
    except (TypeError, ValueError) as error:
        raise type(error)(f"{name}: {error}") from None


def _device_type(device):
    """A device type from a name, a Device or an int: a name in the library's own list first
    (infiniopGetDeviceTypes: a device newer than the Device enum parses by its name too), then
    Device.parse (also before a library is found; the library answers later, with its
    reason)."""
    if isinstance(device, str):
        key = device.strip().lower().replace("-", "_")
        try:
            built = devices()
        except OSError:
            built = []
        for info in built:
            if info.name == key:
                return info.device
        if key.upper() not in Device.__members__:
            names = ", ".join(repr(n) for n in dict.fromkeys(
                [info.name for info in built] + [d.name.lower() for d in Device]))
            raise ValueError(f"unknown device {device!r}; expected one of {names}")
    return Device.parse(device)


class Handle(Closable):
    """An infiniopHandle_t: one device. Use as a context manager, or call close().

    >>> with Handle("cpu") as h: ...
    >>> Handle("opencl:1")   # or Handle("opencl", 1), or Handle(torch.device("cpu"))

    The functions on arrays (infiniop.swiglu, ...) keep the operator descriptors they make on
    their handle, at most DESCRIPTOR_CACHE_SIZE of them, least recently used dropped first,
    keyed by operator, shapes, strides, dtypes and attributes: a repeated call only runs the
    kernel. close() destroys them with the handle. Without a handle given, those functions use
    default_handle(device): one per device and process, so OpenCL programs are built once.
    """

    DESCRIPTOR_CACHE_SIZE = 256

    def __init__(self, device="cpu", device_id=None):
        self.device, index = parse_device(device)
        self.device_id = index if device_id is None else int(device_id)
        lib = _library.get_library()
        handle = ctypes.c_void_p()
        _library.check(lib.infiniopCreateHandle(ctypes.byref(handle), int(self.device),
                                                self.device_id), "infiniopCreateHandle")
        self._lib = lib
        self._raw = handle.value
        self._descriptors = OrderedDict()
        self._descriptors_lock = threading.Lock()
        self._spare_workspaces = []  # [(size, pointer)]: host-memory handles only
        self.weak_reference = weakref.proxy(self)  # what the descriptors it caches hold

    SPARE_WORKSPACES = 4  # kept for reuse; more than that are freed when given back

    def borrow_workspace(self, size):
        """(size, pointer) of device memory of at least `size` bytes for one operator call;
        give it back with give_back_workspace() once the call is queued. Where device pointers
        are host pointers calls are synchronous, so a buffer given back is lent again (up to
        SPARE_WORKSPACES are kept; close() frees them). Elsewhere calls are asynchronous on
        their stream: each gets its own buffer, freed when given back (infiniopFree waits for
        the calls using it), so calls on two streams never share one."""
        if self.host_memory:
            with self._descriptors_lock:
                spares = self._spare_workspaces
                for i, spare in enumerate(spares):
                    if spare[0] >= size:
                        return spares.pop(i)
        return size, self.malloc(size)

    def give_back_workspace(self, buffer):
        if not self.host_memory:
            self.free(buffer[1])
            return
        with self._descriptors_lock:
            spares = self._spare_workspaces
            spares.append(buffer)
            if len(spares) <= self.SPARE_WORKSPACES:
                return
            smallest = min(spares)
            spares.remove(smallest)
        self.free(smallest[1])

    def cached_descriptor(self, key, create=None):
        """The descriptor cached under key, else create()'s, cached (thread-safe); None when
        there is none and no create. Creation runs outside the lock (an OpenCL build may take
        long); a racing twin is dropped."""
        cache, lock = self._descriptors, self._descriptors_lock
        op = cache.get(key)  # a hit needs no lock: OrderedDict's methods hold the GIL
        if op is not None:
            try:
                cache.move_to_end(key)
            except KeyError:  # dropped by another thread just now: still usable here
                pass
            return op
        if create is None:
            return None
        op = create()
        with lock:
            existing = cache.get(key)
            if existing is not None:
                return existing
            cache[key] = op
            if len(cache) > self.DESCRIPTOR_CACHE_SIZE:
                # Dropped, not closed: a thread still running it holds a reference, and the
                # descriptor destroys itself when the last one goes.
                cache.popitem(last=False)
        return op

    def clear_descriptors(self):
        """Destroy the cached descriptors now (close() does too): not while another thread
        is running a call on this handle."""
        with getattr(self, "_descriptors_lock", threading.Lock()):
            cached = list(getattr(self, "_descriptors", {}).values())
            if cached:
                self._descriptors.clear()
        for op in cached:
            op.close()

    FPMATH_MODES = ("strict", "relaxed")  # infiniopFpmathMode_t, in its order

    @property
    def fpmath(self):
        """"strict" (the default) or "relaxed": how the elementwise operators created on this
        handle evaluate F32 outputs (infiniopSetHandleFpmathMode; docs/accuracy.md, "The relaxed
        mode"). Setting it drops the cached descriptors, which keep the mode they were made
        with: not while another thread is running a call on this handle."""
        mode = ctypes.c_int()
        _library.check(self._lib.infiniopGetHandleFpmathMode(self.value, ctypes.byref(mode)),
                       "infiniopGetHandleFpmathMode")
        return self.FPMATH_MODES[mode.value]

    @fpmath.setter
    def fpmath(self, mode):
        if mode not in self.FPMATH_MODES:
            raise ValueError(f"fpmath is 'strict' or 'relaxed', not {mode!r}")
        _library.check(self._lib.infiniopSetHandleFpmathMode(self.value,
                                                             self.FPMATH_MODES.index(mode)),
                       "infiniopSetHandleFpmathMode")
        self.clear_descriptors()

    @property
    def is_open(self):
        return self._raw is not None

    @property
    def value(self):
        """The raw infiniopHandle_t."""
        if not self.is_open:
            raise ValueError("the handle is closed")
        return self._raw

    @property
    def host_memory(self):
        """True when device pointers are host pointers (the CPU devices): no staging needed."""
        if getattr(self, "_host_memory", None) is None:
            self._host_memory = device_info(self.device).host_memory
        return self._host_memory

    def close(self):
        """Destroy the handle and its cached descriptors (idempotent). Memory from malloc() is
        released with it."""
        self.clear_descriptors()
        raw, self._raw = getattr(self, "_raw", None), None
        if raw is not None:
            for _, pointer in self._spare_workspaces:  # infiniopDestroyHandle would free them too
                self._lib.infiniopFree(raw, pointer)
            self._spare_workspaces.clear()
            _library.check(self._lib.infiniopDestroyHandle(raw), "infiniopDestroyHandle")

    def __repr__(self):
        name = device_info(self.device).name if self.is_open else self.device
        state = "" if self.is_open else ", closed"
        return f"Handle({name!r}, device_id={self.device_id}{state})"

    # Device memory and streams (runtime.h). Pointers are ints; streams are ints (or None).
    def malloc(self, size):
        ptr = ctypes.c_void_p()
        _library.check(self._lib.infiniopMalloc(self.value, ctypes.byref(ptr), int(size)),
                       "infiniopMalloc")
        return ptr.value

    def free(self, ptr):
        _library.check(self._lib.infiniopFree(self.value, ptr), "infiniopFree")

    def memcpy_host_to_device(self, dst, src, size, stream=None):
        _library.check(self._lib.infiniopMemcpyHostToDevice(self.value, dst, src, int(size), stream),
                       "infiniopMemcpyHostToDevice")

    def memcpy_device_to_host(self, dst, src, size, stream=None):
        _library.check(self._lib.infiniopMemcpyDeviceToHost(self.value, dst, src, int(size), stream),
                       "infiniopMemcpyDeviceToHost")

    def stream_create(self):
        stream = ctypes.c_void_p()
        _library.check(self._lib.infiniopStreamCreate(self.value, ctypes.byref(stream)),
                       "infiniopStreamCreate")
        return stream.value

    def stream_destroy(self, stream):
        _library.check(self._lib.infiniopStreamDestroy(self.value, stream), "infiniopStreamDestroy")

    def stream_synchronize(self, stream=None):
        _library.check(self._lib.infiniopStreamSynchronize(self.value, stream),
                       "infiniopStreamSynchronize")


_DEFAULT_HANDLES = {}  # (device type, id), and (type, argument) that named it -> Handle
_DEFAULT_HANDLES_LOCK = threading.Lock()


def default_handle(device="cpu"):
    """The process's Handle for a device (anything parse_device() takes), opened on first use
    and kept (opened again if it was closed): what the functions on arrays use when no handle
    is given."""
    try:  # also keyed by the argument as given (typed): the fast path
        handle = _DEFAULT_HANDLES[type(device), device]
        if handle._raw is not None:
            return handle
    except (KeyError, TypeError):
        pass
    parsed = parse_device(device)
    with _DEFAULT_HANDLES_LOCK:
        handle = _DEFAULT_HANDLES.get(parsed)
        if handle is None or not handle.is_open:
            handle = _DEFAULT_HANDLES[parsed] = Handle(*parsed)
        if len(_DEFAULT_HANDLES) < 64:
            try:
                _DEFAULT_HANDLES[type(device), device] = handle
            except TypeError:  # unhashable: found by its parsed value each time
                pass
    return handle


# --------------------------------------------------------------------------------------------
# TensorDescriptor

class TensorDescriptor(Closable):
    """An infiniopTensorDescriptor_t: shape, strides in ELEMENTS (None = contiguous row-major;
    0 and negative allowed where the operator allows them) and dtype."""

    def __init__(self, shape, strides=None, dtype=DType.F32):
        self.shape = tuple(int(s) for s in shape)
        self.strides = None if strides is None else tuple(int(s) for s in strides)
        if self.strides is not None and len(self.strides) != len(self.shape):
            raise ValueError(f"strides {self.strides} do not have one entry per dimension of "
                             f"shape {self.shape}")
        if any(s < 0 for s in self.shape):
            raise ValueError(f"negative size in shape {self.shape}")
        # Keep unknown values as plain ints: the library, not the binding, rejects them.
        self.dtype = DType(dtype) if int(dtype) in DType._value2member_map_ else int(dtype)
        lib = _library.get_library()
        ndim = len(self.shape)
        shape_array = (ctypes.c_size_t * ndim)(*self.shape)
        strides_array = None if self.strides is None else (ctypes.c_ssize_t * ndim)(*self.strides)
        desc = ctypes.c_void_p()
        _library.check(lib.infiniopCreateTensorDescriptor(ctypes.byref(desc), ndim, shape_array,
                                                          strides_array, int(dtype)),
                       "infiniopCreateTensorDescriptor")
        self._lib = lib
        self._raw = desc.value

    @classmethod
    def from_array(cls, array):
        """The descriptor of a NumPy array or torch tensor (or an ArrayView)."""
        view = array if isinstance(array, ArrayView) else array_view(array)
        return cls(view.shape, view.strides, view.dtype)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def value(self):
        if self._raw is None:
            raise ValueError("the tensor descriptor is closed")
        return self._raw

    def close(self):
        raw, self._raw = getattr(self, "_raw", None), None
        if raw is not None:
            _library.check(self._lib.infiniopDestroyTensorDescriptor(raw),
                           "infiniopDestroyTensorDescriptor")

    def __repr__(self):
        dtype = self.dtype.name if isinstance(self.dtype, DType) else self.dtype
        return f"TensorDescriptor(shape={self.shape}, strides={self.strides}, dtype={dtype})"


# --------------------------------------------------------------------------------------------
# Staging host arrays through device memory (devices whose pointers are not host pointers)

def run_staged(handle, views, num_outputs, run):
    """Copy the host arrays `views` (outputs first) to device memory, call run(device_pointers),
    and copy the outputs back once run() has succeeded.

    Arrays whose host bytes overlap share one device buffer at the same relative offsets, so the
    library sees exactly the aliasing the caller made: an exact in-place alias stays an exact
    alias, and a partial overlap is still reported as BAD_TENSOR_STRIDES. Every buffer starts at
    the lowest byte its arrays touch, so a device pointer is the buffer plus a non-negative
    offset even for negative strides.
    """
    ranges = [view.byte_range() for view in views]
    # Merge overlapping byte ranges into groups: [start, end, indices of views].
    groups = []
    for index in sorted((i for i, r in enumerate(ranges) if r), key=lambda i: ranges[i]):
        start, end = ranges[index]
        if groups and start < groups[-1][1]:
            groups[-1][1] = max(groups[-1][1], end)
            groups[-1][2].append(index)
        else:
            groups.append([start, end, [index]])

    buffers = []
    try:
        device_ptrs = [0] * len(views)  # empty arrays: NULL, which the C API accepts
        for start, end, members in groups:
            buffer = handle.malloc(end - start)
            buffers.append(buffer)
            handle.memcpy_host_to_device(buffer, start, end - start)
            for index in members:
                device_ptrs[index] = buffer + (views[index].ptr - start)
        run(device_ptrs)
        for (start, end, members), buffer in zip(groups, buffers):
            if any(index < num_outputs for index in members):
                # The whole group comes back; bytes no output covers come back unchanged.
                handle.memcpy_device_to_host(start, buffer, end - start)
    finally:
        for buffer in buffers:
            handle.free(buffer)


# --------------------------------------------------------------------------------------------
# Output arrays

def contiguous_strides(shape):
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def output(out, like, like_view, shape=None, dtype=None, name="out"):
    """(array, ArrayView) of an output: `out` checked when given (check_out), else a new array
    of like's kind: like's shape and dense layout (torch.empty_like: a broadcast `like` gives a
    contiguous one) when neither shape nor dtype is given, else contiguous of `shape` (like's
    when None) and `dtype` (like's when None)."""
    if out is not None:
        return out, check_out(out, like_view.kind, name)
    if like_view.kind == "torch":
        torch = sys.modules["torch"]
        if shape is None and dtype is None:
            out = torch.empty_like(like)
        else:
            out = torch.empty(like_view.shape if shape is None else shape,
                              dtype=like.dtype if dtype is None else dtype)
        # A new host tensor of a known dtype: its view needs none of array_view's checks.
        shape = tuple(out.shape)
        if shape and type(shape[0]) is not int:  # traced: see _traced_sizes
            shape = _traced_sizes(shape, name)
        return out, _new_view(ArrayView, (out, "torch", out.data_ptr(), shape, out.stride(),
                                          *_TORCH_DTYPES[out.dtype]))
    import numpy as np

    if shape is None and dtype is None:
        out = np.empty_like(like)
    else:
        out = np.empty(like_view.shape if shape is None else shape,
                       dtype=like.dtype if dtype is None else dtype)
    return out, array_view(out, name)


def check_out(out, kind, name="out"):
    """The ArrayView of an output array given by the caller, of the inputs' kind, writable."""
    out_view = array_view(out, name)
    if out_view.kind != kind:
        raise TypeError(f"{name} is a {out_view.kind} array but the inputs are {kind}")
    if out_view.kind == "numpy" and not out.flags.writeable:
        raise ValueError(f"{name} is a read-only numpy array (np.broadcast_to gives read-only "
                         "views)")
    return out_view
