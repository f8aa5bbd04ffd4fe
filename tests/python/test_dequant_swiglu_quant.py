# SPDX-License-Identifier: Apache-2.0
"""DequantSwigluQuant from Python (docs/dequant_swiglu_quant.md): infiniop.dequant_swiglu_quant,
infiniop.torch's function and torch.ops op, and npu_dequant_swiglu_quant, bit for bit against a
float64 oracle written from the definition (not calling the library):

    d = ((x + bias_i) * w) * s_a (+ bias_f) in float64, each torch float64 operation one
        rounding in the contract's order (x + bias_i exact: int64 then float64);
    then test_gated_quant.py's oracle on d (silu(d1) * d2 * m, the limits of its far-left tail,
    the dynamic or static scale, the INT8 bytes and its own e4m3fn table: not torch's float64 ->
    float8 conversion, which rounds twice), rows past group_index's counts 0.

The y bytes and the scale bits are compared exactly, outputs poisoned, on every device: INT32
accumulators up to +-(2^31 - 1) and INT32_MIN, weight and activation scales of many magnitudes,
every bias dtype, per-expert weight_scale / bias / smooth scales with group_index, INT8 and FP8,
groups, UE8M0, static scales, NaN and infinities through the float scales, strided x; the
torch.ops op under torch.compile and opcheck (its fake kernel); the npu alias's modes and
refusals; the library's errors.
"""

import pytest
import torch

import infiniop
import infiniop.torch as iop
from infiniop import Status
from infiniop.torch import _ops

from helpers import DEVICES, expect_error, on, same_bits
from test_gated_quant import (COMPILABLE, QMAX, as_bytes, oracle, poisoned, seeded, y_dtype)

I32_MAX, I32_MIN = 2 ** 31 - 1, -2 ** 31
SCALE_POISON = -1234.5
BIAS_DTYPES = {"none": None, "float32": torch.float32, "float16": torch.float16,
               "bfloat16": torch.bfloat16, "int32": torch.int32}


def experts_of(rows, group_index):
    """Each row's expert (0 past the counts' sum, whose outputs the oracle zeroes)."""
    if group_index is None:
        return torch.zeros(rows, dtype=torch.int64)
    expert = [e for e, count in enumerate(group_index.tolist()) for _ in range(count)]
    return torch.tensor(expert + [0] * (rows - len(expert)), dtype=torch.int64)


def per_row(t, expert, rows):
    """A (2H) tensor broadcast to every row, or an (E, 2H) one's row per expert, as float64 /
    int64 (rows, 2H)."""
    wide = t.to(torch.int64 if t.dtype == torch.int32 else torch.float64)
    return wide[expert] if t.dim() == 2 else wide.expand(rows, -1)


def dequant(x, weight_scale=None, activation_scale=None, bias=None, group_index=None):
    """d (..., 2H) float64 from the definition."""
    lead, width = tuple(x.shape[:-1]), x.shape[-1]
    rows = x.numel() // width if width else 0
    expert = experts_of(rows, group_index)
    acc = x.reshape(rows, width).to(torch.int64)
    if bias is not None and bias.dtype == torch.int32:
        acc = acc + per_row(bias, expert, rows)  # exact in int64
    d = acc.double()
    if weight_scale is not None:
        d = d * per_row(weight_scale, expert, rows)
    if activation_scale is not None:
        d = d * activation_scale.double().reshape(rows, 1)
    if bias is not None and bias.dtype != torch.int32:
        d = d + per_row(bias, expert, rows)
    return d.reshape(*lead, width)


