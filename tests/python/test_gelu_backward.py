# SPDX-License-Identifier: Apache-2.0
"""GeluBackward through the Python binding, on every device, against a float64 truth.

Truth: grad_output * gelu_tanh'(input) in float64 from the already rounded inputs, written in
sigmoid form, s + x s (1 - s) v' with s = sigmoid(v), v = 2a (x + b x^3). That is the same
function as torch.ops.aten.gelu_backward(..., approximate='tanh') (test_truth_matches_torch
checks it), but torch evaluates 0.5 (1 + tanh u) and 1 - tanh^2 u, which cancel for negative x:
in float64 its relative error is 3e-10 at x = -5, 1e-5 at x = -6.5, and it returns exactly 0 below
x = -7.15, where the F32 answer is still a normal number (-4.7e-20 at x = -8). Inputs span
[-10, 10], so torch's formula cannot be the reference there; the sigmoid form has no cancellation.

Error model (the library's accuracy contract), all in float64, g = |grad_output|, x = input
clamped to [-30, 30], v' = 2a (1 + 3 b x^2), terms = s + |x s (1-s) v'|:
  F32:      g * (4 * 2^-24 * terms * (1 + |v|) + 2^-148 * (1 + |x (1-s) v'|)) + 2^-149
  F16/BF16: 1 ulp of the output type at |truth| + the F32 error
The (1 + |v|) factor: the kernel rounds v to F32 and exp amplifies that by |v|; 2^-148 covers
exp's subnormal floor. The final 2^-149 (one F32 subnormal ulp) covers the rounding of a subnormal
F32 result, which no term proportional to g can when g itself is tiny (g = 1e-40).
NaN must give NaN, infinities must match exactly.
"""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import infiniop
from infiniop import InfiniopError, Status

from helpers import (f32_bound, DEVICES, NUMPY_DTYPES, SENTINEL, TORCH_DTYPES, assert_infiniop_error, on,
                     rng_for, ulp_of)

ALPHA = math.sqrt(2.0 / math.pi)
BETA = 0.044715

# The error model's constants (see the module docstring): F32 relative error per unit of `terms`,
# and the absolute floor, relative to |grad_output| (1 + |x (1-s) v'|), left by exp's underflow.
F32_RELATIVE = f32_bound("gelu_backward")
EXP_FLOOR = 2.0 ** -125  # the cpu kernel clamps exp at exp(-87): see docs/gelu_backward.md


# ----------------------------------------------------------------------------------------------
# Truth and error model (NumPy float64)

def derivative_terms(x):
    """gelu_tanh'(x) in float64 without cancellation, and the pieces the error model needs."""
    with np.errstate(all="ignore"):
        # Beyond |x| = 30 the derivative is 0 or 1 to float64 precision; clamping makes
        # +-inf give those limits instead of inf * 0. np.clip keeps NaN.
        xc = np.clip(x, -30.0, 30.0)
        v = 2.0 * ALPHA * (xc + BETA * xc ** 3)
        s = 1.0 / (1.0 + np.exp(-v))  # sigmoid(v) = 0.5 (1 + tanh u)
        s_neg = 1.0 / (1.0 + np.exp(v))  # 1 - sigmoid(v), without the cancellation
        dv = 2.0 * ALPHA * (1.0 + 3.0 * BETA * xc * xc)
        derivative = s + xc * s * s_neg * dv
    return SimpleNamespace(x=xc, v=v, s=s, s_neg=s_neg, dv=dv, derivative=derivative)


def gelu_backward_truth(x, g):
    """grad_output * gelu_tanh'(input) in float64 (IEEE: inf * 0 = NaN)."""
    t = derivative_terms(x)
    with np.errstate(all="ignore"):
        truth = g * t.derivative
    # Far left (x < -24) the float64 derivative underflows to 0 although it is truly negative:
    # an infinite grad_output there gives an infinity of the opposite sign (SEMANTICS.md: an
    # infinity times a finite non-zero factor), not the NaN of inf * 0.
    underflow = np.isinf(g) & np.isfinite(x) & (t.derivative == 0)
    truth[underflow] = -g[underflow]
    return truth


