# SPDX-License-Identifier: Apache-2.0
"""The router operators through the Python binding (infiniop.moe_gating_top_k_softmax,
moe_gating_top_k and their grads; infiniop.torch's autograd functions and torch_npu aliases) on
every device of helpers.DEVICES (cpu, cpu_reference, opencl), F32/F16/BF16 x, INT32/INT64
indices, against a float64 PyTorch oracle written here from docs/moe_gating_top_k_softmax.md
and docs/moe_gating_top_k.md.

The oracle:
- p = softmax(x) as the library defines it: m = max x (NaN if any x is NaN), a = m - x,
  e = exp(-a) and e = 0 where a > 87, p = e / sum e; sigmoid = 1 / (1 + exp(-x)).
- Selection: by key descending, NaN above +inf, equal keys (+0 and -0 equal) lower expert first;
  groups (MoeGatingTopK): E / group_count consecutive experts, scored by their max (mode 0) or
  the sum of their two largest (mode 1), the top k_group groups by the same order.
- y for the expert_idx the library returned, and the gradients by torch.autograd in float64 of
  the same function of x for the given indices (duplicates counting per slot).

Selection check: the library's expert_idx must equal the oracle's, except where the oracle's
keys are within the key bound of each other (near ties: the library selects on its F32 keys):
then each rank's key must be within that bound of the oracle's key of the same rank, and every
selected expert must be selectable (its group's score within the bound of the k_group-th). Where
the key is x itself (renorm 1) or inputs are bitwise equal (exact ties), the choice is exact:
equal inputs are taken lower expert first. NaN rows must select exactly as the oracle.

Error model (F32; F16/BF16 add one ulp of the output type, helpers.assert_matches), the core's
(tests/cpp/moe_gating_test.cc, docs/moe_gating_top_k_softmax.md, docs/moe_gating_top_k.md), with
u = 2^-24, K = tests/accuracy_bounds.json's "moe_gating" (4), chain = ceil(E / 16) + 4 (the
longest addition chain of the 16-slot row sum), a_j = m - x_j (the exponent's argument, whose
F32 rounding exp amplifies), A = sum_j p_j a_j:
    softmax p_j:             u (K + a_j + chain + A) p_j
    renorm 1 y_i:            u (K + a_i + k + A_k) y_i          (over the k selected)
    MoeGatingTopK y_i:       u (K + cond + k + 3) |y_i|, cond the row's largest of p's
                             (a_j + chain + A for softmax, 0 for sigmoid)
    grads:                   u (K + 2 cond + 2 k) M_j, cond the row's largest condition above
                             (p_j's own, and the selected p's through their sum),
                             M_j the sum of the magnitudes of what the formula adds for element j
                             (e.g. p_j (|G_j| + sum_i |g_i| p_{s_i}))
plus an absolute floor 2^-125.5 (scaled by the gradient's magnitude) for e = 0 beyond a = 87.
"""

import math
import warnings

import numpy as np
import pytest
import torch

import infiniop
import infiniop.torch as iop
from infiniop import InfiniopError, Status

import helpers
from helpers import (DEVICES, SENTINEL, TORCH_DTYPES, assert_matches, expect_error, on,
                     rng_for)

U = 2.0 ** -24
EXP_FLOOR = 2.0 ** -125
INDEX_DTYPES = {"int32": torch.int32, "int64": torch.int64}


def bound_u(name):
    """K of the operator `name`: tests/accuracy_bounds.json's "moe_gating", the four routers'
    one constant (an operator's own entry, were one added, first)."""
    try:
        return helpers.f32_bound(name) / U
    except KeyError:
        return helpers.f32_bound("moe_gating") / U


# ----------------------------------------------------------------------------------------------
# Inputs

def router_logits(rng, rows, experts, scale_bits=(-3, 6)):
    """Signed logits: uniform [-1, 1] times 2^U(scale_bits) per row (|x| from ~0.1 to ~60, so
    some rows have exponents beyond 87), about 10% exactly repeated values (exact ties), and in
    every fourth row a cluster of near ties (the row's max plus a few F32 ulps)."""
    x = rng.uniform(-1.0, 1.0, (rows, experts))
    x *= 2.0 ** rng.uniform(*scale_bits, (rows, 1))
    repeat = rng.random((rows, experts)) < 0.1
    x = np.where(repeat, np.roll(x, 1, axis=1), x)  # the left neighbour's value
    for r in range(0, rows, 4):
        top = x[r].max()
        width = min(experts, 5)
        where = rng.choice(experts, width, replace=False)
        x[r, where] = top + np.spacing(np.float32(abs(top) + 1)) * rng.integers(-2, 3, width)
    return torch.from_numpy(x)


def to_dtype(x, dtype_name):
    return x.to(TORCH_DTYPES[dtype_name])


def poisoned(shape, dtype):
    if dtype.is_floating_point:
        return torch.full(shape, float("nan"), dtype=dtype)
    return torch.full(shape, -7, dtype=dtype)


# ----------------------------------------------------------------------------------------------
# The float64 oracle

def softmax64(x):
    """(p, a) of the library's softmax of each row: a = m - x, e = exp(-a) (0 beyond a = 87)."""
    m = x.max(-1, keepdim=True).values  # NaN if any NaN (torch.max propagates NaN)
    a = m - x
    e = torch.where(a > 87, torch.zeros_like(a), torch.exp(-a))
    return e / e.sum(-1, keepdim=True), a


def sigmoid64(x):
    return torch.sigmoid(x)


def select(keys, k, selectable=None):
    """(R, k) int64: the top k of each row by the library's order (NaN highest, ties lower
    index), among the selectable experts."""
    keys = np.asarray(keys, dtype=np.float64)
    rows, experts = keys.shape
    out = np.empty((rows, k), dtype=np.int64)
    index = np.arange(experts)
    for r in range(rows):
        v = keys[r]
        nan = np.isnan(v)
        filled = np.where(nan, 0.0, v)
        ok = np.ones(experts, bool) if selectable is None else selectable[r]
        order = np.lexsort((index, -filled, -nan.astype(np.int8), -ok.astype(np.int8)))
        out[r] = order[:k]
    return out