def run_checked(device, x, qdtype, group_size=0, scale=None, scale_format="f32",
                weight_scale=None, activation_scale=None, bias=None, smooth=None,
                group_index=None, activate_left=True):
    """Runs the library with poisoned outputs and checks y's bytes and the scale's bits against
    the oracle; returns (y, scale)."""
    half = x.shape[-1] // 2
    lead = tuple(x.shape[:-1])
    groups = half // group_size if group_size > 0 else 1
    out = poisoned(lead + (half,), qdtype)
    scale_out = None if scale is not None else torch.full(lead + (groups,), SCALE_POISON)
    y, s = infiniop.dequant_swiglu_quant(
        x, weight_scale=weight_scale, activation_scale=activation_scale, bias=bias,
        dtype=qdtype if qdtype == "fp8" else torch.int8, group_size=group_size, scale=scale,
        scale_format=scale_format, smooth_scales=smooth, group_index=group_index,
        activate_left=activate_left, out=out, scale_out=scale_out, **on(device))
    assert y is out and y.dtype == y_dtype(qdtype)
    d = dequant(x, weight_scale, activation_scale, bias, group_index)
    want_y, want_s = oracle(d, "swiglu", qdtype, group_size, scale, scale_format, smooth,
                            group_index, activate_left)
    if group_index is not None and smooth is None:  # the oracle routes by smooth's rows only
        routed = int(group_index.sum())
        want_y.view(-1, half)[routed:] = 0
        if scale is None:
            want_s.view(-1, groups)[routed:] = 0.0
    got = as_bytes(y)
    if not torch.equal(got, want_y):
        bad = (got != want_y).nonzero()[:8].tolist()
        pytest.fail(f"y bytes differ at {bad}: got {[got[tuple(i)].item() for i in bad]}, "
                    f"want {[want_y[tuple(i)].item() for i in bad]}")
    if scale is None:
        assert s is scale_out and same_bits(s, want_s), (s, want_s)
    else:
        assert s is scale
    return y, s


def accumulators(g, shape, bound=I32_MAX):
    """Signed int32 values of every magnitude up to bound, with 0, +-1 and the ends."""
    bits = torch.randint(0, 32, shape, generator=g)
    magnitude = (torch.rand(shape, generator=g, dtype=torch.float64)
                 * torch.pow(2.0, bits.double())).floor().clamp(max=bound)
    sign = torch.where(torch.rand(shape, generator=g) < 0.5, -1.0, 1.0).double()
    x = (sign * magnitude).to(torch.int64)
    flat = x.view(-1)
    flat[::17] = bound
    flat[5::19] = -bound
    flat[7::23] = I32_MIN if bound == I32_MAX else -bound
    flat[3::29] = 0
    return x.to(torch.int32)


def bias_of(g, dtype, shape, magnitude):
    if dtype == torch.int32:
        return accumulators(g, shape)
    return ((torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1) * magnitude).to(dtype)


# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_order_by_hand(device):
    """The contract's order: a float bias after the scales, an INT32 bias on the accumulator.
    x = (40, 3), weight_scale (1, 2), bias 1 on the second column: float 3 * 2 + 1 = 7, INT32
    (3 + 1) * 2 = 8; z = silu(40) d2 = 40 d2 (1 - 4e-18) over the static scale 4: 70 or 80."""
    x = torch.tensor([[40, 3]], dtype=torch.int32)
    w = torch.tensor([1.0, 2.0])
    for bias, want in ((torch.tensor([0.0, 1.0]), 70), (torch.tensor([0, 1], dtype=torch.int32),
                                                        80),
                       (torch.tensor([0.0, 1.0], dtype=torch.bfloat16), 70)):
        y, _ = run_checked(device, x, "int8", scale=torch.tensor([[4.0]]), weight_scale=w,
                           bias=bias)
        assert y.item() == want
    # activation_scale 0.5, a float bias 0.25: d = (20, 3.25), z = 65 (1 - 2e-9) -> 65; the
    # right gate (activate_left False): d1 silu(d2) = 20 silu(3.25) = 62.57... -> 63.
    a = torch.tensor([0.5])
    y, _ = run_checked(device, x, "int8", scale=torch.tensor([[1.0]]), weight_scale=w,
                       activation_scale=a, bias=torch.tensor([0.0, 0.25]))
    assert y.item() == 65
    y, _ = run_checked(device, x, "int8", scale=torch.tensor([[1.0]]), weight_scale=w,
                       activation_scale=a, bias=torch.tensor([0.0, 0.25]), activate_left=False)
    assert y.item() == 63


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("qdtype", ["int8", "fp8"])
@pytest.mark.parametrize("bias_dtype", list(BIAS_DTYPES))
@pytest.mark.parametrize("group_size", [0, 2, 128])
def test_dynamic_random(device, qdtype, bias_dtype, group_size):
    g = seeded("dequant", qdtype, bias_dtype, group_size)
    rows, width = 6, 512
    for w_mag, a_mag in ((1.0, 1.0), (1e-7, 1e-2), (3e-4, 0.5), (2.0, 3e4), (1e-30, 1e-8)):
        x = accumulators(g, (rows, width))
        w = (torch.rand(width, generator=g) * 2 - 1) * w_mag
        a = (torch.rand(rows, 1, generator=g) + 0.1) * a_mag
        bias = (None if BIAS_DTYPES[bias_dtype] is None
                else bias_of(g, BIAS_DTYPES[bias_dtype], (width,), 1e4 * w_mag * a_mag))
        for activate_left in (True, False):
            run_checked(device, x, qdtype, group_size, weight_scale=w, activation_scale=a,
                        bias=bias, activate_left=activate_left)
    run_checked(device, x, qdtype, group_size, scale_format="ue8m0", weight_scale=w,
                activation_scale=a[:, 0], bias=bias)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("qdtype", ["int8", "fp8"])
