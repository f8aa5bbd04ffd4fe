"""Python ctypes binding of libinfiniop (include/infiniop.h).

The shared library is found through $INFINIOP_LIBRARY, else in build/ or build-*/ at the
repository root; it is loaded on first use, so importing this package never fails for that.

    import infiniop, torch
    grad_input = infiniop.gelu_backward(grad_output, x, device="cpu")
    y = infiniop.swiglu(x, dim=-1)
"""

from ._library import (
    InfiniopError,
    LibraryNotFoundError,
    get_library,
    last_error,
    library_candidates,
    load_library,
    status_string,
)
from .core import ArrayView, Handle, TensorDescriptor, array_view, cpu_isa_name
from .enums import Device, DType, Status
from .gelu_backward import GeluBackward, gelu_backward
from .swiglu import SwiGlu, SwiGluBackward, swiglu, swiglu_backward

__all__ = [
    "ArrayView",
    "Device",
    "DType",
    "GeluBackward",
    "Handle",
    "InfiniopError",
    "LibraryNotFoundError",
    "Status",
    "SwiGlu",
    "SwiGluBackward",
    "TensorDescriptor",
    "array_view",
    "cpu_isa_name",
    "gelu_backward",
    "get_library",
    "last_error",
    "library_candidates",
    "load_library",
    "status_string",
    "swiglu",
    "swiglu_backward",
]
