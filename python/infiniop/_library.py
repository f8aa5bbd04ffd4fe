# SPDX-License-Identifier: Apache-2.0
"""Finding and loading libinfiniop.so, the C prototypes, and status checking."""

import ctypes
import os
import threading
from pathlib import Path

from .enums import Status

__all__ = [
    "InfiniopError",
    "LibraryNotFoundError",
    "library_candidates",
    "load_library",
    "get_library",
    "check",
    "status_string",
    "last_error",
]

LIBRARY_ENV = "INFINIOP_LIBRARY"
LIBRARY_NAME = "libinfiniop.so"

# python/infiniop/_library.py -> the repository root is three levels up.
REPO_ROOT = Path(__file__).resolve().parents[2]


class LibraryNotFoundError(OSError):
    """libinfiniop.so could not be found or could not be loaded."""


class InfiniopError(RuntimeError):
    """A libinfiniop call returned a status other than INFINI_STATUS_SUCCESS.

    status: the int status; status_name: infiniStatusString(status);
    message: infiniopGetLastError() read right after the failing call; function: the C function.
    """

    def __init__(self, status, message, function=None):
        self.status = int(status)
        self.status_name = status_string(self.status)
        self.message = message
        self.function = function
        where = f"{function} failed: " if function else ""
        super().__init__(f"{where}{self.status_name} ({self.status}): {message or '(no message)'}")


# --------------------------------------------------------------------------------------------
# Locating the library

def library_candidates(environ=None, repo_root=None):
    """The paths to try, best first, and whether they came from the environment variable.

    INFINIOP_LIBRARY, when set, is the only candidate (an explicit choice must not be overridden
    by a stale build lying around). Otherwise build/ next to the repository root, then the
    build-*/ folders, most recently built first.
    """
    environ = os.environ if environ is None else environ
    root = REPO_ROOT if repo_root is None else Path(repo_root)
    explicit = environ.get(LIBRARY_ENV, "").strip()
    if explicit:
        return [Path(explicit)], True
    found = []
    default = root / "build" / LIBRARY_NAME
    if default.is_file():
        found.append(default)
    others = [p for p in root.glob("build-*/" + LIBRARY_NAME) if p.is_file()]
    others.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    return found + others, False


def _open(path):
    """dlopen one candidate; None and the reason if it does not load."""
    try:
        return ctypes.CDLL(str(path)), None
    except OSError as error:  # e.g. a sanitizer build that needs its runtime preloaded
        return None, str(error)


def load_library(path=None):
    """Load libinfiniop.so (from `path`, or as library_candidates() says) and declare its API.

    Returns the ctypes.CDLL. Raises LibraryNotFoundError with every path tried and why it failed.
    """
    if path is not None:
        candidates, explicit, origin = [Path(path)], True, "the path given"
    else:
        candidates, explicit = library_candidates()
        origin = f"${LIBRARY_ENV}" if explicit else f"the build folders under {REPO_ROOT}"
    reasons = []
    for candidate in candidates:
        if not candidate.is_file():
            reasons.append(f"{candidate}: no such file")
            continue
        lib, reason = _open(candidate)
        if lib is not None:
            _declare(lib)
            lib.infiniop_path = str(candidate)
            return lib
        reasons.append(f"{candidate}: {reason}")
    hint = (f"Build the library (cmake -S {REPO_ROOT} -B {REPO_ROOT}/build && cmake --build "
            f"{REPO_ROOT}/build) or set {LIBRARY_ENV} to the path of {LIBRARY_NAME}.")
    if not reasons:
        reasons.append(f"no {REPO_ROOT}/build/{LIBRARY_NAME} or {REPO_ROOT}/build-*/{LIBRARY_NAME}")
    raise LibraryNotFoundError(
        f"cannot load {LIBRARY_NAME} from {origin}:\n  " + "\n  ".join(reasons) + "\n" + hint)


_lock = threading.Lock()
_library = None


def get_library():
    """The process-wide library, loaded on first use (so `import infiniop` never fails)."""
    global _library
    if _library is None:
        with _lock:
            if _library is None:
                _library = load_library()
    return _library


# --------------------------------------------------------------------------------------------
# Prototypes: every exported function of include/infiniop.h.

_status = ctypes.c_int  # C enums are int-sized
_enum = ctypes.c_int
_ptr = ctypes.c_void_p
_pptr = ctypes.POINTER(ctypes.c_void_p)
_size = ctypes.c_size_t
_psize = ctypes.POINTER(ctypes.c_size_t)
_pdiff = ctypes.POINTER(ctypes.c_ssize_t)  # ptrdiff_t
_int32 = ctypes.c_int32
# int64_t dim, float alpha, float limit, float bias, bool interleaved
_CLIPPED_SWIGLU_ATTRIBUTES = [ctypes.c_int64, ctypes.c_float, ctypes.c_float, ctypes.c_float,
                              ctypes.c_bool]

