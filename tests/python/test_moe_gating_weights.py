# SPDX-License-Identifier: Apache-2.0
"""MoeGatingWeights through the Python binding (infiniop.moe_gating_weights,
infiniop.torch.moe_gating_weights, torch.ops.infiniop.moe_gating_weights) on every device of
helpers.DEVICES, F32/F16/BF16 x, INT32/INT64 indices, against a float64 PyTorch oracle written
here from docs/moe_gating_weights.md:

    p = softmax(x) (norm_type 0) or sigmoid(x) (norm_type 1);
    y_i = p[s_i] / (sum_i p[s_i] + eps) * c   (duplicates counting per slot),

and its gradient by torch.autograd in float64 (MoeGatingTopKGrad at the same indices must be
it). Error model: MoeGatingTopK's y's (docs/moe_gating_top_k.md, tests/python/test_moe_gating.py):
u (K + cond + k + 3) |y_i| + 2^-125 |c|, cond the row's largest condition of p (a_j + chain + A
for softmax, 0 for sigmoid), K = tests/accuracy_bounds.json's "moe_gating"; the gradient
u (K + 2 cond + 3 k + 3) times the magnitudes of its terms, as test_moe_gating.py's.
"""

import math

import numpy as np
import pytest
import torch

import infiniop
import infiniop.torch as iop
from infiniop import Status
from infiniop.torch import _ops

import helpers
from helpers import DEVICES, TORCH_DTYPES, assert_matches, expect_error, on, rng_for

U = 2.0 ** -24
EXP_FLOOR = 2.0 ** -125
K_BOUND = helpers.f32_bound("moe_gating") / U


def logits(rng, rows, experts, dtype_name, scale_bits=(-3, 5)):
    """Signed logits, |x| from ~0.1 to ~30 per row, about 10% exact repeats (ties)."""
    x = rng.uniform(-1.0, 1.0, (rows, experts)) * 2.0 ** rng.uniform(*scale_bits, (rows, 1))
    x = np.where(rng.random((rows, experts)) < 0.1, np.roll(x, 1, axis=1), x)
    return torch.from_numpy(x).to(TORCH_DTYPES[dtype_name])


def weights64(x, idx, norm_type, c, eps):
    """y in float64, differentiable in x."""
    p = torch.softmax(x, -1) if norm_type == 0 else torch.sigmoid(x)
    w = p.gather(-1, idx)
    return w / (w.sum(-1, keepdim=True) + eps) * c


def condition(x64, norm_type):
    """The row's largest condition of p (in u, K excluded): a_j + chain + A, or 0 (sigmoid)."""
    if norm_type == 1:
        return torch.zeros(x64.shape[:-1] + (1,), dtype=torch.float64)
    m = x64.max(-1, keepdim=True).values
    a = m - x64
    p = torch.softmax(x64, -1)
    chain = math.ceil(x64.shape[-1] / 16) + 4
    return a.max(-1, keepdim=True).values + (p * a).sum(-1, keepdim=True) + chain


def random_indices(rng, shape, experts, dtype, duplicates):
    idx = torch.from_numpy(rng.integers(0, experts, shape)).to(dtype)
    if duplicates and shape[-1] > 1:
        idx[..., -1] = idx[..., 0]
    return idx


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("experts,k", [(1, 1), (7, 3), (33, 33), (256, 8), (2048, 40)],
                         ids=lambda v: str(v))
@pytest.mark.parametrize("norm_type", [0, 1])
def test_forward(device, dtype_name, experts, k, norm_type):
    rows = 12 if experts <= 256 else 3
    rng = rng_for("weights", dtype_name, experts, k, norm_type)
    x = logits(rng, rows, experts, dtype_name)
    index_dtype = torch.int64 if experts in (7, 256) else torch.int32
    idx = random_indices(rng, (rows, k), experts, index_dtype, duplicates=k > 2)
    c, eps = (2.5, 1e-20) if norm_type == 1 else (1.0, 0.125)
    out = torch.full((rows, k), float("nan"), dtype=x.dtype)
    y = infiniop.moe_gating_weights(x, idx, norm_type, 0, c, eps, out=out, **on(device))
    assert y is out and y.dtype == x.dtype
    x64 = x.double()
    truth = weights64(x64, idx.long(), norm_type, float(np.float32(c)), float(np.float32(eps)))
    bound = U * (K_BOUND + condition(x64, norm_type) + k + 3) * truth.abs() + EXP_FLOOR * c
    assert_matches(y, truth.numpy(), bound.numpy(), dtype_name,
                   f"{device} {dtype_name} E={experts} k={k} norm {norm_type}: y")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("groups", [(1, 1, 0), (8, 4, 0), (8, 4, 1)], ids=lambda v: str(v))
