# SPDX-License-Identifier: Apache-2.0
"""GeluMul and GeluMulBackward through the Python binding, on every device, both approximations.

Oracle: PyTorch autograd in float64 from the already rounded inputs:
    x64 = x.double().requires_grad_(); x1, x2 = x64.chunk(2, -1)
    out = gelu(x1) * x2;  out.backward(out_grad.double());  compare out and x64.grad,
with gelu written without cancellation: x Phi(x), Phi(x) = 0.5 erfc(-x / sqrt 2) ('none'), and
x sigmoid(v), v = 2 sqrt(2/pi) (x + 0.044715 x^3) ('tanh'), the same functions as
F.gelu(x1, approximate=...). F.gelu itself cannot be the truth on [-10, 10]: in float64 it
evaluates 0.5 x (1 + erf(x / sqrt 2)) and 0.5 x (1 + tanh u), which cancel for negative x; its
relative error is 2e-5 (erf) and 7e-2 (tanh) at x = -7, and it returns exactly 0 below about
-8.3 (erf) and -7.6 (tanh), where the F32 answer is still a normal number, far beyond the F32
bound below. test_oracle_is_torch_gelu checks that the two agree to 1e-9 wherever F.gelu's float64
evaluation is accurate to that (x >= -5), forward and backward.

Error model (all in float64; REL, REL_BACKWARD = K u from tests/accuracy_bounds.json, u = 2^-24;
x = x1 clamped to [-30, 30], for 'none' only from below):
    c = 0 ('none': exp takes x^2 / 2 as an exact hi + lo pair) or |v| ('tanh'): the argument of
        the exponential, which the kernel rounds to F32; exp turns that rounding into a relative
        error of up to c * 2^-24.
    gelu terms:  |gelu(x)|                       ('none' and 'tanh')
    gelu' terms: Phi + |x phi|                   ('none')
                 s + |x v' s (1 - s)|            ('tanh', s = sigmoid(v), v' = dv/dx)
    floor:       2^-125 (1 + |x|)                (gelu, and gelu' of 'none')
                 2^-125 (1 + |x| (1 + |v'|))     (gelu' of 'tanh')
    value        bound (F32)
    out          |x2|            * (REL (1 + c) gelu terms  + floor) + 2^-149
    input_grad1  |out_grad x2|   * (REL (1 + c) gelu' terms + floor) + 2^-149
    input_grad2  |out_grad|      * (REL (1 + c) gelu terms  + floor) + 2^-149
  F16/BF16: 1 ulp of the output type at |truth| + the F32 bound.
Why these (docs/gelu_mul.md, docs/accuracy.md): the kernels' Phi is exp(-x^2 / 2) over a rational
fit (scripts/fit_erf.py), each a few roundings; (1 + c) is exp's amplification of a rounded
argument (none for 'none'). The floor: the kernels clamp exp's argument at -87 (exp >= 1.6e-38)
and |x| at 13.19 ('none') or x at -20 ('tanh'), so far left (for
'tanh' already at x = -10, where v = -87.3) gelu and gelu' are tiny negative numbers
(|.| < 2^-125 (1 + |x v'|)) instead of the true, tinier ones. The final 2^-149 (one F32
subnormal ulp) covers rounding a subnormal F32 result. A finite truth beyond the dtype's largest
finite value (by half an ulp or more: 65520 for F16) must come out as an infinity of its sign;
NaN must give NaN.
"""

import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import infiniop
from infiniop import DType, GeluApproximate, InfiniopError, Status

from helpers import (f32_bound, DEVICES, LAYOUT_CASES, LAYOUT_SHAPE, NUMPY_CASES, NUMPY_DTYPES, SENTINEL,
                     STAGING_CASES, TORCH_DTYPES, assert_infiniop_error, assert_matches,
                     assert_staging_matches_direct, assert_untouched_outside, expect_failure,
                     make_input, make_output, numpy_case, on, random_tensor, rng_for, sentinel)

REPO_ROOT = Path(__file__).resolve().parents[2]
APPROXIMATIONS = ["none", "tanh"]

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
TANH_BETA = 0.044715
REL, REL_BACKWARD = f32_bound("gelu_mul"), f32_bound("gelu_mul_backward")
EXP_FLOOR = 2.0 ** -125


# ----------------------------------------------------------------------------------------------
# Oracle and error model

def gelu64(x, approximate):
    """gelu(x) of float64 torch tensors, without cancellation (autograd-able)."""
    if approximate == "none":
        return x * (0.5 * torch.special.erfc(-x / math.sqrt(2.0)))
    v = 2.0 * SQRT_2_OVER_PI * (x + TANH_BETA * x ** 3)
    return x * torch.sigmoid(v)


