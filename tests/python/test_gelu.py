# SPDX-License-Identifier: Apache-2.0
"""Gelu and GeluBackwardV2 through the Python binding, on every device, both approximations.

Oracle: PyTorch autograd in float64 from the already rounded inputs:
    x64 = x.double().requires_grad_();  y = gelu(x64);  y.backward(grad_output.double())
with gelu written without cancellation (test_gelu_mul.gelu64: x Phi(x), Phi = 0.5 erfc(-x / sqrt 2)
for 'none'; x sigmoid(v) for 'tanh'), the same functions as torch.nn.functional.gelu and
torch.ops.aten.gelu_backward, which in float64 cancel for negative x (0.5 x (1 + erf), 0.5 (1 +
tanh)) and give exactly 0 below about -8 where the F32 answer is still a normal number:
test_oracle_is_torch checks that the two agree to 1e-9 wherever torch's evaluation is that
accurate (x >= -5), forward and backward.

Error model (test_gelu_mul.terms; K from tests/accuracy_bounds.json, docs/gelu.md and
docs/gelu_backward_v2.md), c = 0 ('none') or |v| ('tanh'):
    output      REL (1 + c) |gelu(x)| + 2^-125 (1 + |x|) + 2^-149
    grad_input  |grad_output| (REL_BACKWARD (1 + c) gelu' terms + gelu' floor) + 2^-149
F16/BF16 add 1 ulp of the output type at |truth|. At infinite inputs SEMANTICS.md's limits
(test_gelu_mul.semantics_limits) stand where the float64 oracle gives NaN from non-NaN inputs.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import infiniop
from infiniop import DType, GeluApproximate, InfiniopError, Status

import test_gelu_backward as gelu_backward
import test_gelu_mul as gelu_mul
from helpers import (DEVICES, NUMPY_DTYPES, SENTINEL, STAGING_CASES, TORCH_DTYPES,
                     assert_matches, assert_staging_matches_direct, expect_failure, f32_bound, on,
                     random_tensor, rng_for, sentinel)

APPROXIMATIONS = ["none", "tanh"]
REL, REL_BACKWARD = f32_bound("gelu"), f32_bound("gelu_backward_v2")


# ----------------------------------------------------------------------------------------------
# Oracle and error model

def torch_oracle(x, grad_output, approximate, gelu=gelu_mul.gelu64):
    """(output, grad_input) in float64 by autograd from the rounded inputs (copies, so an
    in-place call cannot change them); SEMANTICS.md's limits where the oracle gives NaN from
    non-NaN inputs (gelu(-inf), gelu'(+inf), inf times an underflowed gelu')."""
    x64 = x.detach().to(torch.float64, copy=True).requires_grad_()
    y = gelu(x64, approximate)
    g64 = grad_output.detach().to(torch.float64, copy=True)
    y.backward(g64)
    y, grad = y.detach(), x64.grad
    xs, gs = x64.detach().numpy(), g64.numpy()
    limit_y, limit_grad, _ = gelu_mul.semantics_limits(xs.ravel(), np.ones(xs.size), gs.ravel(),
                                                       approximate)
    y, grad = y.numpy().copy(), grad.numpy().copy()
    y_limit = np.isnan(y) & ~np.isnan(xs)
    grad_limit = np.isnan(grad) & ~np.isnan(xs) & ~np.isnan(gs)
    y[y_limit] = limit_y.reshape(y.shape)[y_limit]
    grad[grad_limit] = limit_grad.reshape(grad.shape)[grad_limit]
    return y, grad


def error_bounds(x64, g64, approximate):
    """(bound on output, bound on grad_input) before the output-rounding ulp, float64."""
    c, gelu_terms, slope_terms, gelu_floor, slope_floor = gelu_mul.terms(x64, approximate)
    output = REL * (1 + c) * gelu_terms + gelu_floor
    grad = g64.abs() * (REL_BACKWARD * (1 + c) * slope_terms + slope_floor)
    return output.numpy(), grad.numpy()


def check(output, grad_input, x, g, approximate, dtype_name, what):
    """output (or None), grad_input (or None): torch tensors of the results for inputs x, g."""
    x64, g64 = x.double(), g.double()
    y, grad = torch_oracle(x64, g64, approximate)
    y_bound, grad_bound = error_bounds(x64, g64, approximate)
    inputs = {"x": x64.numpy(), "grad_output": g64.numpy()}
    if output is not None:
        assert_matches(output, y, y_bound, dtype_name, f"{what} gelu {approximate}", inputs)
    if grad_input is not None:
        assert_matches(grad_input, grad, grad_bound, dtype_name,
                       f"{what} gelu_backward_v2 {approximate}", inputs)


def run_and_check(operator, g, x, out, x0, g0, approximate, device, dtype_name, what):
    """infiniop.gelu(x) or infiniop.gelu_backward_v2(g, x) into out (torch or NumPy), checked
    against the oracle of the inputs' copies x0, g0 (torch); returns out."""
    if operator == "gelu":
        result = infiniop.gelu(x, approximate=approximate, **on(device), out=out)
    else:
        result = infiniop.gelu_backward_v2(g, x, approximate=approximate, **on(device), out=out)
    assert result is out
    got = result if isinstance(result, torch.Tensor) else torch.from_numpy(np.array(result))
    check(got if operator == "gelu" else None, None if operator == "gelu" else got, x0, g0,
          approximate, dtype_name, what)
    return result


