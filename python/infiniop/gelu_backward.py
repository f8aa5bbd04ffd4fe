# SPDX-License-Identifier: Apache-2.0
"""GeluBackward: grad_input = grad_output * d/dx gelu_tanh(input)."""

import ctypes

from . import _library
from .core import ArrayView, Handle, TensorDescriptor, array_view, run_staged

__all__ = ["GeluBackward", "gelu_backward"]


class GeluBackward:
    """An infiniopGeluBackwardDescriptor_t.

    Built from three TensorDescriptors (grad_input, input, grad_output: outputs first, as in
    the C API) or, with for_arrays(), from the arrays themselves. Call it with data pointers
    (ints) or with arrays whose layout matches the descriptors.
    """

    def __init__(self, handle, grad_input_desc, input_desc, grad_output_desc):
        lib = _library.get_library()
        desc = ctypes.c_void_p()
        _library.check(lib.infiniopCreateGeluBackwardDescriptor(
            handle.value, ctypes.byref(desc), grad_input_desc.value, input_desc.value,
            grad_output_desc.value), "infiniopCreateGeluBackwardDescriptor")
        self._lib = lib
        self._raw = desc.value
        self.handle = handle  # the descriptor must not outlive its handle
        # The descriptor copies what it needs; these only let __call__ check arrays passed in.
        self._layouts = tuple((d.shape, d.strides, d.dtype)
                              for d in (grad_input_desc, input_desc, grad_output_desc))

    @classmethod
    def for_arrays(cls, handle, grad_input, input, grad_output):
        """A descriptor for these arrays' shapes, strides and dtypes."""
        views = [a if isinstance(a, ArrayView) else array_view(a, name)
                 for a, name in ((grad_input, "grad_input"), (input, "input"),
                                 (grad_output, "grad_output"))]
        descs = [TensorDescriptor.from_array(v) for v in views]
        try:
            return cls(handle, *descs)
        finally:  # the operator descriptor has copied them (API.md)
            for d in descs:
                d.close()

    @property
    def value(self):
        if self._raw is None:
            raise ValueError("the GeluBackward descriptor is closed")
        return self._raw

    @property
    def workspace_size(self):
        size = ctypes.c_size_t()
        _library.check(self._lib.infiniopGetGeluBackwardWorkspaceSize(self.value, ctypes.byref(size)),
                       "infiniopGetGeluBackwardWorkspaceSize")
        return size.value

    def _pointer(self, data, index, name):
        """A data argument as a pointer: an int (device pointer), None (NULL) or an array."""
        if data is None or isinstance(data, int):
            return data
        view = data if isinstance(data, ArrayView) else array_view(data, name)
        shape, strides, dtype = self._layouts[index]
        expected_strides = strides if strides is not None else _contiguous(shape)
        # The stride of a size-1 dimension is never used, so it need not match.
        same_strides = all(size == 1 or a == b
                           for size, a, b in zip(shape, view.strides, expected_strides))
        if (view.shape, view.dtype) != (shape, dtype) or not same_strides:
            raise ValueError(f"{name}: array (shape {view.shape}, strides {view.strides}, "
                             f"{view.dtype.name}) does not match the descriptor (shape {shape}, "
                             f"strides {expected_strides}, {getattr(dtype, 'name', dtype)})")
        return view.ptr

    def __call__(self, grad_input, input, grad_output, workspace=None, workspace_size=None,
                 stream=None):
        """Run it. Without a workspace, one of workspace_size bytes is allocated if needed."""
        pointers = [self._pointer(d, i, n) for i, (d, n) in enumerate(
            ((grad_input, "grad_input"), (input, "input"), (grad_output, "grad_output")))]
        owned = None
        if workspace is None:
            needed = self.workspace_size
            if needed:
                owned = workspace = self.handle.malloc(needed)
                workspace_size = needed
        try:
            size = workspace_size if workspace_size is not None else 0
            _library.check(self._lib.infiniopGeluBackward(self.value, workspace, size, *pointers,
                                                          stream), "infiniopGeluBackward")
        finally:
            if owned is not None:
                self.handle.free(owned)

    def close(self):
        raw, self._raw = getattr(self, "_raw", None), None
        if raw is not None:
            _library.check(self._lib.infiniopDestroyGeluBackwardDescriptor(raw),
                           "infiniopDestroyGeluBackwardDescriptor")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _contiguous(shape):
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _empty_like(array, view):
    if view.kind == "torch":
        import torch

        return torch.empty_like(array)  # keeps a dense layout, makes broadcast ones contiguous
    import numpy as np

    return np.empty_like(array)


def gelu_backward(grad_output, input, *, device="cpu", out=None, handle=None, _stage=None):
    """grad_input = grad_output * d/dx gelu_tanh(input), as torch's
    gelu_backward(grad_output, input, approximate='tanh').

    grad_output, input: NumPy arrays (float32, float16) or torch CPU tensors (float32, float16,
    bfloat16) of one kind, any strides (broadcast and negative included). out: where to write,
    allocated like grad_output when None; it may be the very object passed as input or
    grad_output (in place). device: 'cpu', 'cpu_reference', 'opencl' or a Device; ignored when
    a Handle is given. Returns out. Raises InfiniopError with the library's status and reason.
    """
    grad_output_view = array_view(grad_output, "grad_output")
    input_view = array_view(input, "input")
    if grad_output_view.kind != input_view.kind:
        raise TypeError(f"grad_output is a {grad_output_view.kind} array but input is a "
                        f"{input_view.kind} one; pass two of one kind")
    if out is None:
        out = _empty_like(grad_output, grad_output_view)
    out_view = array_view(out, "out")
    if out_view.kind != grad_output_view.kind:
        raise TypeError(f"out is a {out_view.kind} array but the inputs are {grad_output_view.kind}")
    if out_view.kind == "numpy" and not out.flags.writeable:
        raise ValueError("out is a read-only numpy array (np.broadcast_to gives read-only views)")

    own_handle = handle is None
    if own_handle:
        handle = Handle(device)
    try:
        with GeluBackward.for_arrays(handle, out_view, input_view, grad_output_view) as op:
            views = [out_view, input_view, grad_output_view]
            stage = (not handle.host_memory) if _stage is None else _stage
            if stage:  # host arrays -> device memory -> host
                run_staged(handle, views, 1, lambda pointers: op(*pointers))
            else:
                op(*(v.ptr for v in views))
    finally:
        if own_handle:
            handle.close()
    return out
