# SPDX-License-Identifier: Apache-2.0
"""MoeZLoss and MoeZLossGrad from Python (docs/moe_z_loss.md): against Megatron-LM's z_loss_func
(coeff * mean(logsumexp(x)^2)) and its autograd gradient in float64 torch, within the doc's
bound, on every device, float32/float16/bfloat16, NumPy and torch, strided inputs, large logits,
special rows; infiniop.torch.moe_z_loss with autograd, torch.ops.infiniop, opcheck and
torch.compile."""

import math

import numpy as np
import pytest
import torch

import infiniop
import infiniop.torch as iop
from infiniop import Status

from helpers import DEVICES, expect_error, f32_bound, on

U = 2.0 ** -24
K = f32_bound("moe_z_loss") / U


def _megatron(x, coeff):
    """Megatron-LM's z_loss_func in float64."""
    return torch.mean(torch.square(torch.logsumexp(x.double(), dim=-1))) * coeff


def _terms(x):
    """Per row (flattened): lse, z, A, chain, p, a (the doc's bound's quantities)."""
    x = x.double().reshape(-1, x.shape[-1])
    m = x.max(dim=-1, keepdim=True).values
    lse = torch.logsumexp(x, dim=-1)
    p = torch.softmax(x, dim=-1)
    a = m - x
    A = (a * p).sum(-1)
    chain = math.ceil(x.shape[-1] / 16) + 4
    return lse, lse * lse, A, chain, p, a


def _loss_bound(x, coeff):
    lse, z, A, chain, _, _ = _terms(x)
    T = lse.numel()
    n_b = min(T, 256) + math.ceil(T / 256)
    terms = ((n_b + K) * z + 2 * lse.abs() * (A + chain + K)).sum()
    return U * abs(coeff) / max(T, 1) * terms.item() + 2.0 ** -149


def _grad_bound(x, coeff, g, dtype):
    lse, _, A, chain, p, a = _terms(x)
    T = lse.numel()
    c = abs(2 * coeff / T * g)
    lse, A = lse[:, None].abs(), A[:, None]
    bound = U * c * p * (lse * (K + a + A + chain) + A + chain + K) + 2.0 ** -125 * c * lse
    bound = bound + 2.0 ** -149
    if dtype != torch.float32:
        truth = (2 * coeff / T * g * lse * p).abs()
        bits, smallest = (10, 2.0 ** -14) if dtype == torch.float16 else (7, 2.0 ** -126)
        bound = bound + torch.exp2(torch.floor(torch.log2(truth.clamp_min(smallest))) - bits)
    return bound.reshape(x.shape)


def _truth_grad(x, coeff, g):
    x64 = x.double().detach().requires_grad_(True)
    (_megatron(x64, coeff) * g).backward()
    return x64.grad


def _logits(shape, scale, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64) * scale
    x.view(-1, shape[-1])[::7] = x.view(-1, shape[-1])[::7, :1]  # rows of equal values
    return x.to(dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape,scale", [((300, 256), 3.0), ((4, 33, 40), 30.0),
                                         ((17, 1), 5.0), ((64, 384), 2000.0)])
def test_matches_megatron_float64(device, dtype, shape, scale):
    x = _logits(shape, scale, dtype, sum(shape))
    coeff = 1e-3
    loss = infiniop.moe_z_loss(x, coeff, **on(device))
    assert loss.shape == () and loss.dtype == torch.float32
    truth = _megatron(x, coeff).item()
    assert abs(loss.item() - truth) <= _loss_bound(x, coeff)
    g = 0.75
    grad = infiniop.moe_z_loss_grad(torch.tensor(g), x, coeff, **on(device))
    assert grad.shape == x.shape and grad.dtype == dtype
    err = (grad.double() - _truth_grad(x, coeff, g)).abs()
    assert bool((err <= _grad_bound(x, coeff, g, dtype)).all())


@pytest.mark.parametrize("device", DEVICES)
def test_strided_numpy_and_out(device):
    base = _logits((64, 24), 4.0, torch.float32, 1)
    view = base.t()[::2].t()  # (64, 12), strided both ways
    out = torch.full((2,), -7.0)[0]
    got = infiniop.moe_z_loss(view, 0.01, out=out, **on(device))
    assert got is out
    assert abs(out.item() - _megatron(view, 0.01).item()) <= _loss_bound(view, 0.01)
    array = base.numpy()[:, ::-1]
    loss = infiniop.moe_z_loss(array, 0.01, **on(device))
    assert isinstance(loss, np.ndarray) and loss.shape == () and loss.dtype == np.float32
    assert loss == infiniop.moe_z_loss(torch.from_numpy(array.copy()), 0.01, **on(device)).item()
    grad = infiniop.moe_z_loss_grad(np.array(1.0, dtype=np.float32), array, 0.01, **on(device))
    assert grad.shape == array.shape


