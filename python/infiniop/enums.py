# SPDX-License-Identifier: Apache-2.0
"""The C enums of include/infinicore.h as IntEnum classes.

The numeric values are part of the library's ABI (shared/specs/API.md); tests/python checks them
against the header so the two cannot drift apart silently.
"""

from enum import IntEnum

__all__ = ["Status", "DType", "Device"]


class Status(IntEnum):
    """infiniStatus_t."""

    SUCCESS = 0
    INTERNAL_ERROR = 1
    NOT_IMPLEMENTED = 2
    BAD_PARAM = 3
    NULL_POINTER = 4
    DEVICE_TYPE_NOT_SUPPORTED = 5
    DEVICE_NOT_FOUND = 6
    DEVICE_NOT_INITIALIZED = 7
    DEVICE_ARCHITECTURE_NOT_SUPPORTED = 8
    BAD_TENSOR_DTYPE = 10
    BAD_TENSOR_SHAPE = 11
    BAD_TENSOR_STRIDES = 12
    INSUFFICIENT_WORKSPACE = 13


class DType(IntEnum):
    """infiniDtype_t."""

    INVALID = 0
    BYTE = 1
    BOOL = 2
    I8 = 3
    I16 = 4
    I32 = 5
    I64 = 6
    U8 = 7
    U16 = 8
    U32 = 9
    U64 = 10
    F8 = 11
    F16 = 12
    F32 = 13
    F64 = 14
    C16 = 15
    C32 = 16
    C64 = 17
    C128 = 18
    BF16 = 19


class Device(IntEnum):
    """infiniDevice_t."""

    CPU = 0  # optimized CPU: SIMD with runtime ISA dispatch, OpenMP
    OPENCL = 1  # any OpenCL 1.2+ device
    CPU_REFERENCE = 2  # plain scalar C++, single thread: the readable oracle

    @classmethod
    def parse(cls, device):
        """A device's name as the library spells it ('cpu', 'cpu_reference', 'opencl', any case,
        '-' for '_'), a Device, or a plain int.

        Names come from the library (infiniopGetDeviceTypes) first, so a device newer than this
        enum is found by its name (as a plain int); then from this enum, so that a device this
        build lacks reaches the library, which says why with its own status and message. A plain
        int outside the enum is likewise returned unchanged.
        """
        if isinstance(device, cls):
            return device
        if isinstance(device, str):
            key = device.strip().lower().replace("-", "_")
            built = []
            try:
                from .core import devices  # the library's list; a cycle at import time otherwise

                built = devices()
            except OSError:  # no library yet: the enum's names still parse
                pass
            for info in built:
                if info.name == key:
                    return info.device
            try:
                return cls[key.upper()]
            except KeyError:
                names = ", ".join(repr(n) for n in dict.fromkeys(
                    [info.name for info in built] + [d.name.lower() for d in cls]))
                raise ValueError(f"unknown device {device!r}; expected one of {names}") from None
        if isinstance(device, int) and not isinstance(device, bool):
            try:
                return cls(device)
            except ValueError:
                return int(device)
        raise TypeError(f"device must be a str or an int, not {type(device).__name__}")