def allowed_error(x, g, truth, dtype_name):
    t = derivative_terms(x)
    with np.errstate(all="ignore"):
        terms = t.s + np.abs(t.x * t.s * t.s_neg * t.dv)
        f32 = np.abs(g) * (F32_RELATIVE * terms * (1 + np.abs(t.v))
                           + EXP_FLOOR * (1 + np.abs(t.x * t.s_neg * t.dv)))
    if dtype_name == "float32":
        return f32 + 2.0 ** -149
    if dtype_name == "float16":
        return ulp_of(truth, "float16") + f32
    if dtype_name == "bfloat16":
        return ulp_of(truth, "bfloat16") + f32
    raise ValueError(dtype_name)


def assert_matches_truth(got, x, g, dtype_name, what=""):
    """got, x, g: float64 arrays of one shape (x and g are the rounded inputs)."""
    got, x, g = (np.asarray(a, dtype=np.float64).reshape(-1) for a in (got, x, g))
    truth = gelu_backward_truth(x, g)
    bound = allowed_error(x, g, truth, dtype_name)
    nan_truth, inf_truth = np.isnan(truth), np.isinf(truth)
    finite = ~nan_truth & ~inf_truth
    with np.errstate(all="ignore"):
        error = np.abs(got - truth)
    bad = nan_truth != np.isnan(got)
    bad |= inf_truth & (got != truth)
    bad |= finite & ~(error <= bound)  # a NaN or infinite result fails this too
    if bad.any():
        indices = np.flatnonzero(bad)
        worst = indices[np.argsort(-np.nan_to_num(error[indices] / bound[indices], nan=np.inf))]
        lines = [f"  [{i}] input={x[i]!r} grad_output={g[i]!r} got={got[i]!r} "
                 f"truth={truth[i]!r} allowed={bound[i]:.3g}" for i in worst[:10]]
        pytest.fail(f"{what}: {bad.sum()} of {bad.size} elements wrong ({dtype_name}):\n"
                    + "\n".join(lines))


# ----------------------------------------------------------------------------------------------
# Inputs

def special_values(dtype_name):
    values = [np.inf, -np.inf, np.nan, 1e4, -1e4, 0.0, -0.0]
    if dtype_name == "float32":  # F32 subnormals; F16 would flush them to 0
        values += [1e-40, -1e-40]
    return values


def random_values(rng, shape, dtype_name, specials=True):
    """Signed values in [-10, 10], some near 0, and (if there is room) every special value."""
    n = math.prod(shape)
    values = np.clip(rng.standard_normal(n) * 4.0, -10.0, 10.0)
    near_zero = rng.random(n) < 0.1
    values[near_zero] = rng.standard_normal(int(near_zero.sum())) * 1e-3
    extra = special_values(dtype_name)
    if specials and n >= 2 * len(extra):
        values[rng.choice(n, size=len(extra), replace=False)] = extra
    return values.reshape(shape)


def random_tensor(rng, shape, dtype_name):
    return torch.from_numpy(random_values(rng, shape, dtype_name)).to(TORCH_DTYPES[dtype_name])


def random_array(rng, shape, dtype_name):
    return random_values(rng, shape, dtype_name).astype(NUMPY_DTYPES[dtype_name])


# ----------------------------------------------------------------------------------------------
# torch: devices x dtypes x shapes x layouts

SHAPES = [(), (1,), (17,), (3, 5, 7), (64, 257), (1024, 1031)]
LAYOUTS = ["contiguous", "transposed", "strided", "broadcast_input", "inplace_input",
           "inplace_grad_output"]


