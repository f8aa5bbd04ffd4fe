# SPDX-License-Identifier: Apache-2.0
"""ClippedSwiglu and ClippedSwigluBackward through the Python binding, on every device.

Oracle: PyTorch autograd in float64 of exactly the formula of SEMANTICS.md, from the already
rounded inputs and the float32-rounded attributes (the C API takes float alpha, limit, bias):
    x64 = x.double().requires_grad_(); rows = x64.reshape(pre, L)
    A, B = rows[:, 0::2], rows[:, 1::2]  (interleaved)  or  rows[:, :L/2], rows[:, L/2:]
    a = A.clamp(max=limit); b = B.clamp(-limit, limit)
    y = where(row < n, a * sigmoid(alpha a) * (b + bias), 0).reshape(x's shape, dim halved)
    y.backward(y_grad.double()); compare y and x64.grad.
torch's clamp gradient is 1 on the closed range (inclusive boundaries) and 0 outside, as the
semantics say; those masked gradients, and every element of a row >= n, must be EXACTLY 0.

Error model elsewhere (all in float64; REL = 8 F32 ulps, 8 * 2^-23; s = sigmoid(alpha a),
k = |alpha a|, the argument of sigmoid's exponential, which the kernel rounds to F32: that
rounding changes s by a relative s' / s * k 2^-24 = (1 - s) k 2^-24, and s (1 - s) by at most
k 2^-24; beta = |b| + |bias|: b + bias in F32 errs by 2^-24 |b + bias| <= 2^-24 beta whatever
the order of the products, so no cancellation term is needed):
    value  terms                                                      scale
    y      |a s| (1 + k (1 - s))                                      beta
    dA     s (1 + k (1 - s)) + |alpha a s (1 - s)| (1 + k)            |y_grad| beta
    dB     |a s| (1 + k (1 - s))                                      |y_grad|
  F32:      scale * (REL * terms + 2^-125 (1 + |a| + k)) + 2^-149
  F16/BF16: 1 ulp of the output type at |truth| + the F32 bound
The 2^-125 (1 + |a| + k) floor: like the other gated kernels, sigmoid's exp is clamped at
exp(-87) (alpha a < -87), where the gate and its slope are tiny numbers (|.| < 2^-125 (1 + k))
instead of the true, tinier ones; inputs in [-10, 10] never get there with these alphas, the
special values do. The final 2^-149 (one F32 subnormal ulp) covers rounding a subnormal F32
result. NaN must give NaN (forward: NaN passes through the clamps).
"""

import math

import numpy as np
import pytest
import torch

import infiniop
from infiniop import DType, InfiniopError, Status

from helpers import (f32_bound, DEVICES, LAYOUT_CASES, LAYOUT_SHAPE, NUMPY_CASES, NUMPY_DTYPES, SENTINEL,
                     TORCH_DTYPES, assert_infiniop_error, assert_matches, assert_untouched_outside,
                     expect_failure, halved, make_input, make_output, numpy_case, on,
                     random_tensor, rng_for, sentinel)
from helpers import JunkPointers, clamp_inclusive, device_handle, run_op

REL, REL_BACKWARD = f32_bound("clipped_swiglu"), f32_bound("clipped_swiglu_backward")
EXP_FLOOR = 2.0 ** -125

DEFAULTS = dict(alpha=1.702, limit=7.0, bias=1.0)
# limit 2 on inputs spanning [-10, 10]: A is clipped from above, B from both sides, often.
SMALL_LIMIT = dict(alpha=1.702, limit=2.0, bias=1.0)


def f32(value):
    return float(np.float32(value))


# ----------------------------------------------------------------------------------------------
# Merging and splitting rows

def merged(shape, dim):
    """(pre, L, dim in [0, ndim)) of x viewed as [pre, cut * after] around dim."""
    dim = dim % len(shape)
    return math.prod(shape[:dim]), math.prod(shape[dim:]), dim


def split(rows, interleaved):
    """(A, B) of a [pre, L] tensor."""
    if interleaved:
        return rows[:, 0::2], rows[:, 1::2]
    half = rows.shape[1] // 2
    return rows[:, :half], rows[:, half:]


def merge(first, second, interleaved):
    """The [pre, L] tensor whose split() is (first, second)."""
    if interleaved:
        return torch.stack([first, second], dim=2).reshape(first.shape[0], -1)
    return torch.cat([first, second], dim=1)


def group_rows(group_index, pre):
    """n = min(sum(counts), pre): the rows computed (the sum in exact integer arithmetic)."""
    if group_index is None:
        return pre
    counts = [int(c) for c in np.asarray(group_index).reshape(-1)]
    return min(sum(counts), pre)


# ----------------------------------------------------------------------------------------------
# Oracle and error model

def torch_oracle(x, y_grad, dim, alpha, limit, bias, interleaved, n=None, clamp_mode=0):
    """(y, x_grad) in float64 by autograd from the rounded inputs and float32 attributes;
    x_grad is None without y_grad. Rows >= n (default: all rows computed) are zero. Call before
    the operator: x.double() is a copy, so an in-place call cannot change it. clamp_mode 1
    (aclnnClippedSwigluV2): y = silu(A).clamp(max=limit) * B.clamp(-limit, limit)."""
    alpha, limit, bias = f32(alpha), f32(limit), f32(bias)
    x64 = x.detach().to(torch.float64, copy=True).requires_grad_()  # never the caller's
    pre, L, d = merged(tuple(x.shape), dim)
    n = pre if n is None else n
    A, B = split(x64.reshape(pre, L), interleaved)
    if clamp_mode == 1:
        y = clamp_inclusive(A * torch.sigmoid(A), max=limit) * clamp_inclusive(B, -limit, limit)
    else:
        a = clamp_inclusive(A, max=limit)
        b = clamp_inclusive(B, -limit, limit)
        y = a * torch.sigmoid(alpha * a) * (b + bias)
    keep = (torch.arange(pre) < n)[:, None]
    y = torch.where(keep, y, torch.zeros((), dtype=torch.float64))
    y = y.reshape(halved(tuple(x.shape), d))
    if y_grad is None:
        return y.detach(), None
    y.backward(y_grad.detach().double())
    return y.detach(), x64.grad


