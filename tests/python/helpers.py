# SPDX-License-Identifier: Apache-2.0
"""Helpers shared by the operator test modules (test_gelu_backward, test_swiglu, test_gelu_mul,
test_clipped_swiglu, test_moe_finalize_routing, test_moe_init_routing, test_moe_layer,
test_opencl): devices (and the session's opencl handle) and dtypes, output-type rounding (ulp,
overflow), the elementwise check against a float64 truth and an F32 bound, seeded inputs, tensor
layouts, untouched-output and bit-equality checks, library-error checks and the staging-vs-direct
inputs.

Each test module keeps its own oracle and error model (and says so in its docstring); what is
here is only the machinery those error models are applied with. The tests directory is on
sys.path when pytest imports the test modules (rootdir-based import), so they `import helpers`.
"""

import contextlib
import json
import math
import pathlib
import zlib

import numpy as np
import pytest
import torch

import infiniop
from infiniop import Device, InfiniopError, Status
from infiniop.core import run_staged



# ----------------------------------------------------------------------------------------------
# Devices: every device the library was built with, from the library (infiniop.devices())

def _probe(name):
    """(handle, reason): an open Handle of a device whose memory is not the host's, or None and
    why there is none (no usable platform: the library's reason)."""
    try:
        return infiniop.Handle(name), None
    except InfiniopError as error:
        return None, str(error)


try:
    BUILT = infiniop.devices()
except infiniop.LibraryNotFoundError:  # every test fails on this anyway
    BUILT = []
# One handle per device-memory device (opencl) for the whole session: such a device builds its
# programs once per handle and operator/dtype, so a new handle per call would rebuild them every
# call. The convenience functions take handle= (tests pass it through on()); conftest closes
# them at the end. Host-memory devices get a handle per call, as a user's call would.
_SHARED = {info.name: _probe(info.name) for info in BUILT if not info.host_memory}
OPENCL_BUILT = "opencl" in _SHARED
OPENCL_AVAILABLE = OPENCL_BUILT and _SHARED["opencl"][0] is not None
OPENCL_SKIP_REASON = _SHARED["opencl"][1] if OPENCL_BUILT else None


def _skip_reason(name):
    if name not in _SHARED:
        return f"{name}: library built without it"
    return _SHARED[name][1]


# Devices the parametrized tests run on, for @pytest.mark.parametrize("device", DEVICES):
# host-memory devices first (cpu, cpu_reference), then the others, each skipped with the
# library's reason where this machine has none.
DEVICES = [info.name for info in BUILT if info.host_memory] + [
    pytest.param(name, id=name,
                 marks=() if handle is not None else pytest.mark.skip(reason=_skip_reason(name)))
    for name, (handle, _) in _SHARED.items()]
# DEVICES without cpu_reference, the oracle the others are compared with.
FAST_DEVICES = [d for d in DEVICES if d != "cpu_reference"]


def _name(device):
    """The device's name; None for a value no build has (the library then rejects it)."""
    if isinstance(device, str):
        return device
    return next((info.name for info in BUILT if int(info.device) == int(device)), None)


def shared_handle(device):
    """The session's Handle for a device-memory device (opencl), None for host-memory devices
    (the convenience functions then make their own, as a user's call would). Skips the test
    with the reason when the device is not built or this machine has none."""
    name = _name(device)
    if name is None or any(info.name == name and info.host_memory for info in BUILT):
        return None
    handle = _SHARED.get(name, (None, None))[0]
    if handle is None:
        pytest.skip(_skip_reason(name))
    return handle


def on(device):
    """Keyword arguments that run a convenience function on `device`: device=device, and for
    opencl the session's handle, e.g. infiniop.swiglu(x, **on(device), out=y)."""
    return {"device": device, "handle": shared_handle(device)}


def open_handle(device):
    """A new Handle for `device`, skipping the test with the reason when it has none."""
    shared_handle(device)  # skips when the device is unavailable
    return infiniop.Handle(device)