@pytest.mark.parametrize("norm_type", [0, 1])
def test_same_bits_as_moe_gating_top_k(device, dtype_name, groups, norm_type):
    """With expert_idx = MoeGatingTopK's own selection (no bias), y has its y's bits."""
    group_count, k_group, mode = groups
    rng = rng_for("weights-bits", dtype_name, groups, norm_type)
    x = logits(rng, 16, 256, dtype_name, (-3, 6))
    y, idx, _ = infiniop.moe_gating_top_k(x, 8, None, k_group, group_count, mode, 0, norm_type,
                                          False, 2.5, 1e-20, **on(device))
    w = infiniop.moe_gating_weights(x, idx, norm_type, 0, 2.5, 1e-20, **on(device))
    assert helpers.same_bits(w, y)


@pytest.mark.parametrize("device", DEVICES)
def test_strided_and_three_dims(device):
    rng = rng_for("weights-strided")
    x = logits(rng, 24, 9, "float32").reshape(2, 3, 4, 9)[:, :, ::2].transpose(0, 1)
    idx = random_indices(rng, (3, 2, 2, 4), 9, torch.int32, True)
    base = torch.full((3, 2, 2, 8), float("nan"))
    y = infiniop.moe_gating_weights(x, idx, 0, out=base[..., ::2], **on(device))
    truth = weights64(x.double(), idx.long(), 0, 1.0, 1e-20)
    bound = U * (K_BOUND + condition(x.double(), 0) + 4 + 3) * truth.abs() + EXP_FLOOR
    assert_matches(y, truth.numpy(), bound.numpy(), "float32", "strided y")
    assert torch.isnan(base[..., 1::2]).all(), "written between out's elements"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
@pytest.mark.parametrize("norm_type", [0, 1])
def test_autograd_is_moe_gating_top_k_grad(device, dtype_name, norm_type):
    """infiniop.torch.moe_gating_weights: y and its gradient in x against float64 autograd of
    the formula, the gradient bit for bit MoeGatingTopKGrad's at the same indices."""
    rng = rng_for("weights-grad", dtype_name, norm_type)
    rows, experts, k, c, eps = 10, 16, 4, 2.5, 0.0625
    x = logits(rng, rows, experts, dtype_name, (-2, 2)).requires_grad_()
    idx = random_indices(rng, (rows, k), experts, torch.int64, duplicates=True)
    g = torch.from_numpy(rng.uniform(-2, 2, (rows, k))).to(x.dtype)
    y = iop.moe_gating_weights(x, idx, norm_type, 0, c, eps, **on(device))
    (grad,) = torch.autograd.grad(y, x, g)
    assert helpers.same_bits(grad, infiniop.moe_gating_top_k_grad(
        g, x.detach(), idx, norm_type, 0, c, eps, **on(device)))
    x64 = x.detach().double().requires_grad_()
    truth_y = weights64(x64, idx, norm_type, c, eps)
    (truth,) = torch.autograd.grad(truth_y, x64, g.double())
    with torch.no_grad():
        cond = condition(x64, norm_type)
        bound_y = U * (K_BOUND + cond + k + 3) * truth_y.abs() + EXP_FLOOR * c
        assert_matches(y.detach(), truth_y.numpy(), bound_y.numpy(), dtype_name, "y")
        # The terms' magnitudes: |c| / D (|g_i| + sum |g| w / D) through p's derivative.
        p = torch.softmax(x64, -1) if norm_type == 0 else torch.sigmoid(x64)
        w = p.gather(-1, idx)
        d = w.sum(-1, keepdim=True) + eps
        mw = c / d * (g.double().abs() + (g.double().abs() * w).sum(-1, keepdim=True) / d)
        mgp = torch.zeros_like(p).scatter_add(-1, idx, mw)
        magnitude = mgp * p * (1 + p) if norm_type == 1 else \
            p * (mgp + (mw * w).sum(-1, keepdim=True))
        bound = U * (K_BOUND + 2 * cond + 3 * k + 3) * magnitude + EXP_FLOOR
    assert_matches(grad, truth.numpy(), bound.numpy(), dtype_name, "grad_x")