def torch_oracle(x, out_grad, approximate, gelu=gelu64):
    """(out, input_grad) in float64 by autograd from the rounded inputs; input_grad is None
    without out_grad. Call before the operator: x.double() is a copy, so an in-place call cannot
    change it."""
    x64 = x.detach().to(torch.float64, copy=True).requires_grad_()  # never the caller's
    x1, x2 = x64.chunk(2, -1)
    out = gelu(x1, approximate) * x2
    if out_grad is None:
        return out.detach(), None
    out.backward(out_grad.detach().double())
    return out.detach(), x64.grad


def terms(x1, approximate):
    """(c, gelu terms, gelu' terms, gelu floor, gelu' floor) of the error model, float64."""
    x = x1.clamp(-30.0, 30.0)  # +-inf -> finite terms (the truth there is a limit anyway)
    if approximate == "none":
        # exp takes x^2 / 2 as an exact pair: no rounded argument to amplify. x itself, not the
        # clamped one, in the terms: beyond 30, gelu(x) = x.
        c = torch.zeros_like(x)
        x = x1.clamp(-30.0, 3.4e38)
        cdf = 0.5 * torch.special.erfc(-x / math.sqrt(2.0))
        pdf = torch.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        gelu = (x * cdf).abs()
        slope = cdf + (x * pdf).abs()
        floor = EXP_FLOOR * (1 + x.abs())
        return c, gelu, slope, floor, floor
    v = 2.0 * SQRT_2_OVER_PI * (x + TANH_BETA * x ** 3)
    dv = 2.0 * SQRT_2_OVER_PI * (1 + 3 * TANH_BETA * x * x)
    s, s_neg = torch.sigmoid(v), torch.sigmoid(-v)  # 1 - s without cancellation
    gelu = (x * s).abs()
    slope = s + (x * dv * s * s_neg).abs()
    return (v.abs(), gelu, slope, EXP_FLOOR * (1 + x.abs()),
            EXP_FLOOR * (1 + x.abs() * (1 + dv.abs())))


def error_bounds(x64, g64, approximate):
    """(bound on out, bound on input_grad) before the output-rounding ulp, float64 tensors."""
    x1, x2 = x64.chunk(2, -1)
    c, gelu_terms, slope_terms, gelu_floor, slope_floor = terms(x1, approximate)
    gelu_error = REL * (1 + c) * gelu_terms + gelu_floor
    out_bound = x2.abs() * gelu_error
    if g64 is None:
        return out_bound, None
    grad1 = (g64 * x2).abs() * (REL_BACKWARD * (1 + c) * slope_terms + slope_floor)
    grad2 = g64.abs() * (REL_BACKWARD * (1 + c) * gelu_terms + gelu_floor)
    return out_bound, torch.cat([grad1, grad2], -1)


def halves_context(x64):
    """{x1, x2} of the failing elements' inputs, shaped like out."""
    x1, x2 = x64.chunk(2, -1)
    return {"x1": x1.numpy(), "x2": x2.numpy()}


def check_forward(out, x64, approximate, dtype_name, what):
    truth, _ = torch_oracle(x64, None, approximate)
    bound, _ = error_bounds(x64, None, approximate)
    assert_matches(out, truth, bound, dtype_name, f"{what} approximate={approximate}",
                   halves_context(x64))


def check_backward(input_grad, g64, x64, approximate, dtype_name, what):
    _, truth = torch_oracle(x64, g64, approximate)
    _, bound = error_bounds(x64, g64, approximate)
    x1, x2 = x64.chunk(2, -1)
    context = {"x1": torch.cat([x1, x1], -1).numpy(), "x2": torch.cat([x2, x2], -1).numpy(),
               "out_grad": torch.cat([g64, g64], -1).numpy()}
    assert_matches(input_grad, truth, bound, dtype_name, f"{what} approximate={approximate}",
                   context)


# ----------------------------------------------------------------------------------------------
# Inputs

def halved(shape):
    return tuple(shape[:-1]) + (shape[-1] // 2,)


# ----------------------------------------------------------------------------------------------
# The oracle, the enum

@pytest.mark.parametrize("approximate", APPROXIMATIONS)
def test_oracle_is_torch_gelu(approximate):
    """The cancellation-free gelu above is F.gelu: both agree to 1e-9 (forward and autograd)
    wherever F.gelu's float64 evaluation is that accurate, x1 >= -5."""
    rng = rng_for("oracle", approximate)
    x = torch.from_numpy(np.concatenate([rng.uniform(-5.0, 10.0, (64, 8)),
                                         rng.uniform(-10.0, 10.0, (64, 8))], axis=-1))
    g = torch.from_numpy(rng.uniform(-10.0, 10.0, (64, 8)))
    ours = torch_oracle(x, g, approximate)
    plain = torch_oracle(x, g, approximate,
                         gelu=lambda x1, a: F.gelu(x1, approximate=a))
    for mine, theirs in zip(ours, plain):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-9, atol=1e-12)


