# SPDX-License-Identifier: Apache-2.0
"""MoeInitRoutingV2 and MoeInitRoutingV2Grad through the Python binding, on every device
(helpers.DEVICES: cpu, cpu_reference, opencl), F32/F16/BF16 rows, INT32/INT64 indices.

Forward oracle (PyTorch, exact; SEMANTICS.md "MoeInitRoutingV2"):
    order = torch.argsort(expert_idx.flatten(), stable=True)   sorted rank -> position p
    s[order] = arange(R*K)                                      position p -> its rank s(p)
    c = bincount(expert_idx), start_e = c_0 + ... + c_(e-1), j(p) = s(p) - start_(e(p))
    mode 0: expanded_row_idx = s, expanded_x = x[order[:A] // K] (A from active_num),
            counts = cumsum(c) (flag 1) or c (flag 2)
    mode 1: expanded_row_idx = e*C + j where j < C, else -1; expanded_x (E*C, H) zero, slot
            e*C + j = x[p // K] for j < C; before_capacity = c
Rows are copied bit for bit, so expanded_x is compared BIT FOR BIT (NaN payloads, infinities,
-0 and subnormals in x included), the index outputs and counts exactly, dtype included.

Grad oracle: PyTorch float64 autograd of the same gather: expanded_x as a differentiable
function of x (index_select of x with a zero row for the unfilled slots), backward with
grad_expanded_x. Error model (the library sums in F32 in increasing k and rounds once):
    a row reached by c >= 2 contributions: F32 bound = c U sum over them of |grad_expanded_x|,
      U = 2^-24; plus one F32 subnormal ulp (F32) or 1 ulp of the output type at |truth|
      (F16/BF16) (helpers.assert_matches)
    c = 0: exactly 0
and, as the sum's order is fixed, exactly the values of F32 additions in increasing k from 0 done
in torch (so c = 1 gives that value itself; -0 + 0 = +0 as in torch's autograd).
Inputs are signed, magnitudes spanning the dtype (2^-30 .. 2^30 for F32/BF16, F16 subnormals
2^-20 .. 2^14 for F16) with exact zeros and -0, seeded per case. Outputs are poisoned (NaN,
SENTINEL) before each call; failing calls must leave every output untouched.
"""

import math

import numpy as np
import pytest
import torch

import infiniop
from infiniop import InfiniopError, Status

from helpers import (DEVICES, SENTINEL, TORCH_DTYPES, JunkPointers, assert_infiniop_error,
                     assert_matches, device_handle, expect_error, on, open_handle, rng_for,
                     run_op, same_bits)

U = 2.0 ** -24
INDEX = {"int32": torch.int32, "int64": torch.int64}
# (expert_idx dtype, index_dtype argument): None follows expert_idx (torch.topk: int64)
INDEX_CASES = [("int64", None), ("int32", None), ("int64", "int32"), ("int32", torch.int64)]
MAGNITUDES = {"float32": (-30, 30), "float16": (-20, 14), "bfloat16": (-30, 30)}


# ----------------------------------------------------------------------------------------------
# Inputs

def values(rng, shape, dtype_name):
    """Signed values spanning the dtype's range, about 5% +0 and 3% -0, as a torch tensor."""
    n = math.prod(shape)
    lo, hi = MAGNITUDES[dtype_name]
    v = rng.choice([-1.0, 1.0], n) * 2.0 ** rng.uniform(lo, hi, n)
    v[rng.random(n) < 0.05] = 0.0
    v[rng.random(n) < 0.03] = -0.0
    return torch.from_numpy(v.reshape(shape)).to(TORCH_DTYPES[dtype_name])


def expert_ids(rng, r, k, experts, kind, dtype):
    """(R, K) expert ids in [0, experts): 'uniform' (repeats within a token allowed), 'topk'
    (distinct per token, as torch.topk gives), 'skewed' (most on expert 0, the last expert
    never chosen when there are 3 or more: empty experts)."""
    if kind == "topk" and k <= experts:
        scores = torch.from_numpy(rng.standard_normal((r, experts)))
        ids = torch.topk(scores, k, dim=-1).indices
    elif kind == "skewed":
        used = experts - 1 if experts >= 3 else experts
        p = np.full(used, 0.3 / max(used - 1, 1))
        p[0] = 0.7 if used > 1 else 1.0
        ids = torch.from_numpy(rng.choice(used, (r, k), p=p / p.sum()))
    else:
        ids = torch.from_numpy(rng.integers(0, experts, (r, k)))
    return ids.to(dtype)


# ----------------------------------------------------------------------------------------------
# The oracle

def active_rows(active_num, total):
    return active_num if 0 < active_num < total else total


def reference_init(x, expert_idx, mode, experts, capacity=0, active_num=0):
    """(expanded_x, expanded_row_idx (int64), counts c (int64), gather positions): expanded_x
    rows are x rows (bit copies) or +0; gather (rows,) holds the x row of each expanded row,
    -1 for a zero row."""
    r, k = expert_idx.shape
    total = r * k
    hidden = x.shape[-1]
    flat = expert_idx.reshape(-1).long()
    order = torch.argsort(flat, stable=True)
    rank = torch.empty(total, dtype=torch.long)
    rank[order] = torch.arange(total)
    counts = torch.bincount(flat, minlength=experts)[:experts] if total else \
        torch.zeros(experts, dtype=torch.long)
    token = torch.arange(total) // k
    if mode == 0:
        rows = active_rows(active_num, total)
        gather = token[order[:rows]]
        row_idx = rank
    else:
        start = torch.cumsum(counts, 0) - counts
        j = rank - start[flat] if total else rank
        keep = j < capacity
        row_idx = torch.where(keep, flat * capacity + j, torch.full_like(j, -1))
        gather = torch.full((experts * capacity,), -1, dtype=torch.long)
        gather[row_idx[keep]] = token[keep]
    expanded = torch.zeros((gather.numel(), hidden), dtype=x.dtype)
    filled = gather >= 0
    expanded[filled] = x[gather[filled]]
    if mode == 1:
        expanded = expanded.reshape(experts, capacity, hidden)
    return expanded, row_idx, counts, gather


def run_init(x, expert_idx, device, mode, experts, capacity=0, active_num=0, flag=0,
             before=False, index_dtype=None, out_layout="contiguous"):
    """The library's Init into poisoned outputs (NaN rows, SENTINEL indices) of out_layout
    ('contiguous' or 'strided': every other element, the gaps checked untouched); returns
    (expanded_x, expanded_row_idx, counts or None, before or None)."""
    r, k = expert_idx.shape
    total, hidden = r * k, x.shape[-1]
    idx_dtype = expert_idx.dtype if index_dtype is None else \
        (index_dtype if isinstance(index_dtype, torch.dtype) else INDEX[index_dtype])
    shape = ((experts, capacity, hidden) if mode == 1
             else (active_rows(active_num, total), hidden))
    want_counts = mode == 0 and flag in (1, 2)
    want_before = mode == 1 and before
    specs = [(shape, x.dtype, float("nan")), ((total,), idx_dtype, SENTINEL),
             ((experts,), idx_dtype, SENTINEL) if want_counts else None,
             ((experts,), idx_dtype, SENTINEL) if want_before else None]
    outs, storages = [], []
    for spec in specs:
        if spec is None:
            outs.append(None)
            continue
        s, dt, fill = spec
        if out_layout == "strided" and s:
            storage = torch.full(s[:-1] + (2 * s[-1] + 1,), 7, dtype=dt)
            view = storage[..., 1::2]
            storages.append((storage, 7))
        else:
            view = storage = torch.empty(s, dtype=dt)
        view.fill_(fill)
        outs.append(view)
    got = infiniop.moe_init_routing_v2(
        x, expert_idx, expert_num=experts, active_num=active_num, expert_capacity=capacity,
        drop_pad_mode=mode, expert_tokens_count_or_cumsum_flag=flag,
        expert_tokens_before_capacity_flag=before, index_dtype=index_dtype, **on(device),
        out=tuple(outs))
    assert all(g is o for g, o in zip(got, outs))
    for storage, fill in storages:
        assert (storage[..., 0::2] == fill).all(), "wrote outside an output view"
    return got