@pytest.mark.parametrize("approximate", APPROXIMATIONS)
def test_oracle_is_torch(approximate):
    """The cancellation-free gelu is F.gelu, and its autograd aten.gelu_backward, to 1e-9
    wherever torch's float64 evaluation is that accurate (x >= -5)."""
    rng = rng_for("oracle", approximate)
    x = torch.from_numpy(rng.uniform(-5.0, 10.0, 4096))
    g = torch.from_numpy(rng.uniform(-10.0, 10.0, 4096))
    y, grad = torch_oracle(x, g, approximate)
    np.testing.assert_allclose(y, F.gelu(x, approximate=approximate).numpy(), rtol=1e-9,
                               atol=1e-12)
    theirs = torch.ops.aten.gelu_backward(g, x, approximate=approximate).numpy()
    np.testing.assert_allclose(grad, theirs, rtol=1e-9, atol=1e-12)


# ----------------------------------------------------------------------------------------------
# torch layouts x shapes (test_gelu_backward's cases: signed values in [-10, 10], some near 0,
# and the special values mixed in; the 1M-element shape, for all threads, in two layouts only)

TORCH_CASES = [(layout, shape) for layout, shape in gelu_backward.TORCH_CASES
               if max(shape, default=0) < 1024 or layout in ("contiguous", "transposed")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("layout,shape", TORCH_CASES,
                         ids=[f"{layout}-{'x'.join(map(str, shape)) or 'scalar'}"
                              for layout, shape in TORCH_CASES])
def test_torch(device, dtype_name, approximate, layout, shape):
    what = f"{device} {layout} {shape}"
    for operator in ("gelu", "gelu_backward_v2"):
        rng = rng_for("torch", dtype_name, approximate, layout, shape)
        g, x, out, storage = gelu_backward.build_torch_case(layout, shape, dtype_name, rng)
        x0, g0 = x.clone(), g.clone()  # before any in-place call
        outside = storage.clone()
        result = run_and_check(operator, g, x, out, x0, g0, approximate, device, dtype_name, what)
        assert result.shape == torch.Size(shape) and result.dtype == TORCH_DTYPES[dtype_name]
        if storage is not out:  # the gaps between the strided output's elements
            untouched = torch.ones_like(storage, dtype=torch.bool)
            untouched[..., 1::2] = False
            assert torch.equal(storage[untouched], outside[untouched]), "wrote outside the output"


# ----------------------------------------------------------------------------------------------
# NumPy: negative strides, broadcast_to, Fortran order, in place through negative strides

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(NUMPY_DTYPES))
@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("layout,shape", gelu_backward.NUMPY_CASES,
                         ids=[f"{layout}-{'x'.join(map(str, shape)) or 'scalar'}"
                              for layout, shape in gelu_backward.NUMPY_CASES])
def test_numpy(device, dtype_name, approximate, layout, shape):
    what = f"{device} numpy {layout} {shape}"
    for operator in ("gelu", "gelu_backward_v2"):
        rng = rng_for("numpy", dtype_name, approximate, layout, shape)
        g, x, out = gelu_backward.build_numpy_case(layout, shape, dtype_name, rng)
        x0, g0 = torch.from_numpy(np.array(x)), torch.from_numpy(np.array(g))  # copies
        result = run_and_check(operator, g, x, out, x0, g0, approximate, device, dtype_name, what)
        assert result.dtype == NUMPY_DTYPES[dtype_name]


