# SPDX-License-Identifier: Apache-2.0
"""The C enums of include/infinicore.h as IntEnum classes.

The numeric values are part of the library's ABI (shared/specs/API.md); tests/python checks them
against the header so the two cannot drift apart silently.
"""

import operator
from enum import IntEnum

__all__ = ["Status", "DType", "Device", "QuantMode", "QuantScaleFormat"]


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
        """A device's name as this enum spells it ('cpu', 'cpu_reference', 'opencl', any case,
        '-' for '_'), a Device, or a plain int (one outside the enum returned unchanged, for the
        library to answer). core.parse_device asks the library's own list of names first (a
        device newer than this enum), then this; this module imports nothing of the package.
        """
        if isinstance(device, cls):
            return device
        if isinstance(device, str):
            key = device.strip().lower().replace("-", "_")
            try:
                return cls[key.upper()]
            except KeyError:
                names = ", ".join(repr(d.name.lower()) for d in cls)
                raise ValueError(f"unknown device {device!r}; expected one of {names}") from None
        if isinstance(device, int) and not isinstance(device, bool):
            try:
                return cls(device)
            except ValueError:
                return int(device)
        raise TypeError(f"device must be a str or an int, not {type(device).__name__}")


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


class QuantMode(IntEnum):
    """infiniopQuantMode_t (ops/quant.h)."""

    STATIC = 0  # the scale tensor is read
    DYNAMIC = 1  # s = amax / qmax of each group, computed and written


class QuantScaleFormat(IntEnum):
    """infiniopQuantScaleFormat_t (ops/quant.h): how a dynamic scale is rounded."""

    F32 = 0  # amax / qmax rounded once to nearest F32
    UE8M0 = 1  # rounded up to a power of two (DeepSeek-V3's FP8 recipe, DeepGEMM's scales)
