# SPDX-License-Identifier: Apache-2.0
"""MoeExpertCounts and MoeBiasUpdate from Python (docs/moe_expert_counts.md,
docs/moe_bias_update.md): against torch.bincount and the update's formula in float64, on every
device, NumPy and torch, strided inputs, torch.ops.infiniop and the in-place schema."""

import numpy as np
import pytest
import torch

import infiniop
import infiniop.torch as iop
from infiniop import Status

from helpers import DEVICES, expect_error, on


def _bincount(expert_idx, experts):
    flat = expert_idx.flatten().to(torch.int64)
    return torch.bincount(flat[flat != experts], minlength=experts)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("counts_dtype", ["int32", "int64"])
def test_counts_match_bincount(device, index_dtype, counts_dtype):
    g = torch.Generator().manual_seed(3)
    expert_idx = torch.randint(0, 257, (1000, 8), generator=g, dtype=index_dtype)  # 256: finished
    counts = infiniop.moe_expert_counts(expert_idx, 256, counts_dtype=counts_dtype, **on(device))
    assert counts.dtype == getattr(torch, counts_dtype)
    assert torch.equal(counts.to(torch.int64), _bincount(expert_idx, 256))


@pytest.mark.parametrize("device", DEVICES)
def test_counts_strided_numpy_and_out(device):
    g = torch.Generator().manual_seed(4)
    base = torch.randint(0, 13, (40, 12), generator=g, dtype=torch.int64)
    view = base.t()[::2]  # (6, 40), column strides
    out = torch.full((24,), -7, dtype=torch.int64)[::2]
    got = infiniop.moe_expert_counts(view, 12, out=out, **on(device))
    assert got is out
    assert torch.equal(out, _bincount(view, 12))
    array = np.ascontiguousarray(base.numpy()[:, ::-1])
    counts = infiniop.moe_expert_counts(array, 12, counts_dtype=np.int32, **on(device))
    assert counts.dtype == np.int32
    assert np.array_equal(counts, _bincount(torch.from_numpy(array.copy()), 12).numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_counts_errors(device):
    expert_idx = torch.tensor([[0, 1], [5, 2]], dtype=torch.int32)
    expect_error(Status.BAD_PARAM, infiniop.moe_expert_counts, expert_idx, 4, **on(device))
    expect_error(Status.BAD_PARAM, infiniop.moe_expert_counts, expert_idx, 0, **on(device))
    expect_error(Status.BAD_TENSOR_DTYPE, infiniop.moe_expert_counts, expert_idx.float(), 8,
                 **on(device))


def _bias_truth(bias, counts, u):
    """bias + u sign(mean - counts) per the formula, in float64, rounded once to float32
    (exact: u is a float32 and one addition is rounded once); ties untouched."""
    mean = counts.to(torch.float64).sum() / counts.numel()
    sign = torch.sign(mean - counts.to(torch.float64))
    u32 = float(np.float32(u))
    updated = (bias.to(torch.float64) + sign * u32).to(torch.float32)
    return torch.where(sign == 0, bias, updated)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("counts_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("u", [0.001, 0.5, -0.125])
def test_bias_update_matches_formula(device, counts_dtype, u):
    g = torch.Generator().manual_seed(5)
    bias = torch.randn(256, generator=g)
    counts = torch.randint(0, 1024, (256,), generator=g, dtype=counts_dtype)
    counts[:8] = counts[:8].sum() // 8  # some near the mean
    truth = _bias_truth(bias, counts, u)
    got = infiniop.moe_bias_update(bias, counts, u, **on(device))
    assert got is bias
    assert torch.equal(bias.view(torch.int32), truth.view(torch.int32))


@pytest.mark.parametrize("device", DEVICES)
def test_bias_update_ties_and_strides(device):
    storage = torch.zeros(8)
    bias = storage[::2]
    bias.copy_(torch.tensor([1.0, -0.0, 2.0, 3.0]))
    counts = torch.tensor([3, 4, 5, 4], dtype=torch.int64)  # mean 4
    infiniop.moe_bias_update(bias, counts, 0.25, **on(device))
    assert bias.tolist() == [1.25, -0.0, 1.75, 3.0]
    assert torch.signbit(bias[1])
    assert storage[1::2].eq(0).all()


@pytest.mark.parametrize("device", DEVICES)
def test_bias_update_errors_write_nothing(device):
    bias = torch.arange(3, dtype=torch.float32)
    before = bias.clone()
    expect_error(Status.BAD_PARAM, infiniop.moe_bias_update, bias,
                 torch.tensor([1, -1, 2]), 0.001, **on(device))
    expect_error(Status.BAD_PARAM, infiniop.moe_bias_update, bias,
                 torch.tensor([1, 2, 3]), float("inf"), **on(device))
    expect_error(Status.BAD_TENSOR_DTYPE, infiniop.moe_bias_update, bias.double(),
                 torch.tensor([1, 2, 3]), 0.001, **on(device))
    assert torch.equal(bias, before)


def test_torch_functions_and_ops():
    g = torch.Generator().manual_seed(6)
    expert_idx = torch.randint(0, 64, (128, 6), generator=g, dtype=torch.int32)
    counts = iop.moe_expert_counts(expert_idx, 64)
    assert counts.dtype == torch.int64
    assert torch.equal(counts, _bincount(expert_idx, 64))
    bias = torch.nn.Parameter(torch.zeros(64), requires_grad=False)
    truth = _bias_truth(bias.detach().clone(), counts, 0.001)
    iop.moe_bias_update(bias, counts, 0.001)
    assert torch.equal(bias.detach(), truth)
    from infiniop.torch import _ops
    if not _ops.REGISTERED:
        pytest.skip(_ops.REASON)
    assert torch.equal(torch.ops.infiniop.moe_expert_counts(expert_idx, 64), counts)
    buffer = torch.zeros(64)
    assert torch.ops.infiniop.moe_bias_update(buffer, counts, 0.001) is None
    assert torch.equal(buffer, truth)
    schema = str(torch.ops.infiniop.moe_bias_update.default._schema)
    assert "Tensor(a!) bias" in schema


def test_torch_compile_counts_and_update():
    from infiniop.torch import _ops
    if not (_ops.REGISTERED and _ops.COMPILABLE):
        pytest.skip("torch.compile needs torch.library's register_fake (PyTorch 2.4)")

    def step(expert_idx, bias):
        counts = iop.moe_expert_counts(expert_idx, 16)
        iop.moe_bias_update(bias, counts, 0.01)
        return counts

    expert_idx = torch.randint(0, 16, (64, 2), dtype=torch.int64)
    bias = torch.zeros(16)
    expected_bias = bias.clone()
    expected = step(expert_idx, expected_bias)
    compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
    assert torch.equal(compiled(expert_idx, bias), expected)
    assert torch.equal(bias, expected_bias)