def error_model(x64, g64, dim, alpha, limit, bias, interleaved, n=None, clamp_mode=0):
    """(y bound, x_grad bound, y exact-zero mask, x_grad exact-zero mask), float64/bool tensors
    of y's and x's shapes. The bound is that of F32 before the output-rounding ulp; where the
    mask is set the result must be exactly 0 (masked gradients, rows >= n). clamp_mode 1: alpha
    1, bias 0, no clamp of A; a clamped gate is limit, times one rounded product."""
    after = clamp_mode == 1
    alpha, limit, bias = (1.0, f32(limit), 0.0) if after else (f32(alpha), f32(limit), f32(bias))
    shape = tuple(x64.shape)
    pre, L, d = merged(shape, dim)
    n = pre if n is None else n
    A, B = split(x64.reshape(pre, L), interleaved)
    # -inf -> finite terms (the truth is a limit there)
    a = A.clamp(-1e5, 1e5) if after else A.clamp(max=limit).clamp(min=-1e5)
    b = B.clamp(-limit, limit).clamp(-1e5, 1e5)
    z = alpha * a
    k = z.abs()
    s, s_neg = torch.sigmoid(z), torch.sigmoid(-z)  # 1 - s without cancellation
    beta = b.abs() + abs(bias)
    floor = EXP_FLOOR * (1 + a.abs() + k)
    gate = (a * s).abs() * (1 + k * s_neg)
    gate_clamped = after & ~(A * torch.sigmoid(A) <= limit)  # NaN A: its own NaN anyway
    if after:
        gate = torch.where(gate_clamped, torch.tensor(limit, dtype=torch.float64), gate)
    y_bound = beta * (REL * gate + floor)
    dropped = (torch.arange(pre) >= n)[:, None].expand(pre, L // 2)
    y_zero = dropped.reshape(halved(shape, d))
    y_bound = y_bound.reshape(halved(shape, d))
    if g64 is None:
        return y_bound, None, y_zero, None
    g = g64.reshape(pre, L // 2).abs()
    slope = s * (1 + k * s_neg) + (z * s * s_neg).abs() * (1 + k)
    dA = g * beta * (REL_BACKWARD * slope + floor)
    dB = g * (REL_BACKWARD * gate + floor)
    grad_bound = merge(dA, dB, interleaved).reshape(shape)
    A_masked = gate_clamped | torch.isnan(A) if after else ~(A <= limit)
    B_masked = ~((B >= -limit) & (B <= limit))
    grad_zero = merge(A_masked | dropped, B_masked | dropped, interleaved).reshape(shape)
    return y_bound, grad_bound, y_zero, grad_zero


def pair_context(x64, dim, interleaved):
    """{A, B} of every y element, y-shaped, for failure messages."""
    pre, L, d = merged(tuple(x64.shape), dim)
    A, B = split(x64.reshape(pre, L), interleaved)
    shape = halved(tuple(x64.shape), d)
    return {"A": A.reshape(shape).numpy(), "B": B.reshape(shape).numpy()}


def check(y, x_grad, x64, g64, dim, attrs, interleaved, dtype_name, what, group_index=None):
    """y (or None) and x_grad (or None) against the oracle and the error model."""
    pre, _, _ = merged(tuple(x64.shape), dim)
    n = group_rows(group_index, pre)
    truth_y, truth_grad = torch_oracle(x64, g64 if x_grad is not None else None, dim,
                                       interleaved=interleaved, n=n, **attrs)
    y_bound, grad_bound, y_zero, grad_zero = error_model(
        x64, g64 if x_grad is not None else None, dim, interleaved=interleaved, n=n, **attrs)
    what = f"{what} dim={dim} interleaved={interleaved} {attrs} n={n}/{pre}"
    if y is not None:
        assert_matches(y, truth_y, y_bound, dtype_name, f"{what} y",
                       pair_context(x64, dim, interleaved), exact_zero=y_zero)
    if x_grad is not None:
        assert_matches(x_grad, truth_grad, grad_bound, dtype_name, f"{what} x_grad",
                       {"x": x64.numpy()}, exact_zero=grad_zero)


# ----------------------------------------------------------------------------------------------
# Inputs and outputs

def nan_tensor(shape, dtype_name):
    return torch.full(shape, float("nan"), dtype=TORCH_DTYPES[dtype_name])


def run_both(x, g, dim, attrs, interleaved, device, dtype_name, group_index=None):
    """clipped_swiglu and clipped_swiglu_backward into NaN-poisoned outputs; returns them."""
    y = nan_tensor(halved(tuple(x.shape), dim), dtype_name)
    result = infiniop.clipped_swiglu(x, dim=dim, interleaved=interleaved, group_index=group_index,
                                     **on(device), out=y, **attrs)
    assert result is y
    x_grad = nan_tensor(tuple(x.shape), dtype_name)
    result = infiniop.clipped_swiglu_backward(g, x, dim=dim, interleaved=interleaved,
                                              group_index=group_index, **on(device),
                                              out=x_grad, **attrs)
    assert result is x_grad
    return y, x_grad


# ----------------------------------------------------------------------------------------------
# The oracle itself

def test_oracle_by_hand():
    """The interleaved split pairs FLAT elements of the merged row, not halves along dim: for x
    of shape (2, 3) and dim = 0 (pre = 1, L = 6), A = (x00, x02, x11), B = (x01, x10, x12).
    Written elementwise in NumPy, independently of the oracle's reshapes."""
    x = np.array([[0.5, -3.0, 8.0], [2.5, -1.0, 1.0]])
    alpha, limit, bias = f32(1.702), 2.0, 1.0

    def formula(A, B):
        a, b = min(A, limit), min(max(B, -limit), limit)
        return a / (1 + math.exp(-alpha * a)) * (b + bias)

    flat = x.reshape(-1)
    expected = [formula(flat[2 * p], flat[2 * p + 1]) for p in range(3)]
    y, _ = torch_oracle(torch.from_numpy(x), None, 0, alpha, limit, bias, True)
    assert y.shape == (1, 3)
    np.testing.assert_allclose(y.numpy().reshape(-1), expected, rtol=1e-15)
    expected = [formula(x[0, j], x[1, j]) for j in range(3)]  # not interleaved: halves on dim 0
    y, _ = torch_oracle(torch.from_numpy(x), None, 0, alpha, limit, bias, False)
    np.testing.assert_allclose(y.numpy().reshape(-1), expected, rtol=1e-15)
    got = infiniop.clipped_swiglu(torch.from_numpy(x).float(), dim=0, limit=limit)
    expected = [formula(flat[2 * p], flat[2 * p + 1]) for p in range(3)]
    np.testing.assert_allclose(got.numpy().reshape(-1), expected, rtol=1e-5)

    # Gradients: inclusive clamp boundaries, 0 outside.
    x = torch.tensor([[2.0, 2.0, 3.0, -2.0, 1.0, 3.0, 0.5, -3.0]], dtype=torch.float64)
    _, grad = torch_oracle(x, torch.ones(1, 4, dtype=torch.float64), -1, alpha, limit, bias, True)
    zero = grad[0] == 0
    assert zero.tolist() == [False, False, True, False, False, True, False, True]


# ----------------------------------------------------------------------------------------------
# Every dim of a rank-4 tensor, both spellings, interleaved and not

RANK4_SHAPE = (2, 6, 4, 10)
RANK4_DIMS = [0, 1, 2, 3, -4, -3, -2, -1]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("dim", RANK4_DIMS)
def test_every_dim(device, dtype_name, interleaved, dim):
    attrs = SMALL_LIMIT
    rng = rng_for("dim", dtype_name, interleaved, dim)
    x = random_tensor(rng, RANK4_SHAPE, dtype_name, attrs["limit"])
    g = random_tensor(rng, halved(RANK4_SHAPE, dim), dtype_name)
    x64, g64 = x.double(), g.double()
    y, x_grad = run_both(x, g, dim, attrs, interleaved, device, dtype_name)
    check(y, x_grad, x64, g64, dim, attrs, interleaved, dtype_name, f"{device}")


def test_dim_spellings_agree():
    """dim d and d - ndim are the same dimension: bit-identical results."""
    rng = rng_for("spellings")
    x = random_tensor(rng, RANK4_SHAPE, "float32", 2.0)
    for interleaved in (True, False):
        for dim in range(4):
            g = random_tensor(rng, halved(RANK4_SHAPE, dim), "float32")
            kw = dict(interleaved=interleaved, limit=2.0)
            assert torch.equal(infiniop.clipped_swiglu(x, dim=dim, **kw),
                               infiniop.clipped_swiglu(x, dim=dim - 4, **kw))
            assert torch.equal(infiniop.clipped_swiglu_backward(g, x, dim=dim, **kw),
                               infiniop.clipped_swiglu_backward(g, x, dim=dim - 4, **kw))


@pytest.mark.parametrize("device", DEVICES)
def test_interleaved_matters_off_the_last_dim(device):
    """For dim != -1 the interleaved split of the merged row is neither the non-interleaved one
    nor an interleave along dim (a regression guard for an implementation that splits along
    dim): the library must agree with the oracle, which the other test checks, and differ here."""
    rng = rng_for("interleave")
    x = random_tensor(rng, (4, 6, 4), "float32")
    a = infiniop.clipped_swiglu(x, dim=1, interleaved=True, **on(device))
    b = infiniop.clipped_swiglu(x, dim=1, interleaved=False, **on(device))
    along_dim = infiniop.clipped_swiglu(x.transpose(1, 2).contiguous(), dim=-1,
                                        interleaved=True, **on(device)).transpose(1, 2)
    assert not torch.equal(a, b) and not torch.equal(a, along_dim)


# ----------------------------------------------------------------------------------------------
# Clamping: both directions on both halves, inputs exactly at +-limit, attribute values

ATTRIBUTE_CASES = [
    dict(alpha=1.702, limit=7.0, bias=1.0),  # the vendor's defaults
    dict(alpha=1.702, limit=2.0, bias=1.0),
    dict(alpha=0.75, limit=0.5, bias=-0.5),
    dict(alpha=2.5, limit=3.25, bias=3.0),
    dict(alpha=-1.25, limit=1.5, bias=0.0),  # a negative alpha is finite, so valid
    dict(alpha=0.0, limit=4.0, bias=2.0),  # sigmoid(0) = 1/2 everywhere
    dict(alpha=1.702, limit=math.inf, bias=1.0),  # no clipping
    dict(alpha=1.0, limit=7.0, bias=0.0),  # DeepSeek-V4: silu(min(A, limit)) clamp(B)
]


# ----------------------------------------------------------------------------------------------
# clamp_mode 1 (aclnnClippedSwigluV2): y = min(silu(A), limit) clamp(B, -limit, limit); alpha and
# bias are unused (the vendor's defaults passed here too)

AFTER_CASES = [
    dict(alpha=1.702, limit=7.0, bias=1.0, clamp_mode=1),
    dict(alpha=1.0, limit=2.0, bias=0.0, clamp_mode=1),
    dict(alpha=-3.0, limit=0.5, bias=5.0, clamp_mode=1),
    dict(alpha=1.0, limit=math.inf, bias=0.0, clamp_mode=1),
]


def float32_of(bits):
    return float(np.array(bits, dtype=np.uint32).view(np.float32))


def gate_boundary(limit):
    """The largest float32 A with silu(A) <= limit in float64 (+inf for limit +inf): silu rises
    from 0 on, and is <= 0 < limit below."""
    if math.isinf(limit):
        return limit
    below, above = 0, 0x7F800000
    while above - below > 1:
        middle = (below + above) // 2
        a = float32_of(middle)
        below, above = (middle, above) if a / (1 + math.exp(-a)) <= limit else (below, middle)
    return float32_of(below)


def with_boundary_values(x32, limit, interleaved):
    """x (float32) with A's first values at and around the gate's boundary and B's at +-limit."""
    x = x32.clone()
    A, B = split(x.reshape(x.shape[0], -1), interleaved)
    if math.isfinite(limit):
        edge = gate_boundary(f32(limit))
        values = [edge, float(np.nextafter(np.float32(edge), np.float32(np.inf))),
                  float(np.nextafter(np.float32(edge), np.float32(0))), 2 * edge, -edge]
        A[0, :len(values)] = torch.tensor(values)
        B[0, :3] = torch.tensor([f32(limit), -f32(limit), 0.5 * f32(limit)])
    return x


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("attrs", ATTRIBUTE_CASES + AFTER_CASES,
                         ids=["a{alpha}-l{limit}-b{bias}".format(**c) for c in ATTRIBUTE_CASES]
                         + ["after-a{alpha}-l{limit}-b{bias}".format(**c) for c in AFTER_CASES])
def test_clamping(device, dtype_name, interleaved, attrs):
    shape, dim = (12, 34), -1
    after = attrs.get("clamp_mode", 0) == 1
    rng = rng_for("clamp", dtype_name, interleaved, sorted(attrs.items()))
    x = random_tensor(rng, shape, "float32" if after else dtype_name, attrs["limit"])
    if after:
        x = with_boundary_values(x, attrs["limit"], interleaved).to(TORCH_DTYPES[dtype_name])
    g = random_tensor(rng, halved(shape, dim), dtype_name)
    x64, g64 = x.double(), g.double()
    A, B = split(x64.reshape(shape), interleaved)
    limit = attrs["limit"]
    if math.isfinite(limit):  # the inputs reach every clamp case
        assert (A > limit).any() and (A == limit).any() and (A < -limit).any()
        assert (B > limit).any() and (B == limit).any()
        assert (B < -limit).any() and (B == -limit).any()
        assert ((B > -limit) & (B < limit)).any() and (A < limit).any()
        if after:  # the gate's clamp too, and not everywhere
            gate = A * torch.sigmoid(A)
            assert (gate > limit).any() and (gate <= limit).any()
    y, x_grad = run_both(x, g, dim, attrs, interleaved, device, dtype_name)
    check(y, x_grad, x64, g64, dim, attrs, interleaved, dtype_name, f"{device}")


# ----------------------------------------------------------------------------------------------
# clamp_mode 1 beyond test_clamping's cases

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("interleaved", [True, False])
def test_clamp_mode_one_dims_and_groups(device, dim, interleaved):
    attrs = dict(alpha=1.702, limit=2.0, bias=1.0, clamp_mode=1)
    shape = (6, 4, 10)
    rng = rng_for("after-dims", dim, interleaved)
    x = random_tensor(rng, shape, "float32", attrs["limit"])
    g = random_tensor(rng, halved(shape, dim), "float32")
    for counts in (None, [1, 2]):
        y, x_grad = run_both(x, g, dim, attrs, interleaved, device, "float32", group_index=counts)
        check(y, x_grad, x.double(), g.double(), dim, attrs, interleaved, "float32", f"{device}",
              group_index=counts)


@pytest.mark.parametrize("device", DEVICES)
def test_clamp_mode_one_boundary_by_hand(device):
    """At the boundary's float silu(A) <= limit: y = silu(A) B, dA flows; one float past it
    y = limit B exactly (the float32 product), dA = 0, dB = dy limit."""
    limit = 7.0
    edge = gate_boundary(limit)
    past = float(np.nextafter(np.float32(edge), np.float32(np.inf)))
    x = torch.tensor([[edge, 1.5, past, 1.5]], dtype=torch.float32)
    g = torch.tensor([[2.0, 2.0]])
    kw = dict(limit=limit, clamp_mode=1, **on(device))
    y = infiniop.clipped_swiglu(x, **kw)
    grad = infiniop.clipped_swiglu_backward(g, x, **kw)
    silu = edge / (1 + math.exp(-edge))
    assert silu <= limit < past / (1 + math.exp(-past))
    assert abs(y[0, 0].item() - 1.5 * silu) <= 1e-6 * silu
    assert y[0, 1].item() == np.float32(limit * 1.5)
    assert grad[0, 0].item() != 0 and grad[0, 2].item() == 0
    assert grad[0, 3].item() == 2 * limit


@pytest.mark.parametrize("device", DEVICES)
def test_clamp_mode_one_ignores_alpha_and_bias(device):
    rng = rng_for("after-ignores")
    x = random_tensor(rng, (8, 20), "float32", 3.0)
    g = random_tensor(rng, (8, 10), "float32")
    kw = dict(limit=3.0, clamp_mode=1, **on(device))
    y = infiniop.clipped_swiglu(x, **kw)
    grad = infiniop.clipped_swiglu_backward(g, x, **kw)
    for alpha, bias in ((-2.0, 7.5), (0.0, 0.0), (1e30, -1e30)):
        assert torch.equal(y, infiniop.clipped_swiglu(x, alpha=alpha, bias=bias, **kw))
        assert torch.equal(grad, infiniop.clipped_swiglu_backward(g, x, alpha=alpha, bias=bias,
                                                                  **kw))
    # clamp_mode 0 is the default (the original create function)
    assert torch.equal(infiniop.clipped_swiglu(x, clamp_mode=0, **on(device)),
                       infiniop.clipped_swiglu(x, **on(device)))


@pytest.mark.parametrize("device", DEVICES)
def test_bad_clamp_mode(device):
    x = random_tensor(rng_for("bad-mode"), (4, 6), "float32")
    g = random_tensor(rng_for("bad-mode-g"), (4, 3), "float32")
    for mode in (2, -1, 2 ** 63 - 1, -2 ** 63):
        error = expect_failure(infiniop.clipped_swiglu, Status.BAD_PARAM, x, clamp_mode=mode,
                               out=torch.full((4, 3), 7.0), **on(device))
        assert f"clamp_mode {mode}" in error.message
        expect_failure(infiniop.clipped_swiglu_backward, Status.BAD_PARAM, g, x, clamp_mode=mode,
                       out=torch.full((4, 6), 7.0), **on(device))
    # alpha, bias and limit are still validated in clamp_mode 1
    for bad in (dict(alpha=math.nan), dict(bias=math.inf), dict(limit=0.0)):
        expect_failure(infiniop.clipped_swiglu, Status.BAD_PARAM, x, clamp_mode=1, **bad,
                       **on(device))
    for mode, kind in ((True, TypeError), (1.0, TypeError), ("1", TypeError),
                       (2 ** 63, OverflowError)):
        with pytest.raises(kind):
            infiniop.clipped_swiglu(x, clamp_mode=mode, **on(device))
    assert torch.equal(infiniop.clipped_swiglu(x, clamp_mode=np.int64(1), **on(device)),
                       infiniop.clipped_swiglu(x, clamp_mode=1, **on(device)))


def test_defaults():
    """Omitted attributes are the vendor's: dim=-1, alpha=1.702, limit=7, bias=1,
    interleaved=True."""
    rng = rng_for("defaults")
    x = random_tensor(rng, (4, 3, 16), "float32", 7.0)
    g = random_tensor(rng, (4, 3, 8), "float32")
    explicit = dict(dim=-1, alpha=1.702, limit=7.0, bias=1.0, interleaved=True)
    assert torch.equal(infiniop.clipped_swiglu(x), infiniop.clipped_swiglu(x, **explicit))
    assert torch.equal(infiniop.clipped_swiglu_backward(g, x),
                       infiniop.clipped_swiglu_backward(g, x, **explicit))
    # A limit beyond float32's range arrives as +inf: no clipping, a valid limit.
    assert torch.equal(infiniop.clipped_swiglu(x, limit=1e39),
                       infiniop.clipped_swiglu(x, limit=math.inf))


# ----------------------------------------------------------------------------------------------
# group_index: absent, sum below / equal to / above pre, zero counts

def group_case(case, pre):
    """Counts for a case, relative to pre rows."""
    return {
        "absent": None,
        "less": [2, 0, pre - 5],
        "one_row": [1],
        "equal": [pre - 1, 1],
        "more": [pre, 3],
        "zeros": [0, 0, 0],
        "empty": [],
        "huge": [2 ** 62, 2 ** 62 - 1],  # the sum only just fits int64
    }[case]


GROUP_CASES = ["absent", "less", "one_row", "equal", "more", "zeros", "empty", "huge"]
GROUP_FORMS = ["numpy", "torch", "list"]


def group_index_as(counts, form):
    if counts is None or form == "list":
        return counts
    if form == "numpy":
        return np.array(counts, dtype=np.int64)
    return torch.tensor(counts, dtype=torch.int64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("dim", [1, -1])
@pytest.mark.parametrize("case", GROUP_CASES)
def test_group_index(device, dtype_name, dim, case):
    shape = (8, 6, 4)  # pre = 8 (dim = 1) or 48 (dim = -1)
    pre, _, _ = merged(shape, dim)
    counts = group_case(case, pre)
    form = GROUP_FORMS[(GROUP_CASES.index(case) + dim) % len(GROUP_FORMS)]
    group_index = group_index_as(counts, form)
    for interleaved in (True, False):
        rng = rng_for("group", dtype_name, dim, case, interleaved)
        x = random_tensor(rng, shape, dtype_name, SMALL_LIMIT["limit"])
        g = random_tensor(rng, halved(shape, dim), dtype_name)
        x64, g64 = x.double(), g.double()
        y, x_grad = run_both(x, g, dim, SMALL_LIMIT, interleaved, device, dtype_name, group_index)
        check(y, x_grad, x64, g64, dim, SMALL_LIMIT, interleaved, dtype_name,
              f"{device} group_index={counts} ({form})", counts)


@pytest.mark.parametrize("device", DEVICES)
def test_absent_group_index_pointer_ignored(device):
    """API.md: a nullable descriptor given as NULL means its pointer is ignored. Created without
    group_index, both operators compute every row whatever the group_index pointer is: NULL or
    junk (helpers.JunkPointers: -1 counts in host and device memory, which would fail the call if
    read; device zeros, which would zero every row). Results: the oracle's, bit-identical to the
    NULL call's; the junk unwritten."""
    shape, dim = (8, 6, 4), 1
    half = halved(shape, dim)
    with device_handle(device) as handle, JunkPointers(handle) as junk:
        for dtype_name in TORCH_DTYPES:
            for interleaved in (True, False):
                rng = rng_for("absent-group-index", dtype_name, interleaved)
                x = random_tensor(rng, shape, dtype_name, SMALL_LIMIT["limit"])
                g = random_tensor(rng, half, dtype_name)
                attrs = dict(dim=dim, interleaved=interleaved, **SMALL_LIMIT)
                like_x = torch.empty(shape, dtype=TORCH_DTYPES[dtype_name])
                like_y = torch.empty(half, dtype=TORCH_DTYPES[dtype_name])
                what = f"{device} {dtype_name} interleaved={interleaved}"
                with infiniop.ClippedSwiglu.for_arrays(handle, like_y, like_x, None,
                                                       **attrs) as forward, \
                        infiniop.ClippedSwigluBackward.for_arrays(handle, like_x, like_y, like_x,
                                                                  None, **attrs) as backward:
                    results = []
                    for pointer, name in zip(junk.pointers, junk.names):
                        y = nan_tensor(half, dtype_name)
                        x_grad = nan_tensor(shape, dtype_name)
                        run_op(handle, forward, [y, x, None], 1, absent=pointer)
                        run_op(handle, backward, [x_grad, g, x, None], 1, absent=pointer)
                        check(y, x_grad, x.double(), g.double(), dim, SMALL_LIMIT, interleaved,
                              dtype_name, f"{what}, group_index pointer: {name}")
                        results.append((y, x_grad))
                for (y, x_grad), name in zip(results[1:], junk.names[1:]):
                    assert torch.equal(y.view(torch.uint8), results[0][0].view(torch.uint8)) \
                        and torch.equal(x_grad.view(torch.uint8),
                                        results[0][1].view(torch.uint8)), f"{what}: {name}"
        junk.assert_untouched()


@pytest.mark.parametrize("device", DEVICES)
def test_group_index_strided(device):
    """group_index is a tensor like any other: a strided one is read through its strides (a
    negative stride is read correctly or rejected with BAD_TENSOR_STRIDES, never misread)."""
    x = torch.randn(8, 6) * 4
    g = torch.randn(8, 3)
    expected_y = infiniop.clipped_swiglu(x, group_index=[1, 0, 3], **on(device))
    expected_grad = infiniop.clipped_swiglu_backward(g, x, group_index=[1, 0, 3], **on(device))
    assert (expected_y[4:] == 0).all() and (expected_y[:4] != 0).any()
    strided = np.array([1, 99, 0, 99, 3], np.int64)[::2]
    reversed_ = np.array([3, 0, 1], np.int64)[::-1]
    as_torch = torch.tensor([1, 99, 0, 99, 3])[::2]
    for counts in (strided, reversed_, as_torch):
        try:
            y = infiniop.clipped_swiglu(x, group_index=counts, **on(device))
        except InfiniopError as error:
            if counts is reversed_ and error.status == Status.BAD_TENSOR_STRIDES:
                continue
            raise
        assert torch.equal(y, expected_y)
        assert torch.equal(infiniop.clipped_swiglu_backward(g, x, group_index=counts,
                                                            **on(device)), expected_grad)


@pytest.mark.parametrize("device", DEVICES)
def test_group_index_rows_zeroed_in_place(device):
    """In-place backward (x_grad = x) with a group sum below pre: rows >= n become zero."""
    rng = rng_for("group-inplace")
    x = random_tensor(rng, (5, 8), "float32", 2.0)
    g = random_tensor(rng, (5, 4), "float32")
    x64, g64 = x.double(), g.double()
    counts = np.array([1, 2], dtype=np.int64)
    result = infiniop.clipped_swiglu_backward(g, x, group_index=counts, **on(device), out=x,
                                              **SMALL_LIMIT)
    assert result is x
    assert (x[3:] == 0).all()
    check(None, x, x64, g64, -1, SMALL_LIMIT, True, "float32", f"{device} in place", counts)


@pytest.mark.parametrize("device", DEVICES)
def test_group_sum_beyond_int64(device):
    """Only the sum matters and it is min(sum, pre): counts whose sum exceeds int64 still mean
    every row (a wrapping int64 accumulator would make the sum negative)."""
    x = torch.randn(4, 6)
    g = torch.randn(4, 3)
    counts = np.array([2 ** 62, 2 ** 62, 2 ** 62, 7], dtype=np.int64)
    full_y = infiniop.clipped_swiglu(x, **on(device))
    full_grad = infiniop.clipped_swiglu_backward(g, x, **on(device))
    assert torch.equal(infiniop.clipped_swiglu(x, group_index=counts, **on(device)), full_y)
    assert torch.equal(infiniop.clipped_swiglu_backward(g, x, group_index=counts, **on(device)),
                       full_grad)


# ----------------------------------------------------------------------------------------------
# Non-contiguous inputs and outputs, and in-place backward

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("dim", [-1, 0, 1])
@pytest.mark.parametrize("layouts", LAYOUT_CASES, ids=["-".join(c) for c in LAYOUT_CASES])
def test_layouts(device, dtype_name, dim, layouts):
    x_layout, g_layout, out_layout = layouts
    case = LAYOUT_CASES.index(layouts)
    interleaved = case % 2 == 0
    pre, _, _ = merged(LAYOUT_SHAPE, dim)
    counts = None if case % 3 else [pre // 2]  # a third of the cases drop rows (all if pre = 1)
    attrs = SMALL_LIMIT
    rng = rng_for("layouts", dtype_name, dim, layouts)
    x = make_input(rng, LAYOUT_SHAPE, dtype_name, x_layout, attrs["limit"])
    g = make_input(rng, halved(LAYOUT_SHAPE, dim), dtype_name, g_layout)
    x64, g64 = x.double(), g.double()  # copies, taken before the in-place call
    x_before = x.clone()
    kw = dict(dim=dim, interleaved=interleaved, group_index=counts, **on(device), **attrs)
    what = f"{device} {layouts}"

    if out_layout != "inplace":
        y, y_storage, y_mask = make_output(halved(LAYOUT_SHAPE, dim), dtype_name, out_layout)
        assert infiniop.clipped_swiglu(x, out=y, **kw) is y
        check(y, None, x64, g64, dim, attrs, interleaved, dtype_name, what, counts)
        assert_untouched_outside(y_storage, y_mask)
        assert torch.equal(x, x_before), "clipped_swiglu changed its input"
        out, storage, mask = make_output(LAYOUT_SHAPE, dtype_name, out_layout)
    else:
        out = x
    assert infiniop.clipped_swiglu_backward(g, x, out=out, **kw) is out
    check(None, out, x64, g64, dim, attrs, interleaved, dtype_name, what, counts)
    if out_layout != "inplace":
        assert_untouched_outside(storage, mask)
        assert torch.equal(x, x_before), "clipped_swiglu_backward changed x"


# ----------------------------------------------------------------------------------------------
# NumPy arrays (float32, float16): negative strides, Fortran order, in place

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(NUMPY_DTYPES))
@pytest.mark.parametrize("dim", [-1, 0])
@pytest.mark.parametrize("case", NUMPY_CASES)
def test_numpy(device, dtype_name, dim, case):
    attrs = SMALL_LIMIT
    interleaved = NUMPY_CASES.index(case) % 2 == 0
    rng = rng_for("numpy", dtype_name, dim, case)
    shape = (4, 6, 10)
    x, g, y_out, x_grad_out = numpy_case(case, rng, shape, dim, NUMPY_DTYPES[dtype_name],
                                         attrs["limit"])
    x64 = torch.from_numpy(np.array(x, dtype=np.float64))  # copies (and positive strides)
    g64 = torch.from_numpy(np.array(g, dtype=np.float64))
    counts = np.array([5, 7], dtype=np.int64) if dim == -1 else None  # 12 of 24 rows
    kw = dict(dim=dim, interleaved=interleaved, group_index=counts, **on(device), **attrs)

    y = infiniop.clipped_swiglu(x, out=y_out, **kw)
    assert y is y_out and y.dtype == NUMPY_DTYPES[dtype_name]
    check(torch.from_numpy(np.array(y)), None, x64, g64, dim, attrs, interleaved, dtype_name,
          f"{device} numpy {case}", counts)
    out = x if x_grad_out is None else x_grad_out
    x_grad = infiniop.clipped_swiglu_backward(g, x, out=out, **kw)
    assert x_grad is out
    check(None, torch.from_numpy(np.array(x_grad)), x64, g64, dim, attrs, interleaved,
          dtype_name, f"{device} numpy {case}", counts)


# ----------------------------------------------------------------------------------------------
# Special values, written by hand (F32)

def gate(a, alpha):
    return a / (1 + math.exp(-f32(alpha) * a))


def gate_slope(a, alpha):
    alpha = f32(alpha)
    s = 1 / (1 + math.exp(-alpha * a))
    return s * (1 + alpha * a * (1 - s))


@pytest.mark.parametrize("device", DEVICES)
def test_special_values(device):
    inf, nan = math.inf, math.nan
    alpha, limit, bias = 1.702, 2.0, 1.0
    # (A, B): y.  A is clipped from above only (-inf gives the gate's limit 0); B both ways.
    cases = [
        ((inf, 1.0), gate(limit, alpha) * (1 + bias)),
        ((-inf, 1.0), 0.0),
        ((-inf, inf), 0.0),  # B is clipped: 0 * (limit + bias)
        ((1.0, inf), gate(1.0, alpha) * (limit + bias)),
        ((1.0, -inf), gate(1.0, alpha) * (-limit + bias)),
        ((-1e4, 1.0), 0.0),  # the gate underflows: a tiny number of a's sign at most
        ((1e4, -1e4), gate(limit, alpha) * (-limit + bias)),
        ((nan, 1.0), nan),  # NaN passes through the clamps
        ((1.0, nan), nan),
        ((nan, inf), nan),
        ((-inf, nan), nan),
    ]
    x = torch.tensor([c[0] for c in cases])
    expected = torch.tensor([c[1] for c in cases])
    y = infiniop.clipped_swiglu(x, alpha=alpha, limit=limit, bias=bias, **on(device))[:, 0]
    assert torch.equal(y.isnan(), expected.isnan()), y
    keep = ~expected.isnan()
    # rtol 1e-5: the error model's F32 bound at these points (REL (1 + k), k <= 3.4).
    assert torch.allclose(y[keep], expected[keep], rtol=1e-5, atol=1e-30), y

    # Backward (y_grad = 2), away from NaN. M: a masked gradient, which must be exactly 0.
    M = None
    cases = [
        ((inf, 1.0), (M, 2 * gate(limit, alpha))),
        ((-inf, 1.0), (0.0, 0.0)),  # the limits of the gate's slope and of the gate
        ((1.0, inf), (2 * (limit + bias) * gate_slope(1.0, alpha), M)),
        ((1.0, -inf), (2 * (-limit + bias) * gate_slope(1.0, alpha), M)),
        ((-1e4, 1.0), (0.0, 0.0)),  # tiny numbers at most
        ((1e4, -1e4), (M, M)),
        ((limit, -limit), (2 * (-limit + bias) * gate_slope(limit, alpha),
                           2 * gate(limit, alpha))),  # inclusive boundaries
    ]
    x = torch.tensor([c[0] for c in cases])
    masked = torch.tensor([[v is M for v in c[1]] for c in cases])
    expected = torch.tensor([[0.0 if v is M else v for v in c[1]] for c in cases])
    g = torch.full((len(cases), 1), 2.0)
    x_grad = infiniop.clipped_swiglu_backward(g, x, alpha=alpha, limit=limit, bias=bias,
                                              **on(device))
    assert torch.allclose(x_grad, expected, rtol=1e-5, atol=1e-30), x_grad
    assert (x_grad[masked] == 0).all(), x_grad

    # No clipping (limit = +inf): infinities reach the product.
    cases = [
        ((inf, 1.0), inf),
        ((1.0, inf), inf),
        ((1.0, -inf), -inf),
        ((-inf, inf), nan),  # 0 * inf: the gate is driven to 0 by an infinite input
        ((inf, -1.0), nan),  # inf * (b + bias) = inf * 0
        ((inf, -3.0), -inf),
    ]
    x = torch.tensor([c[0] for c in cases])
    expected = torch.tensor([c[1] for c in cases])
    y = infiniop.clipped_swiglu(x, alpha=alpha, limit=inf, bias=bias, **on(device))[:, 0]
    assert torch.equal(y.isnan(), expected.isnan()), y
    keep = ~expected.isnan()
    assert torch.equal(y[keep], expected[keep]), y


# ----------------------------------------------------------------------------------------------
# Errors: status, name, message, and outputs left untouched

def expect_both_fail(status, x, dim=-1, y_shape=None, **kw):
    """Forward and backward (into sentinel outputs, and allocating) fail with status."""
    y_shape = halved(tuple(x.shape), dim) if y_shape is None else y_shape
    errors = [
        expect_failure(infiniop.clipped_swiglu, status, x, dim=dim, out=sentinel(*y_shape), **kw),
        expect_failure(infiniop.clipped_swiglu_backward, status, torch.randn(y_shape), x,
                       dim=dim, out=sentinel(*x.shape), **kw),
    ]
    expect_failure(infiniop.clipped_swiglu, status, x, dim=dim, **kw)
    return errors


@pytest.mark.parametrize("device", DEVICES)
def test_bad_dim(device):
    x = torch.randn(RANK4_SHAPE)
    for dim in (4, -5, 100, -(2 ** 63), 2 ** 63 - 1, 2 ** 40):
        for error in expect_both_fail(Status.BAD_PARAM, x, dim=dim, **on(device),
                                      y_shape=halved(RANK4_SHAPE, -1)):
            assert "dim" in error.message
    # A scalar has no dimension to split.
    for dim in (0, -1):
        expect_failure(infiniop.clipped_swiglu, Status.BAD_PARAM, torch.tensor(1.0), dim=dim,
                       **on(device), out=sentinel())
        expect_failure(infiniop.clipped_swiglu_backward, Status.BAD_PARAM, torch.tensor(1.0),
                       torch.tensor(1.0), dim=dim, **on(device), out=sentinel())


@pytest.mark.parametrize("device", DEVICES)
def test_odd_split(device):
    x = torch.randn(4, 5, 6)
    for dim in (1, -2):
        for interleaved in (True, False):
            for error in expect_both_fail(Status.BAD_TENSOR_SHAPE, x, dim=dim, **on(device),
                                          y_shape=(4, 2, 6), interleaved=interleaved):
                assert "even" in error.message
    # Even when the merged row (1 * 2 = 2) is even: the split dimension itself must be even.
    expect_failure(infiniop.clipped_swiglu, Status.BAD_TENSOR_SHAPE, torch.randn(4, 1, 2),
                   dim=1, **on(device), out=sentinel(4, 0, 2))


@pytest.mark.parametrize("device", DEVICES)
def test_wrong_shapes(device):
    x = torch.randn(4, 6)
    # y must be x's shape with dim halved: not x's shape, not the other dim halved, not the
    # merged [pre, L/2] view when that differs.
    for dim, y_shapes in ((-1, [(4, 6), (2, 6), (4, 2), (4, 3, 1), (12,)]),
                          (0, [(4, 3), (1, 12), (2, 3), (12,)])):
        for y_shape in y_shapes:
            expect_failure(infiniop.clipped_swiglu, Status.BAD_TENSOR_SHAPE, x, dim=dim,
                           **on(device), out=sentinel(*y_shape))
    # x_grad must be x's shape; y_grad x's shape with dim halved.
    for out_shape in ((4, 3), (2, 6), (6, 4), (4, 6, 1), (24,)):
        expect_failure(infiniop.clipped_swiglu_backward, Status.BAD_TENSOR_SHAPE,
                       torch.randn(4, 3), x, **on(device), out=sentinel(*out_shape))
    for g_shape in ((4, 6), (2, 6), (4, 3, 1), (3, 4), (12,)):
        expect_failure(infiniop.clipped_swiglu_backward, Status.BAD_TENSOR_SHAPE,
                       torch.randn(g_shape), x, **on(device), out=sentinel(4, 6))


@pytest.mark.parametrize("device", DEVICES)
def test_dtype_mismatch(device):
    x = torch.randn(4, 6)
    expect_failure(infiniop.clipped_swiglu, Status.BAD_TENSOR_DTYPE, x, **on(device),
                   out=sentinel(4, 3, dtype=torch.float16))
    expect_failure(infiniop.clipped_swiglu, Status.BAD_TENSOR_DTYPE, x.bfloat16(), **on(device),
                   out=sentinel(4, 3))
    expect_failure(infiniop.clipped_swiglu_backward, Status.BAD_TENSOR_DTYPE,
                   torch.randn(4, 3).half(), x, **on(device), out=sentinel(4, 6))
    expect_failure(infiniop.clipped_swiglu_backward, Status.BAD_TENSOR_DTYPE, torch.randn(4, 3),
                   x.half(), **on(device), out=sentinel(4, 6, dtype=torch.float16))
    expect_failure(infiniop.clipped_swiglu_backward, Status.BAD_TENSOR_DTYPE, torch.randn(4, 3),
                   x, **on(device), out=sentinel(4, 6, dtype=torch.bfloat16))
    out64 = np.full((4, 3), SENTINEL)
    with pytest.raises(InfiniopError) as info:
        infiniop.clipped_swiglu(np.ones((4, 6)), **on(device), out=out64)
    assert_infiniop_error(info.value, Status.BAD_TENSOR_DTYPE)
    assert (out64 == SENTINEL).all()


@pytest.mark.parametrize("device", DEVICES)
def test_bad_attributes(device):
    x = torch.randn(4, 6)
    inf, nan = math.inf, math.nan
    for limit in (0.0, -0.0, -1.0, -inf, nan, 1e-46):  # 1e-46 rounds to float32 0
        for error in expect_both_fail(Status.BAD_PARAM, x, limit=limit, **on(device)):
            assert "limit" in error.message
    for alpha in (inf, -inf, nan, 1e39):  # 1e39 rounds to float32 inf
        for error in expect_both_fail(Status.BAD_PARAM, x, alpha=alpha, **on(device)):
            assert "alpha" in error.message
    for bias in (inf, -inf, nan):
        for error in expect_both_fail(Status.BAD_PARAM, x, bias=bias, **on(device)):
            assert "bias" in error.message


@pytest.mark.parametrize("device", DEVICES)
def test_bad_group_index(device):
    x = torch.randn(4, 6)
    # Negative counts: BAD_PARAM, nothing written, even where the sum is still positive.
    for counts in ([-1], [3, -1], [5, -2, 10], [0, 0, -(2 ** 63)]):
        for form in ("numpy", "torch"):
            for error in expect_both_fail(Status.BAD_PARAM, x, **on(device),
                                          group_index=group_index_as(counts, form)):
                assert "group_index" in error.message
    # Not INT64.
    for group_index in (np.array([1, 2], np.int32), torch.tensor([1.0, 2.0]),
                        np.array([1, 2], np.uint64), torch.tensor([1, 2], dtype=torch.int16)):
        for error in expect_both_fail(Status.BAD_TENSOR_DTYPE, x, **on(device),
                                      group_index=group_index):
            assert "group_index" in error.message
    # Not 1-D.
    for group_index in (np.array([[1], [2]], np.int64), np.array(3, np.int64),
                        torch.ones(1, 1, 2, dtype=torch.int64)):
        for error in expect_both_fail(Status.BAD_TENSOR_SHAPE, x, **on(device),
                                      group_index=group_index):
            assert "group_index" in error.message


@pytest.mark.parametrize("device", DEVICES)
def test_output_overlapping_an_input(device):
    x = torch.randn(4, 6)
    before = x.clone()
    expect_failure(infiniop.clipped_swiglu, Status.BAD_TENSOR_STRIDES, x, **on(device),
                   out=x[:, :3])
    assert torch.equal(x, before)
    square = torch.randn(6, 6)
    before = square.clone()
    expect_failure(infiniop.clipped_swiglu_backward, Status.BAD_TENSOR_STRIDES,
                   torch.randn(6, 3), square, **on(device), out=square.t())
    assert torch.equal(square, before)
    g = torch.randn(8)
    expect_failure(infiniop.clipped_swiglu_backward, Status.BAD_TENSOR_STRIDES, g[:4],
                   torch.randn(8), **on(device), out=g)


def test_binding_argument_errors():
    x = torch.randn(4, 6)
    with pytest.raises(OverflowError):
        infiniop.clipped_swiglu(x, dim=2 ** 63)  # would wrap in ctypes
    with pytest.raises(TypeError):
        infiniop.clipped_swiglu(x, dim=1.0)
    with pytest.raises(TypeError):
        infiniop.clipped_swiglu(x, dim=True)
    with pytest.raises(TypeError):
        infiniop.clipped_swiglu(x, alpha="1.7")
    with pytest.raises(TypeError):
        infiniop.clipped_swiglu(x, limit=None)
    with pytest.raises(TypeError):
        infiniop.clipped_swiglu_backward(torch.randn(4, 3), x, interleaved=1)
    with pytest.raises(TypeError, match="one kind"):
        infiniop.clipped_swiglu_backward(np.ones((4, 3), np.float32), x)
    with pytest.raises(TypeError):
        infiniop.clipped_swiglu(x, out=np.ones((4, 3), np.float32))
    with pytest.raises(ValueError, match="read-only"):
        infiniop.clipped_swiglu(np.ones((4, 6), np.float32),
                                out=np.broadcast_to(np.ones(1, np.float32), (4, 3)))
    with pytest.raises(TypeError):
        infiniop.clipped_swiglu(x, group_index="3")
    # Any integer / real / bool types of NumPy are fine; group_index of either kind.
    y = infiniop.clipped_swiglu(x, dim=np.int64(0), alpha=np.float32(1.5), limit=np.float64(3),
                                bias=np.float16(0.5), interleaved=np.bool_(False),
                                group_index=torch.tensor([1]))
    assert y.shape == (2, 6)


# ----------------------------------------------------------------------------------------------
# Allocation, zero size, descriptor objects, explicit handles, staging

def test_output_allocation():
    x = torch.randn(6, 4, dtype=torch.float16).t()  # (4, 6), transposed
    y = infiniop.clipped_swiglu(x, dim=0)
    assert y.shape == (2, 6) and y.dtype == torch.float16 and y.is_contiguous()
    x_grad = infiniop.clipped_swiglu_backward(torch.randn(2, 6, dtype=torch.float16), x, dim=0)
    assert x_grad.shape == (4, 6) and x_grad.stride() == x.stride()  # allocated like x

    a = np.ones((3, 8), np.float32)
    y = infiniop.clipped_swiglu(a, group_index=[2])
    assert isinstance(y, np.ndarray) and y.shape == (3, 4) and y.dtype == np.float32
    assert (y[2] == 0).all() and (y[:2] != 0).all()
    x_grad = infiniop.clipped_swiglu_backward(y, a)
    assert isinstance(x_grad, np.ndarray) and x_grad.shape == (3, 8)


@pytest.mark.parametrize("device", DEVICES)
def test_zero_size(device):
    x = torch.empty(0, 4)
    assert infiniop.clipped_swiglu(x, **on(device)).shape == (0, 2)
    assert infiniop.clipped_swiglu(x, **on(device), group_index=[3]).shape == (0, 2)
    assert infiniop.clipped_swiglu_backward(torch.empty(0, 2), x, **on(device)).shape == (0, 4)
    x = torch.empty(3, 0)  # splitting a size-0 dimension: 0 is even
    assert infiniop.clipped_swiglu(x, **on(device)).shape == (3, 0)
    assert infiniop.clipped_swiglu_backward(torch.empty(3, 0), x, **on(device),
                                            group_index=[1]).shape == (3, 0)


def test_descriptor_objects():
    shape, half = (8, 10), (8, 5)
    attrs = dict(dim=1, alpha=1.25, limit=2.0, bias=0.5, interleaved=False)
    counts = np.array([3, 2], dtype=np.int64)
    with infiniop.Handle("cpu") as handle:
        descs = [infiniop.TensorDescriptor(s, None, DType.F32) for s in (half, shape)]
        group_desc = infiniop.TensorDescriptor((2,), None, DType.I64)
        forward = infiniop.ClippedSwiglu(handle, *descs, group_desc, **attrs)
        plain = infiniop.ClippedSwiglu(handle, *descs)  # no group_index, default attributes
        for desc in descs + [group_desc]:  # the operator descriptor copied what it needs
            desc.close()
        assert (forward.dim, forward.alpha, forward.limit, forward.bias, forward.interleaved) \
            == (1, 1.25, 2.0, 0.5, False)
        assert (plain.dim, plain.limit, plain.interleaved) == (-1, 7.0, True)
        bdescs = [infiniop.TensorDescriptor(s, None, DType.F32) for s in (shape, half, shape)]
        backward = infiniop.ClippedSwigluBackward(handle, *bdescs, None, **attrs)
        for desc in bdescs:
            desc.close()
        assert forward.workspace_size == 0 and backward.workspace_size == 0
        for seed in range(2):
            generator = torch.Generator().manual_seed(seed)
            x = torch.randn(shape, generator=generator) * 4
            g = torch.randn(half, generator=generator)
            y = torch.full(half, float("nan"))
            forward(y, x, counts)  # arrays
            assert torch.equal(y, infiniop.clipped_swiglu(x, group_index=counts, **attrs))
            y.fill_(float("nan"))
            forward(y.data_ptr(), x.data_ptr(), counts.ctypes.data, workspace=None,
                    workspace_size=0)  # pointers
            assert torch.equal(y, infiniop.clipped_swiglu(x, group_index=counts, **attrs))
            y.fill_(float("nan"))
            plain(y, x)  # the absent group_index left out
            assert torch.equal(y, infiniop.clipped_swiglu(x))
            plain(y, x, None)
            assert torch.equal(y, infiniop.clipped_swiglu(x))
            x_grad = torch.full(shape, float("nan"))
            backward(x_grad, g, x)
            assert torch.equal(x_grad, infiniop.clipped_swiglu_backward(g, x, **attrs))
        with pytest.raises(ValueError, match="does not match the descriptor"):
            forward(y, x, np.array([1, 2, 3], np.int64))
        with pytest.raises(ValueError, match="without group_index"):
            plain(y, x, counts)
        with pytest.raises(TypeError):
            forward(y)
        with pytest.raises(TypeError):
            infiniop.ClippedSwiglu(handle, descs[0])
        with pytest.raises(InfiniopError) as info:
            forward(None, x, counts)
        assert info.value.status == Status.NULL_POINTER
        y.fill_(SENTINEL)
        with pytest.raises(InfiniopError) as info:
            forward(y, x, None)  # the descriptor has a group_index: its pointer is required
        assert info.value.status == Status.NULL_POINTER
        assert (y == SENTINEL).all()
        forward.close()
        forward.close()  # idempotent
        with pytest.raises(ValueError, match="closed"):
            forward(y, x, counts)
        backward.close()
        plain.close()

        like_x, like_y = torch.empty(shape), torch.empty(half)
        with infiniop.ClippedSwigluBackward.for_arrays(handle, like_x, like_y, like_x, counts,
                                                       **attrs) as op:
            x_grad = torch.full(shape, float("nan"))
            op(x_grad, g, x, counts)
            assert torch.equal(x_grad, infiniop.clipped_swiglu_backward(g, x, group_index=counts,
                                                                        **attrs))
        with pytest.raises(InfiniopError) as info:
            infiniop.ClippedSwiglu.for_arrays(handle, like_y, like_x, dim=0)  # halved along 1
        assert info.value.status == Status.BAD_TENSOR_SHAPE


def test_explicit_handle_overrides_device():
    x = torch.randn(10, 8) * 4
    g = torch.randn(10, 4)
    with infiniop.Handle("cpu_reference") as handle:
        y = infiniop.clipped_swiglu(x, limit=2.0, group_index=[7], device="opencl",
                                    handle=handle)
        x_grad = infiniop.clipped_swiglu_backward(g, x, limit=2.0, device="opencl",
                                                  handle=handle)
        assert handle.is_open  # a handle given by the caller stays open
    assert torch.equal(y, infiniop.clipped_swiglu(x, limit=2.0, group_index=[7],
                                                  device="cpu_reference"))
    assert torch.equal(x_grad, infiniop.clipped_swiglu_backward(g, x, limit=2.0,
                                                                device="cpu_reference"))


@pytest.mark.parametrize("case", ["plain", "negative_strides", "inplace", "strided_out", "empty"])
def test_staging_matches_direct(case):
    """Staging through device memory (what non-host devices use), exercised on the cpu device,
    group_index included (an empty one is staged as NULL)."""
    def make():
        rng = np.random.default_rng(11)

        def data(shape):
            return (rng.standard_normal(shape) * 4).astype(np.float32)

        counts = np.array([2, 3], np.int64)
        if case == "plain":
            return data((6, 8)), data((6, 4)), np.full((6, 8), np.nan, np.float32), None, counts
        if case == "negative_strides":
            return (data((6, 8))[::-1], data((6, 8))[:, ::-2],
                    np.full((6, 8), np.nan, np.float32)[::-1, ::-1], None,
                    np.array([1, 99, 0, 99, 3], np.int64)[::2])
        if case == "inplace":
            x = data((6, 8))[::-1]
            return x, data((6, 4)), x, None, counts
        if case == "empty":
            return (data((6, 8)), data((6, 4)), np.full((6, 8), np.nan, np.float32), None,
                    np.zeros(0, np.int64))
        storage = np.full((6, 17), SENTINEL, np.float32)
        return data((6, 8)), data((6, 4)), storage[:, 1::2], storage, None

    results = []
    for stage in (False, True):
        x, g, out, storage, counts = make()
        kw = dict(limit=2.0, group_index=counts, _stage=stage)
        y = infiniop.clipped_swiglu(x, **kw)
        x_grad = infiniop.clipped_swiglu_backward(g, x, out=out, **kw)
        results.append((y, x_grad))
        if storage is not None:
            np.testing.assert_array_equal(storage[:, ::2], SENTINEL)
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
