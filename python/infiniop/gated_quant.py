# SPDX-License-Identifier: Apache-2.0
"""SwiGluQuant, GeluMulQuant and ClippedSwigluQuant: a gated activation with a quantized output
(family GatedQuant, docs/swiglu_quant.md; CANN's SwiGluQuant, vLLM's silu_and_mul / gelu_and_mul
followed by a per-token or per-group quantization; GPT-OSS's clipped SwiGLU, clamp_mode 0).

x (..., 2H) is split on its LAST dim into x1 and x2; a = act(x1) x2 (activate_left True) or
x1 act(x2) (False, CANN's default); z = a m with m the smooth scale of the column (1 without
smooth_scales). Each row's H values form G groups of group_size columns (group_size 0: G = 1,
per-token); y = z / s rounded once to nearest even and saturated, s the group's scale:
    dynamic (scale=None): s = amax / qmax of the group, rounded to F32 (scale_format 'f32') or up
        to a power of two ('ue8m0'), at least 2^-126; written to a new (..., G) float32 tensor;
    static (scale given): s read from scale (..., G) float32, any strides (a stride 0 broadcasts
        one scale, e.g. a per-tensor scalar expanded).
y dtype: INT8 (int8, qmax 127) or FP8 E4M3 (OCP e4m3fn, qmax 448): torch.float8_e4m3fn where
the installed PyTorch has it, else its raw bytes as torch.uint8 (NumPy: numpy.uint8); ask for
it with dtype='fp8' on any PyTorch. The values are exact: the same bytes and scale bits on every
device.
ClippedSwigluQuant splits x's last dim into A and B (interleaved: A = x[..., 0::2], B =
x[..., 1::2]; else the halves) and takes a = min(A, limit) sigmoid(alpha min(A, limit)) (clamp(B,
-limit, limit) + bias), ClippedSwiglu's (infiniop.clipped_swiglu); the rest is SwiGluQuant's.
"""

import operator
import sys

from ._dispatch import run
from .clipped_swiglu import _check_real, _zero_signs
from ._operator import AttributeOperator, array_views, check_bool, check_dim, check_int64
from .core import array_view, output
from .enums import DType, GeluApproximate, QuantMode, QuantScaleFormat

__all__ = ["ClippedSwigluQuant", "DequantSwigluQuant", "GeluMulQuant", "QuantMode",
           "QuantScaleFormat", "SwiGluQuant", "clipped_swiglu_quant", "dequant_swiglu_quant",
           "gelu_mul_quant", "quant_dtype", "quant_dtype_name",
           "swiglu_quant"]

# dtype names -> the library's y dtype (ops/quant.h)
_DTYPE_NAMES = {"int8": DType.I8, "i8": DType.I8, "fp8": DType.F8, "f8": DType.F8,
                "float8_e4m3fn": DType.F8, "e4m3fn": DType.F8, "fp8_e4m3": DType.F8,
                "e4m3": DType.F8}


def quant_dtype(dtype):
    """The library's y dtype (DType.I8 or DType.F8) of `dtype`: torch.int8 or numpy.int8,
    torch.float8_e4m3fn, a DType (I8, F8), or a name ('int8', 'fp8', 'float8_e4m3fn', any
    case). FP8 is OCP's E4M3 (e4m3fn) only. ValueError for anything else."""
    if isinstance(dtype, DType):
        if dtype in (DType.I8, DType.F8):
            return dtype
    elif isinstance(dtype, str):
        code = _DTYPE_NAMES.get(dtype.strip().lower().replace("torch.", ""))
        if code is not None:
            return code
    else:  # a torch or NumPy dtype (or class), by its name
        name = str(dtype).replace("torch.", "").replace("<class 'numpy.", "").rstrip("'>")
        if name in ("int8", "float8_e4m3fn"):
            return _DTYPE_NAMES[name]
    raise ValueError(f"dtype={dtype!r}: the quantized output is int8 (torch.int8, 'int8') or FP8 "
                     "E4M3 (torch.float8_e4m3fn, 'fp8')")


