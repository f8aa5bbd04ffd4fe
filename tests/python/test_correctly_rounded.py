# SPDX-License-Identifier: Apache-2.0
"""Correctly rounded 16-bit results (docs/accuracy.md, "Correctly rounded 16-bit results"): the
F16 and BF16 outputs of every elementwise operator (SwiGlu, GeluMul, Gelu, ClippedSwiglu and
their gradients, approximate "none" and "tanh") are the float64 value rounded once to nearest
even, on every device and cpu target, bit for bit.

Oracle: PyTorch in float64 (silu; x Phi(x) with Phi from erfc, which keeps the left tail;
x sigmoid(2u) for the tanh form, 0.5 (1 + tanh u) without its cancellation; the derivatives
in forms that do not cancel but where they truly cross zero: s + x s sigmoid(-x),
Phi + x phi, and gelu_tanh's from sigmoid(2u) and sigmoid(-2u)),
rounded once to the 16-bit type here (F16 by numpy, which rounds float64 directly; BF16 through
an F32 rounded to odd, which rounds as the float64 value does). The data are signed: the
suite's mix, [-100, 100], products that land exactly on a rounding boundary, and specials; a
count checks that enough of them lie next to a boundary for the correction to be exercised.
"""
import numpy as np
import pytest
import torch

import infiniop
from helpers import DEVICES, on, random_values

N = 1 << 16


def round_bf16_bits(x):
    """float64 -> BF16 bits, once to nearest even (round to odd into F32, then RNE)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        f = x.astype(np.float32)
        bits = f.view(np.uint32).copy()
        inexact = np.isfinite(x) & (f.astype(np.float64) != x)
        away = inexact & (np.abs(f.astype(np.float64)) > np.abs(x))
    bits[away] -= 1
    bits[inexact] |= 1
    rounded = ((bits.astype(np.uint64) + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    rounded[np.isnan(x)] = 0x7FC0
    return rounded


def round_bits(x, dtype):
    if dtype == torch.bfloat16:
        return round_bf16_bits(x)
    with np.errstate(over="ignore"):
        half = np.asarray(x, dtype=np.float64).astype(np.float16)
    bits = half.view(np.uint16).copy()
    bits[np.isnan(half)] = 0x7E00
    return bits


def bits_of(t):
    return t.contiguous().view(torch.int16).numpy().view(np.uint16).reshape(-1)


def silu64(x):
    return torch.where(x == -np.inf, torch.tensor(-0.0, dtype=torch.float64),
                       x * torch.sigmoid(x))


def gelu_erf64(x):
    phi = 0.5 * torch.special.erfc(-x / np.sqrt(2.0))
    return torch.where(x == -np.inf, torch.tensor(-0.0, dtype=torch.float64), x * phi)


def gelu_tanh64(x):
    u = np.sqrt(2.0 / np.pi) * (x + 0.044715 * x * x * x)
    return torch.where(x == -np.inf, torch.tensor(-0.0, dtype=torch.float64),
                       x * torch.sigmoid(2.0 * u))


GELU64 = {"none": gelu_erf64, "tanh": gelu_tanh64}


def times_tail(a, factor, x):
    """a * factor, for a factor that is truly negative left of its zero but underflowed to 0
    far left: there it is -0 (the product's zero takes the exact product's sign), and an
    infinite a gives -a (NaN at x = -inf), as SEMANTICS.md's limits ask."""
    a, factor = torch.broadcast_tensors(torch.as_tensor(a, dtype=torch.float64), factor)
    underflow = (factor == 0) & (x < 0)
    out = torch.where(underflow, a * -0.0, a * factor)
    return torch.where(underflow & torch.isinf(a) & torch.isfinite(x), -a, out)


def limits(x, value, at_plus_inf):
    """value with a derivative's limits at +-inf: at_plus_inf at +inf, -0 at -inf."""
    value = torch.where(x == np.inf, torch.tensor(at_plus_inf, dtype=torch.float64), value)
    return torch.where(x == -np.inf, torch.tensor(-0.0, dtype=torch.float64), value)