def test_hash_routing_example():
    """docs/moe_gating_weights.md's hash routing: expert_idx = tid2eid[token_ids], then the
    weights (and x's gradient) of those experts."""
    torch.manual_seed(0)
    vocab, experts, k, tokens = 100, 16, 2, 12
    tid2eid = torch.randint(0, experts, (vocab, k), dtype=torch.int32)  # a fixed table
    token_ids = torch.randint(0, vocab, (tokens,))
    router_logits = torch.randn(tokens, experts, requires_grad=True)
    expert_idx = tid2eid[token_ids]  # (tokens, k): no selection
    y = iop.moe_gating_weights(router_logits, expert_idx, norm_type=1)
    y.sum().backward()
    truth = weights64(router_logits.detach().double(), expert_idx.long(), 1, 1.0, 1e-20)
    assert torch.allclose(y.detach().double(), truth, rtol=1e-6, atol=0)
    assert router_logits.grad.shape == router_logits.shape


def test_replay_gives_the_recorded_weights():
    """Megatron RouterReplay: the expert_idx recorded in the forward (here with a bias, which
    only moves the selection), given back in the recomputation, reproduces the forward's
    weights bit for bit."""
    torch.manual_seed(1)
    x = torch.randn(32, 64)
    y, recorded, _ = iop.moe_gating_top_k(x, 6, torch.randn(64) * 0.1, 2, 8, 0, 0, 1, False, 2.5)
    assert helpers.same_bits(infiniop.moe_gating_weights(x, recorded, 1, 0, 2.5), y)


@pytest.mark.parametrize("device", DEVICES)
def test_errors(device):
    x = torch.randn(3, 8)
    out = torch.full((3, 2), 42.0)
    idx = torch.tensor([[0, 1], [2, 3], [4, 8]], dtype=torch.int32)
    error = expect_error(Status.BAD_PARAM, infiniop.moe_gating_weights, x, idx, out=out,
                         outputs=(out,), **on(device))
    assert "row 2, column 1" in error.message
    idx[2, 1] = -1
    expect_error(Status.BAD_PARAM, infiniop.moe_gating_weights, x, idx, out=out, outputs=(out,),
                 **on(device))
    idx[2, 1] = 0
    expect_error(Status.BAD_PARAM, infiniop.moe_gating_weights, x, idx, norm_type=3,
                 **on(device))
    expect_error(Status.BAD_PARAM, infiniop.moe_gating_weights, x, idx, renorm=1, **on(device))
    expect_error(Status.BAD_PARAM, infiniop.moe_gating_weights, x, idx, eps=-1.0, **on(device))
    expect_error(Status.BAD_TENSOR_SHAPE, infiniop.moe_gating_weights, x,
                 torch.zeros(3, 9, dtype=torch.int32), **on(device))  # k > E
    expect_error(Status.BAD_TENSOR_DTYPE, infiniop.moe_gating_weights, x, idx.float(),
                 **on(device))


compile_only = pytest.mark.skipif(not (_ops.REGISTERED and _ops.COMPILABLE),
                                  reason="torch.compile support needs PyTorch 2.4 or later")


@compile_only
@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_torch_compile_and_opcheck(dtype_name):
    """torch.compile (fullgraph) gives eager mode's y and x's gradient bit for bit;
    torch.library.opcheck passes (schema, fake kernel, registered autograd)."""
    rng = rng_for("weights-compile", dtype_name)
    x = logits(rng, 6, 8, dtype_name)
    idx = random_indices(rng, (6, 3), 8, torch.int32, duplicates=True)
    g = torch.from_numpy(rng.uniform(-1, 1, (6, 3))).to(x.dtype)

    def layer(x, idx):
        return iop.moe_gating_weights(x, idx, norm_type=0, routed_scaling_factor=2.5) * 1

    results = []
    for fn in (layer, torch.compile(layer, fullgraph=True)):
        xr = x.clone().requires_grad_()
        y = fn(xr, idx)
        (grad,) = torch.autograd.grad(y, xr, g)
        results.append((y.detach(), grad))
    assert helpers.same_bits(results[0][0], results[1][0])
    assert helpers.same_bits(results[0][1], results[1][1])
    torch.library.opcheck(torch.ops.infiniop.moe_gating_weights.default,
                          (x.clone().requires_grad_(), idx), {"routed_scaling_factor": 2.0})
    torch.library.opcheck(torch.ops.infiniop.moe_gating_weights.default,
                          (x.clone().requires_grad_(), idx.long(), 1, 0, 1.0, 0.5), {})


def test_second_derivative_refused():
    """The backward (MoeGatingTopKGrad) has no derivative of its own: create_graph=True gives a
    gradient whose backward raises, never a wrong second derivative."""
    x = torch.randn(5, 8, requires_grad=True)
    idx = torch.tensor([[0, 1], [2, 2], [7, 3], [4, 5], [6, 0]])
    y = iop.moe_gating_weights(x, idx, norm_type=0)
    (g,) = torch.autograd.grad((y * torch.randn(5, 2)).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="no second derivative"):
        g.sum().backward()