def check_init(got, x, expert_idx, mode, experts, capacity=0, active_num=0, flag=0,
               before=False, index_dtype=None, what=""):
    expanded, row_idx, counts, before_out = got
    want_x, want_idx, c, _ = reference_init(x, expert_idx, mode, experts, capacity, active_num)
    idx_dtype = expert_idx.dtype if index_dtype is None else \
        (index_dtype if isinstance(index_dtype, torch.dtype) else INDEX[index_dtype])
    assert same_bits(expanded, want_x), f"{what}: expanded_x differs from the oracle (bits)"
    assert row_idx.dtype == idx_dtype and torch.equal(row_idx.long(), want_idx), \
        f"{what}: expanded_row_idx {row_idx.tolist()} != {want_idx.tolist()}"
    if mode == 0 and flag in (1, 2):
        want = torch.cumsum(c, 0) if flag == 1 else c
        assert counts.dtype == idx_dtype and torch.equal(counts.long(), want), \
            f"{what}: counts {counts.tolist()} != {want.tolist()}"
    else:
        assert counts is None
    if mode == 1 and before:
        assert before_out.dtype == idx_dtype and torch.equal(before_out.long(), c), \
            f"{what}: before_capacity {before_out.tolist()} != {c.tolist()}"
    else:
        assert before_out is None


# ----------------------------------------------------------------------------------------------
# Forward

# (R, K, H, E)
SHAPES = [(1, 1, 1, 1), (7, 3, 17, 4), (16, 2, 67, 8), (5, 4, 3, 2), (33, 8, 5, 3)]
# mode 0: (active_num name, flag); mode 1: (capacity name, before flag)
MODE0 = [("zero", 0), ("zero", 1), ("zero", 2), ("one", 2), ("half", 1), ("all-1", 0),
         ("all", 2), ("more", 1)]
MODE1 = [("one", True), ("tight", True), ("loose", False), ("more-than-R", True)]


def active_value(name, total):
    return {"zero": 0, "one": 1, "half": total // 2, "all-1": total - 1, "all": total,
            "more": total + 4}[name]