def layout_applies(layout, shape):
    if layout == "transposed":
        return len(shape) >= 2
    if layout in ("strided", "broadcast_input"):
        return len(shape) >= 1
    return True


def build_torch_case(layout, shape, dtype_name, rng):
    """(grad_output, input, out, out_storage): out_storage is the whole buffer behind out, whose
    bytes outside out must survive the call."""
    dtype = TORCH_DTYPES[dtype_name]

    def nan_tensor(s):
        return torch.full(s, float("nan"), dtype=dtype)

    if layout == "contiguous":
        g, x = random_tensor(rng, shape, dtype_name), random_tensor(rng, shape, dtype_name)
        out = nan_tensor(shape)
        return g, x, out, out
    if layout == "transposed":
        # input and out transposed (strides increasing), grad_output row-major.
        reverse = tuple(reversed(range(len(shape))))
        x = random_tensor(rng, shape[::-1], dtype_name).permute(reverse)
        g = random_tensor(rng, shape, dtype_name)
        out = nan_tensor(shape[::-1]).permute(reverse)
        return g, x, out, out
    if layout == "strided":
        # Every other element of a wider last dimension; input and out at an odd offset.
        wide = shape[:-1] + (2 * shape[-1] + 1,)
        x = random_tensor(rng, wide, dtype_name)[..., 1::2]
        g = random_tensor(rng, wide, dtype_name)[..., 2::2]
        storage = torch.full(wide, SENTINEL, dtype=dtype)
        out = storage[..., 1::2]
        out.fill_(float("nan"))
        return g, x, out, storage
    if layout == "broadcast_input":
        # Stride 0 on every even-numbered dimension of input (innermost too for 1-D).
        small = tuple(1 if d % 2 == 0 else size for d, size in enumerate(shape))
        x = random_tensor(rng, small, dtype_name).expand(shape)
        g = random_tensor(rng, shape, dtype_name)
        out = nan_tensor(shape)
        return g, x, out, out
    if layout == "inplace_input":
        g, x = random_tensor(rng, shape, dtype_name), random_tensor(rng, shape, dtype_name)
        return g, x, x, x
    if layout == "inplace_grad_output":
        g, x = random_tensor(rng, shape, dtype_name), random_tensor(rng, shape, dtype_name)
        return g, x, g, g
    raise ValueError(layout)