def quant_dtype_name(dtype):
    """'int8' or 'fp8' for `dtype` (quant_dtype): how torch.ops.infiniop's schemas take it."""
    return "int8" if quant_dtype(dtype) == DType.I8 else "fp8"


def _array_dtype(code, kind):
    """The array dtype y is allocated with: int8; FP8 as torch.float8_e4m3fn where PyTorch has
    it, else uint8 (its raw bytes)."""
    if kind == "torch":
        torch = sys.modules["torch"]
        if code == DType.I8:
            return torch.int8
        return getattr(torch, "float8_e4m3fn", torch.uint8)
    import numpy as np

    return np.dtype(np.int8 if code == DType.I8 else np.uint8)


def _parse(enum, value, name, names):
    """A C enum attribute: a name (names' keys, any case), a member of `enum`, or an int (one
    outside the enum passed on for the library to reject: BAD_PARAM)."""
    if isinstance(value, str):
        code = names.get(value.strip().lower())
        if code is None:
            raise ValueError(f"{name}={value!r}: expected one of {', '.join(map(repr, names))}")
        return code
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a str or an int, not bool")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be a str or an int, not {type(value).__name__}") from None
    if not -2 ** 31 <= value < 2 ** 31:
        raise OverflowError(f"{name} {value} does not fit in a C int")
    try:
        return enum(value)
    except ValueError:
        return value


SCALE_FORMATS = {"f32": QuantScaleFormat.F32, "float32": QuantScaleFormat.F32,
                 "ue8m0": QuantScaleFormat.UE8M0}
QUANT_MODES = {"static": QuantMode.STATIC, "dynamic": QuantMode.DYNAMIC}


def scale_format_code(scale_format):
    """'f32' (0) or 'ue8m0' (1), a QuantScaleFormat, or an int."""
    return _parse(QuantScaleFormat, scale_format, "scale_format", SCALE_FORMATS)


def _activate_left(value):
    """True / False or 0 / 1 as the C int32 (other ints passed on: the library's BAD_PARAM)."""
    if isinstance(value, bool):
        return int(value)
    if type(value).__module__ == "numpy" and type(value).__name__ in ("bool_", "bool"):
        return int(bool(value))
    return check_dim(value)  # an int32_t


class SwiGluQuant(AttributeOperator):
    """An infiniopSwiGluQuantDescriptor_t: SwiGluQuant(handle, y_desc, scale_desc, x_desc,
    smooth_scales_desc=None, group_index_desc=None, activate_left=1, quant_mode='dynamic',
    group_size=0, scale_format='f32'), or SwiGluQuant.for_arrays(handle, y, scale, x, ...)
    (an FP8 y held as uint8 is passed as array_view(y)._replace(dtype=DType.F8)). Call it as
    op(y, scale, x, smooth_scales, group_index) (an absent one as None or left out)."""

    _NAME = "SwiGluQuant"
    _ARGUMENTS = ("y", "scale", "x", "smooth_scales", "group_index")
    _OPTIONAL = ("smooth_scales", "group_index")
    _OUTPUTS = ("y", "scale")  # scale is read in static mode: copied back unchanged when staged

    @classmethod
    def _quant_attributes(cls, activate_left, quant_mode, group_size, scale_format):
        return {"activate_left": _activate_left(activate_left),
                "quant_mode": _parse(QuantMode, quant_mode, "quant_mode", QUANT_MODES),
                "group_size": check_int64("group_size", group_size),
                "scale_format": scale_format_code(scale_format)}

    @classmethod
    def _attributes(cls, *, activate_left=1, quant_mode=QuantMode.DYNAMIC, group_size=0,
                    scale_format=QuantScaleFormat.F32):
        checked = cls._quant_attributes(activate_left, quant_mode, group_size, scale_format)
        return checked, [int(v) for v in checked.values()]  # the C order: the dict's