def test_static_scales(device, qdtype):
    g = seeded("dequant static", qdtype)
    x = accumulators(g, (5, 256), bound=1 << 12)
    w = torch.rand(256, generator=g) * 1e-2
    a = torch.rand(5, generator=g) + 0.5
    per_group = torch.rand(5, 64 * 2, generator=g)[:, ::2] * 0.1 + 1e-3  # (5, 64), strided
    run_checked(device, x, qdtype, 2, scale=per_group, weight_scale=w, activation_scale=a)
    run_checked(device, x, qdtype, 0, scale=torch.tensor(0.05).expand(5, 1), weight_scale=w,
                activation_scale=a, bias=torch.arange(256, dtype=torch.int32) - 128)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("qdtype", ["int8", "fp8"])
@pytest.mark.parametrize("bias_dtype", ["float32", "int32"])
def test_per_expert(device, qdtype, bias_dtype):
    """weight_scale, bias (E, 2H) and smooth scales (E, H) chosen by group_index's counts; rows
    past their sum 0; group_index choosing weight_scale rows alone (no smooth scales)."""
    g = seeded("dequant experts", qdtype, bias_dtype)
    rows, half, experts = 9, 16, 3
    x = accumulators(g, (rows, 2 * half), bound=1 << 16)
    w = torch.rand(experts, 2 * half, generator=g) * 1e-3
    a = torch.rand(rows, 1, generator=g) + 0.05
    bias = bias_of(g, BIAS_DTYPES[bias_dtype], (experts, 2 * half), 3.0)
    smooth = torch.rand(experts, half, generator=g) * 2 - 1
    for counts in ([2, 0, 4], [3, 3, 3], [0, 0, 0]):
        gi = torch.tensor(counts, dtype=torch.int64)
        for group_size in (0, 4):
            run_checked(device, x, qdtype, group_size, weight_scale=w, activation_scale=a,
                        bias=bias, smooth=smooth, group_index=gi)
        run_checked(device, x, qdtype, weight_scale=w, activation_scale=a, group_index=gi,
                    activate_left=False)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("qdtype", ["int8", "fp8"])
def test_nan_and_infinities(device, qdtype):
    g = seeded("dequant nan", qdtype)
    x = accumulators(g, (6, 8), bound=1000)
    x[0, 2] = 0  # 0 * inf = NaN
    w = torch.linspace(0.01, 0.08, 8)
    w[2], w[5] = float("inf"), float("nan")
    a = torch.full((6,), 0.5)
    a[1], a[3], a[4] = float("inf"), float("-inf"), float("nan")
    bias = torch.full((8,), 0.25)
    bias[6], bias[7] = float("-inf"), float("inf")
    for group_size in (0, 2):
        run_checked(device, x, qdtype, group_size, weight_scale=w, activation_scale=a, bias=bias)
        run_checked(device, x, qdtype, group_size, weight_scale=w, activation_scale=a)
    # huge values: 2^31 3e38 and a far-left gate (silu -0) over static 0, inf, NaN, -2
    big = torch.tensor([[I32_MIN, I32_MAX, I32_MAX, -3], [-800, 1, 5, 7]], dtype=torch.int32)
    wb = torch.tensor([3e38, 1.0, 3e38, 1.0])
    for value in (0.0, float("inf"), float("nan"), -2.0):
        run_checked(device, big, qdtype, scale=torch.full((2, 1), value), weight_scale=wb)