def test_approximate_enum_matches_header():
    text = (REPO_ROOT / "include/infiniop/ops/gelu_mul.h").read_text()
    from_header = {name: int(value) for name, value in
                   re.findall(r"\bINFINIOP_GELU_APPROXIMATE_(\w+)\s*=\s*(\d+)", text)}
    assert {a.name: a.value for a in GeluApproximate} == from_header
    assert GeluApproximate.parse("none") is GeluApproximate.NONE
    assert GeluApproximate.parse(" TANH ") is GeluApproximate.TANH
    assert GeluApproximate.parse(1) is GeluApproximate.TANH
    assert GeluApproximate.parse(np.int64(0)) is GeluApproximate.NONE
    assert GeluApproximate.parse(7) == 7  # passed on for the library to reject


# ----------------------------------------------------------------------------------------------
# Ranks 1..4, and sizes large enough for full SIMD vectors, tails and several threads

SHAPES = [(2,), (18,), (4106,), (3, 8), (33, 1030), (2, 3, 6), (130, 2, 70), (2, 3, 2, 10),
          (5, 3, 2, 66)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("shape", SHAPES, ids=["x".join(map(str, s)) for s in SHAPES])
def test_shapes(device, dtype_name, approximate, shape):
    rng = rng_for("shapes", dtype_name, approximate, shape)
    dtype = TORCH_DTYPES[dtype_name]
    x = random_tensor(rng, shape, dtype_name)
    g = random_tensor(rng, halved(shape), dtype_name)
    x64, g64 = x.double(), g.double()
    out = torch.full(halved(shape), float("nan"), dtype=dtype)
    result = infiniop.gelu_mul(x, approximate=approximate, **on(device), out=out)
    assert result is out
    check_forward(out, x64, approximate, dtype_name, f"{device} gelu_mul {shape}")
    input_grad = torch.full(shape, float("nan"), dtype=dtype)
    result = infiniop.gelu_mul_backward(g, x, approximate=approximate, **on(device),
                                        out=input_grad)
    assert result is input_grad
    check_backward(input_grad, g64, x64, approximate, dtype_name,
                   f"{device} gelu_mul_backward {shape}")


def test_approximate_spellings_agree():
    """'tanh', GeluApproximate.TANH and 1 are the same approximation (and the default is erf):
    bit-identical results; the two approximations do differ."""
    rng = rng_for("spellings")
    x = random_tensor(rng, (6, 20), "float32")
    g = random_tensor(rng, (6, 10), "float32")
    for spellings in (("none", "NONE", GeluApproximate.NONE, 0),
                      ("tanh", "Tanh", GeluApproximate.TANH, 1)):
        first = infiniop.gelu_mul(x, approximate=spellings[0])
        first_grad = infiniop.gelu_mul_backward(g, x, approximate=spellings[0])
        for spelling in spellings[1:]:
            assert torch.equal(infiniop.gelu_mul(x, approximate=spelling), first)
            assert torch.equal(infiniop.gelu_mul_backward(g, x, approximate=spelling),
                               first_grad)
    assert torch.equal(infiniop.gelu_mul(x), infiniop.gelu_mul(x, approximate="none"))
    assert not torch.equal(infiniop.gelu_mul(x, approximate="none"),
                           infiniop.gelu_mul(x, approximate="tanh"))


# ----------------------------------------------------------------------------------------------
# Non-contiguous inputs and outputs, and in-place backward

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("layouts", LAYOUT_CASES, ids=["-".join(c) for c in LAYOUT_CASES])
def test_layouts(device, dtype_name, approximate, layouts):
    x_layout, g_layout, out_layout = layouts
    rng = rng_for("layouts", dtype_name, approximate, layouts)
    x = make_input(rng, LAYOUT_SHAPE, dtype_name, x_layout)
    g = make_input(rng, halved(LAYOUT_SHAPE), dtype_name, g_layout)
    x64, g64 = x.double(), g.double()  # copies, taken before the in-place call
    x_before = x.clone()
    what = f"{device} {layouts}"

    if out_layout != "inplace":
        out, out_storage, out_mask = make_output(halved(LAYOUT_SHAPE), dtype_name, out_layout)
        assert infiniop.gelu_mul(x, approximate=approximate, **on(device), out=out) is out
        check_forward(out, x64, approximate, dtype_name, f"{what} gelu_mul")
        assert_untouched_outside(out_storage, out_mask)
        assert torch.equal(x, x_before), "gelu_mul changed its input"

        input_grad, storage, mask = make_output(LAYOUT_SHAPE, dtype_name, out_layout)
    else:
        input_grad = x
    result = infiniop.gelu_mul_backward(g, x, approximate=approximate, **on(device),
                                        out=input_grad)
    assert result is input_grad
    check_backward(result, g64, x64, approximate, dtype_name, f"{what} gelu_mul_backward")
    if out_layout != "inplace":
        assert_untouched_outside(storage, mask)
        assert torch.equal(x, x_before), "gelu_mul_backward changed its input"


# ----------------------------------------------------------------------------------------------
# NumPy arrays (float32, float16): negative strides, Fortran order, in-place through negative
# strides

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(NUMPY_DTYPES))
@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("case", NUMPY_CASES)
def test_numpy(device, dtype_name, approximate, case):
    rng = rng_for("numpy", dtype_name, approximate, case)
    shape = (4, 6, 10)
    x, g, out, input_grad_out = numpy_case(case, rng, shape, -1, NUMPY_DTYPES[dtype_name])
    x64 = torch.from_numpy(np.array(x, dtype=np.float64))  # copies (and positive strides)
    g64 = torch.from_numpy(np.array(g, dtype=np.float64))

    result = infiniop.gelu_mul(x, approximate=approximate, **on(device), out=out)
    assert result is out and result.dtype == NUMPY_DTYPES[dtype_name]
    check_forward(torch.from_numpy(np.array(result)), x64, approximate, dtype_name,
                  f"{device} numpy gelu_mul {case}")

    target = x if input_grad_out is None else input_grad_out
    result = infiniop.gelu_mul_backward(g, x, approximate=approximate, **on(device), out=target)
    assert result is target
    check_backward(torch.from_numpy(np.array(result)), g64, x64, approximate, dtype_name,
                   f"{device} numpy gelu_mul_backward {case}")


