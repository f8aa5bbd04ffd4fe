# SPDX-License-Identifier: Apache-2.0
"""infiniop.torch.moe (dispatch / combine): a MoE layer built with the helper equals a plain
PyTorch MoE layer in float64, values and gradients, for every dispatch mode it supports.

The layer (T tokens, hidden H, E experts, top-K, expert width I; signed random inputs):
    d = moe.dispatch(x, ids, E, **mode)
    y = d.map_experts(expert_e)     expert_e(v) = silu(v @ W1[e] + b1[e]) @ W2[e] + b2[e]
    out = moe.combine(y, d, scales, x1=residual, bias=bias)
Reference: a loop over the experts in float64 (index_select the tokens routed to e and kept,
the expert, index_add of scales * output), the kept set derived here independently of the
library (the stable order by expert, cut at active_num; or each expert's first `capacity`
pairs in token order), plus bias[e] * scales for every pair (MoeFinalizeRoutingV2 adds the
bias of a dropped pair too), its gradients by autograd. The routing leaves experts 3 and 7
without tokens.

Modes: dropless (drop_pad_mode 0), dropless with active_num = 3/4 of the pairs, drop/pad with a
capacity below the busiest expert's load (pairs dropped, slots padded), drop/pad with capacity T
(nothing dropped).

Tolerances:
  F32: torch.testing.assert_close(atol=1e-5, rtol=1e-5) element by element. The values are
      O(1) (gradients O(10)) and each path has a few F32 roundings and F32 sums of at most
      T*K = 128 terms (the matmuls, the combine's fma chain, the grads' sums): errors of a
      few 1e-6 at most (measured over 5 seeds of every mode and K: at most 0.3 of the bound,
      5.6e-6 absolute on a weight gradient).
  BF16 (x, weights, scales BF16; also F32 scales with BF16 rows, as vLLM passes them): per
      tensor, max |got - ref| <= 16 * 2^-8 * max |ref|, tests/python/test_moe_layer.py's
      bound: the expert function runs in BF16 torch ops, so every path rounds to BF16 (2^-9
      relative each) at h, silu(h), the expert output, the combine's output and again in the
      backward (grad of y, of h, of the rows), and the weights' gradients sum up to 128 such
      rounded products; 16 units of 2^-8 covers those few roundings with margin (measured
      over 5 seeds of every mode: at most 0.28 of it).
"""

import pytest
import torch
import torch.nn.functional as F

import infiniop
import infiniop.torch as iop
from infiniop.torch import moe

T, H, E, I = 64, 32, 8, 16
EMPTY = (3, 7)  # experts the router never picks
F32_TOL = {"atol": 1e-5, "rtol": 1e-5}
BF16_TOL = 16 * 2.0 ** -8  # relative to each tensor's largest magnitude (see the docstring)