def run_op(handle, op, arrays, num_outputs, absent=None, **kwargs):
    """op(*arrays, **kwargs) for an operator descriptor object on `handle`, with host arrays
    (outputs first, None for absent tensors, which get the pointer `absent`: NULL, or junk an
    operator must ignore): directly on the CPU devices, whose device pointers are host pointers;
    otherwise staged through device memory as the convenience functions do
    (infiniop.core.run_staged), the outputs copied back only if the call succeeds."""
    if handle.host_memory:
        return op(*(absent if a is None else a for a in arrays), **kwargs)
    present = [i for i, a in enumerate(arrays) if a is not None]
    views = [infiniop.array_view(arrays[i]) for i in present]

    def run(pointers):
        data = [absent] * len(arrays)
        for i, pointer in zip(present, pointers):
            data[i] = pointer
        op(*data, **kwargs)

    run_staged(handle, views, sum(1 for i in present if i < num_outputs), run)
    return None


def close_shared_handles():
    for name, (handle, reason) in list(_SHARED.items()):
        _SHARED[name] = (None, reason or f"{name}: the session's handle is closed")
        if handle is not None:
            handle.close()


def clamp_inclusive(t, min=None, max=None):
    """t.clamp(min, max), the same values, whose gradient passes at the bounds themselves and is
    0 beyond: ClippedSwiglu's masks (SEMANTICS.md, inclusive). PyTorch 1.13's clamp backward
    gives that; PyTorch 2 (2.15) gives 0 at the bounds too, so the oracles spell it out."""
    if max is not None:
        t = torch.where(t > max, t.new_tensor(max), t)
    if min is not None:
        t = torch.where(t < min, t.new_tensor(min), t)
    return t


TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
NUMPY_DTYPES = {"float32": np.float32, "float16": np.float16}
SENTINEL = 42.0  # fills bytes an output view does not cover, and outputs of failing calls

F32_SUBNORMAL_ULP = 2.0 ** -149

# Each operator's F32 bound as a multiple of the terms it sums, from the file the C++ tests read
# too (tests/accuracy_bounds.json): K u with u = 2^-24.
with open(pathlib.Path(__file__).resolve().parent.parent / "accuracy_bounds.json") as _bounds:
    _F32_BOUND_U = json.load(_bounds)["f32_bound_u"]


def f32_bound(operator):
    """The operator's F32 relative bound K u (tests/accuracy_bounds.json)."""
    return _F32_BOUND_U[operator] * 2.0 ** -24

# (mantissa bits, exponent of the smallest subnormal, smallest |value| that rounds to inf)
FORMATS = {
    "float32": (23, -149, (2.0 - 2.0 ** -24) * 2.0 ** 127),
    "float16": (10, -24, 65520.0),
    "bfloat16": (7, -133, (2.0 - 2.0 ** -8) * 2.0 ** 127),
}


# ----------------------------------------------------------------------------------------------
# Output rounding and the elementwise check

def ulp_of(values, dtype_name):
    """One ulp of the output type at |values|, never below its smallest subnormal."""
    mantissa_bits, min_exponent, _ = FORMATS[dtype_name]
    values = np.abs(values)
    with np.errstate(all="ignore"):
        _, exponent = np.frexp(values)  # |v| = m 2^exponent, m in [0.5, 1)
        ulp = np.ldexp(1.0, exponent - 1 - mantissa_bits)
    ulp = np.where(np.isfinite(values) & (values != 0), ulp, 0.0)
    return np.maximum(ulp, 2.0 ** min_exponent)