def group_best(mode, k, k_group):
    """How many of a group's largest v its score sums: 1 (mode 0, the max), 2 (mode 1),
    k // k_group (mode 2, Megatron-LM's group_limited_topk)."""
    return {0: 1, 1: 2, 2: k // k_group}[mode]


def group_scores(v, group_count, best):
    """(R, group_count): each group's sum of its `best` largest, by the selection order (NaN
    highest)."""
    rows, experts = v.shape
    size = experts // group_count
    scores = np.empty((rows, group_count))
    for gi in range(group_count):
        block = v[:, gi * size:(gi + 1) * size]
        top = select(block, best)
        scores[:, gi] = np.take_along_axis(block, top, 1).sum(1)
    return scores


def grouped_selectable(v, group_count, k_group, best, tol=None):
    """(R, E) bool: the experts of the top k_group groups; with tol, of every group whose score
    is within tol of the k_group-th (what a near tie may let the library keep)."""
    rows, experts = v.shape
    size = experts // group_count
    if group_count == 1:
        return np.ones((rows, experts), bool)
    scores = group_scores(v, group_count, best)
    kept = select(scores, k_group)
    keep = np.zeros((rows, group_count), bool)
    np.put_along_axis(keep, kept, True, 1)
    if tol is not None:
        last = np.take_along_axis(scores, kept[:, -1:], 1)
        with np.errstate(invalid="ignore"):
            keep |= scores >= last - tol[:, None]
    return np.repeat(keep, size, axis=1)


def check_selection(got, keys, k, tol, what, selectable=None, loose=None):
    """got (R, k) expert_idx of the library, keys (R, E) float64 of the oracle (see the module
    docstring); tol (R,) the key bound; loose: what a near tie may make selectable."""
    got = got.to(torch.int64).numpy()
    want = select(keys, k, selectable)
    for r in range(got.shape[0]):
        if np.array_equal(got[r], want[r]):
            continue
        g, w = got[r], want[r]
        ctx = f"{what}: row {r}: got {g.tolist()}, oracle {w.tolist()}"
        assert len(set(g.tolist())) == k and ((0 <= g) & (g < keys.shape[1])).all(), ctx
        kg, kw = keys[r, g], keys[r, w]
        assert not np.isnan(kw).any() and not np.isnan(kg).any(), ctx + " (NaN rows are exact)"
        assert (np.abs(kg - kw) <= tol[r]).all(), ctx + f" keys {kg.tolist()} vs {kw.tolist()}"
        allowed = loose if loose is not None else selectable
        if allowed is not None:
            assert allowed[r, g].all(), ctx + " (an expert of a group not kept)"


def check_tie_rule(x, got, what):
    """Bitwise-equal inputs of a row (the same key) are taken lower expert first: for each
    selected s_i, no unselected expert j < s_i has x_j equal to x_{s_i}, and equal selected
    ones are in increasing index order."""
    x = x.double().numpy()
    got = got.to(torch.int64).numpy()
    for r in range(got.shape[0]):
        chosen = set(got[r].tolist())
        for i, s in enumerate(got[r]):
            equal = np.flatnonzero(x[r] == x[r, s]) if not np.isnan(x[r, s]) \
                else np.flatnonzero(np.isnan(x[r]))
            lower = [j for j in equal if j < s]
            assert all(j in chosen for j in lower), \
                f"{what}: row {r}: expert {s} taken before an equal lower expert {lower}"
            earlier = got[r][:i].tolist()
            assert all(j in earlier for j in lower), f"{what}: row {r}: equal keys out of order"


def softmax_y64(x, idx, renorm):
    """y of MoeGatingTopKSoftmax for given indices (differentiable in x, float64)."""
    if renorm == 0:
        return torch.softmax(x, -1).gather(-1, idx)
    return torch.softmax(x.gather(-1, idx), -1)


def sqrt_softplus64(x):
    """sqrt(softplus(x)) in float64 from its definition, each branch free of overflow and
    cancellation and differentiable (softplus'(0) = 1/2; torch's softplus returns x itself above
    its threshold 20)."""
    positive = x > 0
    softplus = torch.where(positive, x + torch.log1p(torch.exp(-x.abs())),
                           torch.log1p(torch.exp(-x.abs())))
    return softplus.sqrt()


def scores64(x, norm_type):
    """p of MoeGatingTopK in float64: softmax, sigmoid or sqrt(softplus)."""
    if norm_type == 0:
        return torch.softmax(x, -1)
    return torch.sigmoid(x) if norm_type == 1 else sqrt_softplus64(x)


def gating_y64(x, idx, norm_type, c, eps):
    p = scores64(x, norm_type)
    w = p.gather(-1, idx)
    return w / (w.sum(-1, keepdim=True) + eps) * c


# ----------------------------------------------------------------------------------------------
# MoeGatingTopKSoftmax

SOFTMAX_CASES = [(7, 1), (7, 7), (33, 4), (33, 33), (256, 8), (2048, 8), (2048, 1)]


def softmax_key_bound(x64, name="moe_gating_top_k_softmax"):
    """(p, a, the relative factor u (K + a + chain + A) per element)."""
    p, a = softmax64(x64)
    depth = math.ceil(x64.shape[-1] / 16) + 4
    with np.errstate(invalid="ignore"):
        big_a = torch.nan_to_num((p * torch.where(torch.isfinite(a), a, 0)).sum(-1,
                                                                                keepdim=True))
    rel = U * (bound_u(name) + torch.nan_to_num(a, posinf=0.0) + big_a + depth)
    return p, a, rel


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("experts,k", SOFTMAX_CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("renorm", [0, 1])
def test_softmax_forward(device, dtype_name, experts, k, renorm):
    rows = 24 if experts <= 256 else 6
    rng = rng_for("gating-softmax", dtype_name, experts, k, renorm)
    x = to_dtype(router_logits(rng, rows, experts), dtype_name)
    finished = torch.from_numpy(rng.random(rows) < 0.25)
    index_dtype = torch.int64 if experts == 33 else torch.int32
    want_soft = renorm == 0
    outputs = infiniop.moe_gating_top_k_softmax(x, k, finished, renorm, want_soft,
                                                index_dtype=index_dtype, **on(device))
    y, idx, row_idx = outputs[:3]
    what = f"{device} {dtype_name} E={experts} k={k} renorm {renorm}"
    assert y.shape == (rows, k) and y.dtype == x.dtype
    assert idx.dtype == index_dtype and row_idx.dtype == index_dtype
    # row_idx[r, i] = i * R + r, every row
    r_ = torch.arange(rows).unsqueeze(1)
    assert torch.equal(row_idx.long(), torch.arange(k).unsqueeze(0) * rows + r_)
    # finished rows: y = 0, expert_idx = E
    assert (y[finished] == 0).all() and (idx[finished] == experts).all()
    live = ~finished
    x64 = x.double()
    p, a, rel = softmax_key_bound(x64)
    if renorm == 0:
        tol = (rel * p).max(-1).values.numpy() * 2 + EXP_FLOOR
        check_selection(idx[live], p[live].numpy(), k, tol[live.numpy()], what)
    else:  # the key is x itself: exact
        check_selection(idx[live], x64[live].numpy(), k, np.zeros(int(live.sum())), what)
    check_tie_rule(x[live], idx[live], what)
    # y at the library's indices
    sel = idx[live].long()
    truth = softmax_y64(x64[live], sel, renorm)
    if renorm == 0:
        bound = rel[live].gather(-1, sel) * truth + EXP_FLOOR
    else:
        xs = x64[live].gather(-1, sel)
        ak = xs[:, :1] - xs
        pk = torch.softmax(xs, -1)
        bound = U * (bound_u("moe_gating_top_k_softmax") + ak + (pk * ak).sum(-1, keepdim=True)
                     + k) * truth + EXP_FLOOR
    assert_matches(y[live], truth.numpy(), bound.numpy(), dtype_name, what + ": y")
    if want_soft:
        soft = outputs[3]
        assert soft.dtype == torch.float32 and soft.shape == x.shape
        assert_matches(soft, p.numpy(), (rel * p + EXP_FLOOR).numpy(), "float32",
                       what + ": softmax_out (finished rows too)")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("renorm", [0, 1])
def test_softmax_ties_exact(device, renorm):
    """Rows of exact ties (all equal, +0 / -0, repeated maxima) select exactly as the oracle:
    equal keys lower expert first; the values are small integers, so every other key is far
    from its neighbours."""
    rows = [[0.0] * 8, [0.0, -0.0] * 4, [1.0, 3.0, 3.0, -2.0, 3.0, 0.0, 1.0, 3.0],
            [-1.0, -1.0, -5.0, 2.0, -1.0, 2.0, -5.0, 2.0],
            [5.0, 4.0, 3.0, 2.0, 1.0, 0.0, -1.0, -2.0], [-2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0]]
    x = torch.tensor(rows, dtype=torch.float32)
    for k in (1, 3, 8):
        y, idx, _ = infiniop.moe_gating_top_k_softmax(x, k, renorm=renorm, **on(device))
        keys = softmax64(x.double())[0] if renorm == 0 else x.double()
        assert torch.equal(idx.long(), torch.from_numpy(select(keys.numpy(), k))), (k, idx)
        check_tie_rule(x, idx, f"{device} ties k={k}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("renorm", [0, 1])
def test_softmax_nan_inf_rows(device, renorm):
    """NaN and infinities as the F32 formula gives them: a row with a NaN has y all NaN (renorm
    0: experts 0..k-1; renorm 1: the NaN experts first, then by x); +inf gives NaN (inf - inf);
    a row of -inf only gives NaN; -inf beside finite values is just a zero weight."""
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[1.0, nan, 3.0, 2.0, nan, 0.0],
                      [1.0, inf, 3.0, 2.0, 0.5, 0.0],
                      [-inf] * 6,
                      [1.0, -inf, 3.0, 2.0, -inf, 0.0]], dtype=torch.float32)
    k = 3
    y, idx, _ = infiniop.moe_gating_top_k_softmax(x, k, renorm=renorm, **on(device))
    assert torch.isnan(y[:3]).all(), y
    if renorm == 0:
        assert idx[0].tolist() == [0, 1, 2] and idx[1].tolist() == [0, 1, 2]
    else:
        assert idx[0].tolist() == [1, 4, 2]  # NaN keys first, lower first, then the largest
        assert idx[1].tolist() == [1, 2, 3]
    assert idx[3].tolist() == [2, 3, 0]
    assert torch.isfinite(y[3]).all()
    truth = softmax_y64(x[3:].double(), idx[3:].long(), renorm)
    assert_matches(y[3:], truth.numpy(), (truth * 64 * U).numpy(), "float32", "finite row")


@pytest.mark.parametrize("device", DEVICES)
def test_softmax_layouts_and_out(device):
    """Strided x (the row dim too), a 3-D x, outputs given in out= (strided, poisoned, SENTINEL
    around them), index_dtype names; the results equal the contiguous call's bit for bit."""
    rng = rng_for("gating-softmax-layouts")
    base = router_logits(rng, 24, 33).float()
    want = infiniop.moe_gating_top_k_softmax(base, 5, None, 0, True, **on(device))
    storage = torch.full((33, 48), SENTINEL)
    x = storage[:, ::2].t()  # (24, 33), strides (2, 48): transposed, the row dim strided
    x.copy_(base)
    y_store = torch.full((24, 11), SENTINEL)
    y = y_store[:, 1::2]
    y.fill_(float("nan"))
    idx = poisoned((5, 24), torch.int64).t()
    row = poisoned((24, 5), torch.int64)
    soft = poisoned((33, 24), torch.float32).t()
    got = infiniop.moe_gating_top_k_softmax(x, 5, None, 0, True, index_dtype="int64",
                                            out=(y, idx, row, soft), **on(device))
    assert got[0] is y and got[1] is idx and got[3] is soft
    assert (y_store[:, 0::2] == SENTINEL).all()
    for a, b in zip(want, got):
        assert torch.equal(a.to(b.dtype), b)
    x3 = base.reshape(4, 6, 33)
    got3 = infiniop.moe_gating_top_k_softmax(x3, 5, **on(device))
    assert got3[0].shape == (4, 6, 5)
    assert torch.equal(got3[0].reshape(24, 5), want[0])
    assert torch.equal(got3[1].reshape(24, 5), want[1])
    assert torch.equal(got3[2].reshape(24, 5).long(),
                       torch.arange(5).unsqueeze(0) * 24 + torch.arange(24).unsqueeze(1))
    # numpy arrays too
    npy = infiniop.moe_gating_top_k_softmax(base.numpy(), 5, **on(device))
    assert npy[1].dtype == np.int32
    assert np.array_equal(npy[0], want[0].numpy())


def grad_magnitude_softmax(p, g, idx, renorm, y):
    """M_j: the sum of the magnitudes of grad_x_j's terms (module docstring)."""
    if renorm == 0:
        G = torch.zeros_like(p).scatter_add(-1, idx, g.abs())
        d = (g.abs() * p.gather(-1, idx)).sum(-1, keepdim=True)
        return p * (G + d)
    d = (g.abs() * y).sum(-1, keepdim=True)
    return torch.zeros_like(p).scatter_add(-1, idx, y * (g.abs() + d))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("experts,k", [(7, 1), (33, 33), (256, 8), (2048, 8)],
                         ids=lambda v: str(v))
@pytest.mark.parametrize("renorm", [0, 1])
@pytest.mark.parametrize("indices", ["forward", "duplicates"])
def test_softmax_grad(device, dtype_name, experts, k, renorm, indices):
    rows = 16 if experts <= 256 else 4
    rng = rng_for("gating-softmax-grad", dtype_name, experts, k, renorm, indices)
    x = to_dtype(router_logits(rng, rows, experts, (-3, 4)), dtype_name)
    finished = torch.from_numpy(rng.random(rows) < 0.25)
    g = to_dtype(torch.from_numpy(rng.uniform(-2, 2, (rows, k))), dtype_name)
    if indices == "forward":
        _, idx, _ = infiniop.moe_gating_top_k_softmax(x, k, finished, renorm, **on(device))
    else:  # any indices, duplicates counting per slot; finished rows any value (E here)
        idx = torch.from_numpy(rng.integers(0, experts, (rows, k))).to(torch.int64)
        idx[:, -1] = idx[:, 0]
        idx[finished] = experts
    out = poisoned(x.shape, x.dtype)
    grad = infiniop.moe_gating_top_k_softmax_grad(g, x, idx, finished, renorm, out=out,
                                                  **on(device))
    assert grad is out
    assert (grad[finished] == 0).all()
    live = ~finished
    x64 = x[live].double().requires_grad_()
    sel = idx[live].long()
    y64 = softmax_y64(x64, sel, renorm)
    g64 = g[live].double()
    (truth,) = torch.autograd.grad(y64, x64, g64)
    with torch.no_grad():
        p, a, rel = softmax_key_bound(x64.detach(), "moe_gating_top_k_softmax_grad")
        K = bound_u("moe_gating_top_k_softmax_grad")
        if renorm == 0:  # the row's largest condition of p
            cond = rel.max(-1, keepdim=True).values / U - K
        else:  # over the k selected, chain k
            xs = x64.detach().gather(-1, sel)
            ak = xs.max(-1, keepdim=True).values - xs
            cond = ak.max(-1, keepdim=True).values + (torch.softmax(xs, -1) * ak).sum(
                -1, keepdim=True) + k
        magnitude = grad_magnitude_softmax(p, g64, sel, renorm, y64.detach())
        factor = U * (K + 2 * cond + 2 * k)
        bound = factor * magnitude + 4 * EXP_FLOOR * g64.abs().sum(-1, keepdim=True)
    assert_matches(grad[live], truth.numpy(), bound.numpy(), dtype_name,
                   f"{device} {dtype_name} E={experts} k={k} renorm {renorm} {indices}: grad_x")


# ----------------------------------------------------------------------------------------------
# MoeGatingTopK

# (E, k, group_count, k_group, group_select_mode, norm_type, bias dtype (None: no bias), c)
GATING_CASES = [
    (256, 8, 8, 4, 1, 1, "float32", 2.5),    # DeepSeek-V3
    (256, 6, 1, 1, 0, 2, "float32", 1.5),    # DeepSeek-V4 (sqrtsoftplus)
    (384, 6, 1, 1, 0, 2, "float32", 1.5),
    (256, 12, 8, 4, 2, 2, "float32", 2.5),   # Megatron's group score: the top 3's sum
    (256, 8, 8, 4, 2, 1, "same", 2.5),       # the top 2's: mode 1
    (64, 9, 4, 3, 2, 0, None, 1.0),
    (256, 8, 8, 4, 0, 1, "same", 2.5),
    (7, 3, 1, 1, 0, 0, None, 1.0),
    (33, 33, 1, 1, 0, 1, "same", 1.0),       # k = E
    (33, 2, 3, 2, 1, 0, "float32", 0.5),
    (2048, 8, 16, 4, 1, 1, "float32", 2.5),
    (64, 1, 4, 1, 0, 1, None, -1.0),
]


def gating_keys(x64, bias64, norm_type):
    """(p, v, the per-element relative factor of p)."""
    if norm_type == 0:
        p, a, rel = softmax_key_bound(x64, "moe_gating_top_k")
    else:
        p = scores64(x64, norm_type)
        rel = torch.full_like(p, U * bound_u("moe_gating_top_k"))
    v = p if bias64 is None else p + bias64
    return p, v, rel


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("case", GATING_CASES, ids=lambda c: "-".join(map(str, c)))
def test_gating_forward(device, dtype_name, case):
    experts, k, group_count, k_group, mode, norm_type, bias_kind, c = case
    rows = 24 if experts <= 256 else 6
    rng = rng_for("gating", dtype_name, case)
    # |x| up to 2^8 for DeepSeek-V4's rows: both of the root's tails (-87, -174)
    span = (-3, 8) if norm_type == 2 and group_count == 1 else (-3, 3)
    x = to_dtype(router_logits(rng, rows, experts, span), dtype_name)
    bias = None
    if bias_kind is not None:
        bias = torch.from_numpy(rng.uniform(-0.1, 0.1, experts))
        bias = bias.float() if bias_kind == "float32" else to_dtype(bias, dtype_name)
    eps = 1e-20
    index_dtype = torch.int64 if experts == 33 else torch.int32
    y, idx, norm = infiniop.moe_gating_top_k(x, k, bias, k_group, group_count, mode, 0,
                                             norm_type, True, c, eps, index_dtype=index_dtype,
                                             **on(device))
    what = f"{device} {dtype_name} {case}"
    assert y.dtype == x.dtype and y.shape == (rows, k) and idx.dtype == index_dtype
    x64 = x.double()
    b64 = None if bias is None else bias.double()
    p, v, rel = gating_keys(x64, b64, norm_type)
    key_bound = rel * p + U * v.abs() + EXP_FLOOR
    best = group_best(mode, k, k_group)
    tol = 2 * key_bound.max(-1).values.numpy() * best
    selectable = grouped_selectable(v.numpy(), group_count, k_group, best)
    loose = grouped_selectable(v.numpy(), group_count, k_group, best, tol)
    check_selection(idx, v.numpy(), k, tol, what, selectable, loose)
    if bias is None and group_count == 1:
        check_tie_rule(x, idx, what)
    sel = idx.long()
    truth = gating_y64(x64, sel, norm_type, float(np.float32(c)), eps)
    cond = 0.0
    if norm_type == 0:
        cond = rel.max(-1, keepdim=True).values / U - bound_u("moe_gating_top_k")
    bound = U * (bound_u("moe_gating_top_k") + cond + k + 3) * truth.abs() + EXP_FLOOR * abs(c)
    assert_matches(y, truth.numpy(), bound.numpy(), dtype_name, what + ": y")
    assert norm.dtype == torch.float32 and norm.shape == x.shape
    assert_matches(norm, p.numpy(), (rel * p + EXP_FLOOR).numpy(), "float32", what + ": norm_out")
    # without out_flag: no norm_out, the same y and indices
    y2, idx2, none = infiniop.moe_gating_top_k(x, k, bias, k_group, group_count, mode, 0,
                                               norm_type, False, c, eps,
                                               index_dtype=index_dtype, **on(device))
    assert none is None and torch.equal(y2, y) and torch.equal(idx2, idx)


@pytest.mark.parametrize("device", DEVICES)
def test_gating_nan_rows(device):
    """A NaN in x: sigmoid keys NaN there, selected first (lower first), y all NaN; with softmax
    the whole row is NaN and experts 0..k-1 are selected."""
    nan = float("nan")
    x = torch.tensor([[0.5, nan, 2.0, -1.0, nan, 0.0, 3.0, 1.0]], dtype=torch.float32)
    y, idx, _ = infiniop.moe_gating_top_k(x, 3, norm_type=1, **on(device))
    assert idx[0].tolist() == [1, 4, 6] and torch.isnan(y).all()
    y, idx, _ = infiniop.moe_gating_top_k(x, 3, norm_type=0, **on(device))
    assert idx[0].tolist() == [0, 1, 2] and torch.isnan(y).all()


def gating_grad_magnitude(p, g, idx, norm_type, c, eps):
    w = p.gather(-1, idx)
    d = w.sum(-1, keepdim=True) + eps
    t_abs = (g.abs() * w).sum(-1, keepdim=True)
    mw = abs(c) / d * (g.abs() + t_abs / d)  # grad_w_i's terms
    mgp = torch.zeros_like(p).scatter_add(-1, idx, mw)
    if norm_type == 1:
        return mgp * p * (1 + p), (abs(c) / d).squeeze(-1)
    if norm_type == 2:  # the slope sigmoid(x) / (2 p) <= 1 / (2 p), taken twice as a cover
        return mgp / p, (abs(c) / d).squeeze(-1)
    q = (mw * w).sum(-1, keepdim=True)
    return p * (mgp + q), (abs(c) / d).squeeze(-1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("experts,k,norm_type,c", [(256, 8, 1, 2.5), (256, 8, 0, 2.5),
                                                   (7, 7, 1, 1.0), (2048, 8, 1, 2.5),
                                                   (33, 1, 0, -0.5), (384, 6, 2, 1.5),
                                                   (7, 7, 2, 1.0)], ids=lambda v: str(v))
@pytest.mark.parametrize("indices", ["forward", "duplicates"])
def test_gating_grad(device, dtype_name, experts, k, norm_type, c, indices):
    rows = 16 if experts <= 256 else 4
    rng = rng_for("gating-grad", dtype_name, experts, k, norm_type, c, indices)
    span = (-3, 8) if norm_type == 2 else (-3, 3)  # scale 2^U(span): |x| up to 256
    x = to_dtype(router_logits(rng, rows, experts, span), dtype_name)
    g = to_dtype(torch.from_numpy(rng.uniform(-2, 2, (rows, k))), dtype_name)
    eps = 1e-20
    if indices == "forward":
        _, idx, _ = infiniop.moe_gating_top_k(x, k, norm_type=norm_type,
                                              routed_scaling_factor=c, **on(device))
    else:
        idx = torch.from_numpy(rng.integers(0, experts, (rows, k))).to(torch.int32)
        idx[:, -1] = idx[:, 0]
    out = poisoned(x.shape, x.dtype)
    grad = infiniop.moe_gating_top_k_grad(g, x, idx, norm_type, 0, c, eps, out=out,
                                          **on(device))
    assert grad is out
    x64 = x.double().requires_grad_()
    sel = idx.long()
    g64 = g.double()
    cf = float(np.float32(c))
    (truth,) = torch.autograd.grad(gating_y64(x64, sel, norm_type, cf, eps), x64, g64)
    with torch.no_grad():
        p, _, rel = gating_keys(x64.detach(), None, norm_type)
        magnitude, scale = gating_grad_magnitude(p, g64, sel, norm_type, cf, eps)
        cond = rel.max(-1, keepdim=True).values / U - bound_u("moe_gating_top_k")
        factor = U * (bound_u("moe_gating_top_k_grad") + 2 * cond + 2 * k)
        bound = factor * magnitude + 4 * EXP_FLOOR * (scale.unsqueeze(-1) + 1) \
            * g64.abs().sum(-1, keepdim=True)
    assert_matches(grad, truth.numpy(), bound.numpy(), dtype_name,
                   f"{device} {dtype_name} E={experts} k={k} norm {norm_type} {indices}: grad_x")


@pytest.mark.parametrize("device", DEVICES)
def test_sqrtsoftplus_grad_finite_differences(device):
    """MoeGatingTopKGrad with norm_type 2 against central differences of the float64 definition
    y = p[s] / (sum p[s] + eps) * c, p = sqrt(softplus(x)) (written apart from the oracle above:
    torch's own softplus, which is exact to float64 at these x), at logits from -120 (the root's
    far-left tail, p ~ e^(x / 2)) to 60."""
    xs = torch.tensor([[-120.0, -90.0, -30.0, -1.5, 0.0, 0.75, 4.0, 60.0],
                       [2.0, 2.0, -0.5, -88.0, 10.0, -10.0, 1.0, 0.125]], dtype=torch.float32)
    idx = torch.tensor([[0, 4, 7, 1], [0, 4, 3, 1]], dtype=torch.int32)
    g = torch.tensor([[1.0, -0.5, 0.25, 2.0], [-1.0, 0.5, 3.0, 0.75]], dtype=torch.float32)
    c, eps = 1.5, 1e-20
    grad = infiniop.moe_gating_top_k_grad(g, xs, idx, 2, 0, c, eps, **on(device))

    def y(x):
        p = torch.nn.functional.softplus(x, threshold=1e9).sqrt()
        w = p.gather(-1, idx.long())
        return (w / (w.sum(-1, keepdim=True) + eps) * c * g.double()).sum()

    x64 = xs.double()
    want = torch.zeros_like(x64)
    for r in range(2):
        for j in range(8):
            h = 1e-6 * max(1.0, abs(float(x64[r, j])))
            up, down = x64.clone(), x64.clone()
            up[r, j] += h
            down[r, j] -= h
            want[r, j] = (y(up) - y(down)) / (2 * h)
    # central differences are good to ~1e-9 relatively here; F32 grads to a few ulps of their
    # terms (bounded by |g| c / D times the slope, at most 4 in these rows)
    err = (grad.double() - want).abs()
    assert (err <= 1e-5 * want.abs() + 1e-7).all(), (grad, want)
    # The tail's grad (6.3e-28 at x = -120) is below what differences of y resolve: there, the
    # definition's derivative by float64 autograd, relatively.
    x_tail = x64.clone().requires_grad_()
    (exact,) = torch.autograd.grad(y(x_tail), x_tail)
    assert grad[0, 0] != 0 and abs(float(grad[0, 0]) / float(exact[0, 0]) - 1) < 1e-5


# ----------------------------------------------------------------------------------------------
# Devices agree

@pytest.mark.parametrize("device", [d for d in DEVICES if d not in ("cpu", "cpu_reference")])
def test_cpu_and_other_devices_same_bits(device):
    """cpu and opencl give the same bits for every output (the spec's bit identity)."""
    rng = rng_for("gating-bits")
    x = router_logits(rng, 32, 256).to(torch.bfloat16)
    bias = torch.from_numpy(rng.uniform(-0.1, 0.1, 256)).float()
    for call in (lambda **d: infiniop.moe_gating_top_k_softmax(x, 8, None, 0, True, **d),
                 lambda **d: infiniop.moe_gating_top_k_softmax(x, 8, None, 1, **d),
                 lambda **d: infiniop.moe_gating_top_k(x, 8, bias, 4, 8, 1, 0, 1, True, 2.5,
                                                       **d)):
        for a, b in zip(call(device="cpu"), call(**on(device))):
            assert (a is None and b is None) or helpers.same_bits(a, b)


# ----------------------------------------------------------------------------------------------
# Errors

@pytest.mark.parametrize("device", DEVICES)
def test_softmax_errors(device):
    x = torch.randn(4, 8)
    y = poisoned((4, 3), torch.float32)
    idx = poisoned((4, 3), torch.int32)
    row = poisoned((4, 3), torch.int32)
    outs = (y, idx, row)
    call = infiniop.moe_gating_top_k_softmax
    for k in (0, 9, -1):
        expect_error(Status.BAD_PARAM, call, x, k, **on(device))
    expect_error(Status.BAD_PARAM, call, x, 3, None, 2, out=outs, outputs=outs, **on(device))
    expect_error(Status.BAD_PARAM, call, x, 3, None, 1, True, **on(device))  # softmax_out + 1
    expect_error(Status.BAD_TENSOR_DTYPE, call, x.double(), 3, **on(device))
    expect_error(Status.BAD_TENSOR_DTYPE, call, x, 3, torch.zeros(4, dtype=torch.uint8),
                 out=outs, outputs=outs, **on(device))
    expect_error(Status.BAD_TENSOR_SHAPE, call, x, 3, torch.zeros(5, dtype=torch.bool),
                 out=outs, outputs=outs, **on(device))
    expect_error(Status.BAD_TENSOR_DTYPE, call, x, 3, index_dtype="int32",
                 out=(y, poisoned((4, 3), torch.float32)), **on(device))
    # the grad: an index out of range on an unfinished row, nothing written
    g = torch.randn(4, 3)
    good = torch.tensor([[0, 1, 2]] * 4)
    finished = torch.tensor([False, True, False, False])
    grad_call = infiniop.moe_gating_top_k_softmax_grad
    for bad in (8, -1):
        ids = good.clone()
        ids[2, 1] = bad
        out = poisoned((4, 8), torch.float32)
        expect_error(Status.BAD_PARAM, grad_call, g, x, ids, finished, out=out, outputs=(out,),
                     **on(device))
    ids = good.clone()
    ids[1] = torch.tensor([8, -1, 100])  # finished: any value
    grad = grad_call(g, x, ids, finished, **on(device))
    assert (grad[1] == 0).all()
    expect_error(Status.BAD_PARAM, grad_call, g, x, good, renorm=2, **on(device))
    expect_error(Status.BAD_TENSOR_DTYPE, grad_call, g.half(), x, good, **on(device))
    expect_error(Status.BAD_TENSOR_SHAPE, grad_call, torch.randn(5, 3), x,
                 torch.zeros(5, 3, dtype=torch.int64), **on(device))


@pytest.mark.parametrize("device", DEVICES)
def test_gating_errors(device):
    x = torch.randn(4, 16)
    call = infiniop.moe_gating_top_k
    bad_attributes = [
        {"norm_type": 3}, {"norm_type": -1}, {"renorm": 1}, {"group_count": 3}, {"group_count": 0},
        {"group_count": 4, "k_group": 0}, {"group_count": 4, "k_group": 5},
        {"group_count": 16, "k_group": 2, "group_select_mode": 1},  # groups of 1
        {"group_select_mode": 3}, {"group_count": 4, "k_group": 1, "k": 5},
        {"group_count": 4, "k_group": 3, "group_select_mode": 2},  # k / k_group = 2 / 3 = 0
        {"k": 0}, {"k": 17}, {"routed_scaling_factor": math.inf},
        {"routed_scaling_factor": math.nan}, {"eps": -1.0}, {"eps": math.nan},
        {"routed_scaling_factor": 1e300},  # not finite in F32
    ]
    for attributes in bad_attributes:
        kwargs = {"k": 2, **attributes}
        expect_error(Status.BAD_PARAM, call, x, **kwargs, **on(device))
    expect_error(Status.BAD_TENSOR_SHAPE, call, x, 2, torch.zeros(15), **on(device))
    expect_error(Status.BAD_TENSOR_DTYPE, call, x, 2, torch.zeros(16, dtype=torch.float64),
                 **on(device))
    expect_error(Status.BAD_TENSOR_DTYPE, call, x.half(), 2, torch.zeros(16, dtype=torch.bfloat16),
                 **on(device))
    grad_call = infiniop.moe_gating_top_k_grad
    g = torch.randn(4, 2)
    for bad in (16, -1):
        ids = torch.zeros(4, 2, dtype=torch.int64)
        ids[3, 1] = bad
        out = poisoned((4, 16), torch.float32)
        expect_error(Status.BAD_PARAM, grad_call, g, x, ids, out=out, outputs=(out,),
                     **on(device))
    ids = torch.zeros(4, 2, dtype=torch.int64)
    expect_error(Status.BAD_PARAM, grad_call, g, x, ids, renorm=1, **on(device))
    expect_error(Status.BAD_PARAM, grad_call, g, x, ids, norm_type=3, **on(device))
    expect_error(Status.BAD_PARAM, grad_call, g, x, ids, eps=-1.0, **on(device))
    expect_error(Status.BAD_TENSOR_DTYPE, grad_call, g.bfloat16(), x, ids, **on(device))


def test_binding_argument_errors():
    x = torch.randn(4, 8)
    call = infiniop.moe_gating_top_k_softmax
    for k in (True, 1.5, "2", None):
        with pytest.raises(TypeError):
            call(x, k)
    with pytest.raises(OverflowError):
        call(x, 2 ** 63)
    with pytest.raises(TypeError):
        call(x, 2, softmax_out="yes")
    with pytest.raises(TypeError, match="index_dtype"):
        call(x, 2, index_dtype=torch.float32)
    with pytest.raises(TypeError, match="out"):
        call(x, 2, out=(None,) * 5)
    with pytest.raises(TypeError, match="one kind"):
        call(x.numpy(), 2, torch.zeros(4, dtype=torch.bool))
    with pytest.raises(TypeError):
        infiniop.moe_gating_top_k(x, 2, routed_scaling_factor="2.5")
    with pytest.raises(TypeError):
        infiniop.moe_gating_top_k(x, 2, out_flag=1)
    with pytest.raises(TypeError):
        infiniop.moe_gating_top_k(x, 2, eps=None)
    with pytest.raises(ValueError):  # a CUDA-less torch still refuses meta tensors here
        call(torch.empty(4, 8, device="meta"), 2)


def test_empty_rows():
    """R = 0: valid, nothing to do."""
    x = torch.empty(0, 8)
    y, idx, row = infiniop.moe_gating_top_k_softmax(x, 2)
    assert y.shape == (0, 2) and idx.shape == (0, 2) and row.shape == (0, 2)
    y, idx, _ = infiniop.moe_gating_top_k(x, 2, group_count=2, k_group=1)
    assert y.shape == (0, 2)
    assert infiniop.moe_gating_top_k_softmax_grad(torch.empty(0, 2), x, idx).shape == (0, 8)


# ----------------------------------------------------------------------------------------------
# infiniop.torch: autograd, torch.ops, torch_npu aliases

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("renorm", [0, 1])
def test_torch_softmax_autograd(device, renorm):
    rng = rng_for("gating-autograd", renorm)
    x = router_logits(rng, 12, 33, (-2, 2)).float().requires_grad_()
    finished = torch.from_numpy(rng.random(12) < 0.25)
    g = torch.from_numpy(rng.uniform(-1, 1, (12, 4))).float()
    y, idx, row = iop.moe_gating_top_k_softmax(x, 4, finished, renorm, **on(device))
    assert not idx.requires_grad and not row.requires_grad and y.requires_grad
    y.backward(g)
    want = infiniop.moe_gating_top_k_softmax_grad(g, x.detach(), idx, finished, renorm,
                                                  **on(device))
    assert torch.equal(x.grad, want)
    assert (x.grad[finished] == 0).all()
    if renorm == 0:  # softmax_out differentiable too: its gradient in torch, float32
        x.grad = None
        gs = torch.from_numpy(rng.uniform(-1, 1, (12, 33))).float()
        y, idx, _, soft = iop.moe_gating_top_k_softmax(x, 4, finished, 0, True, **on(device))
        torch.autograd.backward([y, soft], [g, gs])
        x64 = x.detach().double().requires_grad_()
        p64 = torch.softmax(x64, -1)
        y64 = p64.gather(-1, idx.long().clamp(max=32)) * (~finished).unsqueeze(-1)
        torch.autograd.backward([y64, p64], [g.double(), gs.double()])
        torch.testing.assert_close(x.grad.double(), x64.grad, rtol=0, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("norm_type", [0, 1, 2])
def test_torch_gating_autograd(device, norm_type):
    rng = rng_for("gating-autograd-topk", norm_type)
    x = router_logits(rng, 12, 64, (-2, 2)).float().requires_grad_()
    bias = torch.from_numpy(rng.uniform(-0.1, 0.1, 64)).float().requires_grad_()
    g = torch.from_numpy(rng.uniform(-1, 1, (12, 6))).float()
    y, idx, norm = iop.moe_gating_top_k(x, 6, bias, 2, 8, 1, 0, norm_type, True, 2.5,
                                        **on(device))
    assert not idx.requires_grad and y.requires_grad
    y.backward(g)
    assert bias.grad is None  # the bias only steers the selection
    want = infiniop.moe_gating_top_k_grad(g, x.detach(), idx, norm_type, 0, 2.5, **on(device))
    assert torch.equal(x.grad, want)
    x.grad = None
    gn = torch.from_numpy(rng.uniform(-1, 1, (12, 64))).float()
    y, idx, norm = iop.moe_gating_top_k(x, 6, bias, 2, 8, 1, 0, norm_type, True, 2.5,
                                        **on(device))
    torch.autograd.backward([y, norm], [g, gn])
    x64 = x.detach().double().requires_grad_()
    p64 = scores64(x64, norm_type)
    w = p64.gather(-1, idx.long())
    y64 = w / (w.sum(-1, keepdim=True) + 1e-20) * 2.5
    torch.autograd.backward([y64, p64], [g.double(), gn.double()])
    torch.testing.assert_close(x.grad.double(), x64.grad, rtol=0, atol=1e-5)


def test_torch_ops_registered():
    from infiniop.torch import _ops

    if not _ops.REGISTERED:
        pytest.skip(_ops.REASON)
    x = torch.randn(6, 16)
    y, idx, row, soft = torch.ops.infiniop.moe_gating_top_k_softmax(x, 3)
    want = infiniop.moe_gating_top_k_softmax(x, 3)
    assert soft is None and all(torch.equal(a, b) for a, b in zip((y, idx, row), want))
    y, idx, norm = torch.ops.infiniop.moe_gating_top_k(x, 4, None, 2, 4, 1, 0, 1, True, 2.5)
    want = infiniop.moe_gating_top_k(x, 4, None, 2, 4, 1, 0, 1, True, 2.5)
    assert all(torch.equal(a, b) for a, b in zip((y, idx, norm), want))
    xg = x.clone().requires_grad_()
    g = torch.randn(6, 4)
    y, idx, _ = torch.ops.infiniop.moe_gating_top_k(xg, 4)
    y.backward(g)  # (sum(y) is routed_scaling_factor: its gradient would be ~0)
    assert torch.equal(xg.grad, infiniop.moe_gating_top_k_grad(g, x, idx))


@pytest.mark.parametrize("device", DEVICES)
def test_npu_aliases(device):
    rng = rng_for("gating-npu")
    x = router_logits(rng, 10, 16, (-2, 2)).to(torch.bfloat16)
    finished = torch.from_numpy(rng.random(10) < 0.3)
    y, idx, row = iop.npu_moe_gating_top_k_softmax(x, finished, k=3, **on(device))
    want = infiniop.moe_gating_top_k_softmax(x, 3, finished, **on(device))
    assert idx.dtype == torch.int32 and row.dtype == torch.int32
    assert all(torch.equal(a, b) for a, b in zip((y, idx, row), want))
    y, idx, row = iop.npu_moe_gating_top_k_softmax(x, **on(device))  # k = 1
    assert y.shape == (10, 1)
    y, idx, soft = iop.npu_moe_gating_top_k_softmax_v2(x, 3, finished, 0, True, **on(device))
    want = infiniop.moe_gating_top_k_softmax(x, 3, finished, 0, True, **on(device))
    assert torch.equal(y, want[0]) and torch.equal(idx, want[1]) and torch.equal(soft, want[3])
    y, idx, soft = iop.npu_moe_gating_top_k_softmax_v2(x, 3, renorm=1,
                                                       output_softmax_result_flag=True,
                                                       **on(device))
    want = infiniop.moe_gating_top_k_softmax(x, 3, None, 1, **on(device))
    assert soft is None and torch.equal(y, want[0]) and torch.equal(idx, want[1])
    bias = torch.from_numpy(rng.uniform(-0.1, 0.1, 16)).float()
    y, idx, out = iop.npu_moe_gating_top_k(x, 4, bias=bias, k_group=2, group_count=4,
                                           group_select_mode=1, norm_type=1, out_flag=True,
                                           routed_scaling_factor=2.5, **on(device))
    want = infiniop.moe_gating_top_k(x, 4, bias, 2, 4, 1, 0, 1, True, 2.5, **on(device))
    assert idx.dtype == torch.int32
    assert all(torch.equal(a, b) for a, b in zip((y, idx, out), want))
    _, _, none = iop.npu_moe_gating_top_k(x, 4, **on(device))
    assert none is None
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        iop.npu_moe_gating_top_k([1.0], 2)


def test_torch_tracing_and_double_backward():
    """torch.fx and torch.jit.trace record the routers as one call each (a trace replays at
    other shapes); a backward through their gradients (create_graph=True) is refused."""

    class Router(torch.nn.Module):
        def forward(self, x):
            y, idx, _ = iop.moe_gating_top_k_softmax(x, 2, renorm=1)
            y2, idx2, _ = iop.moe_gating_top_k(x, 2, None, 2, 4, 1)
            return y * 2 + y2, idx, idx2

    model = Router()
    x = torch.randn(5, 8)
    graph = torch.fx.symbolic_trace(model)
    assert all(torch.equal(a, b) for a, b in zip(model(x), graph(x)))
    with warnings.catch_warnings():  # torch's TracerWarnings (shapes read as ints)
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(model, x, check_trace=False)
    x2 = torch.randn(7, 8)
    assert all(torch.equal(a, b) for a, b in zip(model(x2), traced(x2)))
    xg = x.clone().requires_grad_()
    (grad,) = torch.autograd.grad(model(xg)[0].sum(), xg, create_graph=True)
    with pytest.raises(RuntimeError, match="no second derivative"):
        grad.sum().backward()


@pytest.mark.parametrize("device", DEVICES)
def test_gating_out_and_layouts(device):
    """MoeGatingTopK with a strided x and every output given in out= (strided, poisoned,
    SENTINEL around y): the contiguous call's bits; F32 bias beside BF16 x."""
    rng = rng_for("gating-out")
    base = router_logits(rng, 16, 64, (-2, 2)).to(torch.bfloat16)
    bias = torch.from_numpy(rng.uniform(-0.1, 0.1, 64)).float()
    args = (6, bias, 2, 8, 1, 0, 1, True, 2.5, 1e-20)
    want = infiniop.moe_gating_top_k(base, *args, **on(device))
    storage = torch.full((64, 33), SENTINEL, dtype=torch.bfloat16)
    x = storage[:, 1::2].t()  # (16, 64), strides (2, 33)
    x.copy_(base)
    y_store = torch.full((16, 13), SENTINEL, dtype=torch.bfloat16)
    y = y_store[:, ::2][:, :6]
    y.fill_(float("nan"))
    idx = poisoned((6, 16), torch.int64).t()
    norm = poisoned((64, 16), torch.float32).t()
    got = infiniop.moe_gating_top_k(x, *args, index_dtype=torch.int64, out=(y, idx, norm),
                                    **on(device))
    assert got[0] is y and got[1] is idx and got[2] is norm
    assert (y_store[:, 1::2] == SENTINEL).all() and (y_store[:, 12] == SENTINEL).all()
    for a, b in zip(want, got):
        assert torch.equal(a.to(b.dtype), b)