# ----------------------------------------------------------------------------------------------
# Special values

SPECIAL_X1 = [0.0, -0.0, 1e-3, -1e-3, 1.0, -1.0, -0.7518, 3.0, -3.0, 5.0, -5.0, 7.5, -7.5, 10.0,
              -10.0, 13.5, -13.5, 20.0, -20.0, -25.0, 88.0, -88.0, 1e4, -1e4, np.inf, -np.inf,
              np.nan]
SPECIAL_X2 = [0.0, -0.0, 1.0, -2.5, 1e-3, 1e4, -1e4, np.inf, -np.inf, np.nan]
SPECIAL_G = [0.0, 1.0, -1.0, 1e4, -1e4, np.inf, -np.inf, np.nan]


def semantics_limits(x1, x2, g, approximate):
    """(out, input_grad1, input_grad2) as SEMANTICS.md defines them at infinite inputs, float64
    NumPy: gelu(-inf) = 0, gelu(+inf) = +inf, gelu'(-inf) = 0, gelu'(+inf) = 1; an infinity
    times a finite non-zero factor is an infinity of the product's sign (gelu and gelu' are
    negative, never 0, for every finite x1 < -0.76, even where float64 underflows them to 0,
    e.g. at x1 = -1e4); inf * 0 where an input is truly 0 or driven to 0 by another infinite
    input is NaN."""
    x1t = torch.from_numpy(np.clip(x1, -1e5, 1e5))  # NaN stays NaN
    with torch.no_grad():
        if approximate == "none":
            cdf = 0.5 * torch.special.erfc(-x1t / math.sqrt(2.0))
            gelu = x1t * cdf
            slope = cdf + x1t * torch.exp(-0.5 * x1t * x1t) / math.sqrt(2.0 * math.pi)
        else:
            v = 2.0 * SQRT_2_OVER_PI * (x1t + TANH_BETA * x1t ** 3)
            dv = 2.0 * SQRT_2_OVER_PI * (1 + 3 * TANH_BETA * x1t * x1t)
            s, s_neg = torch.sigmoid(v), torch.sigmoid(-v)
            gelu = x1t * s
            # x dv s (1 - s) is inf * 0 at +-1e5 in float64: its limit there is 0.
            tail = torch.nan_to_num(x1t * dv * s * s_neg, nan=0.0)
            slope = s + tail
    gelu, slope = gelu.numpy(), slope.numpy()
    with np.errstate(all="ignore"):
        gelu = np.where(x1 == -np.inf, 0.0, np.where(x1 == np.inf, np.inf, gelu))
        slope = np.where(x1 == -np.inf, 0.0, np.where(x1 == np.inf, 1.0, slope))

        def times(a, factor):
            product = a * factor
            underflowed = np.isinf(a) & np.isfinite(x1) & (x1 < -1) & (factor == 0)
            return np.where(underflowed, -a, product)

        return times(x2, gelu), times(g * x2, slope), times(g, gelu)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("approximate", APPROXIMATIONS)