def assert_matches(got, truth, f32_bound, dtype_name, what, inputs=None, exact_zero=None):
    """got (any dtype), truth and f32_bound (float64): elementwise within the error model: the
    F32 bound plus one F32 subnormal ulp (F32), or plus 1 ulp of the output type at |truth|
    (F16/BF16); a finite truth at or beyond the type's overflow threshold must be an infinity
    of its sign; NaN must give NaN. exact_zero (optional, bool): where set the result must be
    exactly 0. inputs: optional {name: float64 array of got's shape} printed for failing
    elements."""
    got = got.double().numpy().reshape(-1)
    truth = np.asarray(truth).reshape(-1)
    bound = np.asarray(f32_bound).reshape(-1)
    zero = (np.zeros(truth.shape, dtype=bool) if exact_zero is None
            else np.asarray(exact_zero).reshape(-1))
    if dtype_name == "float32":
        bound = bound + F32_SUBNORMAL_ULP
    else:
        bound = bound + ulp_of(truth, dtype_name)
    overflow_at = FORMATS[dtype_name][2]
    with np.errstate(all="ignore"):
        expected = np.where(np.abs(truth) >= overflow_at, np.sign(truth) * np.inf, truth)
        error = np.abs(got - expected)
    assert (truth[zero] == 0).all(), "the oracle disagrees with the exact-zero mask"
    nan_expected, inf_expected = np.isnan(expected), np.isinf(expected)
    finite = ~nan_expected & ~inf_expected
    bad = nan_expected != np.isnan(got)
    bad |= inf_expected & (got != expected)
    bad |= finite & ~(error <= bound)  # a NaN or infinite result fails this too
    bad |= zero & ~(got == 0)
    if bad.any():
        indices = np.flatnonzero(bad)
        with np.errstate(all="ignore"):
            ratio = np.nan_to_num(error[indices] / bound[indices], nan=np.inf)
            ratio[zero[indices]] = np.inf
        lines = []
        for i in indices[np.argsort(-ratio)][:10]:
            context = "".join(f" {k}={v.reshape(-1)[i]!r}" for k, v in (inputs or {}).items())
            must = " (must be exactly 0)" if zero[i] else ""
            lines.append(f"  [{i}]{context} got={got[i]!r} truth={truth[i]!r} "
                         f"allowed={bound[i]:.3g}{must}")
        pytest.fail(f"{what}: {bad.sum()} of {bad.size} elements wrong ({dtype_name}):\n"
                    + "\n".join(lines))


# ----------------------------------------------------------------------------------------------
# Inputs and layouts