# ----------------------------------------------------------------------------------------------
# Special values

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("approximate", APPROXIMATIONS)
def test_special_values_grid(device, dtype_name, approximate):
    """Every special input (large |x|, near 0, the clamps, +-inf, NaN) against every special
    gradient."""
    special_x = gelu_backward.SPECIAL_X + [13.19, -13.19, 88.0, -88.0, 3e38, -3e38]
    tiny = [1e-40, -1e-40] if dtype_name == "float32" else []
    xs, gs = np.meshgrid(np.array(special_x + tiny), np.array(gelu_backward.SPECIAL_G + tiny),
                         indexing="ij")
    dtype = TORCH_DTYPES[dtype_name]
    x = torch.from_numpy(xs.ravel()).to(dtype)
    g = torch.from_numpy(gs.ravel()).to(dtype)
    y = torch.full_like(x, float("nan"))
    grad = torch.full_like(x, float("nan"))
    infiniop.gelu(x, approximate=approximate, **on(device), out=y)
    infiniop.gelu_backward_v2(g, x, approximate=approximate, **on(device), out=grad)
    check(y, grad, x, g, approximate, dtype_name, f"{device} special grid")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("approximate", APPROXIMATIONS)
def test_limits_spelled_out(device, approximate):
    """SEMANTICS.md's limits, written by hand (F32)."""
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([-inf, inf, nan, 0.0, -0.0, -1e4, 1e4, -3e38, 3e38])
    y = infiniop.gelu(x, approximate=approximate, **on(device))
    expected = torch.tensor([0.0, inf, nan, 0.0, -0.0, 0.0, 1e4, 0.0, 3e38])
    assert torch.equal(y.isnan(), expected.isnan()), y
    keep = ~expected.isnan()
    assert torch.allclose(y[keep], expected[keep], rtol=0, atol=1e-30), y
    assert y[6] == x[6] and y[8] == x[8], y  # gelu(x) = x exactly where Phi rounds to 1

    x = torch.tensor([inf, -inf, -inf, inf, -1e4, -14.0, 0.0, nan, 1.0, inf])
    g = torch.tensor([2.0, 2.0, inf, 0.0, inf, -inf, inf, 1.0, nan, -inf])
    grad = infiniop.gelu_backward_v2(g, x, approximate=approximate, **on(device))
    # gelu'(+inf) = 1, gelu'(-inf) = 0, inf * 0 = NaN where the 0 is a limit of another infinite
    # input, inf times the tiny negative gelu' far left is an infinity of the opposite sign.
    expected = torch.tensor([2.0, 0.0, nan, 0.0, -inf, inf, inf, nan, nan, -inf])
    assert torch.equal(grad.isnan(), expected.isnan()), grad
    keep = ~expected.isnan()
    assert torch.equal(grad[keep], expected[keep]), grad


# ----------------------------------------------------------------------------------------------
# TANH is GeluBackward; the approximations' spellings

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
def test_tanh_is_gelu_backward(device, dtype_name):
    rng = rng_for("tanh is v1", dtype_name)
    g = gelu_backward.random_tensor(rng, (67, 131), dtype_name)
    x = gelu_backward.random_tensor(rng, (67, 131), dtype_name)
    v2 = infiniop.gelu_backward_v2(g, x, approximate="tanh", **on(device))
    v1 = infiniop.gelu_backward(g, x, **on(device), approximate="tanh")
    assert torch.equal(v2.view(torch.int16 if dtype_name != "float32" else torch.int32),
                       v1.view(torch.int16 if dtype_name != "float32" else torch.int32))


def test_approximate_spellings_agree():
    """'tanh', GeluApproximate.TANH and 1 are the same approximation (the default is 'none'):
    bit-identical results; the two approximations do differ."""
    rng = rng_for("spellings")
    x = random_tensor(rng, (6, 20), "float32")
    g = random_tensor(rng, (6, 20), "float32")
    for spellings in (("none", "NONE", GeluApproximate.NONE, 0),
                      ("tanh", " Tanh", GeluApproximate.TANH, 1)):
        first = infiniop.gelu(x, approximate=spellings[0])
        first_grad = infiniop.gelu_backward_v2(g, x, approximate=spellings[0])
        for spelling in spellings[1:]:
            assert torch.equal(infiniop.gelu(x, approximate=spelling), first)
            assert torch.equal(infiniop.gelu_backward_v2(g, x, approximate=spelling), first_grad)
    assert torch.equal(infiniop.gelu(x), infiniop.gelu(x, approximate="none"))
    assert torch.equal(infiniop.gelu_backward_v2(g, x),
                       infiniop.gelu_backward_v2(g, x, approximate="none"))
    assert not torch.equal(infiniop.gelu(x), infiniop.gelu(x, approximate="tanh"))
    assert not torch.equal(infiniop.gelu_backward_v2(g, x),
                           infiniop.gelu_backward_v2(g, x, approximate="tanh"))