def test_special_values(device, dtype_name, approximate):
    dtype = TORCH_DTYPES[dtype_name]
    x1s, x2s, gs = (a.ravel() for a in np.meshgrid(SPECIAL_X1, SPECIAL_X2, SPECIAL_G,
                                                   indexing="ij"))
    x = torch.from_numpy(np.stack([x1s, x2s], axis=1)).to(dtype)  # (n, 2): split on the last
    g = torch.from_numpy(gs[:, None]).to(dtype)
    x64, g64 = x.double(), g.double()
    x1, x2, gr = (t.numpy().ravel() for t in (x64[:, 0], x64[:, 1], g64[:, 0]))

    torch_out, torch_grad = torch_oracle(x64, g64, approximate)
    torch_out, torch_grad1, torch_grad2 = (t.numpy().ravel() for t in
                                           (torch_out, torch_grad[:, 0], torch_grad[:, 1]))
    limit_out, limit_grad1, limit_grad2 = semantics_limits(x1, x2, gr, approximate)
    # The limits are the oracle's answer wherever its float64 evaluation has one.
    for ours, theirs in ((limit_out, torch_out), (limit_grad1, torch_grad1),
                         (limit_grad2, torch_grad2)):
        known = ~np.isnan(theirs)
        # atol: both cancel near gelu's minimum (x1 = -0.7518), times |out_grad x2| up to 1e8.
        np.testing.assert_allclose(ours[known], theirs[known], rtol=1e-9, atol=1e-6)

    out = torch.full((x.shape[0], 1), float("nan"), dtype=dtype)
    input_grad = torch.full(x.shape, float("nan"), dtype=dtype)
    infiniop.gelu_mul(x, approximate=approximate, **on(device), out=out)
    infiniop.gelu_mul_backward(g, x, approximate=approximate, **on(device), out=input_grad)

    out_bound, grad_bound = error_bounds(x64, g64, approximate)
    inputs = {"x1": x1, "x2": x2, "out_grad": gr}
    for name, got, torch_truth, limit, bound, depends_on in (
            ("out", out[:, 0], torch_out, limit_out, out_bound[:, 0], (x1, x2)),
            ("input_grad1", input_grad[:, 0], torch_grad1, limit_grad1, grad_bound[:, 0],
             (gr, x1, x2)),
            ("input_grad2", input_grad[:, 1], torch_grad2, limit_grad2, grad_bound[:, 1],
             (gr, x1))):
        nan_in = np.any([np.isnan(a) for a in depends_on], axis=0)
        # The oracle's value where it has one; where it gives NaN from non-NaN inputs (its
        # float64 evaluation hits -inf * 0 in gelu(-inf), inf * 0 in gelu'(+inf), or inf times
        # a factor underflowed to 0), SEMANTICS.md defines the limit instead, which the oracle
        # does not reach: we check that limit (computed above) rather than the oracle's NaN.
        assert np.isnan(torch_truth[nan_in]).all()
        use_limit = np.isnan(torch_truth) & ~nan_in
        truth = np.where(use_limit, limit, torch_truth)
        assert np.isnan(truth[nan_in]).all()
        assert_matches(got, truth, bound.numpy(), dtype_name,
                       f"{device} special values {name} approximate={approximate}", inputs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("approximate", APPROXIMATIONS)
def test_limits_spelled_out(device, approximate):
    """A few SEMANTICS.md limits, written by hand (F32)."""
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[-inf, 3.0], [-inf, inf], [inf, 2.0], [inf, 0.0], [-1e4, inf],
                      [-1e4, 1.0], [0.0, inf], [nan, 1.0], [1.0, nan]])
    out = infiniop.gelu_mul(x, approximate=approximate, **on(device))[:, 0]
    expected = torch.tensor([0.0, nan, inf, nan, -inf, 0.0, nan, nan, nan])
    assert torch.equal(out.isnan(), expected.isnan()), out
    keep = ~expected.isnan()
    assert torch.allclose(out[keep], expected[keep], rtol=0, atol=1e-30), out

    g = torch.tensor([[2.0], [inf], [2.0], [2.0], [inf], [1.0], [1.0], [1.0], [1.0]])
    input_grad = infiniop.gelu_mul_backward(g, x, approximate=approximate, **on(device))
    # input_grad1 = g x2 gelu'(x1), input_grad2 = g gelu(x1)
    expected = torch.tensor([[0.0, 0.0], [nan, nan], [4.0, inf], [0.0, inf], [-inf, -inf],
                             [0.0, 0.0], [inf, 0.0], [nan, nan], [nan, 0.0]])
    expected[8, 1] = gelu64(torch.tensor(1.0, dtype=torch.float64), approximate).item()
    assert torch.equal(input_grad.isnan(), expected.isnan()), input_grad
    keep = ~expected.isnan()
    assert torch.allclose(input_grad[keep], expected[keep], rtol=1e-6, atol=1e-30), input_grad