def rng_for(*key):
    """A generator seeded by the test's parameters: reproducible, different per case."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def random_values(rng, shape, limit=None):
    """Signed values spanning [-10, 10], about 15% of them near zero (|v| ~ 1e-3) and, with a
    finite limit, about 12% exactly +-limit (the clamps' inclusive boundaries)."""
    n = math.prod(shape)
    values = rng.uniform(-10.0, 10.0, n)
    near_zero = rng.random(n) < 0.15
    values[near_zero] = rng.standard_normal(int(near_zero.sum())) * 1e-3
    if limit is not None and math.isfinite(limit):
        at_limit = rng.random(n) < 0.12
        values[at_limit] = rng.choice([-limit, limit], int(at_limit.sum()))
    return values.reshape(shape)


def random_tensor(rng, shape, dtype_name, limit=None):
    return torch.from_numpy(random_values(rng, shape, limit)).to(TORCH_DTYPES[dtype_name])


def halved(shape, dim):
    shape = list(shape)
    shape[dim] //= 2
    return tuple(shape)


# A layout maps a logical shape to (storage shape, view of the storage with that shape).
LAYOUTS = {
    "contiguous": (lambda s: s, lambda t: t),
    # Strides increasing: the innermost logical dimension is the outermost in memory.
    "transposed": (lambda s: s[::-1], lambda t: t.permute(*reversed(range(t.dim())))),
    # Every other element of a wider last dimension, starting at an odd offset.
    "strided": (lambda s: s[:-1] + (2 * s[-1] + 1,), lambda t: t[..., 1::2]),
    # Stride 0 on every even-numbered dimension (inputs only).
    "broadcast": (lambda s: tuple(1 if d % 2 == 0 else n for d, n in enumerate(s)), None),
}

LAYOUT_SHAPE = (6, 10, 14)
# (input layout, incoming-gradient layout, out layout); out "inplace" is backward only: out=input.
LAYOUT_CASES = [
    ("transposed", "contiguous", "contiguous"),
    ("strided", "strided", "contiguous"),
    ("contiguous", "transposed", "transposed"),
    ("contiguous", "contiguous", "strided"),
    ("strided", "transposed", "strided"),
    ("broadcast", "broadcast", "transposed"),
    ("contiguous", "contiguous", "inplace"),
    ("transposed", "strided", "inplace"),
    ("strided", "broadcast", "inplace"),
]


def make_input(rng, shape, dtype_name, layout, limit=None):
    storage_shape, view = LAYOUTS[layout]
    storage = random_tensor(rng, storage_shape(shape), dtype_name, limit)
    if layout == "broadcast":
        return storage.expand(shape)
    return view(storage)


def make_output(shape, dtype_name, layout):
    """(out poisoned with NaN, its storage filled with SENTINEL elsewhere, mask of out's
    elements in the storage)."""
    storage_shape, view = LAYOUTS[layout]
    storage = torch.full(storage_shape(shape), SENTINEL, dtype=TORCH_DTYPES[dtype_name])
    out = view(storage)
    out.fill_(float("nan"))
    mask = torch.zeros(storage.shape, dtype=torch.bool)
    view(mask).fill_(True)
    assert out.shape == torch.Size(shape)
    return out, storage, mask


def assert_untouched_outside(storage, mask):
    assert (storage[~mask] == SENTINEL).all(), "wrote outside the output view"


# NumPy arrays: negative strides, Fortran order, in-place through negative strides
NUMPY_CASES = ["contiguous", "reversed", "negative_strided", "fortran_out", "inplace_reversed"]


def numpy_case(case, rng, shape, dim, dtype, limit=None):
    """(x, y_grad, y_out, x_grad_out) for a split along dim: x_grad_out None means in place
    (out=x)."""
    def data(s):
        return random_values(rng, s, limit).astype(dtype)

    def nan(s, order="C"):
        return np.full(s, np.nan, dtype=dtype, order=order)

    half = halved(shape, dim)
    every_axis_reversed = (slice(None, None, -1),) * len(shape)
    if case == "contiguous":
        return data(shape), data(half), nan(half), nan(shape)
    if case == "reversed":  # ctypes.data is element [0, ...], the highest address
        return (data(shape)[every_axis_reversed], data(half)[every_axis_reversed],
                nan(half)[every_axis_reversed], nan(shape)[every_axis_reversed])
    if case == "negative_strided":  # step -2 on the last axis: gaps and a negative stride
        def wide(s, fill):
            return fill(s[:-1] + (2 * s[-1],))[..., ::-2]
        return wide(shape, data), wide(half, data), wide(half, nan), wide(shape, nan)
    if case == "fortran_out":
        return data(shape), data(half), nan(half, "F"), nan(shape, "F")
    if case == "inplace_reversed":
        return data(shape)[every_axis_reversed], data(half), nan(half), None
    raise ValueError(case)


# ----------------------------------------------------------------------------------------------
# Errors: status, name, message, and outputs left untouched

def assert_infiniop_error(error, status):
    assert isinstance(error, RuntimeError)
    assert error.status == status, str(error)
    assert error.status_name == f"INFINI_STATUS_{Status(status).name}"
    assert error.status_name == infiniop.status_string(status)
    assert error.message, "the library gave no reason"
    assert error.status_name in str(error) and error.message in str(error)


def expect_failure(function, status, *args, **kwargs):
    out = kwargs.get("out")
    before = None if out is None else out.clone()
    with pytest.raises(InfiniopError) as info:
        function(*args, **kwargs)
    assert_infiniop_error(info.value, status)
    if out is not None:
        assert torch.equal(out, before), "a failing call changed its output"
    return info.value


def same_bits(a, b):
    """Two torch tensors equal bit for bit (NaN payloads and -0 included), shape and dtype too."""
    def raw(t):
        return t.contiguous().reshape(-1).view(torch.uint8)
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(raw(a), raw(b))


def expect_error(status, function, *args, outputs=(), **kwargs):
    """function(*args, **kwargs) raises InfiniopError with `status` and a reason, and leaves
    every tensor in `outputs` bit for bit as it was."""
    befores = [o.clone() for o in outputs]
    with pytest.raises(InfiniopError) as info:
        function(*args, **kwargs)
    assert_infiniop_error(info.value, status)
    for output, before in zip(outputs, befores):
        assert same_bits(output, before), "a failing call changed an output"
    return info.value


def sentinel(*shape, dtype=torch.float32):
    return torch.full(shape, SENTINEL, dtype=dtype)


# ----------------------------------------------------------------------------------------------
# Staging through device memory vs the direct call

STAGING_CASES = ["plain", "negative_strides", "inplace", "strided_out"]


def staging_inputs(case):
    """(x, y_grad, x_grad out, its storage or None) of a (6, 8) float32 split along the last
    dimension, the same on every call; for "strided_out" the storage's other elements are
    SENTINEL."""
    rng = np.random.default_rng(11)

    def data(shape):
        return (rng.standard_normal(shape) * 4).astype(np.float32)

    if case == "plain":
        return data((6, 8)), data((6, 4)), np.full((6, 8), np.nan, np.float32), None
    if case == "negative_strides":
        return (data((6, 8))[::-1], data((6, 8))[:, ::-2],
                np.full((6, 8), np.nan, np.float32)[::-1, ::-1], None)
    if case == "inplace":
        x = data((6, 8))[::-1]
        return x, data((6, 4)), x, None
    storage = np.full((6, 17), SENTINEL, np.float32)
    return data((6, 8)), data((6, 4)), storage[:, 1::2], storage


def assert_staging_matches_direct(case, forward, backward):
    """forward(x, stage) and backward(y_grad, x, out, stage), on staging_inputs(case): staged
    and direct results are bit-identical and nothing outside a strided out is written."""
    results = []
    for stage in (False, True):
        x, g, out, storage = staging_inputs(case)
        y = forward(x, stage)
        x_grad = backward(g, x, out, stage)
        results.append((y, x_grad))
        if storage is not None:
            np.testing.assert_array_equal(storage[:, ::2], SENTINEL)
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


# ----------------------------------------------------------------------------------------------
# Absent tensors' pointers: API.md says a nullable descriptor given as NULL means its pointer is
# ignored, whatever it is

@contextlib.contextmanager
def device_handle(device):
    """A Handle for `device`: the session's for opencl (skipping the test without one), a new
    one for the CPU devices."""
    shared = shared_handle(device)
    if shared is not None:
        yield shared
        return
    with infiniop.Handle(device) as handle:
        yield handle


class JunkPointers:
    """What a test passes behind an absent tensor on `handle`, in `pointers` (named in
    `names`): NULL; a host buffer whose every byte is 0xFF (NaN in F32, F16 and BF16, -1 as
    INT32 and INT64); device memory of the handle holding the same bytes; device memory of
    zeros (zero scales, indices and counts). On the CPU devices device memory is host memory;
    on opencl the host buffer is a pointer the device could not even resolve.
    assert_untouched() checks that none of them was written."""

    SIZE = 1 << 14  # bytes, more than any tensor of the tests

    def __init__(self, handle):
        self._handle = handle
        self._host = np.full(self.SIZE, 0xFF, np.uint8)
        self._device = []
        self.pointers = [None, self._host.ctypes.data]
        self.names = ["NULL", "host 0xFF bytes", "device 0xFF bytes", "device zeros"]
        for byte in (0xFF, 0x00):
            pointer = handle.malloc(self.SIZE)
            self._device.append((pointer, byte))
            fill = np.full(self.SIZE, byte, np.uint8)
            handle.memcpy_host_to_device(pointer, fill.ctypes.data, self.SIZE)
            self.pointers.append(pointer)

    def assert_untouched(self):
        assert (self._host == 0xFF).all(), "the host junk behind an absent tensor was written"
        for pointer, byte in self._device:
            back = np.empty(self.SIZE, np.uint8)
            self._handle.memcpy_device_to_host(back.ctypes.data, pointer, self.SIZE)
            assert (back == byte).all(), "the device junk behind an absent tensor was written"

    def close(self):
        for pointer, _ in self._device:
            self._handle.free(pointer)
        self._device = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