class GeluMulQuant(SwiGluQuant):
    """An infiniopGeluMulQuantDescriptor_t: GeluMulQuant(handle, y_desc, scale_desc, x_desc,
    smooth_scales_desc=None, group_index_desc=None, approximate='none', activate_left=1,
    quant_mode='dynamic', group_size=0, scale_format='f32'), or GeluMulQuant.for_arrays(...).
    Called as SwiGluQuant."""

    _NAME = "GeluMulQuant"

    @classmethod
    def _attributes(cls, *, approximate="none", activate_left=1, quant_mode=QuantMode.DYNAMIC,
                    group_size=0, scale_format=QuantScaleFormat.F32):
        checked = {"approximate": GeluApproximate.parse(approximate),
                   **cls._quant_attributes(activate_left, quant_mode, group_size, scale_format)}
        return checked, [int(v) for v in checked.values()]


class ClippedSwigluQuant(SwiGluQuant):
    """An infiniopClippedSwigluQuantDescriptor_t: ClippedSwigluQuant(handle, y_desc, scale_desc,
    x_desc, smooth_scales_desc=None, group_index_desc=None, alpha=1.702, limit=7.0, bias=1.0,
    interleaved=True, quant_mode='dynamic', group_size=0, scale_format='f32'), or
    ClippedSwigluQuant.for_arrays(...). Called as SwiGluQuant."""

    _NAME = "ClippedSwigluQuant"

    @classmethod
    def _attributes(cls, *, alpha=1.702, limit=7.0, bias=1.0, interleaved=True,
                    quant_mode=QuantMode.DYNAMIC, group_size=0,
                    scale_format=QuantScaleFormat.F32):
        quant = cls._quant_attributes(1, quant_mode, group_size, scale_format)
        del quant["activate_left"]  # not this operator's
        checked = {"alpha": _check_real("alpha", alpha), "limit": _check_real("limit", limit),
                   "bias": _check_real("bias", bias),
                   "interleaved": check_bool("interleaved", interleaved), **quant}
        values = [checked[k] for k in ("alpha", "limit", "bias", "interleaved")]
        return checked, values + [int(checked[k]) for k in quant]


class DequantSwigluQuant(SwiGluQuant):
    """An infiniopDequantSwigluQuantDescriptor_t (docs/dequant_swiglu_quant.md):
    DequantSwigluQuant(handle, y_desc, scale_desc, x_desc, weight_scale_desc=None,
    activation_scale_desc=None, bias_desc=None, smooth_scales_desc=None, group_index_desc=None,
    activate_left=1, quant_mode='dynamic', group_size=0, scale_format='f32'), or
    DequantSwigluQuant.for_arrays(handle, y, scale, x, ...). Called as op(y, scale, x,
    weight_scale, activation_scale, bias, smooth_scales, group_index)."""

    _NAME = "DequantSwigluQuant"
    _ARGUMENTS = ("y", "scale", "x", "weight_scale", "activation_scale", "bias", "smooth_scales",
                  "group_index")
    _OPTIONAL = ("weight_scale", "activation_scale", "bias", "smooth_scales", "group_index")


# --------------------------------------------------------------------------------------------
# Functions on arrays

def _groups(half, group_size):
    """G: 1 for group_size 0 (per-token), else H // group_size (the library rejects a
    group_size that does not divide H, or a negative one, before it compares scale's shape)."""
    return half // group_size if group_size > 0 else 1


def gated_quant_shapes(x_shape, group_size):
    """(y's shape, scale's shape) for x of shape (..., 2H): (..., H) and (..., G). Also what
    infiniop.torch's fake kernels allocate by."""
    lead = tuple(x_shape[:-1])
    half = x_shape[-1] // 2 if len(x_shape) else 0
    return lead + (half,), lead + (_groups(half, group_size),)