# ----------------------------------------------------------------------------------------------
# Errors: status, name, message, and outputs left untouched

@pytest.mark.parametrize("device", DEVICES)
def test_unknown_approximate(device):
    x, g = torch.randn(4, 6), torch.randn(4, 6)
    for approximate in (2, -1, 100, 2 ** 31 - 1, -(2 ** 31)):
        error = expect_failure(infiniop.gelu, Status.BAD_PARAM, x, approximate=approximate,
                               **on(device), out=sentinel(4, 6))
        assert "approximate" in error.message and error.message.startswith("Gelu:")
        error = expect_failure(infiniop.gelu_backward_v2, Status.BAD_PARAM, g, x,
                               approximate=approximate, **on(device), out=sentinel(4, 6))
        assert "approximate" in error.message and error.message.startswith("GeluBackwardV2:")
    # The binding's own refusals, before any C call.
    with pytest.raises(ValueError, match="unknown approximate"):
        infiniop.gelu(x, approximate="exact", **on(device))
    with pytest.raises(TypeError):
        infiniop.gelu(x, approximate=True, **on(device))
    with pytest.raises(TypeError):
        infiniop.gelu_backward_v2(g, x, approximate=1.0, **on(device))
    with pytest.raises(OverflowError):
        infiniop.gelu_backward_v2(g, x, approximate=2 ** 32, **on(device))


@pytest.mark.parametrize("device", DEVICES)
def test_wrong_shapes_and_dtypes(device):
    x = torch.randn(4, 6)
    for out_shape in ((4, 5), (6, 4), (4, 6, 1), (24,)):
        expect_failure(infiniop.gelu, Status.BAD_TENSOR_SHAPE, x, **on(device),
                       out=sentinel(*out_shape))
        expect_failure(infiniop.gelu_backward_v2, Status.BAD_TENSOR_SHAPE, torch.randn(4, 6), x,
                       **on(device), out=sentinel(*out_shape))
    expect_failure(infiniop.gelu_backward_v2, Status.BAD_TENSOR_SHAPE, torch.randn(4, 5), x,
                   **on(device), out=sentinel(4, 6))
    expect_failure(infiniop.gelu, Status.BAD_TENSOR_DTYPE, x, **on(device),
                   out=sentinel(4, 6, dtype=torch.float16))
    expect_failure(infiniop.gelu_backward_v2, Status.BAD_TENSOR_DTYPE, torch.randn(4, 6),
                   x.bfloat16(), **on(device), out=sentinel(4, 6))
    out64 = np.full((4, 6), SENTINEL)
    with pytest.raises(InfiniopError) as info:
        infiniop.gelu(np.ones((4, 6)), **on(device), out=out64)
    assert info.value.status == Status.BAD_TENSOR_DTYPE
    assert (out64 == SENTINEL).all()


@pytest.mark.parametrize("device", DEVICES)
def test_output_overlapping_an_input(device):
    storage = torch.randn(11)
    before = storage.clone()
    expect_failure(infiniop.gelu, Status.BAD_TENSOR_STRIDES, storage[:10], **on(device),
                   out=storage[1:])
    expect_failure(infiniop.gelu_backward_v2, Status.BAD_TENSOR_STRIDES, storage[1:],
                   torch.randn(10), **on(device), out=storage[:10])
    square = torch.randn(4, 4)
    square_before = square.clone()
    expect_failure(infiniop.gelu, Status.BAD_TENSOR_STRIDES, square, **on(device), out=square.t())
    assert torch.equal(storage, before) and torch.equal(square, square_before)
    broadcast = torch.full((1, 5), SENTINEL)
    expect_failure(infiniop.gelu, Status.BAD_TENSOR_STRIDES, torch.randn(3, 5), **on(device),
                   out=broadcast.expand(3, 5))
    assert torch.equal(broadcast, torch.full((1, 5), SENTINEL))


