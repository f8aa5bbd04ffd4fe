# SPDX-License-Identifier: Apache-2.0
"""The relaxed mode (Handle.fpmath = "relaxed", infiniopSetHandleFpmathMode; docs/accuracy.md,
"The relaxed mode"), on every device.

Oracle: PyTorch in float64 of each formula from the rounded F32 inputs. Error model: the strict
one (docs/accuracy.md, "The form of the bound") with the relaxed K of tests/accuracy_bounds.json
("relaxed_f32_bound_u", 8 for every operator that has a relaxed evaluation):
    F32: |scale| (K u terms (1 + c) + 2^-125 (1 + |x|)) + 2^-149
terms = |value| for the values (they never cancel) and the derivatives' summed terms for the
gradients (which cancel where a derivative crosses zero); c = 0 but for gelu_tanh and
ClippedSwiglu, whose exp argument (v, z = alpha a) is rounded first: |v| (1 - s) for a value
(the relative change of sigmoid(v) per relative change of v), |v| min(1, (1 - s) (1 + |c'|)) for
a slope, as docs/accuracy.md's. Also: the relaxed values do differ from the strict ones (the mode reaches the
kernel), a descriptor keeps the mode it was made with, and F16/BF16 outputs are the same bits in
both modes (correctly rounded either way). The bits are the same on every target and on opencl:
tests/cpp/bit_identity_test.cc's "_Relaxed" groups.
"""

import json
import math
import pathlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import infiniop

from helpers import DEVICES, assert_matches, open_handle, rng_for

with open(pathlib.Path(__file__).resolve().parent.parent / "accuracy_bounds.json") as _bounds:
    RELAXED_U = json.load(_bounds)["relaxed_f32_bound_u"]
U = 2.0 ** -24
EXP_FLOOR = 2.0 ** -125
ROWS, COLUMNS = 16, 4096


def hostile(rng, shape):
    """Signed values over [-10, 10], 15% near zero, 10% out to |x| = 100 and a few far-left tails
    (x < -87, where silu's exact path takes over) and exact zeros."""
    n = int(np.prod(shape))
    v = rng.uniform(-10.0, 10.0, n)
    pick = rng.random(n)
    v[pick < 0.15] = rng.standard_normal(int((pick < 0.15).sum())) * 1e-3
    wide = (pick >= 0.15) & (pick < 0.25)
    v[wide] = rng.uniform(-100.0, 100.0, int(wide.sum()))
    v[(pick >= 0.25) & (pick < 0.26)] = -90.0
    v[(pick >= 0.26) & (pick < 0.265)] = 0.0
    return torch.from_numpy(v.reshape(shape)).float()


def gelu_erf64(x):
    """x Phi(x) without cancellation (F.gelu's 1 + erf loses the far left in float64)."""
    return x * (0.5 * torch.special.erfc(-x / math.sqrt(2.0)))


# name: (run(x, handle), truth and bound from x64, the key of RELAXED_U)
def swiglu_case(x, handle):
    return infiniop.swiglu(x, handle=handle)


def swiglu_truth(x64, k):
    a, b = x64.chunk(2, -1)
    value = F.silu(a) * b
    return value, k * U * value.abs() + b.abs() * EXP_FLOOR * (1 + a.abs())


def gelu_mul_case(x, handle):
    return infiniop.gelu_mul(x, handle=handle)


def gelu_mul_truth(x64, k):
    a, b = x64.chunk(2, -1)
    value = gelu_erf64(a) * b
    return value, k * U * value.abs() + b.abs() * EXP_FLOOR * (1 + a.abs())


def gelu_case(x, handle):
    return infiniop.gelu(x, handle=handle)


def gelu_truth(x64, k):
    value = gelu_erf64(x64)
    return value, k * U * value.abs() + EXP_FLOOR * (1 + x64.abs())