def capacity_value(name, r, k, counts):
    largest = int(counts.max()) if counts.numel() else 1
    return {"one": 1, "tight": max(largest // 2, 1), "loose": largest + 2,
            "more-than-R": r * k + 3}[name]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("index_case", INDEX_CASES, ids=lambda c: f"{c[0]}-{c[1]}")
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_forward(device, dtype_name, index_case, shape):
    r, k, hidden, experts = shape
    eidx_name, index_dtype = index_case
    for dist in ("uniform", "topk", "skewed"):
        rng = rng_for("init", dtype_name, index_case, shape, dist)
        x = values(rng, (r, hidden), dtype_name)
        eidx = expert_ids(rng, r, k, experts, dist, INDEX[eidx_name])
        for active, flag in MODE0:
            what = f"{device} mode 0 {shape} {dist} active={active} flag={flag}"
            a = active_value(active, r * k)
            got = run_init(x, eidx, device, 0, experts, active_num=a, flag=flag,
                           index_dtype=index_dtype)
            check_init(got, x, eidx, 0, experts, active_num=a, flag=flag,
                       index_dtype=index_dtype, what=what)
        counts = torch.bincount(eidx.reshape(-1).long(), minlength=experts)
        for cap, before in MODE1:
            what = f"{device} mode 1 {shape} {dist} capacity={cap} before={before}"
            c = capacity_value(cap, r, k, counts)
            got = run_init(x, eidx, device, 1, experts, capacity=c, before=before,
                           index_dtype=index_dtype)
            check_init(got, x, eidx, 1, experts, capacity=c, before=before,
                       index_dtype=index_dtype, what=what)


@pytest.mark.parametrize("device", DEVICES)
def test_forward_literal_example(device):
    """A hand-worked case: R = 4, K = 2, E = 3, x row r = r + 1."""
    x = torch.arange(1.0, 5.0).reshape(4, 1).expand(4, 2).contiguous()
    eidx = torch.tensor([[1, 0], [2, 1], [0, 0], [1, 2]])  # p: 0..7
    # stable order by expert: e0: p1, p4, p5; e1: p0, p3, p6; e2: p2, p7
    ex, idx, counts, _ = infiniop.moe_init_routing_v2(
        x, eidx, expert_num=3, expert_tokens_count_or_cumsum_flag=1, **on(device))
    assert idx.tolist() == [3, 0, 6, 4, 1, 2, 5, 7] and idx.dtype == torch.int64
    assert ex[:, 0].tolist() == [1, 3, 3, 1, 2, 4, 2, 4]
    assert counts.tolist() == [3, 6, 8]
    ex, idx, _, before = infiniop.moe_init_routing_v2(
        x, eidx, expert_num=3, drop_pad_mode=1, expert_capacity=2,
        expert_tokens_before_capacity_flag=True, index_dtype=torch.int32, **on(device))
    # j: p1 0, p4 1, p5 2 (dropped); p0 0, p3 1, p6 2 (dropped); p2 0, p7 1
    assert idx.tolist() == [2, 0, 4, 3, 1, -1, -1, 5] and idx.dtype == torch.int32
    assert ex[..., 0].tolist() == [[1, 3], [1, 2], [2, 4]]
    assert before.tolist() == [3, 3, 2]


def special_rows(dtype_name, hidden):
    """x rows full of special bit patterns: NaNs with payloads and signs (a signalling one in
    F32), +-inf, -0, the smallest subnormal, the largest finite value."""
    dtype = TORCH_DTYPES[dtype_name]
    if dtype_name == "float32":
        bits = [0x7FC00000, 0xFFC00001, 0x7F800001, 0x7FBFFFFF, 0x7F800000, 0xFF800000,
                0x80000000, 0x00000001, 0x80000001, 0x7F7FFFFF, 0x3F800000, 0x00000000]
        raw = torch.tensor(bits, dtype=torch.int64).to(torch.int32)
    else:
        if dtype_name == "float16":
            bits = [0x7E00, 0xFE01, 0x7C01, 0x7DFF, 0x7C00, 0xFC00, 0x8000, 0x0001, 0x8001,
                    0x7BFF, 0x3C00, 0x0000]
        else:
            bits = [0x7FC0, 0xFFC1, 0x7F81, 0x7FBF, 0x7F80, 0xFF80, 0x8000, 0x0001, 0x8001,
                    0x7F7F, 0x3F80, 0x0000]
        raw = torch.tensor(bits, dtype=torch.int32).to(torch.int16)
    pattern = raw.view(dtype)
    reps = -(-hidden // pattern.numel())
    row = pattern.repeat(reps)[:hidden]
    return torch.stack([row.roll(i) for i in range(6)])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("hidden", [1, 12, 37, 1030])
def test_forward_bit_exact_rows(device, dtype_name, hidden):
    """Rows are copied bit for bit: NaN payloads and signs, infinities, -0, subnormals."""
    x = special_rows(dtype_name, hidden)
    rng = rng_for("init-bits", dtype_name, hidden)
    for index in ("int32", "int64"):
        eidx = expert_ids(rng, 6, 3, 4, "uniform", INDEX[index])
        for mode, capacity in ((0, 0), (1, 2), (1, 7)):
            got = run_init(x, eidx, device, mode, 4, capacity=capacity)
            check_init(got, x, eidx, mode, 4, capacity=capacity,
                       what=f"{device} special rows mode {mode}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_forward_strides(device, dtype_name):
    """x and expert_idx transposed / strided / broadcast, outputs strided."""
    r, k, hidden, experts = 9, 3, 11, 4
    rng = rng_for("init-strides", dtype_name)
    base_x = values(rng, (r, hidden), dtype_name)
    base_e = expert_ids(rng, r, k, experts, "uniform", torch.int64)
    xs = {"transposed": base_x.t().contiguous().t(),
          "strided": torch.zeros(r, 2 * hidden + 1, dtype=base_x.dtype)[:, 1::2],
          "broadcast": base_x[:1].expand(r, hidden)}
    xs["strided"].copy_(base_x)
    es = {"transposed": base_e.t().contiguous().t(),
          "strided": torch.zeros(r, 2 * k + 1, dtype=torch.int64)[:, 1::2],
          "broadcast": base_e[:, :1].expand(r, k)}
    es["strided"].copy_(base_e)
    for xname, x in xs.items():
        for ename, eidx in es.items():
            for out_layout in ("contiguous", "strided"):
                what = f"{device} x {xname} expert_idx {ename} out {out_layout}"
                got = run_init(x, eidx, device, 0, experts, flag=2, active_num=20,
                               out_layout=out_layout)
                check_init(got, x, eidx, 0, experts, flag=2, active_num=20, what=what)
                got = run_init(x, eidx, device, 1, experts, capacity=3, before=True,
                               out_layout=out_layout)
                check_init(got, x, eidx, 1, experts, capacity=3, before=True, what=what)


@pytest.mark.parametrize("device", DEVICES)
def test_forward_zero_size(device):
    """R = 0 (mode 1: every slot zero, counts 0), H = 0, K = 0."""
    for r, k, hidden in ((0, 2, 5), (4, 2, 0), (3, 0, 4)):
        x = torch.ones(r, hidden)
        eidx = torch.zeros(r, k, dtype=torch.int64)
        for mode in (0, 1):
            got = run_init(x, eidx, device, mode, 3, capacity=2, flag=2, before=True)
            check_init(got, x, eidx, mode, 3, capacity=2, flag=2, before=True,
                       what=f"{device} R={r} K={k} H={hidden} mode {mode}")


@pytest.mark.parametrize("device", DEVICES)
def test_forward_numpy(device):
    rng = rng_for("init-numpy")
    x = values(rng, (6, 5), "float32").numpy()
    for dtype in (np.int32, np.int64):
        eidx = rng.integers(0, 3, (6, 2)).astype(dtype)
        ex, idx, counts, _ = infiniop.moe_init_routing_v2(
            x, eidx, expert_num=3, expert_tokens_count_or_cumsum_flag=2, **on(device))
        assert isinstance(ex, np.ndarray) and idx.dtype == dtype and counts.dtype == dtype
        want = reference_init(torch.from_numpy(x), torch.from_numpy(eidx), 0, 3)
        assert same_bits(torch.from_numpy(ex), want[0])
        assert (idx == want[1].numpy()).all() and (counts == want[2].numpy()).all()
        ex, idx, _, before = infiniop.moe_init_routing_v2(
            x[::-1], eidx[::-1], expert_num=3, drop_pad_mode=1, expert_capacity=2,
            expert_tokens_before_capacity_flag=True, index_dtype=np.int32, **on(device))
        want = reference_init(torch.from_numpy(x[::-1].copy()),
                              torch.from_numpy(eidx[::-1].copy()), 1, 3, 2)
        assert same_bits(torch.from_numpy(ex), want[0]) and idx.dtype == np.int32
        assert (idx == want[1].numpy()).all() and (before == want[2].numpy()).all()


@pytest.mark.parametrize("case", ["mode0", "mode1"])
def test_staging_matches_direct(case):
    """The binding's staging through device memory (what opencl uses), on the cpu device."""
    rng = rng_for("init-staging", case)
    x = values(rng, (7, 9), "float32")
    eidx = expert_ids(rng, 7, 3, 4, "uniform", torch.int64)
    mode, kwargs = (0, {"expert_tokens_count_or_cumsum_flag": 1, "active_num": 15}) \
        if case == "mode0" else (1, {"expert_capacity": 3,
                                     "expert_tokens_before_capacity_flag": True})
    results = [infiniop.moe_init_routing_v2(x, eidx, expert_num=4, drop_pad_mode=mode,
                                            _stage=stage, **kwargs) for stage in (False, True)]
    for direct, staged in zip(*results):
        assert (direct is None and staged is None) or same_bits(direct, staged)
    grads = [infiniop.moe_init_routing_v2_grad(results[0][0], results[0][1], top_k=3,
                                               drop_pad_mode=mode,
                                               active_num=kwargs.get("active_num", 0),
                                               _stage=stage) for stage in (False, True)]
    assert same_bits(grads[0], grads[1])


# ----------------------------------------------------------------------------------------------
# Flags: outputs not asked for are neither checked nor written

@pytest.mark.parametrize("device", DEVICES)
def test_unasked_outputs_untouched(device):
    """An output its flag does not ask for (flag off, or the other mode) is not written, and
    not checked: given in any shape or dtype it is returned as given, untouched."""
    rng = rng_for("init-unasked")
    x = values(rng, (5, 4), "float32")
    eidx = expert_ids(rng, 5, 2, 3, "uniform", torch.int64)
    for mode, flag, before in ((0, 0, True), (1, 2, False), (1, 1, False), (0, 1, True)):
        junk = [torch.full((7, 2), SENTINEL), torch.full((1,), SENTINEL)]
        outs = (None, None, junk[0] if mode == 1 or flag == 0 else None,
                junk[1] if mode == 0 or not before else None)
        got = infiniop.moe_init_routing_v2(
            x, eidx, expert_num=3, drop_pad_mode=mode, expert_capacity=2,
            expert_tokens_count_or_cumsum_flag=flag, expert_tokens_before_capacity_flag=before,
            out=outs, **on(device))
        for given, returned in zip(outs[2:], got[2:]):
            if given is not None:
                assert returned is given and (given == SENTINEL).all()
        check_init((got[0], got[1]) + tuple(g if o is None else None
                                             for g, o in zip(got[2:], outs[2:])),
                   x, eidx, mode, 3, 2, 0, flag, before, what=f"{device} unasked")


@pytest.mark.parametrize("device", DEVICES)
def test_absent_pointers_ignored(device):
    """Count descriptors given as NULL: their pointers (NULL or junk) are ignored."""
    rng = rng_for("init-absent", device)
    x = values(rng, (6, 37), "float32")
    eidx = expert_ids(rng, 6, 2, 4, "uniform", torch.int32)
    with device_handle(device) as handle, JunkPointers(handle) as junk:
        for mode in (0, 1):
            shape = (12, 37) if mode == 0 else (4, 3, 37)
            want = reference_init(x, eidx, mode, 4, 3)
            with infiniop.MoeInitRoutingV2.for_arrays(
                    handle, torch.empty(shape), torch.empty(12, dtype=torch.int32), None, None,
                    x, eidx, expert_num=4, drop_pad_mode=mode, expert_capacity=3) as op:
                for pointer, name in zip(junk.pointers, junk.names):
                    ex = torch.full(shape, float("nan"))
                    idx = torch.full((12,), -7, dtype=torch.int32)
                    run_op(handle, op, [ex, idx, None, None, x, eidx], 4, absent=pointer)
                    assert same_bits(ex, want[0]), f"{device} absent {name}"
                    assert torch.equal(idx.long(), want[1]), f"{device} absent {name}"
        junk.assert_untouched()


# ----------------------------------------------------------------------------------------------
# Grad

def grad_truth(grad_expanded, gather, r, hidden):
    """(truth, sum of |terms|) by float64 autograd of expanded_x = [x; 0][gather] w.r.t. x."""
    results = []
    for absolute in (False, True):
        x = torch.zeros(r, hidden, dtype=torch.float64, requires_grad=True)
        padded = torch.cat([x, x.new_zeros(1, hidden)])
        safe = torch.where(gather >= 0, gather, torch.full_like(gather, r))
        expanded = padded.index_select(0, safe)
        g = grad_expanded.double().reshape(-1, hidden)
        expanded.backward(g.abs() if absolute else g)
        results.append(x.grad)
    return results


def literal_grad(grad_expanded, row_idx, k, rows, hidden, dtype, acc_dtype=torch.float32):
    """The header's formula as written: additions in increasing k from 0 in acc_dtype (F32; the
    cpu_reference device sums in double), rounded once to dtype."""
    g = grad_expanded.reshape(-1, hidden).to(acc_dtype)
    idx = row_idx.long().reshape(-1, k)
    acc = torch.zeros(idx.shape[0], hidden, dtype=acc_dtype)
    for j in range(k):
        col = idx[:, j]
        valid = (col >= 0) & (col < rows)
        acc[valid] = acc[valid] + g[col[valid]]
    return acc.to(dtype)


def check_grad(got, grad_expanded, row_idx, k, mode, dtype_name, what, device):
    r, hidden = got.shape
    rows = math.prod(grad_expanded.shape[:-1])
    idx = row_idx.long().reshape(r, k)
    landing = (idx >= 0) & (idx < rows)
    c = landing.sum(1)
    # gather: the inverse of the index (every valid index value is one expanded row)
    gather = torch.full((rows,), -1, dtype=torch.long)
    flat = idx.reshape(-1)
    tokens = torch.arange(r * k) // k
    ok = landing.reshape(-1)
    # duplicate index values (hand-made cases): autograd of a gather cannot express them, so
    # the truth is then the sum formula in float64 (the same gradient)
    if torch.unique(flat[ok]).numel() == int(ok.sum()):
        gather[flat[ok]] = tokens[ok]
        truth, terms = grad_truth(grad_expanded, gather, r, hidden)
    else:
        g = grad_expanded.double().reshape(-1, hidden)
        truth = torch.zeros(r, hidden, dtype=torch.float64)
        terms = torch.zeros(r, hidden, dtype=torch.float64)
        for j in range(k):
            col, valid = idx[:, j], landing[:, j]
            truth[valid] += g[col[valid]]
            terms[valid] += g[col[valid]].abs()
    cc = c.double().reshape(r, 1).expand(r, hidden)
    zero = (c == 0).reshape(r, 1).expand(r, hidden)
    assert_matches(got, truth.numpy(), (cc * U * terms).numpy(), dtype_name, what,
                   exact_zero=zero.numpy())
    # The order is fixed: exactly the F32 additions in increasing k from 0 (so one
    # contribution is that value itself, -0 becoming +0 as in torch's autograd).
    acc = torch.float64 if device == "cpu_reference" else torch.float32
    want = literal_grad(grad_expanded, row_idx, k, rows, hidden, got.dtype, acc)
    nan = torch.isnan(want)
    assert torch.equal(torch.isnan(got), nan) and torch.equal(got[~nan], want[~nan]), \
        f"{what}: not the F32 sum in increasing k"


def grad_case(rng, shape, dtype_name, index_dtype, mode, setting):
    """(grad_expanded_x, expanded_row_idx from the library's own Init (checked against the
    oracle), attributes)."""
    r, k, hidden, experts = shape
    eidx = expert_ids(rng, r, k, experts, "skewed", INDEX[index_dtype])
    x = values(rng, (r, hidden), dtype_name)
    if mode == 0:
        active = active_value(setting, r * k)
        got = run_init(x, eidx, "cpu_reference", 0, experts, active_num=active)
        attrs = {"drop_pad_mode": 0, "active_num": active}
        check_init(got, x, eidx, 0, experts, active_num=active, what="grad case")
    else:
        counts = torch.bincount(eidx.reshape(-1).long(), minlength=experts)
        cap = capacity_value(setting, r, k, counts)
        got = run_init(x, eidx, "cpu_reference", 1, experts, capacity=cap)
        attrs = {"drop_pad_mode": 1}
        check_init(got, x, eidx, 1, experts, capacity=cap, what="grad case")
    grad_expanded = values(rng, tuple(got[0].shape), dtype_name)
    return grad_expanded, got[1], attrs


GRAD_SHAPES = [(1, 1, 1, 1), (7, 3, 17, 4), (16, 2, 67, 8), (9, 9, 5, 3), (3, 19, 1030, 5)]
GRAD_CONFIGS = [(0, "zero"), (0, "one"), (0, "half"), (0, "all"), (0, "more"),
                (1, "one"), (1, "tight"), (1, "loose")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("index_dtype", list(INDEX))
@pytest.mark.parametrize("shape", GRAD_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_grad(device, dtype_name, index_dtype, shape):
    r, k, hidden, _ = shape
    for mode, setting in GRAD_CONFIGS:
        rng = rng_for("init-grad", dtype_name, index_dtype, shape, mode, setting)
        grad_expanded, row_idx, attrs = grad_case(rng, shape, dtype_name, index_dtype, mode,
                                                  setting)
        out = torch.full((r, hidden), float("nan"), dtype=TORCH_DTYPES[dtype_name])
        got = infiniop.moe_init_routing_v2_grad(grad_expanded, row_idx, top_k=k, **attrs,
                                                **on(device), out=out)
        assert got is out
        check_grad(out, grad_expanded, row_idx, k, mode, dtype_name,
                   f"{device} grad {shape} mode {mode} {setting}", device)
        alloc = infiniop.moe_init_routing_v2_grad(grad_expanded, row_idx, top_k=k, **attrs,
                                                  **on(device))
        assert alloc.dtype == out.dtype and same_bits(alloc, out)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
def test_grad_duplicates_and_specials(device, dtype_name):
    """Duplicate index values each add (hand-made; the Init never writes them); -1 and
    inactive indices add nothing; infinities and NaN propagate."""
    dtype = TORCH_DTYPES[dtype_name]
    hidden, k = 6, 3
    rng = rng_for("init-grad-dup", dtype_name)
    g = values(rng, (8, hidden), dtype_name)
    g[2, 0], g[3, 1], g[5, 2] = float("inf"), float("-inf"), float("nan")
    for index_dtype in INDEX.values():
        idx0 = torch.tensor([0, 0, 1, 2, 3, 7, 6, 6, 6, 4, 5, 2], dtype=index_dtype)
        got = infiniop.moe_init_routing_v2_grad(g[:6], idx0, top_k=k, active_num=6,
                                                **on(device))
        check_grad(got, g[:6], idx0, k, 0, dtype_name, f"{device} duplicates mode 0",
                   device)
        idx1 = torch.tensor([0, 0, -1, 2, 3, 7, -1, -1, -1, 4, 5, 2], dtype=index_dtype)
        got = infiniop.moe_init_routing_v2_grad(g.reshape(2, 4, hidden), idx1, top_k=k,
                                                drop_pad_mode=1, **on(device))
        check_grad(got, g, idx1, k, 1, dtype_name, f"{device} duplicates mode 1",
                   device)
        assert (got[2] == 0).all() and got.dtype == dtype


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", [0, 1])
def test_grad_strides(device, mode):
    rng = rng_for("init-grad-strides", mode)
    shape = (7, 3, 17, 4)
    grad_expanded, row_idx, attrs = grad_case(rng, shape, "float32", "int64", mode,
                                              "half" if mode == 0 else "tight")
    want = infiniop.moe_init_routing_v2_grad(grad_expanded, row_idx, top_k=3, **attrs,
                                             **on(device))
    g_t = grad_expanded.permute(*reversed(range(grad_expanded.dim()))).contiguous()
    g_t = g_t.permute(*reversed(range(grad_expanded.dim())))
    idx_s = torch.full((2 * row_idx.numel(),), 99, dtype=row_idx.dtype)[::2]
    idx_s.copy_(row_idx)
    storage = torch.full((7, 35), SENTINEL)
    out = storage[:, 1::2]
    infiniop.moe_init_routing_v2_grad(g_t, idx_s, top_k=3, **attrs, **on(device), out=out)
    assert same_bits(out.contiguous(), want) and (storage[:, 0::2] == SENTINEL).all()


@pytest.mark.parametrize("device", DEVICES)
def test_grad_large_matches_literal(device):
    """Above the cpu's parallel threshold (2^15 elements): the fixed-order F32 sum, the same
    values on every device and thread count."""
    rng = rng_for("init-grad-large")
    shape = (512, 4, 96, 8)
    for mode, setting in ((0, "all"), (1, "tight")):
        grad_expanded, row_idx, attrs = grad_case(rng, shape, "bfloat16", "int64", mode,
                                                  setting)
        got = infiniop.moe_init_routing_v2_grad(grad_expanded, row_idx, top_k=4, **attrs,
                                                **on(device))
        check_grad(got, grad_expanded, row_idx, 4, mode, "bfloat16", f"{device} large",
                   device)


# ----------------------------------------------------------------------------------------------
# Errors: status, message, every output untouched

def init_base(mode, index_dtype=torch.int64):
    """A valid Init call: R = 4, K = 2, H = 5, E = 3; mode 1: C = 2; all four outputs given."""
    rng = rng_for("init-base", mode)
    kwargs = {"x": values(rng, (4, 5), "float32"),
              "expert_idx": expert_ids(rng, 4, 2, 3, "uniform", index_dtype),
              "expert_num": 3, "drop_pad_mode": mode,
              "expert_tokens_count_or_cumsum_flag": 1 if mode == 0 else 0,
              "expert_tokens_before_capacity_flag": mode == 1,
              "expert_capacity": 2 if mode == 1 else 0}
    shape = (8, 5) if mode == 0 else (3, 2, 5)
    kwargs["out"] = [torch.full(shape, SENTINEL), torch.full((8,), 7, dtype=index_dtype),
                     torch.full((3,), 7, dtype=index_dtype) if mode == 0 else None,
                     torch.full((3,), 7, dtype=index_dtype) if mode == 1 else None]
    return kwargs


def call_init(device, kwargs):
    kwargs = dict(kwargs)
    x, eidx = kwargs.pop("x"), kwargs.pop("expert_idx")
    kwargs["out"] = tuple(kwargs["out"])
    return infiniop.moe_init_routing_v2(x, eidx, **on(device), **kwargs)


def expect_init_error(device, status, kwargs, extra=()):
    outputs = tuple(o for o in kwargs["out"] if o is not None) + tuple(extra)
    return expect_error(status, call_init, device, kwargs, outputs=outputs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", [0, 1])
def test_init_valid_base(device, mode):
    kwargs = init_base(mode)
    got = call_init(device, kwargs)
    check_init(got, kwargs["x"], kwargs["expert_idx"], mode, 3, kwargs["expert_capacity"], 0,
               kwargs["expert_tokens_count_or_cumsum_flag"],
               kwargs["expert_tokens_before_capacity_flag"], what="base")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", [0, 1])
def test_init_bad_expert_ids(device, mode):
    """Expert ids outside [0, E): BAD_PARAM, nothing written; INT64 values a 32-bit truncation
    would make valid (2^32 -> 0) too. The bad value first and last."""
    for index_dtype in (torch.int32, torch.int64):
        bad = [3, -1, 2 ** 31 - 1, -2 ** 31]
        if index_dtype == torch.int64:
            bad += [2 ** 32, 2 ** 32 + 2, -2 ** 32, 2 ** 63 - 1, -2 ** 63]
        for position in (0, 7):
            for value in bad:
                kwargs = init_base(mode, index_dtype)
                eidx = kwargs["expert_idx"].clone()
                eidx.view(-1)[position] = value
                kwargs["expert_idx"] = eidx
                error = expect_init_error(device, Status.BAD_PARAM, kwargs)
                assert error.message


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", [0, 1])
def test_init_bad_params(device, mode):
    for bad_mode in (-1, 2, 3):
        kwargs = init_base(mode)
        kwargs["drop_pad_mode"] = bad_mode
        expect_init_error(device, Status.BAD_PARAM, kwargs)
    for experts in (0, -1):
        kwargs = init_base(mode)
        kwargs["expert_num"] = experts
        expect_init_error(device, Status.BAD_PARAM, kwargs)
    for flag in (-1, 3):
        kwargs = init_base(mode)
        kwargs["expert_tokens_count_or_cumsum_flag"] = flag
        expect_init_error(device, Status.BAD_PARAM, kwargs)
    if mode == 0:
        kwargs = init_base(0)
        kwargs["active_num"] = -1
        expect_init_error(device, Status.BAD_PARAM, kwargs)
        kwargs = init_base(0)  # expert_capacity ignored in mode 0
        kwargs["expert_capacity"] = -3
        call_init(device, kwargs)
    else:
        for capacity in (0, -2):
            kwargs = init_base(1)
            kwargs["expert_capacity"] = capacity
            kwargs["out"][0] = torch.full((3, max(capacity, 0), 5), SENTINEL)
            expect_init_error(device, Status.BAD_PARAM, kwargs)
        kwargs = init_base(1)  # active_num ignored in mode 1
        kwargs["active_num"] = -5
        call_init(device, kwargs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", [0, 1])
def test_init_required_output_absent(device, mode):
    """A flag asking for an output whose descriptor is NULL: BAD_PARAM, nothing written."""
    kwargs = init_base(mode)
    out = kwargs["out"]
    with device_handle(device) as handle:
        arrays = [out[0], out[1], None, None, kwargs["x"], kwargs["expert_idx"]]
        with pytest.raises(InfiniopError) as info:
            infiniop.MoeInitRoutingV2.for_arrays(
                handle, *arrays, expert_num=3, drop_pad_mode=mode, expert_capacity=2,
                expert_tokens_count_or_cumsum_flag=2 if mode == 0 else 0,
                expert_tokens_before_capacity_flag=mode == 1)
        assert_infiniop_error(info.value, Status.BAD_PARAM)
    assert (out[0] == SENTINEL).all() and (out[1] == 7).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", [0, 1])
def test_init_bad_shapes(device, mode):
    ex_bad = [(7, 5), (9, 5), (8, 4), (8, 5, 1)] if mode == 0 else \
        [(3, 2, 4), (2, 2, 5), (3, 3, 5), (6, 5)]
    for shape in ex_bad:
        kwargs = init_base(mode)
        kwargs["out"][0] = torch.full(shape, SENTINEL)
        expect_init_error(device, Status.BAD_TENSOR_SHAPE, kwargs)
    slot = 2 if mode == 0 else 3
    for shape in ((2,), (4,), (3, 1)):
        kwargs = init_base(mode)
        kwargs["out"][slot] = torch.full(shape, 7, dtype=torch.int64)
        expect_init_error(device, Status.BAD_TENSOR_SHAPE, kwargs)
    for shape in ((7,), (9,), (4, 2)):
        kwargs = init_base(mode)
        kwargs["out"][1] = torch.full(shape, 7, dtype=torch.int64)
        expect_init_error(device, Status.BAD_TENSOR_SHAPE, kwargs)
    for name, shapes in (("x", [(3, 5), (5, 5), (4, 5, 1), (20,)]),
                         ("expert_idx", [(3, 2), (8,), (4, 2, 1)])):
        for shape in shapes:
            kwargs = init_base(mode)
            kwargs[name] = (torch.ones(shape) if name == "x"
                            else torch.zeros(shape, dtype=torch.int64))
            expect_init_error(device, Status.BAD_TENSOR_SHAPE, kwargs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", [0, 1])
def test_init_bad_dtypes(device, mode):
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        kwargs = init_base(mode)
        kwargs["out"][0] = kwargs["out"][0].to(dtype)  # expanded_x not x's dtype
        expect_init_error(device, Status.BAD_TENSOR_DTYPE, kwargs)
    kwargs = init_base(mode)
    kwargs["x"] = kwargs["x"].double()
    kwargs["out"][0] = kwargs["out"][0].double()
    expect_init_error(device, Status.BAD_TENSOR_DTYPE, kwargs)
    for dtype in (torch.int16, torch.uint8, torch.float32):
        kwargs = init_base(mode)
        kwargs["expert_idx"] = kwargs["expert_idx"].to(dtype)
        expect_init_error(device, Status.BAD_TENSOR_DTYPE, kwargs)
        for slot in (1, 2 if mode == 0 else 3):
            kwargs = init_base(mode)
            kwargs["out"][slot] = kwargs["out"][slot].to(dtype)
            expect_init_error(device, Status.BAD_TENSOR_DTYPE, kwargs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", [0, 1])
def test_init_overlapping_outputs(device, mode):
    kwargs = init_base(mode)
    storage = torch.full((64,), SENTINEL)
    x = storage[:20].reshape(4, 5)
    x.copy_(kwargs["x"])
    kwargs["x"] = x
    shape = tuple(kwargs["out"][0].shape)
    kwargs["out"][0] = storage[10:10 + math.prod(shape)].reshape(shape)  # over x
    expect_init_error(device, Status.BAD_TENSOR_STRIDES, kwargs, (storage,))
    kwargs = init_base(mode)
    kwargs["out"][0] = torch.full(shape[:-1] + (1,), SENTINEL).expand(shape)  # stride 0
    expect_init_error(device, Status.BAD_TENSOR_STRIDES, kwargs)
    kwargs = init_base(mode)  # expanded_row_idx over expert_idx
    raw = torch.zeros(16, dtype=torch.int64)
    raw[:8] = kwargs["expert_idx"].reshape(-1)
    kwargs["expert_idx"] = raw[:8].reshape(4, 2)
    kwargs["out"][1] = raw[4:12]
    expect_init_error(device, Status.BAD_TENSOR_STRIDES, kwargs, (raw,))
    kwargs = init_base(mode)  # the counts over expanded_row_idx
    raw = torch.full((12,), 7, dtype=torch.int64)
    kwargs["out"][1] = raw[:8]
    kwargs["out"][2 if mode == 0 else 3] = raw[6:9]
    expect_init_error(device, Status.BAD_TENSOR_STRIDES, kwargs, (raw,))


def grad_base(mode, index_dtype=torch.int64):
    """A valid grad call: R = 4, top_k = 2, H = 5; mode 0: (8, 5), mode 1: E = 3, C = 2."""
    rng = rng_for("init-grad-base", mode)
    if mode == 0:
        idx = torch.randperm(8, generator=torch.Generator().manual_seed(3)).to(index_dtype)
        g = values(rng, (8, 5), "float32")
    else:
        idx = torch.tensor([0, 3, -1, 1, 4, 5, -1, 2], dtype=index_dtype)
        g = values(rng, (3, 2, 5), "float32")
    return {"grad_expanded_x": g, "expanded_row_idx": idx, "top_k": 2, "drop_pad_mode": mode,
            "active_num": 0, "out": torch.full((4, 5), SENTINEL)}


def call_grad(device, kwargs):
    kwargs = dict(kwargs)
    g, idx = kwargs.pop("grad_expanded_x"), kwargs.pop("expanded_row_idx")
    return infiniop.moe_init_routing_v2_grad(g, idx, **on(device), **kwargs)


def expect_grad_error(device, status, kwargs):
    return expect_error(status, call_grad, device, kwargs, outputs=(kwargs["out"],))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", [0, 1])
def test_grad_errors(device, mode):
    kwargs = grad_base(mode)
    check_grad(call_grad(device, kwargs), kwargs["grad_expanded_x"], kwargs["expanded_row_idx"],
               2, mode, "float32", "grad base", device)
    for top_k in (0, -1):
        kwargs = grad_base(mode)
        kwargs["top_k"] = top_k
        expect_grad_error(device, Status.BAD_PARAM, kwargs)
    for bad_mode in (-1, 2):
        kwargs = grad_base(mode)
        kwargs["drop_pad_mode"] = bad_mode
        expect_grad_error(device, Status.BAD_PARAM, kwargs)
    if mode == 0:
        kwargs = grad_base(0)
        kwargs["active_num"] = -1
        expect_grad_error(device, Status.BAD_PARAM, kwargs)
        bad_values = [-1, 8, 2 ** 31 - 1]
    else:
        kwargs = grad_base(1)
        kwargs["active_num"] = -1  # ignored in mode 1
        call_grad(device, kwargs)
        bad_values = [-2, 6, 2 ** 31 - 1]
    for index_dtype in (torch.int32, torch.int64):
        values_ = bad_values + ([2 ** 32, 2 ** 32 + 1, -2 ** 63] if index_dtype == torch.int64
                                else [])
        for position in (0, 7):
            for value in values_:
                kwargs = grad_base(mode, index_dtype)
                idx = kwargs["expanded_row_idx"].clone()
                idx[position] = value
                kwargs["expanded_row_idx"] = idx
                expect_grad_error(device, Status.BAD_PARAM, kwargs)
    # shapes
    for shape in ((4, 4), (3, 5), (8, 5), (4, 5, 1)):
        kwargs = grad_base(mode)
        kwargs["out"] = torch.full(shape, SENTINEL)
        expect_grad_error(device, Status.BAD_TENSOR_SHAPE, kwargs)
    kwargs = grad_base(mode)
    kwargs["expanded_row_idx"] = kwargs["expanded_row_idx"][:7]
    expect_grad_error(device, Status.BAD_TENSOR_SHAPE, kwargs)
    kwargs = grad_base(mode)
    g = kwargs["grad_expanded_x"]
    kwargs["grad_expanded_x"] = torch.ones((7, 5) if mode == 0 else (3, 2, 4))
    expect_grad_error(device, Status.BAD_TENSOR_SHAPE, kwargs)
    if mode == 0:  # rows must be A: active_num = 5 wants (5, H)
        kwargs = grad_base(0)
        kwargs["active_num"] = 5
        expect_grad_error(device, Status.BAD_TENSOR_SHAPE, kwargs)
    # dtypes
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        kwargs = grad_base(mode)
        kwargs["out"] = kwargs["out"].to(dtype)
        expect_grad_error(device, Status.BAD_TENSOR_DTYPE, kwargs)
    for dtype in (torch.int16, torch.float32):
        kwargs = grad_base(mode)
        kwargs["expanded_row_idx"] = kwargs["expanded_row_idx"].to(dtype)
        expect_grad_error(device, Status.BAD_TENSOR_DTYPE, kwargs)
    # overlap: grad_x over grad_expanded_x
    kwargs = grad_base(mode)
    g = kwargs["grad_expanded_x"]
    kwargs["out"] = g.reshape(-1)[:20].reshape(4, 5)
    before = g.clone()
    with pytest.raises(InfiniopError) as info:
        call_grad(device, kwargs)
    assert_infiniop_error(info.value, Status.BAD_TENSOR_STRIDES)
    assert same_bits(g, before)


# ----------------------------------------------------------------------------------------------
# Descriptor objects, workspace, binding argument checks

@pytest.mark.parametrize("device", DEVICES)
def test_descriptor_workspace(device):
    kwargs = init_base(0)
    x, eidx = kwargs["x"], kwargs["expert_idx"]
    want = call_init(device, init_base(0))
    with open_handle(device) as handle:
        ex = torch.full((8, 5), SENTINEL)
        idx = torch.full((8,), 7, dtype=torch.int64)
        counts = torch.full((3,), 7, dtype=torch.int64)
        with infiniop.MoeInitRoutingV2.for_arrays(
                handle, ex, idx, counts, None, x, eidx, expert_num=3,
                expert_tokens_count_or_cumsum_flag=1) as op:
            assert (op.expert_num, op.drop_pad_mode, op.expert_tokens_count_or_cumsum_flag,
                    op.expert_tokens_before_capacity_flag) == (3, 0, 1, False)
            needed = op.workspace_size
            if handle.host_memory:
                assert needed == 0
            if needed:  # less than asked: INSUFFICIENT_WORKSPACE, nothing written
                workspace = handle.malloc(needed - 1) if needed > 1 else 0
                try:
                    with pytest.raises(InfiniopError) as info:
                        run_op(handle, op, [ex, idx, counts, None, x, eidx], 4,
                               workspace=workspace, workspace_size=needed - 1)
                finally:
                    if workspace:
                        handle.free(workspace)
                assert_infiniop_error(info.value, Status.INSUFFICIENT_WORKSPACE)
                assert (ex == SENTINEL).all() and (idx == 7).all() and (counts == 7).all()
            run_op(handle, op, [ex, idx, counts, None, x, eidx], 4)
            assert same_bits(ex, want[0]) and torch.equal(idx, want[1])
            assert torch.equal(counts, want[2])
        gx = torch.full((4, 5), float("nan"))
        with infiniop.MoeInitRoutingV2Grad.for_arrays(handle, gx, ex, idx, top_k=2) as op:
            assert (op.top_k, op.drop_pad_mode, op.active_num) == (2, 0, 0)
            assert op.workspace_size == 0
            run_op(handle, op, [gx, ex, idx], 1)
        check_grad(gx, ex, idx, 2, 0, "float32", "descriptor", device)


def test_binding_argument_errors():
    x = torch.ones(4, 3)
    eidx = torch.zeros(4, 2, dtype=torch.int64)
    for bad in (1.0, True, "0"):
        with pytest.raises(TypeError):
            infiniop.moe_init_routing_v2(x, eidx, expert_num=bad)
        with pytest.raises(TypeError):
            infiniop.moe_init_routing_v2(x, eidx, expert_num=2, active_num=bad)
        with pytest.raises(TypeError):
            infiniop.moe_init_routing_v2_grad(x, eidx.reshape(-1), top_k=bad)
    with pytest.raises(TypeError):
        infiniop.moe_init_routing_v2(x, eidx, expert_num=2, expert_tokens_before_capacity_flag=1)
    with pytest.raises(TypeError):
        infiniop.moe_init_routing_v2(x, eidx)  # expert_num is required
    with pytest.raises(TypeError):
        infiniop.moe_init_routing_v2_grad(x, eidx.reshape(-1))  # top_k is required
    with pytest.raises(OverflowError):
        infiniop.moe_init_routing_v2(x, eidx, expert_num=2 ** 63)
    with pytest.raises(TypeError, match="index_dtype"):
        infiniop.moe_init_routing_v2(x, eidx, expert_num=2, index_dtype=torch.int16)
    with pytest.raises(TypeError, match="out"):
        infiniop.moe_init_routing_v2(x, eidx, expert_num=2, out=(None,) * 5)
    with pytest.raises(TypeError, match="one kind"):
        infiniop.moe_init_routing_v2(x, eidx.numpy(), expert_num=2)
    with pytest.raises(TypeError, match="one kind"):
        infiniop.moe_init_routing_v2_grad(x.numpy(), eidx.reshape(-1), top_k=2)
    for spelling in ("int32", "INT32", np.int32, np.dtype("int32"), torch.int32,
                     infiniop.DType.I32):
        got = infiniop.moe_init_routing_v2(x, eidx, expert_num=2, index_dtype=spelling)
        assert got[1].dtype == torch.int32


# ----------------------------------------------------------------------------------------------
# MoeInitRoutingQuantV2: the same routing, expanded_x quantized per row (a float64 oracle: the
# routing by reference_init, the bytes by test_gated_quant's INT8 / e4m3fn encoders)

from test_gated_quant import dynamic_scale, fp8_bytes, int8_bytes  # noqa: E402

QUANT_QMAX = {"int8": 127.0, "fp8": 448.0}


def quant_oracle(x, expert_idx, mode, experts, quant, qdtype, scale=None, offset=None,
                 capacity=0, active_num=0):
    """(expanded_x bytes as uint8, dynamic scales (rows,) float32 or None) in float64: static
    y = x scale + offset; dynamic z = x m (m the row's expert's smooth row, row 0, or 1),
    s = amax / qmax to F32, y = z / s; unfilled slots 0 with scale 0."""
    _, _, _, gather = reference_init(x, expert_idx, mode, experts, capacity, active_num)
    flat = expert_idx.reshape(-1).long()
    order = torch.argsort(flat, stable=True)
    rows = gather.numel()
    if mode == 0:
        expert = flat[order[:rows]]
    else:
        expert = torch.arange(rows) // max(capacity, 1)
    filled = gather >= 0
    v = x.double()[gather.clamp(min=0)]
    if quant == "static":
        t = v * scale.double() + offset.double()
        s = None
    else:
        if scale is None:
            z = v
        else:
            m = scale.double()
            z = v * (m[expert] if m.shape[0] > 1 else m[0])
        amax = z.abs().amax(-1) if z.shape[-1] else torch.zeros(rows, dtype=torch.float64)
        s = dynamic_scale(amax, QUANT_QMAX[qdtype], False)
        t = z / s.double()[:, None]
        s = torch.where(filled, s, torch.zeros_like(s))
    q = (fp8_bytes(t) if qdtype == "fp8" else int8_bytes(t)).clone()
    q[~filled] = 0
    shape = (experts, capacity, x.shape[-1]) if mode == 1 else (rows, x.shape[-1])
    return q.reshape(shape), None if s is None else s.reshape(shape[:-1])


def quant_case(seed, r, k, hidden, experts, dtype, index=torch.int32):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(r, hidden, generator=g, dtype=torch.float64)
         * torch.pow(10.0, torch.randint(-3, 3, (r, 1), generator=g).double())).to(dtype)
    ids = torch.randint(0, experts, (r, k), generator=g).to(index)
    return x, ids, g


QUANT_CASES = [  # (quant, smooth rows: 0 none, 1 (1, H), 2 (E, H), mode)
    ("static", 0, 0), ("static", 0, 1), ("dynamic", 0, 0), ("dynamic", 1, 0),
    ("dynamic", 2, 0), ("dynamic", 2, 1), ("dynamic", 1, 1)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("qdtype", ["int8", "fp8"])
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("case", QUANT_CASES, ids=lambda c: f"{c[0]}-smooth{c[1]}-mode{c[2]}")
def test_quant_forward(device, qdtype, dtype_name, case):
    """Every byte and scale as the float64 oracle's, the index and count outputs as
    moe_init_routing_v2's, on every device the same bits as cpu_reference."""
    quant, smooth, mode = case
    r, k, hidden, experts = 13, 3, 37, 5
    x, ids, g = quant_case(7, r, k, hidden, experts, TORCH_DTYPES[dtype_name],
                           torch.int64 if mode else torch.int32)
    capacity, active = (4, 0) if mode else (0, 30)
    scale = offset = None
    if quant == "static":
        scale, offset = torch.tensor([0.75]), torch.tensor([-2.5])
    elif smooth:
        scale = torch.rand(experts if smooth == 2 else 1, hidden, generator=g) * 2 - 0.5
    flags = ({"expert_tokens_before_capacity_flag": True} if mode
             else {"expert_tokens_count_or_cumsum_flag": 1})
    got = infiniop.moe_init_routing_quant_v2(
        x, ids, expert_num=experts, quant_mode=quant, dtype=qdtype, scale=scale, offset=offset,
        active_num=active, expert_capacity=capacity, drop_pad_mode=mode, **flags, **on(device))
    want_q, want_s = quant_oracle(x, ids, mode, experts, quant, qdtype, scale, offset, capacity,
                                  active)
    assert torch.equal(got[0].view(torch.uint8), want_q), "expanded_x bytes"
    if quant == "static":
        assert got[4] is None
    else:
        assert torch.equal(got[4].view(torch.int32), want_s.view(torch.int32)), "scales"
    plain = infiniop.moe_init_routing_v2(x, ids, expert_num=experts, active_num=active,
                                         expert_capacity=capacity, drop_pad_mode=mode, **flags)
    for a, b in zip(got[1:4], plain[1:4]):
        assert (a is None and b is None) or same_bits(a, b), "routing outputs differ from V2's"
    if device != "cpu_reference":
        ref = infiniop.moe_init_routing_quant_v2(
            x, ids, expert_num=experts, quant_mode=quant, dtype=qdtype, scale=scale,
            offset=offset, active_num=active, expert_capacity=capacity, drop_pad_mode=mode,
            **flags, device="cpu_reference")
        for a, b in zip(got, ref):
            assert (a is None and b is None) or torch.equal(a.view(torch.uint8),
                                                            b.view(torch.uint8))


@pytest.mark.parametrize("device", DEVICES)
def test_quant_by_hand(device):
    """Ties after the offset round to even, saturation, -0, NaN / inf; a NaN row's scale."""
    x = torch.tensor([[1.0, 3.0, 100.0, -300.0, float("nan"), float("inf"), -0.0, 0.25]])
    ids = torch.zeros(1, 1, dtype=torch.int32)
    y = infiniop.moe_init_routing_quant_v2(x, ids, expert_num=1, quant_mode="static",
                                           scale=2.0, offset=0.5, **on(device))[0]
    # 2.5 -> 2, 6.5 -> 6, 200.5 -> 127, -599.5 -> -127, NaN -> 0, inf -> 127, 0.5 -> 0, 1
    # (FP8 below: 1, 3, 100 a tie -> 96 (even), -300 -> -288, NaN, inf -> 448, -0, 0.25)
    assert y.tolist() == [[2, 6, 127, -127, 0, 127, 0, 1]]
    y = infiniop.moe_init_routing_quant_v2(x, ids, expert_num=1, quant_mode="static",
                                           dtype="fp8", scale=1.0, offset=-0.0, **on(device))[0]
    assert y.view(torch.uint8).tolist() == [[0x38, 0x44, 0x6C, 0xF9, 0x7F, 0x7E, 0x80, 0x28]]
    y, _, _, _, s = infiniop.moe_init_routing_quant_v2(
        torch.tensor([[127.0, 63.5, -0.5], [1.0, float("nan"), 2.0]]), ids.repeat(2, 1),
        expert_num=1, **on(device))
    assert y.tolist() == [[127, 64, 0], [0, 0, 0]]
    assert s.view(torch.int32).tolist() == [0x3F800000, 0x7FC00000]


@pytest.mark.parametrize("device", DEVICES)
def test_quant_errors(device):
    x, ids = torch.randn(4, 8), torch.zeros(4, 2, dtype=torch.int32)
    for kwargs, status in [({"quant_mode": "static", "scale": 1.0}, Status.BAD_PARAM),
                           ({"offset": 1.0}, Status.BAD_PARAM),
                           ({"scale": torch.ones(2, 8)}, Status.BAD_TENSOR_SHAPE),
                           ({"scale": torch.ones(3, 8, dtype=torch.float16)},
                            Status.BAD_TENSOR_DTYPE),
                           ({"quant_mode": 2}, Status.BAD_PARAM)]:
        expect_error(status, infiniop.moe_init_routing_quant_v2, x, ids, expert_num=3,
                     **kwargs, **on(device))
    with pytest.raises(InfiniopError, match="expert_idx value 3"):
        infiniop.moe_init_routing_quant_v2(x, ids + 3, expert_num=3, **on(device))


@pytest.mark.parametrize("device", DEVICES)
def test_npu_quant_modes(device):
    """npu_moe_init_routing_v2: quant_mode 1 (dynamic, expanded_scale the row scales) and 0 with
    offset (static, expanded_scale None) as the library's; no quant arguments: unquantized."""
    import infiniop.torch as itorch

    x, ids, g = quant_case(3, 6, 2, 16, 4, torch.bfloat16)
    smooth = torch.rand(4, 16, generator=g) + 0.5
    ex, idx, counts, es = itorch.npu_moe_init_routing_v2(
        x, ids, scale=smooth, expert_num=4, quant_mode=1, expert_tokens_num_flag=True,
        expert_tokens_num_type=1, row_idx_type=1, **on(device))
    want = infiniop.moe_init_routing_quant_v2(x, ids, expert_num=4, scale=smooth,
                                              expert_tokens_count_or_cumsum_flag=2)
    assert torch.equal(ex, want[0]) and torch.equal(es, want[4]) and torch.equal(idx, want[1])
    assert torch.equal(counts, want[2].long())
    ex, idx, _, es = itorch.npu_moe_init_routing_v2(
        x, ids, scale=torch.tensor([0.5]), offset=torch.tensor([1.0]), expert_num=4,
        quant_mode=0, **on(device))
    want = infiniop.moe_init_routing_quant_v2(x, ids, expert_num=4, quant_mode="static",
                                              scale=0.5, offset=1.0)
    gather = torch.empty_like(want[1])
    gather[want[1].long()] = torch.arange(want[1].numel(), dtype=want[1].dtype)
    assert es is None and torch.equal(ex, want[0]) and torch.equal(idx, gather)
    ex, _, _, es = itorch.npu_moe_init_routing_v2(x, ids, expert_num=4, **on(device))
    assert ex.dtype == torch.bfloat16 and es is None
    assert torch.equal(ex, infiniop.moe_init_routing_v2(x, ids, expert_num=4)[0])
    with pytest.raises(NotImplementedError, match="quant_mode"):
        itorch.npu_moe_init_routing_v2(x, ids, expert_num=4, quant_mode=2)


COMPILABLE_QUANT = pytest.mark.skipif(
    not (torch_ops_registered := __import__("infiniop.torch._ops", fromlist=["_ops"])).REGISTERED
    or not torch_ops_registered.COMPILABLE, reason="torch.library custom ops unavailable")


@COMPILABLE_QUANT
def test_quant_torch_op_and_compile():
    import infiniop.torch as itorch

    x, ids = torch.randn(8, 32), torch.randint(0, 4, (8, 2))
    torch.library.opcheck(torch.ops.infiniop.moe_init_routing_quant_v2, (x, ids),
                          {"expert_num": 4, "device": "cpu_reference"},
                          test_utils=("test_schema", "test_faketensor"))
    torch.library.opcheck(torch.ops.infiniop.moe_init_routing_quant_v2,
                          (x, ids, torch.tensor([0.5]), torch.tensor([0.25])),
                          {"expert_num": 4, "quant_mode": 0, "dtype": "fp8", "drop_pad_mode": 1,
                           "expert_capacity": 3, "device": "cpu_reference"},
                          test_utils=("test_schema", "test_faketensor"))

    def f(x, ids):
        return itorch.moe_init_routing_quant_v2(x, ids, expert_num=4, dtype="fp8",
                                                expert_tokens_count_or_cumsum_flag=1,
                                                device="cpu_reference")

    torch._dynamo.reset()
    eager, compiled = f(x, ids), torch.compile(f, fullgraph=True)(x, ids)
    torch._dynamo.reset()
    for a, b in zip(eager, compiled):
        assert (a is None and b is None) or torch.equal(a.view(torch.uint8), b.view(torch.uint8))
