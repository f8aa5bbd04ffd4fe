"""SwiGlu and SwiGluBackward through the Python binding, on both CPU devices.

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

import math
import zlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import infiniop
from infiniop import DType, InfiniopError, Status

DEVICES = ["cpu", "cpu_reference"]
TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
NUMPY_DTYPES = {"float32": np.float32, "float16": np.float16}
SENTINEL = 42.0  # fills bytes an output view does not cover, and outputs of failing calls

REL = 8 * 2.0 ** -23
EXP_FLOOR = 2.0 ** -125
F32_SUBNORMAL_ULP = 2.0 ** -149
# (mantissa bits, exponent of the smallest subnormal, smallest |value| that rounds to inf)
FORMATS = {
    "float32": (23, -149, (2.0 - 2.0 ** -24) * 2.0 ** 127),
    "float16": (10, -24, 65520.0),
    "bfloat16": (7, -133, (2.0 - 2.0 ** -8) * 2.0 ** 127),
}


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
    grad1 = (g64 * x2).abs() * (REL * (s + (xc * s * s_neg).abs()) + floor)
    grad2 = g64.abs() * (REL * silu_terms + floor)
    return y_bound, torch.cat([grad1, grad2], dim)


def ulp_of(values, dtype_name):
    """One ulp of the output type at |values|, never below its smallest subnormal."""
    mantissa_bits, min_exponent, _ = FORMATS[dtype_name]
    values = np.abs(values)
    with np.errstate(all="ignore"):
        _, exponent = np.frexp(values)  # |v| = m 2^exponent, m in [0.5, 1)
        ulp = np.ldexp(1.0, exponent - 1 - mantissa_bits)
    ulp = np.where(np.isfinite(values) & (values != 0), ulp, 0.0)
    return np.maximum(ulp, 2.0 ** min_exponent)


def assert_matches(got, truth, f32_bound, dtype_name, what, inputs=None):
    """got (any dtype), truth and f32_bound (float64): elementwise within the error model.
    inputs: optional {name: float64 array of got's shape} printed for failing elements."""
    got = got.double().numpy().reshape(-1)
    truth = truth.numpy().reshape(-1)
    bound = f32_bound.numpy().reshape(-1)
    if dtype_name == "float32":
        bound = bound + F32_SUBNORMAL_ULP
    else:
        bound = bound + ulp_of(truth, dtype_name)
    overflow_at = FORMATS[dtype_name][2]
    with np.errstate(all="ignore"):
        expected = np.where(np.abs(truth) >= overflow_at, np.sign(truth) * np.inf, truth)
        error = np.abs(got - expected)
    nan_expected, inf_expected = np.isnan(expected), np.isinf(expected)
    finite = ~nan_expected & ~inf_expected
    bad = nan_expected != np.isnan(got)
    bad |= inf_expected & (got != expected)
    bad |= finite & ~(error <= bound)  # a NaN or infinite result fails this too
    if bad.any():
        indices = np.flatnonzero(bad)
        with np.errstate(all="ignore"):
            ratio = np.nan_to_num(error[indices] / bound[indices], nan=np.inf)
        lines = []
        for i in indices[np.argsort(-ratio)][:10]:
            context = "".join(f" {k}={v.reshape(-1)[i]!r}" for k, v in (inputs or {}).items())
            lines.append(f"  [{i}]{context} got={got[i]!r} truth={truth[i]!r} "
                         f"allowed={bound[i]:.3g}")
        pytest.fail(f"{what}: {bad.sum()} of {bad.size} elements wrong ({dtype_name}):\n"
                    + "\n".join(lines))


def check_forward(y, x64, dim, dtype_name, what):
    truth, _ = torch_oracle(x64, None, dim)
    y_bound, _ = error_bounds(x64, None, dim, dtype_name)
    assert_matches(y, truth, y_bound, dtype_name, what)


def check_backward(x_grad, g64, x64, dim, dtype_name, what):
    _, truth = torch_oracle(x64, g64, dim)
    _, bound = error_bounds(x64, g64, dim, dtype_name)
    assert_matches(x_grad, truth, bound, dtype_name, what)


# ----------------------------------------------------------------------------------------------
# Inputs and layouts

def rng_for(*key):
    """A generator seeded by the test's parameters: reproducible, different per case."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def random_values(rng, shape):
    """Signed values spanning [-10, 10], about 15% of them near zero (|v| ~ 1e-3)."""
    n = math.prod(shape)
    values = rng.uniform(-10.0, 10.0, n)
    near_zero = rng.random(n) < 0.15
    values[near_zero] = rng.standard_normal(int(near_zero.sum())) * 1e-3
    return values.reshape(shape)


def random_tensor(rng, shape, dtype_name):
    return torch.from_numpy(random_values(rng, shape)).to(TORCH_DTYPES[dtype_name])


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
    "broadcast": (lambda s: tuple(1 if d % 2 == 0 else n for d, n in enumerate(s)),
                  None),
}


def make_input(rng, shape, dtype_name, layout):
    storage_shape, view = LAYOUTS[layout]
    storage = random_tensor(rng, storage_shape(shape), dtype_name)
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
    result = infiniop.swiglu(x, dim=dim, device=device, out=out)
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
    result = infiniop.swiglu_backward(g, x, dim=dim, device=device, out=out)
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
    y = infiniop.swiglu(x, dim=dim, device=device,
                        out=torch.full(halved(shape, dim), float("nan"), dtype=dtype))
    check_forward(y, x64, dim, dtype_name, f"{device} swiglu {shape} dim={dim}")
    x_grad = infiniop.swiglu_backward(g, x, dim=dim, device=device,
                                      out=torch.full(shape, float("nan"), dtype=dtype))
    check_backward(x_grad, g64, x64, dim, dtype_name, f"{device} swiglu_backward {shape} dim={dim}")


# ----------------------------------------------------------------------------------------------
# Non-contiguous inputs and outputs, and in-place backward

LAYOUT_SHAPE = (6, 10, 14)
LAYOUT_DIMS = [-1, 0, 1]
# (x layout, y_grad layout, out layout); out "inplace" is backward only: out=x.
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
        assert infiniop.swiglu(x, dim=dim, device=device, out=y) is y
        check_forward(y, x64, dim, dtype_name, f"{device} swiglu {layouts} dim={dim}")
        assert_untouched_outside(y_storage, y_mask)
        assert torch.equal(x, x_before), "swiglu changed its input"

        out, storage, mask = make_output(LAYOUT_SHAPE, dtype_name, out_layout)
    else:
        out = x
    result = infiniop.swiglu_backward(g, x, dim=dim, device=device, out=out)
    assert result is out
    check_backward(result, g64, x64, dim, dtype_name,
                   f"{device} swiglu_backward {layouts} dim={dim}")
    if out_layout != "inplace":
        assert_untouched_outside(storage, mask)
        assert torch.equal(x, x_before), "swiglu_backward changed x"


# ----------------------------------------------------------------------------------------------
# NumPy arrays: negative strides, Fortran order, in-place through negative strides

NUMPY_CASES = ["contiguous", "reversed", "negative_strided", "fortran_out", "inplace_reversed"]


def numpy_case(case, rng, shape, dim, dtype):
    """(x, y_grad, y_out, x_grad_out): out None means in place (out=x) for the backward."""
    def data(s):
        return random_values(rng, s).astype(dtype)

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

    y = infiniop.swiglu(x, dim=dim, device=device, out=y_out)
    assert y is y_out and y.dtype == NUMPY_DTYPES[dtype_name]
    check_forward(torch.from_numpy(np.array(y)), x64, dim, dtype_name,
                  f"{device} numpy swiglu {case} dim={dim}")

    out = x if x_grad_out is None else x_grad_out
    x_grad = infiniop.swiglu_backward(g, x, dim=dim, device=device, out=out)
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
    infiniop.swiglu(x, dim=1, device=device, out=y)
    infiniop.swiglu_backward(g, x, dim=1, device=device, out=x_grad)

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
    y = infiniop.swiglu(x, device=device)[:, 0]
    expected = torch.tensor([0.0, nan, inf, nan, -inf, 0.0])
    assert torch.equal(y.isnan(), expected.isnan()), y
    assert torch.allclose(y[~y.isnan()], expected[~expected.isnan()], rtol=0, atol=1e-30), y

    g = torch.tensor([[2.0], [inf], [2.0], [2.0], [inf], [1.0]])
    x_grad = infiniop.swiglu_backward(g, x, device=device)
    # x_grad1 = g x2 silu'(x1), x_grad2 = g silu(x1)
    expected = torch.tensor([[0.0, 0.0], [nan, nan], [4.0, inf], [0.0, inf], [-inf, -inf],
                             [0.0, 0.0]])
    assert torch.equal(x_grad.isnan(), expected.isnan()), x_grad
    keep = ~expected.isnan()
    assert torch.allclose(x_grad[keep], expected[keep], rtol=1e-6, atol=1e-30), x_grad


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


def sentinel(*shape, dtype=torch.float32):
    return torch.full(shape, SENTINEL, dtype=dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_bad_dim(device):
    x = torch.randn(RANK4_SHAPE)
    for dim in (4, -5, 100, -(2 ** 31), 2 ** 31 - 1):
        error = expect_failure(infiniop.swiglu, Status.BAD_PARAM, x, dim=dim, device=device,
                               out=sentinel(*halved(RANK4_SHAPE, -1)))
        assert "dim" in error.message
        expect_failure(infiniop.swiglu, Status.BAD_PARAM, x, dim=dim, device=device)
        expect_failure(infiniop.swiglu_backward, Status.BAD_PARAM,
                       torch.randn(halved(RANK4_SHAPE, -1)), x, dim=dim, device=device,
                       out=sentinel(*RANK4_SHAPE))
    # A scalar has no dimension to split.
    for dim in (0, -1):
        expect_failure(infiniop.swiglu, Status.BAD_PARAM, torch.tensor(1.0), dim=dim,
                       device=device, out=sentinel())
        expect_failure(infiniop.swiglu_backward, Status.BAD_PARAM, torch.tensor(1.0),
                       torch.tensor(1.0), dim=dim, device=device, out=sentinel())


@pytest.mark.parametrize("device", DEVICES)
def test_odd_split(device):
    x = torch.randn(4, 5, 6)
    for dim in (1, -2):
        error = expect_failure(infiniop.swiglu, Status.BAD_TENSOR_SHAPE, x, dim=dim,
                               device=device, out=sentinel(4, 2, 6))
        assert "even" in error.message
        expect_failure(infiniop.swiglu, Status.BAD_TENSOR_SHAPE, x, dim=dim, device=device)
        expect_failure(infiniop.swiglu_backward, Status.BAD_TENSOR_SHAPE, torch.randn(4, 2, 6),
                       x, dim=dim, device=device, out=sentinel(4, 5, 6))
        expect_failure(infiniop.swiglu_backward, Status.BAD_TENSOR_SHAPE, torch.randn(4, 2, 6),
                       x, dim=dim, device=device)
    expect_failure(infiniop.swiglu, Status.BAD_TENSOR_SHAPE, torch.randn(1), dim=0,
                   device=device, out=sentinel(0))


@pytest.mark.parametrize("device", DEVICES)
def test_wrong_shapes(device):
    x = torch.randn(4, 6)
    # y must be x's shape with dim halved: not x's shape, not the other dim halved.
    for out_shape in ((4, 6), (2, 6), (4, 2), (4, 3, 1), (3,)):
        expect_failure(infiniop.swiglu, Status.BAD_TENSOR_SHAPE, x, dim=-1, device=device,
                       out=sentinel(*out_shape))
    # x_grad must be x's shape; y_grad x's shape with dim halved.
    for out_shape in ((4, 3), (2, 6), (6, 4), (4, 6, 1)):
        expect_failure(infiniop.swiglu_backward, Status.BAD_TENSOR_SHAPE, torch.randn(4, 3), x,
                       dim=-1, device=device, out=sentinel(*out_shape))
    for g_shape in ((4, 6), (2, 6), (4, 3, 1), (3, 4)):
        expect_failure(infiniop.swiglu_backward, Status.BAD_TENSOR_SHAPE, torch.randn(g_shape),
                       x, dim=-1, device=device, out=sentinel(4, 6))


@pytest.mark.parametrize("device", DEVICES)
def test_dtype_mismatch(device):
    x = torch.randn(4, 6)
    expect_failure(infiniop.swiglu, Status.BAD_TENSOR_DTYPE, x, device=device,
                   out=sentinel(4, 3, dtype=torch.float16))
    expect_failure(infiniop.swiglu, Status.BAD_TENSOR_DTYPE, x.bfloat16(), device=device,
                   out=sentinel(4, 3))
    expect_failure(infiniop.swiglu_backward, Status.BAD_TENSOR_DTYPE, torch.randn(4, 3).half(),
                   x, device=device, out=sentinel(4, 6))
    expect_failure(infiniop.swiglu_backward, Status.BAD_TENSOR_DTYPE, torch.randn(4, 3),
                   x.half(), device=device, out=sentinel(4, 6, dtype=torch.float16))
    expect_failure(infiniop.swiglu_backward, Status.BAD_TENSOR_DTYPE, torch.randn(4, 3), x,
                   device=device, out=sentinel(4, 6, dtype=torch.bfloat16))
    # float64 is described faithfully and rejected by the library, not by the binding
    out64 = np.full((4, 3), SENTINEL)
    with pytest.raises(InfiniopError) as info:
        infiniop.swiglu(np.ones((4, 6)), device=device, out=out64)
    assert_infiniop_error(info.value, Status.BAD_TENSOR_DTYPE)
    assert (out64 == SENTINEL).all()


@pytest.mark.parametrize("device", DEVICES)
def test_output_overlapping_an_input(device):
    # y is x's first half: the same bytes, not the same layout.
    x = torch.randn(4, 6)
    before = x.clone()
    expect_failure(infiniop.swiglu, Status.BAD_TENSOR_STRIDES, x, device=device, out=x[:, :3])
    assert torch.equal(x, before)
    # x_grad on x's memory but transposed, or shifted by one element.
    square = torch.randn(6, 6)
    before = square.clone()
    expect_failure(infiniop.swiglu_backward, Status.BAD_TENSOR_STRIDES, torch.randn(6, 3),
                   square, device=device, out=square.t())
    storage = torch.randn(13)
    expect_failure(infiniop.swiglu_backward, Status.BAD_TENSOR_STRIDES, torch.randn(6),
                   storage[:12], device=device, out=storage[1:])
    assert torch.equal(square, before)
    # x_grad on y_grad's memory (y_grad can never be an exact alias: it is half the size).
    g = torch.randn(8)
    expect_failure(infiniop.swiglu_backward, Status.BAD_TENSOR_STRIDES, g[:4], torch.randn(8),
                   device=device, out=g)


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
    assert infiniop.swiglu(x, device=device).shape == (0, 2)
    assert infiniop.swiglu_backward(torch.empty(0, 2), x, device=device).shape == (0, 4)
    x = torch.empty(3, 0)  # splitting a size-0 dimension: 0 is even
    assert infiniop.swiglu(x, device=device).shape == (3, 0)


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


@pytest.mark.parametrize("case", ["plain", "negative_strides", "inplace", "strided_out"])
def test_staging_matches_direct(case):
    """Staging through device memory (what non-host devices use), exercised on the cpu device."""
    def make():
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

    results = []
    for stage in (False, True):
        x, g, out, storage = make()
        y = infiniop.swiglu(x, _stage=stage)
        x_grad = infiniop.swiglu_backward(g, x, out=out, _stage=stage)
        results.append((y, x_grad))
        if storage is not None:
            np.testing.assert_array_equal(storage[:, ::2], SENTINEL)
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