CLIPPED = {"interleaved": dict(alpha=1.702, limit=7.0, bias=1.0, interleaved=True),
           "halves_negative_alpha": dict(alpha=-1.702, limit=7.0, bias=-1.0, interleaved=False),
           "no_clip": dict(alpha=1.0, limit=float("inf"), bias=0.0, interleaved=False),
           # clamp_mode 1: min(silu(A), limit) clamp(B, -limit, limit), alpha and bias unused
           "clamp_after": dict(alpha=1.702, limit=7.0, bias=1.0, interleaved=True, clamp_mode=1),
           "clamp_after_halves": dict(alpha=1.0, limit=2.0, bias=0.0, interleaved=False,
                                      clamp_mode=1)}


def clipped_parts(attributes, A, B):
    """(a, b, z, the gate times the multiplier's factor: y = gate * v, v) of either clamp_mode."""
    limit = attributes["limit"]
    b = B.clamp(-limit, limit)
    if attributes.get("clamp_mode", 0) == 1:
        return A, b, A, (A * torch.sigmoid(A)).clamp(max=limit), b
    a = A.clamp(max=limit)
    z = attributes["alpha"] * a
    return a, b, z, a * torch.sigmoid(z), b + attributes["bias"]


def clipped_case(attributes):
    def run(x, handle):
        return infiniop.clipped_swiglu(x, handle=handle, **attributes)

    def truth(x64, k):
        if attributes["interleaved"]:
            A, B = x64[..., 0::2], x64[..., 1::2]
        else:
            A, B = x64.chunk(2, -1)
        a, _, z, gate, v = clipped_parts(attributes, A, B)
        value = gate * v
        condition = z.abs() * torch.sigmoid(-z)
        scale = v.abs()
        return value, k * U * value.abs() * (1 + condition) + scale * EXP_FLOOR * (1 + a.abs())
    return run, truth


def no_condition(x):
    return 0.0, 0.0


def slope_case(run, activation, slope_terms, split, conditions=no_condition):
    """A gradient case: run(y_grad, x, handle); truth by float64 autograd of activation (gated by
    the second half where split); bound K u |scale| terms (1 + c) (cancelling derivatives: their
    terms; c from conditions(x): the slope's and the value's)."""
    def truth(x64, y_grad64, k):
        x = x64.detach().clone().requires_grad_()
        a, b = x.chunk(2, -1) if split else (x, None)
        value = activation(a) if b is None else activation(a) * b
        value.backward(y_grad64)
        a64, b64 = x64.chunk(2, -1) if split else (x64, None)
        scale = y_grad64.abs() if b64 is None else (y_grad64 * b64).abs()
        floor = EXP_FLOOR * (1 + a64.abs())
        c_slope, c_value = conditions(a64)
        bound = scale * (k * U * slope_terms(a64) * (1 + c_slope) + floor)
        if b64 is not None:
            value_bound = y_grad64.abs() * (k * U * activation(a64).abs() * (1 + c_value) + floor)
            bound = torch.cat([bound, value_bound], -1)
        return x.grad, bound
    return run, truth


def silu_terms(x):
    s = torch.sigmoid(x)
    return s + (x * s * torch.sigmoid(-x)).abs()


def gelu_erf_terms(x):
    cdf = 0.5 * torch.special.erfc(-x / math.sqrt(2.0))
    return cdf + (x * torch.exp(-x * x / 2) / math.sqrt(2 * math.pi)).abs()


TWO_A, GELU_B = 2.0 * math.sqrt(2.0 / math.pi), 0.044715


def gelu_tanh64(x):
    """x sigmoid(v), v = 2a (x + b x^3): 0.5 x (1 + tanh(v / 2)) without its cancellation."""
    return x * torch.sigmoid(TWO_A * (x + GELU_B * x ** 3))


def gelu_tanh_parts(x):
    """(v, s, 1 - s, x v') of gelu_tanh at x."""
    v = TWO_A * (x + GELU_B * x ** 3)
    return v, torch.sigmoid(v), torch.sigmoid(-v), x * TWO_A * (1 + 3 * GELU_B * x * x)