@pytest.mark.parametrize("device", DEVICES)
def test_strides_and_ranks(device):
    g = seeded("dequant strides")
    base = accumulators(g, (7, 80), bound=5000)
    x = base[:, :32]  # row stride 80
    w = (torch.rand(64, generator=g) * 0.02 - 0.01)[::2]  # stride 2
    a = torch.rand(7, 3, generator=g)[:, :1] + 0.1  # (7, 1), row stride 3
    run_checked(device, x, "fp8", 4, weight_scale=w, activation_scale=a,
                bias=torch.rand(32, generator=g).to(torch.bfloat16).flip(0))
    run_checked(device, base.t()[:32].t(), "int8", weight_scale=w)  # column-major x
    x3 = accumulators(g, (2, 3, 16), bound=100)
    run_checked(device, x3, "int8", 8, activation_scale=torch.rand(2, 3, generator=g))
    run_checked(device, accumulators(g, (16,), bound=50), "fp8",
                activation_scale=torch.tensor(0.25))


@pytest.mark.parametrize("device", DEVICES)
def test_errors(device):
    x = torch.zeros(4, 16, dtype=torch.int32)
    expect_error(Status.BAD_TENSOR_DTYPE, infiniop.dequant_swiglu_quant, x.float(), **on(device))
    expect_error(Status.BAD_TENSOR_SHAPE, infiniop.dequant_swiglu_quant, x,
                 weight_scale=torch.ones(8), **on(device))
    expect_error(Status.BAD_TENSOR_DTYPE, infiniop.dequant_swiglu_quant, x,
                 bias=torch.ones(16, dtype=torch.int8), **on(device))
    expect_error(Status.BAD_PARAM, infiniop.dequant_swiglu_quant, x,
                 group_index=torch.tensor([2, 2]), **on(device))  # chooses nothing
    expect_error(Status.BAD_PARAM, infiniop.dequant_swiglu_quant, x,
                 weight_scale=torch.ones(2, 16), group_index=torch.tensor([3, 2]), **on(device))


# ----------------------------------------------------------------------------------------------
# infiniop.torch, torch.ops and the npu alias

@pytest.mark.parametrize("device", DEVICES)
def test_npu_dequant_swiglu_quant(device):
    """torch_npu's signature and defaults: activate_left False, quant_mode 0 (static: CANN's
    y = round(z * quant_scale), the library's static scale 1), 1 dynamic; (1, 2H) / (1, H)
    tensors of one group shared; group_index counts; scale (TokensNum); quant_offset refused."""
    g = seeded("npu dequant")
    x = accumulators(g, (6, 32), bound=1 << 14)
    w = torch.rand(1, 32, generator=g) * 1e-3
    a = torch.rand(6, generator=g) + 0.5
    qs = torch.rand(1, 16, generator=g) + 0.5
    d = dequant(x, w[0], a)
    for mode in (0, 1):
        y, s = iop.npu_dequant_swiglu_quant(x, weight_scale=w, activation_scale=a, quant_scale=qs,
                                            quant_mode=mode, **on(device))
        static = torch.ones(6, 1) if mode == 0 else None
        want_y, want_s = oracle(d, "swiglu", "int8", 0, static, smooth=qs[0],
                                activate_left=False)
        assert torch.equal(as_bytes(y), want_y) and y.dtype == torch.int8
        assert s.shape == (6,) and same_bits(s, want_s[:, 0])
    # per-group: weight_scale (E, 2H), quant_scale (E, H), counts with rows past the sum
    we, qe = torch.rand(3, 32, generator=g) * 1e-3, torch.rand(3, 16, generator=g)
    gi = torch.tensor([2, 0, 3], dtype=torch.int32)
    y, s = iop.npu_dequant_swiglu_quant(x, weight_scale=we, activation_scale=a, quant_scale=qe,
                                        group_index=gi, quant_mode=1, **on(device))
    want_y, want_s = oracle(dequant(x, we, a, group_index=gi.long()), "swiglu", "int8", 0,
                            smooth=qe, group_index=gi.long(), activate_left=False)
    assert torch.equal(as_bytes(y), want_y) and same_bits(s, want_s[:, 0])
    with pytest.raises(NotImplementedError, match="quant_offset"):
        iop.npu_dequant_swiglu_quant(x, quant_offset=torch.zeros(16))
    with pytest.raises(ValueError, match="quant_mode"):
        iop.npu_dequant_swiglu_quant(x, quant_mode=2)