# ----------------------------------------------------------------------------------------------
# Errors: status, name, message, and outputs left untouched

@pytest.mark.parametrize("device", DEVICES)
def test_unknown_approximate(device):
    x, g = torch.randn(4, 6), torch.randn(4, 3)
    for approximate in (2, -1, 100, 2 ** 31 - 1, -(2 ** 31)):
        error = expect_failure(infiniop.gelu_mul, Status.BAD_PARAM, x, approximate=approximate,
                               **on(device), out=sentinel(4, 3))
        assert "approximate" in error.message
        expect_failure(infiniop.gelu_mul_backward, Status.BAD_PARAM, g, x,
                       approximate=approximate, **on(device), out=sentinel(4, 6))
    # The binding's own refusals, before any C call: no spelling of an int, no wrapping int.
    with pytest.raises(ValueError, match="unknown approximate"):
        infiniop.gelu_mul(x, approximate="exact", **on(device))
    with pytest.raises(TypeError):
        infiniop.gelu_mul(x, approximate=True, **on(device))
    with pytest.raises(TypeError):
        infiniop.gelu_mul_backward(g, x, approximate=1.0, **on(device))
    with pytest.raises(TypeError):
        infiniop.gelu_mul(x, approximate=None, **on(device))
    with pytest.raises(OverflowError):
        infiniop.gelu_mul(x, approximate=2 ** 32, **on(device))  # would wrap to 0 in ctypes


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("approximate", APPROXIMATIONS)
def test_odd_last_dim(device, approximate):
    for shape in ((4, 5), (5,), (2, 3, 1)):
        x = torch.randn(shape)
        error = expect_failure(infiniop.gelu_mul, Status.BAD_TENSOR_SHAPE, x,
                               approximate=approximate, **on(device),
                               out=sentinel(*halved(shape)))
        assert "even" in error.message
        expect_failure(infiniop.gelu_mul, Status.BAD_TENSOR_SHAPE, x, approximate=approximate,
                       **on(device))
        expect_failure(infiniop.gelu_mul_backward, Status.BAD_TENSOR_SHAPE,
                       torch.randn(halved(shape)), x, approximate=approximate, **on(device),
                       out=sentinel(*shape))
    # A scalar has no dimension to split.
    expect_failure(infiniop.gelu_mul, Status.BAD_TENSOR_SHAPE, torch.tensor(1.0),
                   approximate=approximate, **on(device), out=sentinel())
    expect_failure(infiniop.gelu_mul_backward, Status.BAD_TENSOR_SHAPE, torch.tensor(1.0),
                   torch.tensor(1.0), approximate=approximate, **on(device), out=sentinel())


@pytest.mark.parametrize("device", DEVICES)
def test_wrong_shapes(device):
    x = torch.randn(4, 6)
    # out must be input's shape with the LAST dim halved: not input's shape, not dim 0 halved.
    for out_shape in ((4, 6), (2, 6), (4, 2), (4, 3, 1), (1, 4, 3), (3,), (12,)):
        expect_failure(infiniop.gelu_mul, Status.BAD_TENSOR_SHAPE, x, **on(device),
                       out=sentinel(*out_shape))
    # input_grad must be input's shape; out_grad input's shape with the last dim halved.
    for out_shape in ((4, 3), (2, 6), (6, 4), (4, 6, 1), (24,)):
        expect_failure(infiniop.gelu_mul_backward, Status.BAD_TENSOR_SHAPE, torch.randn(4, 3),
                       x, **on(device), out=sentinel(*out_shape))
    for g_shape in ((4, 6), (2, 6), (4, 3, 1), (3, 4), (12,)):
        expect_failure(infiniop.gelu_mul_backward, Status.BAD_TENSOR_SHAPE, torch.randn(g_shape),
                       x, **on(device), out=sentinel(4, 6))