def test_binding_argument_errors():
    x = torch.randn(4, 6)
    with pytest.raises(TypeError, match="one kind"):
        infiniop.gelu_backward_v2(np.ones((4, 6), np.float32), x)
    with pytest.raises(TypeError):
        infiniop.gelu(x, out=np.ones((4, 6), np.float32))
    with pytest.raises(ValueError, match="read-only"):
        infiniop.gelu(np.ones((4, 6), np.float32),
                      out=np.broadcast_to(np.ones(1, np.float32), (4, 6)))
    with pytest.raises(TypeError):
        infiniop.gelu([1.0, 2.0])
    with pytest.raises(TypeError):
        infiniop.gelu(x, "tanh")  # approximate is keyword-only


# ----------------------------------------------------------------------------------------------
# Allocation, zero size, descriptor objects, staging

def test_output_allocation():
    x = torch.randn(6, 4, dtype=torch.float16).t()  # transposed: out is allocated like x
    y = infiniop.gelu(x)
    assert y.shape == (4, 6) and y.dtype == torch.float16 and y.stride() == x.stride()
    g = torch.randn(4, 6, dtype=torch.float16)
    grad = infiniop.gelu_backward_v2(g, x)
    assert grad.shape == (4, 6) and grad.stride() == g.stride()  # like grad_output
    a = np.ones((3, 8), np.float32)
    assert isinstance(infiniop.gelu(a, approximate="tanh"), np.ndarray)
    assert infiniop.gelu_backward_v2(a, a).shape == (3, 8)


@pytest.mark.parametrize("device", DEVICES)
def test_zero_size(device):
    x = torch.empty(0, 4)
    assert infiniop.gelu(x, **on(device)).shape == (0, 4)
    assert infiniop.gelu_backward_v2(x, x, **on(device)).shape == (0, 4)


def test_descriptor_objects():
    shape = (8, 10)
    with infiniop.Handle("cpu") as handle:
        descs = [infiniop.TensorDescriptor(shape, None, DType.F32) for _ in range(3)]
        forward = infiniop.Gelu(handle, *descs[:2], approximate="tanh")
        backward = infiniop.GeluBackwardV2(handle, *descs)  # approximate defaults to 'none'
        for desc in descs:  # the operator descriptors copied what they need
            desc.close()
        assert forward.approximate is GeluApproximate.TANH
        assert backward.approximate is GeluApproximate.NONE
        assert forward.workspace_size == 0 and backward.workspace_size == 0
        x, g = torch.randn(shape), torch.randn(shape)
        y = torch.full(shape, float("nan"))
        forward(y, x)  # arrays
        assert torch.equal(y, infiniop.gelu(x, approximate="tanh"))
        y.fill_(float("nan"))
        forward(y.data_ptr(), x.data_ptr(), workspace=None, workspace_size=0)  # pointers
        assert torch.equal(y, infiniop.gelu(x, approximate="tanh"))
        grad = torch.full(shape, float("nan"))
        backward(grad, x, g)
        assert torch.equal(grad, infiniop.gelu_backward_v2(g, x))
        with pytest.raises(ValueError, match="does not match the descriptor"):
            forward(torch.empty(10, 8).t(), x)
        with pytest.raises(InfiniopError) as info:
            forward(None, x)
        assert info.value.status == Status.NULL_POINTER
        forward.close()
        forward.close()  # idempotent
        with pytest.raises(ValueError, match="closed"):
            forward(y, x)
        backward.close()
        with infiniop.GeluBackwardV2.for_arrays(handle, grad, x, g, approximate="tanh") as op:
            op(grad, x, g)
            assert torch.equal(grad, infiniop.gelu_backward(g, x, approximate="tanh"))
        with pytest.raises(InfiniopError) as info:
            infiniop.Gelu.for_arrays(handle, y, x, approximate=5)
        assert info.value.status == Status.BAD_PARAM


@pytest.mark.parametrize("case", STAGING_CASES)
def test_staging_matches_direct(case):
    """Staging through device memory (what non-host devices use), exercised on the cpu device:
    gelu on x, gelu_backward_v2 with x's grad layout (x_grad's own shape as grad_output)."""
    assert_staging_matches_direct(
        case, lambda x, stage: infiniop.gelu(x, _stage=stage),
        lambda g, x, out, stage: infiniop.gelu_backward_v2(np.ascontiguousarray(x) * 0.5, x,
                                                           out=out, _stage=stage))