@pytest.mark.parametrize("device", DEVICES)
def test_large_logits_and_special_rows(device):
    x = torch.tensor([[1e4, 1e4 - 1, -1e4], [-3e4, -3e4, -3e4], [0.0, -math.inf, 1.0]])
    loss = infiniop.moe_z_loss(x, 1.0, **on(device))
    assert math.isfinite(loss.item())
    assert abs(loss.item() - _megatron(x, 1.0).item()) <= _loss_bound(x[[0, 1]], 1.0) * 2
    inf_row = torch.tensor([[0.0, 1.0], [-math.inf, -math.inf]])
    assert infiniop.moe_z_loss(inf_row, 1.0, **on(device)).item() == math.inf
    nan_row = torch.tensor([[0.0, 1.0], [math.nan, 0.0]])
    assert math.isnan(infiniop.moe_z_loss(nan_row, 1.0, **on(device)).item())
    grad = infiniop.moe_z_loss_grad(torch.tensor(1.0), nan_row, 1.0, **on(device))
    assert torch.isnan(grad[1]).all() and torch.isfinite(grad[0]).all()
    empty = torch.zeros(0, 8)
    assert infiniop.moe_z_loss(empty, 1.0, **on(device)).item() == 0.0


@pytest.mark.parametrize("device", DEVICES)
def test_errors(device):
    x = torch.randn(4, 8)
    expect_error(Status.BAD_PARAM, infiniop.moe_z_loss, x, math.inf, **on(device))
    expect_error(Status.BAD_PARAM, infiniop.moe_z_loss, x, 1e39, **on(device))
    expect_error(Status.BAD_TENSOR_SHAPE, infiniop.moe_z_loss, torch.randn(8), 1.0, **on(device))
    expect_error(Status.BAD_TENSOR_DTYPE, infiniop.moe_z_loss, x.double(), 1.0, **on(device))
    expect_error(Status.BAD_TENSOR_SHAPE, infiniop.moe_z_loss_grad, torch.ones(1), x, 1.0,
                 **on(device))
    with pytest.raises(TypeError):
        infiniop.moe_z_loss(x, "1e-3")


@pytest.mark.parametrize("device", DEVICES)
def test_torch_autograd(device):
    x = _logits((50, 64), 3.0, torch.float32, 9).requires_grad_(True)
    task = (x * 0.5).sum()
    loss = task + iop.moe_z_loss(x, 1e-2, **on(device))
    loss.backward()
    x64 = x.detach().double().requires_grad_(True)
    ((x64 * 0.5).sum() + _megatron(x64, 1e-2)).backward()
    err = (x.grad.double() - x64.grad).abs()
    assert bool((err <= _grad_bound(x.detach(), 1e-2, 1.0, torch.float32) + 1e-7).all())


def test_torch_ops_opcheck_and_compile():
    from infiniop.torch import _ops
    if not (_ops.REGISTERED and _ops.COMPILABLE):
        pytest.skip("torch.compile needs torch.library's register_fake (PyTorch 2.4)")
    x = _logits((40, 32), 2.0, torch.float32, 2)
    for dtype in (torch.float32, torch.bfloat16):
        torch.library.opcheck(torch.ops.infiniop.moe_z_loss.default,
                              (x.to(dtype).clone().requires_grad_(True), 1e-3), {})
        torch.library.opcheck(torch.ops.infiniop.moe_z_loss_grad.default,
                              (torch.tensor(1.0), x.to(dtype), 1e-3), {})

    def step(logits):
        return iop.moe_z_loss(logits, 1e-3) + logits.sum() * 0

    eager_x = x.clone().requires_grad_(True)
    eager = step(eager_x)
    eager.backward()
    compiled_x = x.clone().requires_grad_(True)
    got = torch.compile(step, backend="aot_eager", fullgraph=True)(compiled_x)
    got.backward()
    assert torch.equal(got.detach(), eager.detach())
    assert torch.equal(compiled_x.grad, eager_x.grad)