@pytest.mark.parametrize("device", DEVICES)
def test_dtype_mismatch(device):
    x = torch.randn(4, 6)
    expect_failure(infiniop.gelu_mul, Status.BAD_TENSOR_DTYPE, x, **on(device),
                   out=sentinel(4, 3, dtype=torch.float16))
    expect_failure(infiniop.gelu_mul, Status.BAD_TENSOR_DTYPE, x.bfloat16(), **on(device),
                   out=sentinel(4, 3))
    expect_failure(infiniop.gelu_mul_backward, Status.BAD_TENSOR_DTYPE,
                   torch.randn(4, 3).half(), x, **on(device), out=sentinel(4, 6))
    expect_failure(infiniop.gelu_mul_backward, Status.BAD_TENSOR_DTYPE, torch.randn(4, 3),
                   x.half(), **on(device), out=sentinel(4, 6, dtype=torch.float16))
    expect_failure(infiniop.gelu_mul_backward, Status.BAD_TENSOR_DTYPE, torch.randn(4, 3), x,
                   **on(device), out=sentinel(4, 6, dtype=torch.bfloat16))
    # float64 and integers are described faithfully and rejected by the library
    out64 = np.full((4, 3), SENTINEL)
    with pytest.raises(InfiniopError) as info:
        infiniop.gelu_mul(np.ones((4, 6)), **on(device), out=out64)
    assert_infiniop_error(info.value, Status.BAD_TENSOR_DTYPE)
    assert (out64 == SENTINEL).all()
    expect_failure(infiniop.gelu_mul, Status.BAD_TENSOR_DTYPE, torch.ones(4, 6, dtype=torch.int32),
                   **on(device), out=torch.full((4, 3), 42, dtype=torch.int32))


@pytest.mark.parametrize("device", DEVICES)
def test_output_overlapping_an_input(device):
    # out is input's first half: the same bytes, not the same layout.
    x = torch.randn(4, 6)
    before = x.clone()
    expect_failure(infiniop.gelu_mul, Status.BAD_TENSOR_STRIDES, x, **on(device), out=x[:, :3])
    assert torch.equal(x, before)
    # input_grad on input's memory but transposed, or shifted by one element.
    square = torch.randn(6, 6)
    before = square.clone()
    expect_failure(infiniop.gelu_mul_backward, Status.BAD_TENSOR_STRIDES, torch.randn(6, 3),
                   square, **on(device), out=square.t())
    assert torch.equal(square, before)
    storage = torch.randn(13)
    expect_failure(infiniop.gelu_mul_backward, Status.BAD_TENSOR_STRIDES, torch.randn(6),
                   storage[:12], **on(device), out=storage[1:])
    # input_grad on out_grad's memory (never an exact alias: it is half the size).
    g = torch.randn(8)
    expect_failure(infiniop.gelu_mul_backward, Status.BAD_TENSOR_STRIDES, g[:4], torch.randn(8),
                   **on(device), out=g)
    # Stride 0 on an output of more than one element.
    expect_failure(infiniop.gelu_mul, Status.BAD_TENSOR_STRIDES, torch.randn(4, 6),
                   **on(device), out=torch.full((1, 3), SENTINEL).expand(4, 3))


def test_binding_argument_errors():
    x = torch.randn(4, 6)
    with pytest.raises(TypeError, match="one kind"):
        infiniop.gelu_mul_backward(np.ones((4, 3), np.float32), x)
    with pytest.raises(TypeError):
        infiniop.gelu_mul(x, out=np.ones((4, 3), np.float32))
    with pytest.raises(ValueError, match="read-only"):
        infiniop.gelu_mul(np.ones((4, 6), np.float32),
                          out=np.broadcast_to(np.ones(1, np.float32), (4, 3)))
    with pytest.raises(TypeError):
        infiniop.gelu_mul([1.0, 2.0])
    with pytest.raises(TypeError):
        infiniop.gelu_mul(x, -1)  # approximate is keyword-only; there is no dim


# ----------------------------------------------------------------------------------------------
# Allocation, zero size, descriptor objects, explicit handles, staging

def test_output_allocation():
    x = torch.randn(6, 4, dtype=torch.float16).t()  # (4, 6), transposed
    out = infiniop.gelu_mul(x)
    assert out.shape == (4, 3) and out.dtype == torch.float16 and out.is_contiguous()
    input_grad = infiniop.gelu_mul_backward(torch.randn(4, 3, dtype=torch.float16), x)
    assert input_grad.shape == (4, 6) and input_grad.stride() == x.stride()  # allocated like x

    a = np.ones((3, 8), np.float32)
    out = infiniop.gelu_mul(a, approximate="tanh")
    assert isinstance(out, np.ndarray) and out.shape == (3, 4) and out.dtype == np.float32
    input_grad = infiniop.gelu_mul_backward(out, a, approximate="tanh")
    assert isinstance(input_grad, np.ndarray) and input_grad.shape == (3, 8)