TORCH_CASES = [(layout, shape) for shape in SHAPES for layout in LAYOUTS
               if layout_applies(layout, shape)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("layout,shape", TORCH_CASES,
                         ids=[f"{layout}-{'x'.join(map(str, shape)) or 'scalar'}"
                              for layout, shape in TORCH_CASES])
def test_torch(device, dtype_name, layout, shape):
    rng = rng_for("torch", dtype_name, layout, shape)
    g, x, out, storage = build_torch_case(layout, shape, dtype_name, rng)
    # Snapshot the inputs first: in the in-place layouts the call overwrites one of them.
    x64, g64 = x.double().numpy().copy(), g.double().numpy().copy()
    outside = storage.clone()

    result = infiniop.gelu_backward(g, x, **on(device), out=out, approximate="tanh")

    assert result is out
    assert result.shape == torch.Size(shape) and result.dtype == TORCH_DTYPES[dtype_name]
    assert_matches_truth(result.double().numpy(), x64, g64, dtype_name,
                         f"{device} {layout} {shape}")
    if storage is not out:  # the gaps between the strided output's elements
        untouched = torch.ones_like(storage, dtype=torch.bool)
        untouched[..., 1::2] = False
        assert torch.equal(storage[untouched], outside[untouched]), "wrote outside the output"


# ----------------------------------------------------------------------------------------------
# NumPy: negative strides, broadcast_to, Fortran order

NUMPY_SHAPES = [(), (17,), (33, 65), (4, 6, 10)]
NUMPY_LAYOUTS = ["contiguous", "reversed", "negative_strided", "transposed", "broadcast_input",
                 "fortran_out", "inplace_input_reversed", "inplace_grad_output_strided"]


def numpy_layout_applies(layout, shape):
    if layout in ("contiguous", "fortran_out"):
        return True
    if layout == "transposed":
        return len(shape) >= 2
    return len(shape) >= 1


def build_numpy_case(layout, shape, dtype_name, rng):
    dtype = NUMPY_DTYPES[dtype_name]
    every_axis_reversed = (slice(None, None, -1),) * len(shape)

    def nan_array(s, order="C"):
        return np.full(s, np.nan, dtype=dtype, order=order)

    if layout == "contiguous":
        return random_array(rng, shape, dtype_name), random_array(rng, shape, dtype_name), \
            nan_array(shape)
    if layout == "reversed":
        # Negative strides everywhere on input and out: ctypes.data is element [0, ..., 0],
        # the highest address of each.
        x = random_array(rng, shape, dtype_name)[every_axis_reversed]
        return random_array(rng, shape, dtype_name), x, nan_array(shape)[every_axis_reversed]
    if layout == "negative_strided":
        # Step -2 on the last axis (gaps and a negative stride), reversed outer axes.
        wide = shape[:-1] + (2 * shape[-1],)
        index = (slice(None, None, -1),) * (len(shape) - 1) + (slice(None, None, -2),)
        g = random_array(rng, wide, dtype_name)[index]
        x = random_array(rng, shape, dtype_name)
        return g, x, nan_array(wide)[index]
    if layout == "transposed":
        return random_array(rng, shape[::-1], dtype_name).T, random_array(rng, shape, dtype_name), \
            nan_array(shape[::-1]).T
    if layout == "broadcast_input":
        small = tuple(1 if d % 2 == 0 else size for d, size in enumerate(shape))
        x = np.broadcast_to(random_array(rng, small, dtype_name), shape)
        return random_array(rng, shape, dtype_name), x, nan_array(shape)
    if layout == "fortran_out":
        return random_array(rng, shape, dtype_name), random_array(rng, shape, dtype_name), \
            nan_array(shape, order="F")
    if layout == "inplace_input_reversed":
        x = random_array(rng, shape, dtype_name)[every_axis_reversed]
        return random_array(rng, shape, dtype_name), x, x
    if layout == "inplace_grad_output_strided":
        wide = shape[:-1] + (3 * shape[-1],)
        g = random_array(rng, wide, dtype_name)[..., ::3]
        return g, random_array(rng, shape, dtype_name), g
    raise ValueError(layout)


NUMPY_CASES = [(layout, shape) for shape in NUMPY_SHAPES for layout in NUMPY_LAYOUTS
               if numpy_layout_applies(layout, shape)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(NUMPY_DTYPES))
@pytest.mark.parametrize("layout,shape", NUMPY_CASES,
                         ids=[f"{layout}-{'x'.join(map(str, shape)) or 'scalar'}"
                              for layout, shape in NUMPY_CASES])
def test_numpy(device, dtype_name, layout, shape):
    rng = rng_for("numpy", dtype_name, layout, shape)
    g, x, out = build_numpy_case(layout, shape, dtype_name, rng)
    x64, g64 = x.astype(np.float64), g.astype(np.float64)  # copies, taken before any in-place

    result = infiniop.gelu_backward(g, x, **on(device), out=out, approximate="tanh")

    assert result is out
    assert result.shape == shape and result.dtype == NUMPY_DTYPES[dtype_name]
    assert_matches_truth(result, x64, g64, dtype_name, f"{device} {layout} {shape}")


# ----------------------------------------------------------------------------------------------
# Every special input against every special gradient

SPECIAL_X = [0.0, -0.0, 1e-3, -1e-3, 0.5, -0.5, -0.75, 1.5, -1.5, 3.0, -3.0, 5.5, -5.5, -7.0,
             -8.0, -9.5, 10.0, -10.0, -10.5, -12.0, -15.0, 20.0, -20.0, -25.0, 50.0, -50.0,
             1e4, -1e4, np.inf, -np.inf, np.nan]
SPECIAL_G = [0.0, -0.0, 1.0, -1.0, 2.5, 1e-3, 1e4, -1e4, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
def test_special_values_grid(device, dtype_name):
    tiny = [1e-40, -1e-40] if dtype_name == "float32" else []
    xs, gs = np.meshgrid(np.array(SPECIAL_X + tiny), np.array(SPECIAL_G + tiny), indexing="ij")
    dtype = TORCH_DTYPES[dtype_name]
    x = torch.from_numpy(xs.ravel()).to(dtype)
    g = torch.from_numpy(gs.ravel()).to(dtype)
    out = torch.full_like(x, float("nan"))
    infiniop.gelu_backward(g, x, **on(device), out=out, approximate="tanh")
    assert_matches_truth(out.double().numpy(), x.double().numpy(), g.double().numpy(),
                         dtype_name, f"{device} special grid")


@pytest.mark.parametrize("device", DEVICES)
def test_sign_of_infinity_far_left(device):
    """inf times the tiny negative derivative far left is -inf on every device (not NaN)."""
    x = torch.tensor([-8.0, -15.0, -25.0, -1e4, -3.0e38], dtype=torch.float32)
    g = torch.full_like(x, float("inf"))
    result = infiniop.gelu_backward(g, x, **on(device), approximate="tanh")
    assert torch.equal(result, torch.full_like(x, float("-inf"))), (device, result)


# ----------------------------------------------------------------------------------------------
# The truth itself, against PyTorch's definition

def test_truth_matches_torch():
    """Where torch's float64 tanh form is accurate (x >= -4: relative error <= 2e-12), it and
    the sigmoid-form truth agree; beyond |x| = 30 both are exactly 0 or 1."""
    x = np.concatenate([np.linspace(-4.0, 30.0, 20001), [0.0, -0.0, 40.0, 1e4, np.inf, np.nan]])
    ours = derivative_terms(x).derivative
    theirs = torch.ops.aten.gelu_backward(
        torch.ones(x.size, dtype=torch.float64),
        torch.from_numpy(np.clip(x, -30.0, 30.0)), approximate="tanh").numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-11, atol=1e-15, equal_nan=True)
    np.testing.assert_array_equal(derivative_terms(np.array([-np.inf, np.inf])).derivative,
                                  [0.0, 1.0])


# ----------------------------------------------------------------------------------------------
# The fast devices (cpu, opencl) agree with cpu_reference

@pytest.mark.parametrize("device", [d for d in DEVICES if d != "cpu_reference"])
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
def test_matches_cpu_reference(dtype_name, device):
    rng = rng_for("agree", dtype_name)
    shape = (256, 1031)
    g, x = random_tensor(rng, shape, dtype_name), random_tensor(rng, shape, dtype_name)
    fast = infiniop.gelu_backward(g, x, **on(device), approximate="tanh").double().numpy().ravel()
    reference = infiniop.gelu_backward(g, x, device="cpu_reference", approximate="tanh").double().numpy().ravel()
    x64, g64 = x.double().numpy().ravel(), g.double().numpy().ravel()
    bound = allowed_error(x64, g64, gelu_backward_truth(x64, g64), dtype_name)
    np.testing.assert_array_equal(np.isnan(fast), np.isnan(reference))
    infinite = np.isinf(fast) | np.isinf(reference)
    np.testing.assert_array_equal(fast[infinite], reference[infinite])
    finite = ~np.isnan(fast) & ~infinite
    with np.errstate(all="ignore"):
        excess = np.abs(fast - reference)[finite] - 2 * bound[finite]
    assert (excess <= 0).all(), f"devices differ by more than twice the bound: {excess.max()}"


# ----------------------------------------------------------------------------------------------
# Errors: status, name, message, and outputs left untouched

def expect_failure(status, *args, **kwargs):
    with pytest.raises(InfiniopError) as info:
        infiniop.gelu_backward(*args, **kwargs, approximate="tanh")
    assert_infiniop_error(info.value, status)
    return info.value


@pytest.mark.parametrize("device", DEVICES)
def test_shape_mismatch(device):
    out = torch.full((4, 6), SENTINEL)
    expect_failure(Status.BAD_TENSOR_SHAPE, torch.randn(4, 6), torch.randn(4, 5),
                   **on(device), out=out)
    expect_failure(Status.BAD_TENSOR_SHAPE, torch.randn(4, 6), torch.randn(4, 6),
                   **on(device), out=torch.full((6, 4), SENTINEL))
    assert torch.equal(out, torch.full((4, 6), SENTINEL))


@pytest.mark.parametrize("device", DEVICES)
def test_dtype_mismatch(device):
    out = torch.full((3, 4), SENTINEL)
    error = expect_failure(Status.BAD_TENSOR_DTYPE, torch.randn(3, 4),
                           torch.randn(3, 4).half(), **on(device), out=out)
    assert "F16" in error.message or "F32" in error.message
    # out's dtype differs from the inputs'
    expect_failure(Status.BAD_TENSOR_DTYPE, torch.randn(3, 4), torch.randn(3, 4), **on(device),
                   out=torch.full((3, 4), SENTINEL, dtype=torch.bfloat16))
    # float64 is described faithfully and rejected by the library, not the binding
    out64 = np.full((3, 4), SENTINEL)
    expect_failure(Status.BAD_TENSOR_DTYPE, np.ones((3, 4)), np.ones((3, 4)), **on(device),
                   out=out64)
    assert torch.equal(out, torch.full((3, 4), SENTINEL))
    assert (out64 == SENTINEL).all()


# Values of infiniDevice_t that no build supports (opencl, 1, is a real device now; new devices
# take the next free values).
@pytest.mark.parametrize("device", [-1, 99, 1000])
def test_unsupported_device(device):
    out = torch.full((5,), SENTINEL)
    expect_failure(Status.DEVICE_TYPE_NOT_SUPPORTED, torch.randn(5), torch.randn(5),
                   **on(device), out=out)
    assert torch.equal(out, torch.full((5,), SENTINEL))


@pytest.mark.parametrize("device", DEVICES)
def test_output_overlapping_an_input(device):
    # out is input shifted by one element: overlapping, not identical.
    storage = torch.randn(11)
    before = storage.clone()
    expect_failure(Status.BAD_TENSOR_STRIDES, torch.randn(10), storage[:10], **on(device),
                   out=storage[1:])
    expect_failure(Status.BAD_TENSOR_STRIDES, storage[1:], torch.randn(10), **on(device),
                   out=storage[:10])
    assert torch.equal(storage, before)

    # Same memory and pointer as grad_output but another layout (transposed).
    square = torch.randn(4, 4)
    before = square.clone()
    expect_failure(Status.BAD_TENSOR_STRIDES, square, torch.randn(4, 4), **on(device),
                   out=square.t())
    assert torch.equal(square, before)

    # NumPy, through a negative stride: out = the input's bytes, reversed and shifted.
    base = np.arange(16, dtype=np.float32)
    before_np = base.copy()
    expect_failure(Status.BAD_TENSOR_STRIDES, np.ones(8, np.float32), base[:8], **on(device),
                   out=base[12:4:-1])
    np.testing.assert_array_equal(base, before_np)


@pytest.mark.parametrize("device", DEVICES)
def test_broadcast_output(device):
    storage = torch.full((1, 5), SENTINEL)
    expect_failure(Status.BAD_TENSOR_STRIDES, torch.randn(3, 5), torch.randn(3, 5),
                   **on(device), out=storage.expand(3, 5))
    assert torch.equal(storage, torch.full((1, 5), SENTINEL))
