# SPDX-License-Identifier: Apache-2.0
"""SwiGlu and SwiGluBackward through the Python binding, on every device.

Oracle: PyTorch autograd in float64 of the plain formula, from the already rounded inputs:
    x64 = x.double().requires_grad_(); a, b = x64.chunk(2, dim)
    y = silu(a) * b;  y.backward(y_grad.double());  compare y and x64.grad.

Error model (s = sigmoid(x1), all in float64; REL = 8 F32 ulps, 8 * 2^-23):
    value    terms                      scale
    y        |silu(x1)|                 |x2|
    x_grad1  |s| + |x1 s (1 - s)|       |y_grad * x2|
    x_grad2  |silu(x1)|                 |y_grad|
  F32:      scale * (REL * terms + 2^-125 (1 + |x1|)) + 2^-149
  F16/BF16: 1 ulp of the output type at |truth| + the F32 bound
The 2^-125 (1 + |x1|) floor: the cpu kernel clamps x1 at -87 (sigmoid's exp at exp(-87)), so far
left silu and silu' are tiny negative numbers (|.| < 1.5e-36) instead of the true, tinier ones.
The final 2^-149 (one F32 subnormal ulp) covers rounding a subnormal F32 result, which no term
proportional to a tiny scale can. A finite truth beyond the dtype's largest finite value (by half
an ulp or more: 65520 for F16) must come out as an infinity of its sign; NaN must give NaN.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import infiniop
from infiniop import DType, InfiniopError, Status

from helpers import (DEVICES, LAYOUT_CASES, LAYOUT_SHAPE, NUMPY_CASES, NUMPY_DTYPES, SENTINEL,
                     STAGING_CASES, TORCH_DTYPES, assert_infiniop_error, assert_matches, f32_bound,
                     assert_staging_matches_direct, assert_untouched_outside, expect_failure,
                     halved, make_input, make_output, numpy_case, on, random_tensor, rng_for,
                     sentinel)

REL, REL_BACKWARD = f32_bound("swiglu"), f32_bound("swiglu_backward")
EXP_FLOOR = 2.0 ** -125


# ----------------------------------------------------------------------------------------------
# Oracle and error model

def torch_oracle(x, y_grad, dim):
    """(y, x_grad) in float64 by autograd from the rounded inputs; x_grad is None without y_grad.
    Call before the operator: x.double() is a copy, so an in-place call cannot change it."""
    x64 = x.detach().to(torch.float64, copy=True).requires_grad_()  # never the caller's
    a, b = x64.chunk(2, dim)
    y = F.silu(a) * b
    if y_grad is None:
        return y.detach(), None
    y.backward(y_grad.detach().double())
    return y.detach(), x64.grad


def error_bounds(x64, g64, dim, dtype_name):
    """(bound on y, bound on x_grad) before the output-rounding ulp, float64 tensors."""
    x1, x2 = x64.chunk(2, dim)
    xc = x1.clamp(-1e5, 1e5)  # +-inf -> finite terms (the truth there is NaN or infinite anyway)
    s, s_neg = torch.sigmoid(xc), torch.sigmoid(-xc)  # 1 - s without cancellation
    silu_terms = (xc * s).abs()
    floor = EXP_FLOOR * (1 + xc.abs())
    y_bound = x2.abs() * (REL * silu_terms + floor)
    if g64 is None:
        return y_bound, None
    grad1 = (g64 * x2).abs() * (REL_BACKWARD * (s + (xc * s * s_neg).abs()) + floor)
    grad2 = g64.abs() * (REL_BACKWARD * silu_terms + floor)
    return y_bound, torch.cat([grad1, grad2], dim)


def check_forward(y, x64, dim, dtype_name, what):
    truth, _ = torch_oracle(x64, None, dim)
    y_bound, _ = error_bounds(x64, None, dim, dtype_name)
    assert_matches(y, truth, y_bound, dtype_name, what)


def check_backward(x_grad, g64, x64, dim, dtype_name, what):
    _, truth = torch_oracle(x64, g64, dim)
    _, bound = error_bounds(x64, g64, dim, dtype_name)
    assert_matches(x_grad, truth, bound, dtype_name, what)


# ----------------------------------------------------------------------------------------------
# Every dim of a rank-4 tensor, both spellings

RANK4_SHAPE = (2, 6, 4, 10)
RANK4_DIMS = [0, 1, 2, 3, -4, -3, -2, -1]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("dim", RANK4_DIMS)
def test_swiglu_every_dim(device, dtype_name, dim):
    rng = rng_for("forward-dim", dtype_name, dim)
    x = random_tensor(rng, RANK4_SHAPE, dtype_name)
    x64 = x.double()
    out = torch.full(halved(RANK4_SHAPE, dim), float("nan"), dtype=TORCH_DTYPES[dtype_name])
    result = infiniop.swiglu(x, dim=dim, **on(device), out=out)
    assert result is out
    check_forward(result, x64, dim, dtype_name, f"{device} swiglu dim={dim}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("dim", RANK4_DIMS)
def test_swiglu_backward_every_dim(device, dtype_name, dim):
    rng = rng_for("backward-dim", dtype_name, dim)
    x = random_tensor(rng, RANK4_SHAPE, dtype_name)
    g = random_tensor(rng, halved(RANK4_SHAPE, dim), dtype_name)
    x64, g64 = x.double(), g.double()
    out = torch.full(RANK4_SHAPE, float("nan"), dtype=TORCH_DTYPES[dtype_name])
    result = infiniop.swiglu_backward(g, x, dim=dim, **on(device), out=out)
    assert result is out
    check_backward(result, g64, x64, dim, dtype_name, f"{device} swiglu_backward dim={dim}")


def test_dim_spellings_agree():
    """dim d and d - ndim are the same dimension: bit-identical results."""
    rng = rng_for("spellings")
    x = random_tensor(rng, RANK4_SHAPE, "float32")
    for dim in range(4):
        g = random_tensor(rng, halved(RANK4_SHAPE, dim), "float32")
        assert torch.equal(infiniop.swiglu(x, dim=dim), infiniop.swiglu(x, dim=dim - 4))
        assert torch.equal(infiniop.swiglu_backward(g, x, dim=dim),
                           infiniop.swiglu_backward(g, x, dim=dim - 4))


# ----------------------------------------------------------------------------------------------
# Rank 1, and sizes large enough for full SIMD vectors, tails and several threads

SIZE_CASES = [((2,), 0), ((2,), -1), ((38,), 0), ((4106,), -1), ((40, 1034), -1),
              ((40, 1034), 0), ((130, 2, 67), 1)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("shape,dim", SIZE_CASES,
                         ids=[f"{'x'.join(map(str, s))}-dim{d}" for s, d in SIZE_CASES])
def test_sizes(device, dtype_name, shape, dim):
    rng = rng_for("sizes", dtype_name, shape, dim)
    dtype = TORCH_DTYPES[dtype_name]
    x = random_tensor(rng, shape, dtype_name)
    g = random_tensor(rng, halved(shape, dim), dtype_name)
    x64, g64 = x.double(), g.double()
    y = infiniop.swiglu(x, dim=dim, **on(device),
                        out=torch.full(halved(shape, dim), float("nan"), dtype=dtype))
    check_forward(y, x64, dim, dtype_name, f"{device} swiglu {shape} dim={dim}")
    x_grad = infiniop.swiglu_backward(g, x, dim=dim, **on(device),
                                      out=torch.full(shape, float("nan"), dtype=dtype))
    check_backward(x_grad, g64, x64, dim, dtype_name, f"{device} swiglu_backward {shape} dim={dim}")


# ----------------------------------------------------------------------------------------------
# Non-contiguous inputs and outputs, and in-place backward

LAYOUT_DIMS = [-1, 0, 1]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("dim", LAYOUT_DIMS)
@pytest.mark.parametrize("layouts", LAYOUT_CASES, ids=["-".join(c) for c in LAYOUT_CASES])
def test_layouts(device, dtype_name, dim, layouts):
    x_layout, g_layout, out_layout = layouts
    rng = rng_for("layouts", dtype_name, dim, layouts)
    x = make_input(rng, LAYOUT_SHAPE, dtype_name, x_layout)
    g = make_input(rng, halved(LAYOUT_SHAPE, dim), dtype_name, g_layout)
    x64, g64 = x.double(), g.double()  # copies, taken before the in-place call
    x_before = x.clone()

    if out_layout != "inplace":
        y, y_storage, y_mask = make_output(halved(LAYOUT_SHAPE, dim), dtype_name, out_layout)
        assert infiniop.swiglu(x, dim=dim, **on(device), out=y) is y
        check_forward(y, x64, dim, dtype_name, f"{device} swiglu {layouts} dim={dim}")
        assert_untouched_outside(y_storage, y_mask)
        assert torch.equal(x, x_before), "swiglu changed its input"

        out, storage, mask = make_output(LAYOUT_SHAPE, dtype_name, out_layout)
    else:
        out = x
    result = infiniop.swiglu_backward(g, x, dim=dim, **on(device), out=out)
    assert result is out
    check_backward(result, g64, x64, dim, dtype_name,
                   f"{device} swiglu_backward {layouts} dim={dim}")
    if out_layout != "inplace":
        assert_untouched_outside(storage, mask)
        assert torch.equal(x, x_before), "swiglu_backward changed x"


# ----------------------------------------------------------------------------------------------
# NumPy arrays: negative strides, Fortran order, in-place through negative strides

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(NUMPY_DTYPES))
@pytest.mark.parametrize("dim", [-1, 0])
@pytest.mark.parametrize("case", NUMPY_CASES)
def test_numpy(device, dtype_name, dim, case):
    rng = rng_for("numpy", dtype_name, dim, case)
    shape = (4, 6, 10)
    x, g, y_out, x_grad_out = numpy_case(case, rng, shape, dim, NUMPY_DTYPES[dtype_name])
    x64 = torch.from_numpy(np.array(x, dtype=np.float64))  # copies (and positive strides)
    g64 = torch.from_numpy(np.array(g, dtype=np.float64))

    y = infiniop.swiglu(x, dim=dim, **on(device), out=y_out)
    assert y is y_out and y.dtype == NUMPY_DTYPES[dtype_name]
    check_forward(torch.from_numpy(np.array(y)), x64, dim, dtype_name,
                  f"{device} numpy swiglu {case} dim={dim}")

    out = x if x_grad_out is None else x_grad_out
    x_grad = infiniop.swiglu_backward(g, x, dim=dim, **on(device), out=out)
    assert x_grad is out
    check_backward(torch.from_numpy(np.array(x_grad)), g64, x64, dim, dtype_name,
                   f"{device} numpy swiglu_backward {case} dim={dim}")


# ----------------------------------------------------------------------------------------------
# Special values

SPECIAL_X1 = [0.0, -0.0, 1e-3, -1e-3, 1.0, -1.0, -1.2785, 5.0, -5.0, 10.0, -10.0, 20.0, -20.0,
              88.0, -88.0, -90.0, -100.0, 1e4, -1e4, np.inf, -np.inf, np.nan]
SPECIAL_X2 = [0.0, -0.0, 1.0, -2.5, 1e-3, 1e4, -1e4, np.inf, -np.inf, np.nan]
SPECIAL_G = [0.0, 1.0, -1.0, 1e4, -1e4, np.inf, -np.inf, np.nan]


def semantics_limits(x1, x2, g):
    """(y, x_grad1, x_grad2) as SEMANTICS.md defines them at infinite inputs, float64 NumPy:
    silu(-inf) = 0, silu'(-inf) = 0, silu'(+inf) = 1; an infinity times a finite non-zero factor
    is an infinity of the product's sign (silu and silu' are negative, never 0, for finite
    x1 < -1.28, even where float64 underflows them to 0, e.g. at x1 = -1e4); inf * 0 where an
    input is truly 0 or driven to 0 by another infinite input is NaN."""
    with np.errstate(all="ignore"):
        xc = np.clip(x1, -1e5, 1e5)  # NaN stays NaN
        s, s_neg = 1.0 / (1.0 + np.exp(-xc)), 1.0 / (1.0 + np.exp(xc))
        silu = np.where(x1 == -np.inf, 0.0, np.where(x1 == np.inf, np.inf, xc * s))
        slope = s + xc * s * s_neg  # 0 at -1e5 and 1 at +1e5: the limits at -+inf

        def times(a, factor):
            product = a * factor
            underflowed = np.isinf(a) & np.isfinite(x1) & (x1 < 0) & (factor == 0)
            return np.where(underflowed, -a, product)

        return times(x2, silu), times(g * x2, slope), times(g, silu)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
def test_special_values(device, dtype_name):
    dtype = TORCH_DTYPES[dtype_name]
    x1s, x2s, gs = (a.ravel() for a in np.meshgrid(SPECIAL_X1, SPECIAL_X2, SPECIAL_G,
                                                   indexing="ij"))
    x = torch.from_numpy(np.stack([x1s, x2s], axis=1)).to(dtype)  # (n, 2): split along dim 1
    g = torch.from_numpy(gs[:, None]).to(dtype)
    x64, g64 = x.double(), g.double()
    x1, x2, gr = (t.numpy().ravel() for t in (x64[:, 0], x64[:, 1], g64[:, 0]))

    torch_y, torch_grad = torch_oracle(x64, g64, 1)
    torch_y, torch_grad1, torch_grad2 = (t.numpy().ravel() for t in
                                         (torch_y, torch_grad[:, 0], torch_grad[:, 1]))
    limit_y, limit_grad1, limit_grad2 = semantics_limits(x1, x2, gr)
    # The limits are torch's answer wherever torch's float64 evaluation has one.
    for ours, theirs in ((limit_y, torch_y), (limit_grad1, torch_grad1),
                         (limit_grad2, torch_grad2)):
        known = ~np.isnan(theirs)
        # atol: both cancel near silu's minimum (x1 = -1.2785), times |y_grad x2| up to 1e8.
        np.testing.assert_allclose(ours[known], theirs[known], rtol=1e-9, atol=1e-6)

    y = torch.full((x.shape[0], 1), float("nan"), dtype=dtype)
    x_grad = torch.full(x.shape, float("nan"), dtype=dtype)
    infiniop.swiglu(x, dim=1, **on(device), out=y)
    infiniop.swiglu_backward(g, x, dim=1, **on(device), out=x_grad)

    y_bound, grad_bound = error_bounds(x64, g64, 1, dtype_name)
    inputs = {"x1": x1, "x2": x2, "y_grad": gr}
    for name, got, torch_truth, limit, bound, depends_on in (
            ("y", y[:, 0], torch_y, limit_y, y_bound[:, 0], (x1, x2)),
            ("x_grad1", x_grad[:, 0], torch_grad1, limit_grad1, grad_bound[:, 0], (gr, x1, x2)),
            ("x_grad2", x_grad[:, 1], torch_grad2, limit_grad2, grad_bound[:, 1], (gr, x1))):
        nan_in = np.any([np.isnan(a) for a in depends_on], axis=0)
        # Torch's value where it has one; where torch gives NaN from non-NaN inputs (its float64
        # evaluation hits -inf * 0 in silu(-inf), inf * 0 in silu'(+inf), or inf * a factor
        # underflowed to 0), SEMANTICS.md defines the limit instead, which torch does not reach:
        # we check that limit (computed above) rather than torch's NaN.
        assert np.isnan(torch_truth[nan_in]).all()
        use_limit = np.isnan(torch_truth) & ~nan_in
        truth = np.where(use_limit, limit, torch_truth)
        assert np.isnan(truth[nan_in]).all()
        assert_matches(got, torch.from_numpy(truth), bound, dtype_name,
                       f"{device} special values {name}", inputs)


@pytest.mark.parametrize("device", DEVICES)
def test_limits_spelled_out(device):
    """A few SEMANTICS.md limits, written by hand (F32)."""
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[-inf, 3.0], [-inf, inf], [inf, 2.0], [inf, 0.0], [-1e4, inf],
                      [-1e4, 1.0]])
    y = infiniop.swiglu(x, **on(device))[:, 0]
    expected = torch.tensor([0.0, nan, inf, nan, -inf, 0.0])
    assert torch.equal(y.isnan(), expected.isnan()), y
    assert torch.allclose(y[~y.isnan()], expected[~expected.isnan()], rtol=0, atol=1e-30), y

    g = torch.tensor([[2.0], [inf], [2.0], [2.0], [inf], [1.0]])
    x_grad = infiniop.swiglu_backward(g, x, **on(device))
    # x_grad1 = g x2 silu'(x1), x_grad2 = g silu(x1)
    expected = torch.tensor([[0.0, 0.0], [nan, nan], [4.0, inf], [0.0, inf], [-inf, -inf],
                             [0.0, 0.0]])
    assert torch.equal(x_grad.isnan(), expected.isnan()), x_grad
    keep = ~expected.isnan()
    assert torch.allclose(x_grad[keep], expected[keep], rtol=1e-6, atol=1e-30), x_grad


# ----------------------------------------------------------------------------------------------
# Errors: status, name, message, and outputs left untouched

@pytest.mark.parametrize("device", DEVICES)
def test_bad_dim(device):
    x = torch.randn(RANK4_SHAPE)
    for dim in (4, -5, 100, -(2 ** 31), 2 ** 31 - 1):
        error = expect_failure(infiniop.swiglu, Status.BAD_PARAM, x, dim=dim, **on(device),
                               out=sentinel(*halved(RANK4_SHAPE, -1)))
        assert "dim" in error.message
        expect_failure(infiniop.swiglu, Status.BAD_PARAM, x, dim=dim, **on(device))
        expect_failure(infiniop.swiglu_backward, Status.BAD_PARAM,
                       torch.randn(halved(RANK4_SHAPE, -1)), x, dim=dim, **on(device),
                       out=sentinel(*RANK4_SHAPE))
    # A scalar has no dimension to split.
    for dim in (0, -1):
        expect_failure(infiniop.swiglu, Status.BAD_PARAM, torch.tensor(1.0), dim=dim,
                       **on(device), out=sentinel())
        expect_failure(infiniop.swiglu_backward, Status.BAD_PARAM, torch.tensor(1.0),
                       torch.tensor(1.0), dim=dim, **on(device), out=sentinel())


@pytest.mark.parametrize("device", DEVICES)
def test_odd_split(device):
    x = torch.randn(4, 5, 6)
    for dim in (1, -2):
        error = expect_failure(infiniop.swiglu, Status.BAD_TENSOR_SHAPE, x, dim=dim,
                               **on(device), out=sentinel(4, 2, 6))
        assert "even" in error.message
        expect_failure(infiniop.swiglu, Status.BAD_TENSOR_SHAPE, x, dim=dim, **on(device))
        expect_failure(infiniop.swiglu_backward, Status.BAD_TENSOR_SHAPE, torch.randn(4, 2, 6),
                       x, dim=dim, **on(device), out=sentinel(4, 5, 6))
        expect_failure(infiniop.swiglu_backward, Status.BAD_TENSOR_SHAPE, torch.randn(4, 2, 6),
                       x, dim=dim, **on(device))
    expect_failure(infiniop.swiglu, Status.BAD_TENSOR_SHAPE, torch.randn(1), dim=0,
                   **on(device), out=sentinel(0))


@pytest.mark.parametrize("device", DEVICES)
def test_wrong_shapes(device):
    x = torch.randn(4, 6)
    # y must be x's shape with dim halved: not x's shape, not the other dim halved.
    for out_shape in ((4, 6), (2, 6), (4, 2), (4, 3, 1), (3,)):
        expect_failure(infiniop.swiglu, Status.BAD_TENSOR_SHAPE, x, dim=-1, **on(device),
                       out=sentinel(*out_shape))
    # x_grad must be x's shape; y_grad x's shape with dim halved.
    for out_shape in ((4, 3), (2, 6), (6, 4), (4, 6, 1)):
        expect_failure(infiniop.swiglu_backward, Status.BAD_TENSOR_SHAPE, torch.randn(4, 3), x,
                       dim=-1, **on(device), out=sentinel(*out_shape))
    for g_shape in ((4, 6), (2, 6), (4, 3, 1), (3, 4)):
        expect_failure(infiniop.swiglu_backward, Status.BAD_TENSOR_SHAPE, torch.randn(g_shape),
                       x, dim=-1, **on(device), out=sentinel(4, 6))


@pytest.mark.parametrize("device", DEVICES)
def test_dtype_mismatch(device):
    x = torch.randn(4, 6)
    expect_failure(infiniop.swiglu, Status.BAD_TENSOR_DTYPE, x, **on(device),
                   out=sentinel(4, 3, dtype=torch.float16))
    expect_failure(infiniop.swiglu, Status.BAD_TENSOR_DTYPE, x.bfloat16(), **on(device),
                   out=sentinel(4, 3))
    expect_failure(infiniop.swiglu_backward, Status.BAD_TENSOR_DTYPE, torch.randn(4, 3).half(),
                   x, **on(device), out=sentinel(4, 6))
    expect_failure(infiniop.swiglu_backward, Status.BAD_TENSOR_DTYPE, torch.randn(4, 3),
                   x.half(), **on(device), out=sentinel(4, 6, dtype=torch.float16))
    expect_failure(infiniop.swiglu_backward, Status.BAD_TENSOR_DTYPE, torch.randn(4, 3), x,
                   **on(device), out=sentinel(4, 6, dtype=torch.bfloat16))
    # float64 is described faithfully and rejected by the library, not by the binding
    out64 = np.full((4, 3), SENTINEL)
    with pytest.raises(InfiniopError) as info:
        infiniop.swiglu(np.ones((4, 6)), **on(device), out=out64)
    assert_infiniop_error(info.value, Status.BAD_TENSOR_DTYPE)
    assert (out64 == SENTINEL).all()


@pytest.mark.parametrize("device", DEVICES)
def test_output_overlapping_an_input(device):
    # y is x's first half: the same bytes, not the same layout.
    x = torch.randn(4, 6)
    before = x.clone()
    expect_failure(infiniop.swiglu, Status.BAD_TENSOR_STRIDES, x, **on(device), out=x[:, :3])
    assert torch.equal(x, before)
    # x_grad on x's memory but transposed, or shifted by one element.
    square = torch.randn(6, 6)
    before = square.clone()
    expect_failure(infiniop.swiglu_backward, Status.BAD_TENSOR_STRIDES, torch.randn(6, 3),
                   square, **on(device), out=square.t())
    storage = torch.randn(13)
    expect_failure(infiniop.swiglu_backward, Status.BAD_TENSOR_STRIDES, torch.randn(6),
                   storage[:12], **on(device), out=storage[1:])
    assert torch.equal(square, before)
    # x_grad on y_grad's memory (y_grad can never be an exact alias: it is half the size).
    g = torch.randn(8)
    expect_failure(infiniop.swiglu_backward, Status.BAD_TENSOR_STRIDES, g[:4], torch.randn(8),
                   **on(device), out=g)


def test_binding_argument_errors():
    x = torch.randn(4, 6)
    with pytest.raises(OverflowError):
        infiniop.swiglu(x, dim=2 ** 31)  # would wrap to a valid int32_t in ctypes
    with pytest.raises(OverflowError):
        infiniop.swiglu_backward(torch.randn(4, 3), x, dim=-(2 ** 31) - 1)
    with pytest.raises(TypeError):
        infiniop.swiglu(x, dim=1.0)
    with pytest.raises(TypeError):
        infiniop.swiglu(x, dim=True)
    with pytest.raises(TypeError, match="one kind"):
        infiniop.swiglu_backward(np.ones((4, 3), np.float32), x)
    with pytest.raises(TypeError):
        infiniop.swiglu(x, out=np.ones((4, 3), np.float32))
    with pytest.raises(ValueError, match="read-only"):
        infiniop.swiglu(np.ones((4, 6), np.float32),
                        out=np.broadcast_to(np.ones(1, np.float32), (4, 3)))
    with pytest.raises(TypeError):
        infiniop.swiglu([1.0, 2.0])
    assert infiniop.swiglu(x, dim=np.int64(0)).shape == (2, 6)  # any integer type


# ----------------------------------------------------------------------------------------------
# Allocation, zero size, descriptor objects, explicit handles, staging

def test_output_allocation():
    x = torch.randn(6, 4, dtype=torch.float16).t()  # (4, 6), transposed
    y = infiniop.swiglu(x, dim=0)
    assert y.shape == (2, 6) and y.dtype == torch.float16 and y.is_contiguous()
    x_grad = infiniop.swiglu_backward(torch.randn(2, 6, dtype=torch.float16), x, dim=0)
    assert x_grad.shape == (4, 6) and x_grad.stride() == x.stride()  # allocated like x

    a = np.ones((3, 8), np.float32)
    y = infiniop.swiglu(a)
    assert isinstance(y, np.ndarray) and y.shape == (3, 4) and y.dtype == np.float32
    x_grad = infiniop.swiglu_backward(y, a)
    assert isinstance(x_grad, np.ndarray) and x_grad.shape == (3, 8)


@pytest.mark.parametrize("device", DEVICES)
def test_zero_size(device):
    x = torch.empty(0, 4)
    assert infiniop.swiglu(x, **on(device)).shape == (0, 2)
    assert infiniop.swiglu_backward(torch.empty(0, 2), x, **on(device)).shape == (0, 4)
    x = torch.empty(3, 0)  # splitting a size-0 dimension: 0 is even
    assert infiniop.swiglu(x, **on(device)).shape == (3, 0)


def test_descriptor_objects():
    shape, half = (8, 10), (8, 5)
    with infiniop.Handle("cpu") as handle:
        descs = [infiniop.TensorDescriptor(s, None, DType.F32) for s in (half, shape)]
        forward = infiniop.SwiGlu(handle, *descs, dim=1)
        for desc in descs:  # the operator descriptor copied what it needs
            desc.close()
        bdescs = [infiniop.TensorDescriptor(s, None, DType.F32) for s in (shape, half, shape)]
        backward = infiniop.SwiGluBackward(handle, *bdescs, dim=-1)
        for desc in bdescs:
            desc.close()
        assert forward.workspace_size == 0 and backward.workspace_size == 0
        for seed in range(2):
            generator = torch.Generator().manual_seed(seed)
            x, g = torch.randn(shape, generator=generator), torch.randn(half, generator=generator)
            y = torch.full(half, float("nan"))
            forward(y, x)  # arrays
            assert torch.equal(y, infiniop.swiglu(x))
            y.fill_(float("nan"))
            forward(y.data_ptr(), x.data_ptr(), workspace=None, workspace_size=0)  # pointers
            assert torch.equal(y, infiniop.swiglu(x))
            x_grad = torch.full(shape, float("nan"))
            backward(x_grad, g, x)
            assert torch.equal(x_grad, infiniop.swiglu_backward(g, x))
        with pytest.raises(ValueError, match="does not match the descriptor"):
            forward(torch.empty(5, 8).t(), x)
        with pytest.raises(TypeError):
            forward(y)
        with pytest.raises(InfiniopError) as info:
            forward(None, x)
        assert info.value.status == Status.NULL_POINTER
        forward.close()
        forward.close()  # idempotent
        with pytest.raises(ValueError, match="closed"):
            forward(y, x)
        backward.close()

        like_x, like_y = torch.empty(shape), torch.empty(half)
        with infiniop.SwiGluBackward.for_arrays(handle, like_x, like_y, like_x, dim=1) as op:
            x_grad = torch.full(shape, float("nan"))
            op(x_grad, g, x)
            assert torch.equal(x_grad, infiniop.swiglu_backward(g, x, dim=1))
        with pytest.raises(InfiniopError) as info:
            infiniop.SwiGlu.for_arrays(handle, like_y, like_x, dim=0)  # y halved along 1, not 0
        assert info.value.status == Status.BAD_TENSOR_SHAPE


def test_explicit_handle_overrides_device():
    x = torch.randn(10, 8)
    g = torch.randn(10, 4)
    with infiniop.Handle("cpu_reference") as handle:
        y = infiniop.swiglu(x, device="opencl", handle=handle)
        x_grad = infiniop.swiglu_backward(g, x, device="opencl", handle=handle)
        assert handle.is_open  # a handle given by the caller stays open
    assert torch.equal(y, infiniop.swiglu(x, device="cpu_reference"))
    assert torch.equal(x_grad, infiniop.swiglu_backward(g, x, device="cpu_reference"))


@pytest.mark.parametrize("case", STAGING_CASES)
def test_staging_matches_direct(case):
    """Staging through device memory (what non-host devices use), exercised on the cpu device."""
    assert_staging_matches_direct(
        case, lambda x, stage: infiniop.swiglu(x, _stage=stage),
        lambda g, x, out, stage: infiniop.swiglu_backward(g, x, out=out, _stage=stage))