@pytest.mark.parametrize("device", DEVICES)
def test_zero_size(device):
    x = torch.empty(0, 4)
    assert infiniop.gelu_mul(x, **on(device)).shape == (0, 2)
    assert infiniop.gelu_mul_backward(torch.empty(0, 2), x, **on(device)).shape == (0, 4)
    x = torch.empty(3, 0)  # splitting a size-0 dimension: 0 is even
    assert infiniop.gelu_mul(x, **on(device)).shape == (3, 0)
    assert infiniop.gelu_mul_backward(torch.empty(3, 0), x, **on(device)).shape == (3, 0)


def test_descriptor_objects():
    shape, half = (8, 10), (8, 5)
    with infiniop.Handle("cpu") as handle:
        descs = [infiniop.TensorDescriptor(s, None, DType.F32) for s in (half, shape)]
        forward = infiniop.GeluMul(handle, *descs, approximate="tanh")
        for desc in descs:  # the operator descriptor copied what it needs
            desc.close()
        assert forward.approximate is GeluApproximate.TANH
        bdescs = [infiniop.TensorDescriptor(s, None, DType.F32) for s in (shape, half, shape)]
        backward = infiniop.GeluMulBackward(handle, *bdescs)  # approximate defaults to 'none'
        for desc in bdescs:
            desc.close()
        assert backward.approximate is GeluApproximate.NONE
        assert forward.workspace_size == 0 and backward.workspace_size == 0
        for seed in range(2):
            generator = torch.Generator().manual_seed(seed)
            x, g = torch.randn(shape, generator=generator), torch.randn(half, generator=generator)
            out = torch.full(half, float("nan"))
            forward(out, x)  # arrays
            assert torch.equal(out, infiniop.gelu_mul(x, approximate="tanh"))
            out.fill_(float("nan"))
            forward(out.data_ptr(), x.data_ptr(), workspace=None, workspace_size=0)  # pointers
            assert torch.equal(out, infiniop.gelu_mul(x, approximate="tanh"))
            input_grad = torch.full(shape, float("nan"))
            backward(input_grad, g, x)
            assert torch.equal(input_grad, infiniop.gelu_mul_backward(g, x))
        with pytest.raises(ValueError, match="does not match the descriptor"):
            forward(torch.empty(5, 8).t(), x)
        with pytest.raises(TypeError):
            forward(out)
        with pytest.raises(TypeError):
            infiniop.GeluMul(handle, descs[0])
        with pytest.raises(InfiniopError) as info:
            forward(None, x)
        assert info.value.status == Status.NULL_POINTER
        forward.close()
        forward.close()  # idempotent
        with pytest.raises(ValueError, match="closed"):
            forward(out, x)
        backward.close()

        like_x, like_out = torch.empty(shape), torch.empty(half)
        with infiniop.GeluMulBackward.for_arrays(handle, like_x, like_out, like_x,
                                                 approximate=GeluApproximate.TANH) as op:
            input_grad = torch.full(shape, float("nan"))
            op(input_grad, g, x)
            assert torch.equal(input_grad, infiniop.gelu_mul_backward(g, x, approximate="tanh"))
        with pytest.raises(InfiniopError) as info:
            infiniop.GeluMul.for_arrays(handle, torch.empty(4, 10), like_x)  # dim 0 halved
        assert info.value.status == Status.BAD_TENSOR_SHAPE
        with pytest.raises(InfiniopError) as info:
            infiniop.GeluMul.for_arrays(handle, like_out, like_x, approximate=5)
        assert info.value.status == Status.BAD_PARAM


def test_explicit_handle_overrides_device():
    x = torch.randn(10, 8)
    g = torch.randn(10, 4)
    with infiniop.Handle("cpu_reference") as handle:
        out = infiniop.gelu_mul(x, device="opencl", handle=handle)
        input_grad = infiniop.gelu_mul_backward(g, x, device="opencl", handle=handle)
        assert handle.is_open  # a handle given by the caller stays open
    assert torch.equal(out, infiniop.gelu_mul(x, device="cpu_reference"))
    assert torch.equal(input_grad, infiniop.gelu_mul_backward(g, x, device="cpu_reference"))


@pytest.mark.parametrize("case", STAGING_CASES)
def test_staging_matches_direct(case):
    """Staging through device memory (what non-host devices use), exercised on the cpu device."""
    assert_staging_matches_direct(
        case, lambda x, stage: infiniop.gelu_mul(x, approximate="tanh", _stage=stage),
        lambda g, x, out, stage: infiniop.gelu_mul_backward(g, x, out=out, _stage=stage))