class DeviceInfoStruct(ctypes.Structure):
    """infiniopDeviceInfo_t (handle.h)."""

    _fields_ = [("name", ctypes.c_char_p), ("count", ctypes.c_int), ("host_memory", ctypes.c_int)]


_PROTOTYPES = {
    # infinicore.h
    "infiniStatusString": (ctypes.c_char_p, [_enum]),
    "infiniopGetLastError": (ctypes.c_char_p, []),
    # handle.h
    "infiniopCreateHandle": (_status, [_pptr, _enum, ctypes.c_int]),
    "infiniopDestroyHandle": (_status, [_ptr]),
    "infiniopGetDeviceTypes": (_status, [ctypes.POINTER(_enum), ctypes.c_int,
                                         ctypes.POINTER(ctypes.c_int)]),
    "infiniopGetDeviceInfo": (_status, [_enum, ctypes.POINTER(DeviceInfoStruct)]),
    # tensor_descriptor.h
    "infiniopCreateTensorDescriptor": (_status, [_pptr, _size, _psize, _pdiff, _enum]),
    "infiniopDestroyTensorDescriptor": (_status, [_ptr]),
    # runtime.h
    "infiniopMalloc": (_status, [_ptr, _pptr, _size]),
    "infiniopFree": (_status, [_ptr, _ptr]),
    "infiniopMemcpyHostToDevice": (_status, [_ptr, _ptr, _ptr, _size, _ptr]),
    "infiniopMemcpyDeviceToHost": (_status, [_ptr, _ptr, _ptr, _size, _ptr]),
    "infiniopStreamCreate": (_status, [_ptr, _pptr]),
    "infiniopStreamDestroy": (_status, [_ptr, _ptr]),
    "infiniopStreamSynchronize": (_status, [_ptr, _ptr]),
    "infiniopCpuIsaName": (ctypes.c_char_p, []),
    # ops/gelu_backward.h
    "infiniopCreateGeluBackwardDescriptor": (_status, [_ptr, _pptr, _ptr, _ptr, _ptr]),
    "infiniopGetGeluBackwardWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopGeluBackward": (_status, [_ptr, _ptr, _size, _ptr, _ptr, _ptr, _ptr]),
    "infiniopDestroyGeluBackwardDescriptor": (_status, [_ptr]),
    # ops/swiglu.h
    "infiniopCreateSwiGluDescriptor": (_status, [_ptr, _pptr, _ptr, _ptr, _int32]),
    "infiniopGetSwiGluWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopSwiGlu": (_status, [_ptr, _ptr, _size, _ptr, _ptr, _ptr]),
    "infiniopDestroySwiGluDescriptor": (_status, [_ptr]),
    # ops/swiglu_backward.h
    "infiniopCreateSwiGluBackwardDescriptor": (_status, [_ptr, _pptr, _ptr, _ptr, _ptr, _int32]),
    "infiniopGetSwiGluBackwardWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopSwiGluBackward": (_status, [_ptr, _ptr, _size, _ptr, _ptr, _ptr, _ptr]),
    "infiniopDestroySwiGluBackwardDescriptor": (_status, [_ptr]),
    # ops/gelu_mul.h, ops/gelu_mul_backward.h (the approximation is a C enum)
    "infiniopCreateGeluMulDescriptor": (_status, [_ptr, _pptr, _ptr, _ptr, _enum]),
    "infiniopGetGeluMulWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopGeluMul": (_status, [_ptr, _ptr, _size, _ptr, _ptr, _ptr]),
    "infiniopDestroyGeluMulDescriptor": (_status, [_ptr]),
    "infiniopCreateGeluMulBackwardDescriptor": (_status, [_ptr, _pptr, _ptr, _ptr, _ptr, _enum]),
    "infiniopGetGeluMulBackwardWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopGeluMulBackward": (_status, [_ptr, _ptr, _size, _ptr, _ptr, _ptr, _ptr]),
    "infiniopDestroyGeluMulBackwardDescriptor": (_status, [_ptr]),
    # ops/gelu.h, ops/gelu_backward_v2.h
    "infiniopCreateGeluDescriptor": (_status, [_ptr, _pptr, _ptr, _ptr, _enum]),
    "infiniopGetGeluWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopGelu": (_status, [_ptr, _ptr, _size, _ptr, _ptr, _ptr]),
    "infiniopDestroyGeluDescriptor": (_status, [_ptr]),
    "infiniopCreateGeluBackwardV2Descriptor": (_status, [_ptr, _pptr, _ptr, _ptr, _ptr, _enum]),
    "infiniopGetGeluBackwardV2WorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopGeluBackwardV2": (_status, [_ptr, _ptr, _size, _ptr, _ptr, _ptr, _ptr]),
    "infiniopDestroyGeluBackwardV2Descriptor": (_status, [_ptr]),
    # ops/clipped_swiglu.h, ops/clipped_swiglu_backward.h
    "infiniopCreateClippedSwigluDescriptor": (
        _status, [_ptr, _pptr, _ptr, _ptr, _ptr] + _CLIPPED_SWIGLU_ATTRIBUTES),
    "infiniopGetClippedSwigluWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopClippedSwiglu": (_status, [_ptr, _ptr, _size, _ptr, _ptr, _ptr, _ptr]),
    "infiniopDestroyClippedSwigluDescriptor": (_status, [_ptr]),
    "infiniopCreateClippedSwigluBackwardDescriptor": (
        _status, [_ptr, _pptr, _ptr, _ptr, _ptr, _ptr] + _CLIPPED_SWIGLU_ATTRIBUTES),
    "infiniopGetClippedSwigluBackwardWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopClippedSwigluBackward": (_status, [_ptr, _ptr, _size, _ptr, _ptr, _ptr, _ptr, _ptr]),
    "infiniopDestroyClippedSwigluBackwardDescriptor": (_status, [_ptr]),
    # ops/moe_finalize_routing_v2.h: out, expanded_x, expanded_row_idx, x1, x2, bias, scales,
    # expert_idx, then int64_t drop_pad_mode
    "infiniopCreateMoeFinalizeRoutingV2Descriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 8 + [ctypes.c_int64]),
    "infiniopGetMoeFinalizeRoutingV2WorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopMoeFinalizeRoutingV2": (_status, [_ptr, _ptr, _size] + [_ptr] * 8 + [_ptr]),
    "infiniopDestroyMoeFinalizeRoutingV2Descriptor": (_status, [_ptr]),
    # ops/moe_finalize_routing_v2_grad.h: grad_expanded_x, grad_scales, grad_y, expanded_row_idx,
    # expanded_x, scales, expert_idx, bias, then int64_t drop_pad_mode, active_num, expert_num,
    # expert_capacity
    "infiniopCreateMoeFinalizeRoutingV2GradDescriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 8 + [ctypes.c_int64] * 4),
    "infiniopGetMoeFinalizeRoutingV2GradWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopMoeFinalizeRoutingV2Grad": (_status, [_ptr, _ptr, _size] + [_ptr] * 8 + [_ptr]),
    "infiniopDestroyMoeFinalizeRoutingV2GradDescriptor": (_status, [_ptr]),
    # ops/moe_init_routing_v2.h: expanded_x, expanded_row_idx, expert_tokens_count_or_cumsum,
    # expert_tokens_before_capacity, x, expert_idx, then int64_t active_num, expert_capacity,
    # expert_num, drop_pad_mode, expert_tokens_count_or_cumsum_flag, bool
    # expert_tokens_before_capacity_flag
    "infiniopCreateMoeInitRoutingV2Descriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 6 + [ctypes.c_int64] * 5 + [ctypes.c_bool]),
    "infiniopGetMoeInitRoutingV2WorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopMoeInitRoutingV2": (_status, [_ptr, _ptr, _size] + [_ptr] * 6 + [_ptr]),
    "infiniopDestroyMoeInitRoutingV2Descriptor": (_status, [_ptr]),
    # ops/moe_init_routing_v2_grad.h: grad_x, grad_expanded_x, expanded_row_idx, then int64_t
    # top_k, drop_pad_mode, active_num
    "infiniopCreateMoeInitRoutingV2GradDescriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 3 + [ctypes.c_int64] * 3),
    "infiniopGetMoeInitRoutingV2GradWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopMoeInitRoutingV2Grad": (_status, [_ptr, _ptr, _size] + [_ptr] * 3 + [_ptr]),
    "infiniopDestroyMoeInitRoutingV2GradDescriptor": (_status, [_ptr]),
}

EXPORTED_FUNCTIONS = tuple(_PROTOTYPES)


def _declare(lib):
    for name, (restype, argtypes) in _PROTOTYPES.items():
        function = getattr(lib, name)  # AttributeError names a missing export clearly
        function.restype = restype
        function.argtypes = argtypes


# --------------------------------------------------------------------------------------------
# Status helpers

def _decode(raw):
    return raw.decode("utf-8", errors="replace") if raw else ""


def status_string(status):
    """infiniStatusString(status), e.g. 'INFINI_STATUS_BAD_PARAM'."""
    return _decode(get_library().infiniStatusString(int(status)))


def last_error():
    """infiniopGetLastError(): why the last call on this thread failed ('' after a success)."""
    return _decode(get_library().infiniopGetLastError())


def check(status, function=None):
    """Raise InfiniopError unless status is SUCCESS.

    Must be called right after the C call: the last-error text is thread-local and only valid
    until the next libinfiniop call on this thread.
    """
    if status != Status.SUCCESS:
        raise InfiniopError(status, last_error(), function)


def call(name, *args):
    """Call a status-returning C function by name and check its status."""
    check(getattr(get_library(), name)(*args), name)