def gelu_tanh_terms(x):
    _, s, one_minus, c = gelu_tanh_parts(x)
    return s * (1 + c.abs() * one_minus)


def gelu_tanh_conditions(x):
    """The rounded v's condition (docs/accuracy.md): |v| min(1, (1 - s) (1 + |x v'|)) for the
    slope, |v| (1 - s) for the value."""
    v, _, one_minus, c = gelu_tanh_parts(x)
    return (v.abs() * torch.clamp(one_minus * (1 + c.abs()), max=1.0), v.abs() * one_minus)


def clipped_backward_case(attributes):
    def run(y_grad, x, handle):
        return infiniop.clipped_swiglu_backward(y_grad, x, handle=handle, **attributes)

    def truth(x64, y_grad64, k):
        x = x64.detach().clone().requires_grad_()
        A, B = (x[..., 0::2], x[..., 1::2]) if attributes["interleaved"] else x.chunk(2, -1)
        a, b, z, gate, v = clipped_parts(attributes, A, B)
        (gate * v).backward(y_grad64)
        with torch.no_grad():
            a, z, gate, v = a.detach(), z.detach(), gate.detach(), v.detach()
            s, one_minus = torch.sigmoid(z), torch.sigmoid(-z)
            condition = z.abs() * torch.clamp(one_minus * (1 + z.abs()), max=1.0)
            floor = EXP_FLOOR * (1 + a.abs())
            da = (y_grad64 * v).abs() * (
                k * U * s * (1 + z.abs() * one_minus) * (1 + condition) + floor)
            db = y_grad64.abs() * (k * U * gate.abs() * (1 + condition) + floor)
            bound = torch.zeros_like(x64)
            if attributes["interleaved"]:
                bound[..., 0::2], bound[..., 1::2] = da, db
            else:
                bound = torch.cat([da, db], -1)
        return x.grad, bound
    return run, truth


GRADIENT_CASES = {
    "gelu_backward_tanh": slope_case(
        lambda g, x, h: infiniop.gelu_backward(g, x, approximate="tanh", handle=h), gelu_tanh64,
        gelu_tanh_terms, False, gelu_tanh_conditions) + ("gelu_backward",),
    "gelu_mul_backward_tanh": slope_case(
        lambda g, x, h: infiniop.gelu_mul_backward(g, x, approximate="tanh", handle=h),
        gelu_tanh64, gelu_tanh_terms, True, gelu_tanh_conditions) + ("gelu_mul_backward",),
    "swiglu_backward": slope_case(lambda g, x, h: infiniop.swiglu_backward(g, x, handle=h),
                                  F.silu, silu_terms, True) + ("swiglu_backward",),
    "gelu_mul_backward_erf": slope_case(lambda g, x, h: infiniop.gelu_mul_backward(g, x, handle=h),
                                        gelu_erf64, gelu_erf_terms, True)
    + ("gelu_mul_backward",),
    "gelu_backward_v2_erf": slope_case(lambda g, x, h: infiniop.gelu_backward_v2(g, x, handle=h),
                                       gelu_erf64, gelu_erf_terms, False)
    + ("gelu_backward_v2",),
}
for _name, _attributes in CLIPPED.items():
    GRADIENT_CASES["clipped_swiglu_backward_" + _name] = (clipped_backward_case(_attributes)
                                                          + ("clipped_swiglu_backward",))


def tanh_case(run, split):
    def truth(x64, k):
        a, b = x64.chunk(2, -1) if split else (x64, None)
        value = gelu_tanh64(a) if b is None else gelu_tanh64(a) * b
        scale = 1.0 if b is None else b.abs()
        _, c = gelu_tanh_conditions(a)
        return value, k * U * value.abs() * (1 + c) + scale * EXP_FLOOR * (1 + a.abs())
    return run, truth