@pytest.mark.parametrize("device", DEVICES)
def test_torch_function(device):
    g = seeded("torch dequant")
    x = accumulators(g, (4, 64), bound=1 << 10)
    w = torch.rand(64, generator=g) * 1e-2
    y, s = iop.dequant_swiglu_quant(x, weight_scale=w, dtype="fp8", group_size=8, device=device)
    want_y, want_s = oracle(dequant(x, w), "swiglu", "fp8", 8)
    assert torch.equal(as_bytes(y), want_y) and same_bits(s, want_s)
    static = torch.tensor(0.5).expand(4, 1)
    y, s = iop.dequant_swiglu_quant(x, weight_scale=w, scale=static, device=device)
    assert s is static and torch.equal(as_bytes(y), oracle(dequant(x, w), "swiglu", "int8", 0,
                                                           static)[0])


@COMPILABLE
@pytest.mark.parametrize("device", DEVICES)
def test_compiles_fullgraph_with_eager_bits(device):
    torch._dynamo.reset()
    g = seeded("compile dequant")
    x = accumulators(g, (8, 256), bound=1 << 16)
    w, a = torch.rand(256, generator=g) * 1e-3, torch.rand(8, 1, generator=g)

    def step(x, w, a):
        y1, s1 = iop.dequant_swiglu_quant(x, weight_scale=w, activation_scale=a, dtype="fp8",
                                          group_size=128, device=device)
        y2, s2 = iop.npu_dequant_swiglu_quant(x, weight_scale=w, activation_scale=a,
                                              quant_mode=1, device=device)
        return y1, s1 * 2.0, y2, s2

    eager = step(x, w, a)
    for compiled in (torch.compile(step, fullgraph=True),
                     torch.compile(step, fullgraph=True, dynamic=True)):
        for got, want in zip(compiled(x, w, a), eager):
            assert same_bits(got, want)
    want_y, want_s = oracle(dequant(x, w, a), "swiglu", "fp8", 128)
    assert torch.equal(as_bytes(eager[0]), want_y) and same_bits(eager[1], want_s * 2.0)
    torch._dynamo.reset()


@COMPILABLE
def test_opcheck():
    x = torch.randint(-100, 100, (4, 64), dtype=torch.int32)
    w, a = torch.rand(64), torch.rand(4, 1)
    samples = [((x, w, a), {"dtype": "int8", "group_size": 2, "device": "cpu_reference"}),
               ((x, None, None, torch.ones(64), torch.tensor(0.5).expand(4, 1)),
                {"dtype": "fp8", "device": "cpu_reference"})]
    for args, kwargs in samples:
        torch.library.opcheck(torch.ops.infiniop.dequant_swiglu_quant, args, kwargs,
                              test_utils=("test_schema", "test_faketensor"))


@COMPILABLE
def test_backward_refused():
    x = torch.randint(-100, 100, (4, 64), dtype=torch.int32)
    w = torch.rand(64, requires_grad=True)
    y, s = iop.dequant_swiglu_quant(x, weight_scale=w, device="cpu_reference")
    assert not y.requires_grad
    if s.requires_grad:
        with pytest.raises(RuntimeError, match="dequant_swiglu_quant: no gradient"):
            s.sum().backward()