def _gated_quant(cls, x, extra, dtype, group_size, scale, scale_format, smooth_scales,
                 group_index, activate_left, device, out, scale_out, handle, stage,
                 key_extra=None, inputs=None):
    """inputs: the operator's own inputs between x and smooth_scales, by name (DequantSwigluQuant's
    weight_scale, activation_scale, bias)."""
    inputs = inputs or {}
    code = quant_dtype(dtype)
    dynamic = scale is None
    if not dynamic and scale_out is not None:
        raise ValueError("scale_out: a static scale (scale=...) is read, not written; pass "
                         "scale_out only without scale")
    if activate_left is not None:
        extra = {**extra, "activate_left": activate_left}
    attributes = cls._attributes(
        **extra, quant_mode=QuantMode.DYNAMIC if dynamic else QuantMode.STATIC,
        group_size=group_size, scale_format=scale_format)[0]
    x_view = array_view(x, "x")
    views = array_views(x_view.kind, scale=scale, smooth_scales=smooth_scales,
                        group_index=group_index, **inputs)
    y_shape, scale_shape = gated_quant_shapes(x_view.shape, attributes["group_size"])
    y, y_view = output(out, x, x_view, y_shape, _array_dtype(code, x_view.kind), "out")
    if code == DType.F8 and y_view.dtype == DType.U8:  # FP8's raw bytes
        y_view = y_view._replace(dtype=DType.F8)
    if out is not None and y_view.dtype != code:
        raise ValueError(f"out has dtype {y_view.dtype.name} but dtype={dtype!r} asks for "
                         f"{code.name} (FP8: float8_e4m3fn, or uint8 for its raw bytes)")
    if dynamic:
        s_dtype = sys.modules["torch"].float32 if x_view.kind == "torch" else "float32"
        scale, s_view = output(scale_out, x, x_view, scale_shape, s_dtype, "scale_out")
    else:
        s_view = views["scale"]
    names = [("y", "out" if out is not None else "y", out is not None),
             ("scale", "scale_out" if scale_out is not None else "scale", scale_out is not None)]
    run(cls, [y_view, s_view, x_view] + [views[name] for name in inputs]
        + [views["smooth_scales"], views["group_index"]], attributes, device, handle, stage,
        key_extra(attributes) if key_extra else (), names=names)
    return y, scale


def swiglu_quant(x, *, dtype="int8", group_size=0, scale=None, scale_format="f32",
                 smooth_scales=None, group_index=None, activate_left=True, device="cpu",
                 out=None, scale_out=None, handle=None, _stage=None):
    """(y, scale): y = quantize(silu(x1) * x2 * m) (activate_left True; x1 * silu(x2) * m for
    False), x1 and x2 the halves of x's LAST dim (see the module docstring).

    x: a torch CPU tensor (float32, float16, bfloat16) or a NumPy array (float32, float16),
    (..., 2H), any strides. dtype: int8 (torch.int8, 'int8', the default) or FP8 E4M3
    (torch.float8_e4m3fn, 'fp8'): y is int8, torch.float8_e4m3fn, or uint8 (FP8's bytes) on a
    PyTorch without float8 and for NumPy. group_size: 0 (per-token, G = 1) or a divisor of H
    (G = H / group_size). scale: None for dynamic scales, returned as a new (..., G) float32
    tensor (scale_format 'f32': amax / qmax rounded to F32; 'ue8m0': up to a power of two);
    else the static (..., G) float32 scale (any strides, stride 0 broadcasts), returned as
    given. smooth_scales: (H) float32, or (E, H) with group_index (E) int64 (the count of rows of
    each expert: expert e's rows take row e; rows past the counts' sum get bytes 0 and dynamic
    scale 0). out / scale_out: where to write y / the dynamic scale (allocated contiguous when
    None). device: 'cpu', 'cpu_reference', 'opencl' or a Device; ignored when a Handle is given.
    Raises InfiniopError with the library's status and reason (BAD_TENSOR_SHAPE for an odd last
    dim or a group_size not dividing H, BAD_PARAM for bad counts, ...).
    """
    return _gated_quant(SwiGluQuant, x, {}, dtype, group_size, scale, scale_format,
                        smooth_scales, group_index, activate_left, device, out, scale_out,
                        handle, _stage)