CASES = {"swiglu": (swiglu_case, swiglu_truth, "swiglu"),
         "gelu_tanh": tanh_case(lambda x, h: infiniop.gelu(x, approximate="tanh", handle=h),
                                False) + ("gelu",),
         "gelu_mul_tanh": tanh_case(lambda x, h: infiniop.gelu_mul(x, approximate="tanh", handle=h),
                                    True) + ("gelu_mul",),
         "gelu_mul_erf": (gelu_mul_case, gelu_mul_truth, "gelu_mul"),
         "gelu_erf": (gelu_case, gelu_truth, "gelu")}
for _name, _attributes in CLIPPED.items():
    CASES["clipped_swiglu_" + _name] = clipped_case(_attributes) + ("clipped_swiglu",)


@pytest.fixture(params=DEVICES)
def handles(request):
    """(strict, relaxed) handles of one device, each its own (the session's shared handles keep
    the strict mode)."""
    strict, relaxed = open_handle(request.param), open_handle(request.param)
    relaxed.fpmath = "relaxed"
    yield strict, relaxed
    strict.close()
    relaxed.close()


@pytest.mark.parametrize("case", sorted(CASES))
def test_relaxed_within_bound(handles, case):
    run, truth_of, key = CASES[case]
    strict, relaxed = handles
    x = hostile(rng_for("relaxed", case), (ROWS, COLUMNS))
    got = run(x, relaxed)
    truth, bound = truth_of(x.double(), RELAXED_U[key])
    assert_matches(got, truth, bound, "float32", f"{case} relaxed on {relaxed.device.name}")
    if relaxed.device != infiniop.Device.CPU_REFERENCE:  # the oracle has no relaxed evaluation
        assert (got != run(x, strict)).any(), "the relaxed mode did not reach the kernel"


@pytest.mark.parametrize("case", sorted(GRADIENT_CASES))
def test_relaxed_gradient_within_bound(handles, case):
    run, truth_of, key = GRADIENT_CASES[case]
    strict, relaxed = handles
    x = hostile(rng_for("relaxed", case), (ROWS, COLUMNS))
    y_grad_shape = (ROWS, COLUMNS) if case.startswith("gelu_backward") else (ROWS, COLUMNS // 2)
    y_grad = hostile(rng_for("relaxed y_grad", case), y_grad_shape)
    got = run(y_grad, x, relaxed)
    truth, bound = truth_of(x.double(), y_grad.double(), RELAXED_U[key])
    assert_matches(got, truth, bound, "float32", f"{case} relaxed on {relaxed.device.name}")
    if relaxed.device != infiniop.Device.CPU_REFERENCE:
        assert (got != run(y_grad, x, strict)).any(), "the relaxed mode did not reach the kernel"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("case", ["swiglu", "gelu_mul_erf", "clipped_swiglu_interleaved"])
def test_half_outputs_ignore_the_mode(handles, case, dtype):
    run = CASES[case][0]
    strict, relaxed = handles
    x = hostile(rng_for("relaxed half", case), (ROWS, COLUMNS)).to(dtype)
    assert torch.equal(run(x, strict).view(torch.int16), run(x, relaxed).view(torch.int16))


def test_mode_is_the_handles_and_kept_by_descriptors():
    with infiniop.Handle("cpu") as handle:
        assert handle.fpmath == "strict"
        x = hostile(rng_for("relaxed keep"), (ROWS, COLUMNS))
        strict = infiniop.swiglu(x, handle=handle)
        handle.fpmath = "relaxed"
        assert handle.fpmath == "relaxed"
        relaxed = infiniop.swiglu(x, handle=handle)
        assert (strict != relaxed).any()
        handle.fpmath = "strict"
        assert torch.equal(infiniop.swiglu(x, handle=handle), strict)
        with pytest.raises(ValueError):
            handle.fpmath = "fast"
        assert handle.fpmath == "strict"
        # the C function's own check, for a value outside infiniopFpmathMode_t
        lib = infiniop._library.get_library()
        assert lib.infiniopSetHandleFpmathMode(handle.value, 7) == infiniop.Status.BAD_PARAM
        assert "neither INFINIOP_FPMATH_STRICT" in infiniop.last_error()
        assert handle.fpmath == "strict"