def silu_grad64(x):
    s, sm = torch.sigmoid(x), torch.sigmoid(-x)
    return limits(x, s + x * s * sm, 1.0)


def gelu_erf_grad64(x):
    phi = torch.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi)
    return limits(x, 0.5 * torch.special.erfc(-x / np.sqrt(2.0)) + x * phi, 1.0)


def gelu_tanh_grad64(x):
    c = x.clamp(-30.0, 30.0)
    u = np.sqrt(2.0 / np.pi) * (c + 0.044715 * c * c * c)
    p, m = torch.sigmoid(2.0 * u), torch.sigmoid(-2.0 * u)
    slope = p + c * (2.0 * p * m) * np.sqrt(2.0 / np.pi) * (1.0 + 3.0 * 0.044715 * c * c)
    return torch.where(torch.isnan(x), x, slope)


GELU_GRAD64 = {"none": gelu_erf_grad64, "tanh": gelu_tanh_grad64}


def data(dtype, seed):
    rng = np.random.default_rng(seed)
    values = np.concatenate([random_values(rng, (N,)), rng.uniform(-100, 100, N // 2),
                             rng.standard_normal(N // 2) * 3,
                             [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 90.0, -90.0, 5.0]])
    return torch.from_numpy(rng.permutation(values)).to(dtype)


def near_boundaries(truth, dtype):
    """How many finite truths lie within 16 F32 steps of a 16-bit rounding boundary."""
    f = np.asarray(truth, dtype=np.float64).astype(np.float32)
    finite = np.isfinite(f) & (f != 0)
    bits = f[finite].view(np.uint32).astype(np.int64)
    step = 1 << (16 if dtype == torch.bfloat16 else 13)
    offset = (bits % step) - step // 2
    return int((np.abs(offset) <= 16).sum())


DTYPES = [pytest.param(torch.bfloat16, id="bf16"), pytest.param(torch.float16, id="f16")]


def check(got, truth, dtype, what):
    expected = round_bits(truth.numpy(), dtype)
    actual = bits_of(got)
    bad = np.nonzero(expected != actual)[0]
    assert bad.size == 0, (f"{what}: {bad.size} of {expected.size} differ from the correctly "
                           f"rounded float64 value; first at {bad[0]}: got 0x{actual[bad[0]]:04x}, "
                           f"correct 0x{expected[bad[0]]:04x} (truth {truth.reshape(-1)[bad[0]]!r})")
    assert near_boundaries(truth.numpy(), dtype) >= 8, "too few values near a boundary to test"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_swiglu(device, dtype):
    x = data(dtype, 1).reshape(2, -1)
    x1, x2 = x[0].double(), x[1].double()
    truth = times_tail(x2, silu64(x1), x1)
    check(infiniop.swiglu(x, dim=0, **on(device)), truth, dtype, "swiglu")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_gelu_mul(device, dtype, approximate):
    x = data(dtype, 2).reshape(-1, 2)  # each row [x1, x2]: the split halves of the last dim
    x1, x2 = x[:, 0].double(), x[:, 1].double()
    truth = times_tail(x2, GELU64[approximate](x1), x1)
    check(infiniop.gelu_mul(x, approximate=approximate, **on(device)), truth, dtype, "gelu_mul")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_gelu(device, dtype, approximate):
    x = data(dtype, 3)
    check(infiniop.gelu(x, approximate=approximate, **on(device)),
          GELU64[approximate](x.double()), dtype, "gelu")


# Worked by hand: silu(24) = 24 (1 - 3.8e-11), so 24 x2 is just below 24 x2, which for these x2
# is exactly the midpoint between two 16-bit neighbours: the exact value rounds down, while
# rounding F32's silu(24) x2 (= 24 exactly times x2, the midpoint itself) ties to the even one
# above.
#   BF16: x2 = 1 + 2^-7, 24 x2 = 24.1875, between 24.125 (0x41c1) and 24.25 (0x41c2).
#   F16:  x2 = 1 + 2^-10, 24 x2 = 24.0234375, between 24.015625 (0x4e01) and 24.03125 (0x4e02).
@pytest.mark.parametrize("dtype, x2, expected", [
    pytest.param(torch.bfloat16, 1 + 2 ** -7, 0x41C1, id="bf16"),
    pytest.param(torch.float16, 1 + 2 ** -10, 0x4E01, id="f16")])
@pytest.mark.parametrize("device", DEVICES)
def test_swiglu_exact_midpoint_product(device, dtype, x2, expected):
    x = torch.tensor([[24.0] * 37, [x2] * 37], dtype=dtype)  # 37: a vector's body and tail
    got = bits_of(infiniop.swiglu(x, dim=0, **on(device)))
    assert (got == expected).all(), [hex(v) for v in got[:4]]


# gelu_tanh's wide windows: x < 0, where exp's rounded argument v weighs |v| (up to 177.5 at the
# tail's clamp), and the far-left tail with multipliers that bring it back into range.
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_gelu_mul_tanh_left(device, dtype):
    rng = np.random.default_rng(7)
    n = N // 2
    x1 = np.concatenate([rng.uniform(-14, -9, n), rng.uniform(-9.9, 0, n)])
    big = 3e38 if dtype == torch.bfloat16 else 6e4
    x2 = np.concatenate([np.exp(rng.uniform(0, np.log(big), n)), rng.uniform(-8, 8, n)])
    x = torch.from_numpy(np.stack([x1, x2], axis=1)).to(dtype)
    a, b = x[:, 0].double(), x[:, 1].double()
    truth = times_tail(b, gelu_tanh64(a), a)
    check(infiniop.gelu_mul(x, approximate="tanh", **on(device)), truth, dtype, "gelu_mul tanh")


# The gradients: where a derivative crosses zero (silu' at -1.2785, gelu' at -0.7518) their
# bound is absolute, so many values lie near a boundary there: the data include such x.
def grad_data(dtype, seed, n):
    rng = np.random.default_rng(seed)
    x = data(dtype, seed)[:n].double().numpy().copy()
    x[: n // 8] = rng.uniform(-1.6, -0.5, n // 8)
    return torch.from_numpy(rng.permutation(x)).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_swiglu_backward(device, dtype):
    x = torch.stack([grad_data(dtype, 11, N), data(dtype, 12)[:N]])
    dy = data(dtype, 13)[:N].reshape(1, -1)
    x1, x2, g = x[0].double(), x[1].double(), dy[0].double()
    got = infiniop.swiglu_backward(dy, x, dim=0, **on(device))
    check(got[0], times_tail(g * x2, silu_grad64(x1), x1), dtype, "swiglu_backward x1")
    check(got[1], times_tail(g, silu64(x1), x1), dtype, "swiglu_backward x2")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_gelu_mul_backward(device, dtype, approximate):
    x = torch.stack([grad_data(dtype, 14, N), data(dtype, 15)[:N]], dim=1)
    dy = data(dtype, 16)[:N].reshape(-1, 1)
    x1, x2, g = x[:, 0].double(), x[:, 1].double(), dy[:, 0].double()
    got = infiniop.gelu_mul_backward(dy, x, approximate=approximate, **on(device))
    check(got[:, 0], times_tail(g * x2, GELU_GRAD64[approximate](x1), x1), dtype,
          "gelu_mul_backward x1")
    check(got[:, 1], times_tail(g, GELU64[approximate](x1), x1), dtype, "gelu_mul_backward x2")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("function", ["gelu_backward", "gelu_backward_v2"])
def test_gelu_backward(device, dtype, approximate, function):
    x = grad_data(dtype, 17, N)
    dy = data(dtype, 18)[:N]
    truth = times_tail(dy.double(), GELU_GRAD64[approximate](x.double()), x.double())
    got = getattr(infiniop, function)(dy, x, approximate=approximate, **on(device))
    check(got, truth, dtype, function)


# ClippedSwiglu (SEMANTICS.md): a = min(A, limit), b = clamp(B, -limit, limit), z = alpha a,
# g = a sigmoid(z); y = g (b + bias), dA = dy (b + bias) g'(a) [A <= limit], dB = dy g [B inside].
@pytest.mark.parametrize("alpha", [1.702, -0.75])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_clipped_swiglu(device, dtype, alpha):
    limit, bias = 7.0, 1.0
    x = torch.stack([grad_data(dtype, 19, N), data(dtype, 20)[:N] / 8], dim=1)  # interleaved
    dy = data(dtype, 21)[:N].reshape(-1, 1)
    A, B, g = x[:, 0].double(), x[:, 1].double(), dy[:, 0].double()
    a = torch.where(A > limit, torch.tensor(limit, dtype=torch.float64), A)
    b = torch.where(B > limit, torch.tensor(limit, dtype=torch.float64),
                    torch.where(B < -limit, torch.tensor(-limit, dtype=torch.float64), B))
    z = np.float64(np.float32(alpha)) * a
    with np.errstate(all="ignore"):
        gate = torch.where(z == -np.inf, torch.tensor(0.0, dtype=torch.float64),
                           a * torch.sigmoid(z))
    v = b + bias
    finite_ok = torch.isfinite(A) & torch.isfinite(B) & torch.isfinite(g)
    attributes = dict(alpha=alpha, limit=limit, bias=bias, **on(device))
    y = infiniop.clipped_swiglu(x, **attributes)
    # specials aside (cpu_reference's limits, checked bit for bit against it in bit_identity)
    keep = finite_ok.numpy()
    check(y[keep], (gate * v)[keep], dtype, "clipped_swiglu")
    grad = infiniop.clipped_swiglu_backward(dy, x, **attributes)
    dA = torch.where(A <= limit, times_tail(g * v, silu_grad64(z), z),
                     torch.tensor(0.0, dtype=torch.float64))
    dB = torch.where((B >= -limit) & (B <= limit), g * gate,
                     torch.tensor(0.0, dtype=torch.float64))
    check(grad[:, 0][keep], dA[keep], dtype, "clipped_swiglu_backward A")
    check(grad[:, 1][keep], dB[keep], dtype, "clipped_swiglu_backward B")


# ClippedSwiglu's clamp_mode 1 (aclnnClippedSwigluV2): g = silu(A), y = min(g, limit) b,
# dA = dy b silu'(A) [g <= limit], dB = dy min(g, limit) [B inside]; alpha and bias unused. A
# spans [-10, 10] and beyond, so the gate's clamp at limit 4 is often active.
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_clipped_swiglu_clamp_mode_one(device, dtype):
    limit = 4.0
    x = torch.stack([grad_data(dtype, 22, N), data(dtype, 23)[:N] / 8], dim=1)  # interleaved
    dy = data(dtype, 24)[:N].reshape(-1, 1)
    A, B, g = x[:, 0].double(), x[:, 1].double(), dy[:, 0].double()
    b = B.clamp(-limit, limit)
    gate = A * torch.sigmoid(A)
    clamped = gate > limit
    gate_c = torch.where(clamped, torch.tensor(limit, dtype=torch.float64), gate)
    keep = (torch.isfinite(A) & torch.isfinite(B) & torch.isfinite(g)).numpy()
    assert clamped[torch.from_numpy(keep)].any() and not clamped[torch.from_numpy(keep)].all()
    attributes = dict(alpha=1.702, limit=limit, bias=1.0, clamp_mode=1, **on(device))
    check(infiniop.clipped_swiglu(x, **attributes)[keep], (gate_c * b)[keep], dtype,
          "clipped_swiglu clamp_mode=1")
    grad = infiniop.clipped_swiglu_backward(dy, x, **attributes)
    zero = torch.tensor(0.0, dtype=torch.float64)
    dA = torch.where(gate <= limit, times_tail(g * b, silu_grad64(A), A), zero)
    dB = torch.where((B >= -limit) & (B <= limit), g * gate_c, zero)
    check(grad[:, 0][keep], dA[keep], dtype, "clipped_swiglu_backward clamp_mode=1 A")
    check(grad[:, 1][keep], dB[keep], dtype, "clipped_swiglu_backward clamp_mode=1 B")