MODES = {
    "dropless": lambda K: {},
    "active_num": lambda K: {"active_num": 3 * T * K // 4},
    "capacity_drops": lambda K: {"drop_pad_mode": 1, "expert_capacity": None},  # set below
    "capacity_all": lambda K: {"drop_pad_mode": 1, "expert_capacity": T},
}


def make_inputs(K, seed, dtype=torch.float32, scales_dtype=None):
    """Signed random inputs: x, the experts' weights, a residual, a per-expert bias, the
    routing (ids (T, K) int64 avoiding EMPTY, scales (T, K) signed) and the upstream gradient."""
    g = torch.Generator().manual_seed(seed)
    randn = lambda *shape: torch.randn(*shape, generator=g)
    logits = randn(T, E)
    logits[:, list(EMPTY)] = -float("inf")
    ids = torch.topk(logits, K, dim=-1).indices
    p = {"x": randn(T, H), "W1": randn(E, H, I) / H ** 0.5, "b1": randn(E, I),
         "W2": randn(E, I, H) / I ** 0.5, "b2": randn(E, H), "x1": randn(T, H),
         "bias": randn(E, H) * 0.5}
    p = {name: t.to(dtype) for name, t in p.items()}
    p["scales"] = randn(T, K).to(scales_dtype or dtype)
    return p, ids, randn(T, H).to(dtype)


def mode_kwargs(name, ids):
    K = ids.shape[1]
    kwargs = MODES[name](K)
    if kwargs.get("expert_capacity", 0) is None:
        load = torch.bincount(ids.reshape(-1), minlength=E)
        low, high = int(load[load > 0].min()), int(load.max())
        kwargs["expert_capacity"] = (low + high) // 2
        assert low < kwargs["expert_capacity"] < high, load  # the busiest drop, others pad
    return kwargs


def kept_pairs(ids, kwargs):
    """(T*K) bool: the pairs the dispatch keeps, derived here (not by the library)."""
    flat = ids.reshape(-1).tolist()
    n = len(flat)
    keep = [True] * n
    if kwargs.get("drop_pad_mode", 0) == 1:
        seen = [0] * E
        for p, e in enumerate(flat):
            keep[p] = seen[e] < kwargs["expert_capacity"]
            seen[e] += 1
    elif 0 < kwargs.get("active_num", 0) < n:
        order = sorted(range(n), key=lambda p: (flat[p], p))  # stable, by expert
        keep = [False] * n
        for p in order[:kwargs["active_num"]]:
            keep[p] = True
    return torch.tensor(keep)


def expert(p, e, rows):
    return F.silu(rows @ p["W1"][e] + p["b1"][e]) @ p["W2"][e] + p["b2"][e]


LEAVES = ("x", "W1", "b1", "W2", "b2", "scales", "x1", "bias")


def helper_layer(p, ids, grad_out, kwargs, with_bias):
    """(out, {name: grad}, Dispatched) through infiniop.torch.moe."""
    p = {name: t.clone().requires_grad_() for name, t in p.items()}
    d = moe.dispatch(p["x"], ids, E, **kwargs)
    # two stages (as a gated MLP would have): map_experts feeds map_experts
    h = d.map_experts(lambda e, rows: rows @ p["W1"][e] + p["b1"][e])
    y = d.map_experts(lambda e, rows: rows @ p["W2"][e] + p["b2"][e], F.silu(h))
    out = moe.combine(y, d, p["scales"], x1=p["x1"], bias=p["bias"] if with_bias else None)
    out.backward(grad_out)
    return out.detach(), {n: p[n].grad for n in LEAVES}, d


def reference_layer(p, ids, grad_out, keep, with_bias):
    """(out, {name: grad}) of the plain float64 MoE layer (a loop over the experts)."""
    p = {name: t.double().clone().requires_grad_() for name, t in p.items()}
    K = ids.shape[1]
    flat = ids.reshape(-1)
    out = p["x1"].clone()
    weights = p["scales"].reshape(-1)
    for e in range(E):
        pairs = ((flat == e) & keep).nonzero().flatten()
        tokens = pairs // K
        y = expert(p, e, p["x"].index_select(0, tokens))
        out = out.index_add(0, tokens, weights.index_select(0, pairs).unsqueeze(1) * y)
    if with_bias:  # every pair, dropped ones too (MoeFinalizeRoutingV2)
        out = out + (p["scales"].unsqueeze(-1) * p["bias"][ids]).sum(1)
    out.backward(grad_out.double())
    grads = {n: p[n].grad for n in LEAVES}
    if not with_bias:
        grads["bias"] = None
    return out.detach(), grads


def check_bf16(got, ref, what):
    got = got.double()
    scale = ref.abs().max().item()
    error = (got - ref).abs().max().item()
    assert scale > 0, f"{what}: vacuous (reference all zero)"
    assert torch.isfinite(got).all(), f"{what}: non-finite"
    assert error <= BF16_TOL * scale, \
        f"{what}: max error {error:.3g} = {error / scale:.3g} x max|ref| (tolerance {BF16_TOL})"


# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("with_bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("K", [1, 2], ids=["top1", "top2"])
@pytest.mark.parametrize("mode", list(MODES))
def test_layer_matches_torch_f32(mode, K, with_bias):
    p, ids, grad_out = make_inputs(K, seed=10 * K + len(mode))
    kwargs = mode_kwargs(mode, ids)
    keep = kept_pairs(ids, kwargs)
    out, grads, d = helper_layer(p, ids, grad_out, kwargs, with_bias)
    ref, ref_grads = reference_layer(p, ids, grad_out, keep, with_bias)
    if mode in ("capacity_drops", "active_num"):
        assert not keep.all(), "nothing dropped: the case is vacuous"
    assert d.dropped == int((~keep).sum())
    assert d.finalize_mode == (3 if kwargs.get("drop_pad_mode") == 1 else 2)
    assert out.dtype == torch.float32 and out.shape == (T, H)
    torch.testing.assert_close(out.double(), ref, **F32_TOL)
    for name in LEAVES:
        if ref_grads[name] is None:
            assert grads[name] is None
            continue
        torch.testing.assert_close(grads[name].double(), ref_grads[name], **F32_TOL,
                                   msg=lambda m: f"grad {name}: {m}")
    for e in EMPTY:  # no token reached these experts: their weights get exactly zero
        assert d.counts[e] == 0 and (grads["W1"][e] == 0).all() and (grads["b2"][e] == 0).all()


@pytest.mark.parametrize("scales_dtype", [torch.bfloat16, torch.float32],
                         ids=["scales_bf16", "scales_f32"])
@pytest.mark.parametrize("mode", list(MODES))
def test_layer_matches_torch_bf16(mode, scales_dtype):
    K = 2
    p, ids, grad_out = make_inputs(K, seed=100 + len(mode), dtype=torch.bfloat16,
                                   scales_dtype=scales_dtype)
    kwargs = mode_kwargs(mode, ids)
    out, grads, _ = helper_layer(p, ids, grad_out, kwargs, with_bias=True)
    ref, ref_grads = reference_layer(p, ids, grad_out, kept_pairs(ids, kwargs), True)
    assert out.dtype == torch.bfloat16
    check_bf16(out, ref, f"bf16 {mode}: out")
    for name in LEAVES:
        assert grads[name].dtype == p[name].dtype, name
        check_bf16(grads[name], ref_grads[name], f"bf16 {mode}: grad {name}")


@pytest.mark.parametrize("K", [1, 2], ids=["top1", "top2"])
@pytest.mark.parametrize("mode", list(MODES))
def test_spans(mode, K):
    p, ids, _ = make_inputs(K, seed=7)
    kwargs = mode_kwargs(mode, ids)
    keep = kept_pairs(ids, kwargs)
    d = moe.dispatch(p["x"], ids, E, **kwargs)
    for values in (d.counts, d.offsets, d.routed_counts, [v for s in d.spans for v in s]):
        assert len(values) in (E, 2 * E) and all(type(v) is int for v in values), values
    assert d.routed_counts == torch.bincount(ids.reshape(-1), minlength=E).tolist()
    assert sum(d.counts) == int(keep.sum())
    if kwargs.get("drop_pad_mode", 0) == 0:  # the spans tile the expanded rows
        assert sum(d.counts) == d.expanded_x.shape[0] == d.num_rows
        assert [s for s, _ in d.spans] == [0] + [end for _, end in d.spans[:-1]]
        assert d.spans[-1][1] == d.num_rows
    else:  # expert e's rows start its C slots
        C = kwargs["expert_capacity"]
        assert d.expanded_x.shape == (E, C, H) and d.num_rows == E * C
        assert d.offsets == [e * C for e in range(E)]
        assert sum(d.counts) == int((d.expanded_row_idx >= 0).sum())
    flat = ids.reshape(-1)
    for e, rows in d.experts():
        pairs = ((flat == e) & keep).nonzero().flatten()
        assert torch.equal(rows, p["x"][pairs // K]), e  # in token order
        assert torch.equal(d.expert_rows(e), rows)
        if e in EMPTY:
            assert rows.shape == (0, H)


@pytest.mark.parametrize("mode", list(MODES))
def test_combine_by_expert_ranges(mode):
    """experts=: partial combines of consecutive expert ranges (one of them empty) sum to the
    whole combine (expert parallel), values and gradients."""
    K = 2
    p, ids, grad_out = make_inputs(K, seed=3)
    kwargs = mode_kwargs(mode, ids)
    parts = [range(0, 3), range(3, 4), slice(4, 6), (6, 8)]  # expert 3 alone: no rows
    ids_of = [range(0, 3), range(3, 4), range(4, 6), range(6, 8)]  # the same, as ranges

    def run(split):
        q = {name: t.clone().requires_grad_() for name, t in p.items()}
        d = moe.dispatch(q["x"], ids, E, **kwargs)
        y = d.map_experts(lambda e, rows: expert(q, e, rows))
        if not split:
            out = moe.combine(y, d, q["scales"], x1=q["x1"])
        else:
            out = q["x1"].clone()
            for part, r in zip(parts, ids_of):  # what a rank holding experts r computes
                if d.drop_pad_mode == 0:
                    local = torch.cat([d.expert_rows(e, y) for e in r])  # (n, H)
                else:
                    local = y.reshape(E, -1, H)[r.start:r.stop]  # (len(r), C, H)
                out = out + moe.combine(local, d, q["scales"], experts=part)
        out.backward(grad_out)
        return out.detach(), {n: q[n].grad for n in ("x", "W1", "W2", "b2", "scales", "x1")}

    whole, whole_grads = run(False)
    split, split_grads = run(True)
    torch.testing.assert_close(split, whole, **F32_TOL)
    for name in whole_grads:
        torch.testing.assert_close(split_grads[name], whole_grads[name], **F32_TOL)


def test_drop_pad_accepts_the_expanded_shape():
    """Mode 1: expert outputs may stay (E, C, H') (a batched matmul over the slots)."""
    p, ids, _ = make_inputs(2, seed=5)
    d = moe.dispatch(p["x"], ids, E, drop_pad_mode=1, expert_capacity=20)
    y3 = torch.bmm(d.expanded_x, p["W1"])  # (E, C, I), every slot
    out3 = moe.combine(y3, d, p["scales"])
    y2 = d.map_experts(lambda e, rows: rows @ p["W1"][e])  # (E*C, I), filled slots only
    torch.testing.assert_close(out3, moe.combine(y2, d, p["scales"]), **F32_TOL)
    assert out3.shape == (T, I)


@pytest.mark.parametrize("mode", list(MODES))
def test_top1_without_scales(mode):
    """K = 1: scales may be None (every weight 1), as the finalize allows."""
    p, ids, _ = make_inputs(1, seed=4)
    d = moe.dispatch(p["x"], ids, E, **mode_kwargs(mode, ids))
    y = d.map_experts(lambda e, rows: expert(p, e, rows))
    torch.testing.assert_close(moe.combine(y, d, None, x1=p["x1"]),
                               moe.combine(y, d, torch.ones(T, 1), x1=p["x1"]), rtol=0, atol=0)


def test_device_and_handle_follow_the_dispatch():
    p, ids, _ = make_inputs(2, seed=6)
    with infiniop.Handle("cpu_reference") as handle:
        d = moe.dispatch(p["x"], ids, E, handle=handle)
        assert d.handle is handle
        out = moe.combine(d.map_experts(lambda e, rows: rows * (e + 1)), d, p["scales"])
    want = moe.combine(moe.dispatch(p["x"], ids, E).map_experts(lambda e, rows: rows * (e + 1)),
                       moe.dispatch(p["x"], ids, E), p["scales"])
    torch.testing.assert_close(out, want, **F32_TOL)


def test_builds_on_infiniop_torch():
    """The helper's results are the operators' own: dispatch's rows and index are
    moe_init_routing_v2's, combine is moe_finalize_routing_v2 in mode 2 bit for bit."""
    p, ids, _ = make_inputs(2, seed=8)
    d = moe.dispatch(p["x"], ids, E)
    expanded_x, row_idx, _, _ = iop.moe_init_routing_v2(p["x"], ids, expert_num=E)
    assert torch.equal(d.expanded_x, expanded_x) and torch.equal(d.expanded_row_idx, row_idx)
    y = d.expanded_x * 3
    assert torch.equal(moe.combine(y, d, p["scales"]),
                       iop.moe_finalize_routing_v2(y, row_idx, scales=p["scales"],
                                                   drop_pad_mode=2))


# ----------------------------------------------------------------------------------------------
# Bad arguments: each message names the argument

def _bad_cases():
    """{name: (call, exception, what the message must name)}."""
    p, ids, _ = make_inputs(2, seed=9)
    x, scales = p["x"], p["scales"]
    d0 = moe.dispatch(x, ids, E)
    d1 = moe.dispatch(x, ids, E, drop_pad_mode=1, expert_capacity=8)
    y0 = d0.rows
    return {
        "x not a tensor": (lambda: moe.dispatch(x.numpy(), ids, E), TypeError, "x must be"),
        "x 1-D": (lambda: moe.dispatch(x[0], ids, E), ValueError, "x shape"),
        "ids rows": (lambda: moe.dispatch(x, ids[:-1], E), ValueError, "expert_idx shape"),
        "ids float": (lambda: moe.dispatch(x, ids.float(), E), TypeError, "expert_idx"),
        "ids range": (lambda: moe.dispatch(x, ids + 4, E), infiniop.InfiniopError,
             "expert_idx"),
        "expert_num 0": (lambda: moe.dispatch(x, ids, 0), ValueError, "expert_num"),
        "expert_num float": (lambda: moe.dispatch(x, ids, 8.0), TypeError, "expert_num"),
        "expert_num bool": (lambda: moe.dispatch(x, ids, True), TypeError, "expert_num"),
        "mode 2": (lambda: moe.dispatch(x, ids, E, drop_pad_mode=2), ValueError,
             "drop_pad_mode"),
        "mode 1 no capacity": (lambda: moe.dispatch(x, ids, E, drop_pad_mode=1), ValueError,
             "expert_capacity"),
        "mode 0 capacity": (lambda: moe.dispatch(x, ids, E, expert_capacity=8), ValueError,
             "expert_capacity"),
        "active_num < 0": (lambda: moe.dispatch(x, ids, E, active_num=-1), ValueError,
             "active_num"),
        "mode 1 active_num": (lambda: moe.dispatch(x, ids, E, drop_pad_mode=1,
                                                   expert_capacity=8, active_num=4),
             ValueError, "active_num"),
        "dispatched": (lambda: moe.combine(y0, (y0, ids), scales), TypeError, "dispatched"),
        "expert_out rows": (lambda: moe.combine(y0[1:], d0, scales), ValueError, "expert_out"),
        "expert_out mode 1": (lambda: moe.combine(y0, d1, scales), ValueError, "expert_out"),
        "expert_out type": (lambda: moe.combine(y0.numpy(), d0, scales), TypeError,
             "expert_out"),
        "scales shape": (lambda: moe.combine(y0, d0, scales[:, :1]), ValueError, "scales"),
        "scales None": (lambda: moe.combine(y0, d0, None), ValueError, "scales"),
        "scales dtype": (lambda: moe.combine(y0, d0, scales.half()), infiniop.InfiniopError,
             "scales"),
        "x1 shape": (lambda: moe.combine(y0, d0, scales, x1=x[:, :4]), ValueError, "x1"),
        "x2 alone": (lambda: moe.combine(y0, d0, scales, x2=x), ValueError, "x2"),
        "bias shape": (lambda: moe.combine(y0, d0, scales, bias=p["bias"][:4]), ValueError,
             "bias"),
        "experts range": (lambda: moe.combine(y0, d0, scales, experts=range(0, 9)),
             ValueError, "experts"),
        "experts step": (lambda: moe.combine(y0, d0, scales, experts=range(0, 8, 2)),
             ValueError, "experts"),
        "experts type": (lambda: moe.combine(y0, d0, scales, experts=[0, 1]), TypeError,
             "experts"),
        "experts rows": (lambda: moe.combine(y0, d0, scales, experts=range(0, 2)), ValueError,
             "expert_out"),
        "experts bias": (lambda: moe.combine(y0, d0, scales, experts=range(0, 8),
                                             bias=p["bias"]), ValueError, "bias"),
        "fn rows": (lambda: d0.map_experts(lambda e, rows: rows[:1]), ValueError, "fn"),
        "fn result": (lambda: d0.map_experts(lambda e, rows: 0), TypeError, "fn"),
        "expert e": (lambda: d0.expert_rows(8), IndexError, "e = 8"),
    }


BAD_CASES = ["x not a tensor", "x 1-D", "ids rows", "ids float", "ids range", "expert_num 0",
             "expert_num float", "expert_num bool", "mode 2", "mode 1 no capacity",
             "mode 0 capacity", "active_num < 0", "mode 1 active_num", "dispatched",
             "expert_out rows", "expert_out mode 1", "expert_out type", "scales shape",
             "scales None", "scales dtype", "x1 shape", "x2 alone", "bias shape",
             "experts range", "experts step", "experts type", "experts rows", "experts bias",
             "fn rows", "fn result", "expert e"]


@pytest.fixture(scope="module")
def bad_cases():
    cases = _bad_cases()
    assert sorted(cases) == sorted(BAD_CASES)
    return cases


@pytest.mark.parametrize("case", BAD_CASES)
def test_bad_arguments(bad_cases, case):
    call, error, name = bad_cases[case]
    with pytest.raises(error, match=name):
        call()


def test_jit_trace_refuses_the_rows_per_expert():
    """A trace would keep the example's counts and replay another routing wrong: refused."""
    p, ids, _ = make_inputs(2, 0)

    def layer(x):
        d = moe.dispatch(x, ids, E)
        return moe.combine(d.map_experts(lambda e, rows: expert(p, e, rows)), d, p["scales"])

    with pytest.raises(RuntimeError, match="torch.jit.trace would record as constants"):
        torch.jit.trace(layer, (p["x"],), check_trace=False)


def test_jit_trace_of_a_layer_on_the_whole_dispatch_replays_another_routing():
    """drop/pad and a batched matmul over (E, C, H) read no count: the trace replays the
    operators, so another batch with another routing gives eager mode's bits."""
    p, ids, _ = make_inputs(2, 0)
    w = torch.randn(E, H, H, generator=torch.Generator().manual_seed(3))

    def layer(x, ids, scales):
        d = moe.dispatch(x, ids, E, drop_pad_mode=1, expert_capacity=T // 2)
        return moe.combine(torch.bmm(d.expanded_x, w), d, scales, x1=x)

    traced = torch.jit.trace(layer, (p["x"], ids, p["scales"]), check_trace=False)
    q, other_ids, _ = make_inputs(2, 1)
    assert not torch.equal(ids, other_ids)
    assert torch.equal(traced(q["x"], other_ids, q["scales"]),
                       layer(q["x"], other_ids, q["scales"]))