def gelu_mul_quant(x, *, approximate="none", dtype="int8", group_size=0, scale=None,
                   scale_format="f32", smooth_scales=None, group_index=None, activate_left=True,
                   device="cpu", out=None, scale_out=None, handle=None, _stage=None):
    """(y, scale): swiglu_quant with gelu for silu, a = gelu(x1) * x2 (activate_left True) or
    x1 * gelu(x2); approximate 'none' (erf, the default) or 'tanh', as torch's gelu. Every other
    argument is swiglu_quant's."""
    return _gated_quant(GeluMulQuant, x, {"approximate": approximate}, dtype, group_size, scale,
                        scale_format, smooth_scales, group_index, activate_left, device, out,
                        scale_out, handle, _stage)


def clipped_swiglu_quant(x, *, alpha=1.702, limit=7.0, bias=1.0, interleaved=True, dtype="int8",
                         group_size=0, scale=None, scale_format="f32", smooth_scales=None,
                         group_index=None, device="cpu", out=None, scale_out=None, handle=None,
                         _stage=None):
    """(y, scale): y = quantize(a * sigmoid(alpha a) * (b + bias) * m), a = min(A, limit),
    b = clamp(B, -limit, limit), A and B x's LAST dim split as ClippedSwiglu splits it
    (interleaved True: A = x[..., 0::2], B = x[..., 1::2]; False: the first and second halves).
    alpha, limit, bias: real numbers passed as float32 (limit > 0, +inf for no clipping; alpha
    and bias finite: BAD_PARAM otherwise). Every other argument is swiglu_quant's (there is no
    activate_left)."""
    return _gated_quant(ClippedSwigluQuant, x,
                        {"alpha": alpha, "limit": limit, "bias": bias, "interleaved": interleaved},
                        dtype, group_size, scale, scale_format, smooth_scales, group_index, None,
                        device, out, scale_out, handle, _stage, _zero_signs)


def dequant_swiglu_quant(x, *, weight_scale=None, activation_scale=None, bias=None, dtype="int8",
                         group_size=0, scale=None, scale_format="f32", smooth_scales=None,
                         group_index=None, activate_left=True, device="cpu", out=None,
                         scale_out=None, handle=None, _stage=None):
    """(y, scale): swiglu_quant of the dequantized INT32 accumulators x (..., 2H) (int32, any
    strides; docs/dequant_swiglu_quant.md): d = ((x + bias) * weight_scale) * activation_scale
    (+ bias), each step one float64 rounding in that order, an int32 bias added to x exactly and
    a float32 / float16 / bfloat16 one after the scales; then y = quantize(silu(d1) * d2 * m)
    (activate_left True; d1 * silu(d2) * m for False).

    weight_scale: (2H) float32, the weight's per-channel scale, or (E, 2H) with group_index (row
    e for expert e's rows); None: 1. activation_scale: float32 of x's leading dims, with or
    without a trailing 1 (the per-token scale); None: 1. bias: (2H) or (E, 2H), float32,
    float16, bfloat16 or int32; None: no bias. Every other argument is swiglu_quant's: dtype,
    group_size, scale (None: dynamic; else the static scale, y = z / scale), scale_format,
    smooth_scales ((H), or (E, H) with group_index), group_index ((E) int64 counts; rows past
    their sum get bytes 0 and dynamic scale 0), out, scale_out, device, handle."""
    return _gated_quant(DequantSwigluQuant, x, {}, dtype, group_size, scale, scale_format,
                        smooth_scales, group_index, activate_left, device, out, scale_out,
                        handle, _stage, inputs={"weight_scale": weight_scale,
                                                "activation_scale": activation_scale,
                                                "bias": bias})
