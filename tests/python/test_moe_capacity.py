# SPDX-License-Identifier: Apache-2.0
"""MoeExpertCapacity from Python (docs/moe_expert_capacity.md): kept_idx and weights_out against
an independent oracle written from the definition (per expert, its slots s = r k + j in order,
sorted by (-w, s) with a NaN weight first for the probability policy, the first C kept), bit for
bit on every device (the operator is exact: comparisons only); int32/int64 indices, F32/F16/BF16
weights with ties, NaN, +-0, values E in the input, C = 0, C at least the slots, strided and 3-D
inputs, NumPy; the position policy against MoeInitRoutingV2 drop_pad_mode 1's drops; the errors;
infiniop.torch's autograd (grad * (kept_idx != E), exact) and torch.compile; expert_capacity
against Megatron-LM's get_capacity expression."""

import math

import numpy as np
import pytest
import torch

import infiniop
import infiniop.torch as iop
from infiniop import Status
from infiniop.torch import _ops

from helpers import DEVICES, expect_error, on, same_bits

# The devices this machine runs (DEVICES' skipped ones left out), cpu_reference among them.
AVAILABLE = [d if isinstance(d, str) else d.values[0] for d in DEVICES
             if isinstance(d, str) or not d.marks]
WEIGHT_DTYPES = [torch.float32, torch.float16, torch.bfloat16]
POLICIES = ["position", "probability"]


def oracle(expert_idx, weights, experts, capacity, policy):
    """(kept_idx, weights_out) from the definition, in plain Python over the logical order."""
    ids = expert_idx.reshape(-1).tolist()
    w = None if weights is None else weights.reshape(-1).double().tolist()
    slots = {}
    for s, e in enumerate(ids):
        if e != experts:
            slots.setdefault(e, []).append(s)
    kept = set()
    for e, ss in slots.items():
        if policy in ("probability", 1):
            # NaN first, then the larger weight (-0 == +0 as floats), then the lower s.
            ss = sorted(ss, key=lambda s: (0, 0.0, s) if math.isnan(w[s]) else (1, -w[s], s))
        kept.update(ss[:capacity])
    kept_idx = torch.tensor([e if s in kept else experts for s, e in enumerate(ids)],
                            dtype=expert_idx.dtype).reshape(expert_idx.shape)
    weights_out = None
    if weights is not None:
        flat = weights.reshape(-1).clone()
        mask = torch.tensor([s not in kept for s in range(len(ids))], dtype=torch.bool)
        flat[mask] = 0.0  # +0
        weights_out = flat.reshape(weights.shape)
    return kept_idx, weights_out


def routing(g, rows, k, experts, finished=0.1, distinct=True):
    """(rows, k) expert indices: distinct within a row (a router's top-k) unless told, with
    about `finished` of the slots E (already dropped)."""
    if distinct:
        ids = torch.stack([torch.randperm(experts, generator=g)[:k] for _ in range(rows)])
    else:
        ids = torch.randint(0, experts, (rows, k), generator=g)
    ids[torch.rand(rows, k, generator=g) < finished] = experts
    return ids


def tied_weights(g, shape, dtype):
    """Weights with many ties (a few values), +-0, NaN and signed values."""
    levels = torch.tensor([0.5, 0.25, 0.125, 0.0, -0.0, 1.0, -0.5, float("nan"), 3.0e-3,
                           0.3333333], dtype=torch.float32)
    pick = torch.randint(0, len(levels), shape, generator=g)
    values = levels[pick]
    noise = torch.rand(shape, generator=g) < 0.3
    values[noise] = torch.rand(int(noise.sum()), generator=g)
    return values.to(dtype)


def poisoned(like, dtype=None):
    out = torch.empty_like(like, dtype=dtype)
    if out.is_floating_point():
        out.fill_(42.0)
    else:
        out.fill_(-7)
    return out


def check(device, expert_idx, weights, experts, capacity, policy, with_weights_out=True):
    want_kept, want_w = oracle(expert_idx, weights, experts, capacity, policy)
    out = poisoned(expert_idx)
    w_out = poisoned(weights) if weights is not None and with_weights_out else None
    kept, got_w = infiniop.moe_expert_capacity(
        expert_idx, experts, capacity, weights=weights, drop_policy=policy, out=out,
        weights_out=w_out, **on(device))
    assert kept is out
    assert torch.equal(kept, want_kept), f"kept_idx differs at C={capacity}, {policy}"
    if weights is not None and with_weights_out:
        assert got_w is w_out
        assert same_bits(got_w, want_w), f"weights_out differs at C={capacity}, {policy}"
    return kept, got_w


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("weight_dtype", WEIGHT_DTYPES)
@pytest.mark.parametrize("policy", POLICIES)
def test_matches_oracle(device, index_dtype, weight_dtype, policy):
    g = torch.Generator().manual_seed(11)
    rows, k, experts = 48, 4, 8
    expert_idx = routing(g, rows, k, experts).to(index_dtype)
    weights = tied_weights(g, (rows, k), weight_dtype)
    for capacity in (0, 1, 3, 7, 24, rows * k):  # 0: all dropped; rows * k: none
        check(device, expert_idx, weights, experts, capacity, policy)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("policy", [0, 1])
def test_duplicates_allocated_outputs_and_policy_ints(device, policy):
    """Repeated experts within a row (hash routing), the outputs allocated by the call, the
    policy given as 0 / 1."""
    g = torch.Generator().manual_seed(12)
    expert_idx = routing(g, 30, 6, 5, distinct=False)
    weights = tied_weights(g, (30, 6), torch.float32)
    want_kept, want_w = oracle(expert_idx, weights, 5, 4, policy)
    kept, w_out = infiniop.moe_expert_capacity(expert_idx, 5, 4, weights=weights,
                                               drop_policy=policy, **on(device))
    assert kept.dtype == expert_idx.dtype and kept.shape == expert_idx.shape
    assert torch.equal(kept, want_kept)
    assert w_out.dtype == weights.dtype and same_bits(w_out, want_w)


@pytest.mark.parametrize("device", DEVICES)
def test_position_without_weights(device):
    g = torch.Generator().manual_seed(13)
    expert_idx = routing(g, 40, 2, 6)
    kept, w_out = infiniop.moe_expert_capacity(expert_idx, 6, 5, **on(device))
    assert w_out is None
    assert torch.equal(kept, oracle(expert_idx, None, 6, 5, "position")[0])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("policy", POLICIES)
def test_strided_and_3d(device, policy):
    g = torch.Generator().manual_seed(14)
    base = routing(g, 36, 4, 9).to(torch.int64)
    view = base.t().contiguous().t()  # column-major (36, 4)
    wbase = tied_weights(g, (4, 72), torch.bfloat16)
    weights = wbase.t()[::2]  # (36, 4), strides (2, 72)
    check(device, view, weights, 9, 5, policy)
    three = routing(g, 2 * 15, 3, 7).reshape(2, 15, 3).to(torch.int32)
    w3 = tied_weights(g, (2, 15, 3), torch.float16)
    check(device, three, w3, 7, 4, policy)
    check(device, three[:, ::2], w3[:, ::2], 7, 2, policy)  # a strided 3-D view


@pytest.mark.parametrize("device", DEVICES)
def test_numpy(device):
    g = torch.Generator().manual_seed(15)
    expert_idx = routing(g, 20, 3, 6).to(torch.int32)
    weights = tied_weights(g, (20, 3), torch.float32)
    kept, w_out = infiniop.moe_expert_capacity(expert_idx.numpy(), 6, 3,
                                               weights=weights.numpy(),
                                               drop_policy="probability", **on(device))
    want_kept, want_w = oracle(expert_idx, weights, 6, 3, "probability")
    assert isinstance(kept, np.ndarray) and kept.dtype == np.int32
    assert np.array_equal(kept, want_kept.numpy())
    assert np.array_equal(w_out.view(np.int32), want_w.numpy().view(np.int32))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_position_policy_is_init_routings_drop_pad_mode_1(device, index_dtype):
    """The slots the position policy drops are those MoeInitRoutingV2 drops at
    drop_pad_mode 1 (expanded_row_idx -1), at the same expert_capacity."""
    g = torch.Generator().manual_seed(16)
    rows, k, experts = 50, 3, 7
    expert_idx = routing(g, rows, k, experts, finished=0.0).to(index_dtype)
    x = torch.randn(rows, 2, generator=g)
    for capacity in (1, 4, 9, 30):
        _, row_idx, _, _ = infiniop.moe_init_routing_v2(
            x, expert_idx, expert_num=experts, expert_capacity=capacity, drop_pad_mode=1,
            **on(device))
        kept, _ = infiniop.moe_expert_capacity(expert_idx, experts, capacity, **on(device))
        assert torch.equal(kept.reshape(-1) == experts, row_idx == -1), capacity


def test_same_bits_on_every_device():
    """A large routing (many rows per expert, a thread's share of them and more) on each
    device, both policies: the same bits as cpu_reference's."""
    g = torch.Generator().manual_seed(17)
    rows, k, experts = 3000, 8, 64
    expert_idx = routing(g, rows, k, experts, finished=0.02)
    weights = tied_weights(g, (rows, k), torch.float32)
    for policy in POLICIES:
        outputs = [infiniop.moe_expert_capacity(expert_idx, experts, 300, weights=weights,
                                                drop_policy=policy, **on(name))
                   for name in AVAILABLE]
        kept0, w0 = outputs[0]
        assert (kept0 == experts).any()
        for kept, w in outputs[1:]:
            assert torch.equal(kept, kept0) and same_bits(w, w0)


@pytest.mark.parametrize("device", DEVICES)
def test_errors(device):
    expert_idx = torch.tensor([[0, 1], [4, 2]], dtype=torch.int32)  # 4 = E: allowed
    weights = torch.rand(2, 2)
    out = torch.full((2, 2), -7, dtype=torch.int32)
    w_out = torch.full((2, 2), 42.0)
    outputs = (out, w_out)

    def call(idx=expert_idx, experts=4, capacity=1, **kw):
        kw.setdefault("weights", weights)
        kw.setdefault("weights_out", w_out)
        return infiniop.moe_expert_capacity(idx, experts, capacity, out=out, **kw,
                                            **on(device))

    bad = expert_idx.clone()
    bad[1, 0] = 5  # E + 1
    expect_error(Status.BAD_PARAM, call, bad, outputs=outputs)
    bad[1, 0] = -1
    expect_error(Status.BAD_PARAM, call, bad, outputs=outputs)
    expect_error(Status.BAD_PARAM, call, experts=0, outputs=outputs)
    expect_error(Status.BAD_PARAM, call, capacity=-1, outputs=outputs)
    expect_error(Status.BAD_PARAM, call, drop_policy=2, outputs=outputs)
    expect_error(Status.NULL_POINTER, call, weights=None, weights_out=None,
                 drop_policy="probability", outputs=outputs)
    expect_error(Status.NULL_POINTER, call, weights=None, outputs=outputs)  # weights_out alone
    expect_error(Status.BAD_TENSOR_SHAPE, call, weights=torch.rand(2, 3),
                 weights_out=torch.rand(2, 3), outputs=outputs)
    expect_error(Status.BAD_TENSOR_DTYPE, call, weights=weights.double(),
                 weights_out=w_out.double(), outputs=outputs)
    expect_error(Status.BAD_TENSOR_DTYPE, call, expert_idx.float(), outputs=outputs)
    with pytest.raises(ValueError, match="drop_policy"):
        call(drop_policy="lowest")


def test_expert_capacity_is_megatrons_get_capacity():
    """math.ceil((T * k / E) * factor), raised to min_capacity: Megatron-LM's get_capacity as
    apply_router_token_dropping calls it (num_tokens = T * topk), float rounding included."""
    assert infiniop.expert_capacity(4096, 64, 8, 1.25) == 640
    assert infiniop.expert_capacity(4096, 64, 8, 1.0) == 512
    assert infiniop.expert_capacity(100, 16, 2, 1.0) == 13  # ceil(12.5)
    # (75 * 2 / 3) * 1.1 is 55.00000000000001 in double (the real is 55): 56, as Megatron's
    # expression gives.
    assert infiniop.expert_capacity(75, 3, 2, 1.1) == 56
    assert infiniop.expert_capacity(10, 3, 1, 0.3) == 1
    assert infiniop.expert_capacity(10, 3, 1, 0.3, min_capacity=5) == 5
    assert infiniop.expert_capacity(10, 3, 1, 3.0, min_capacity=5) == 10
    assert infiniop.expert_capacity(0, 8, 2, 1.0) == 0
    for args in ((10, 0, 1, 1.0), (-1, 4, 1, 1.0), (10, 4, 0, 1.0), (10, 4, 1, float("nan"))):
        with pytest.raises(ValueError):
            infiniop.expert_capacity(*args)
    with pytest.raises(TypeError):
        infiniop.expert_capacity(10.0, 4, 1, 1.0)


# --------------------------------------------------------------------------------------------
# infiniop.torch

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("weight_dtype", WEIGHT_DTYPES)
@pytest.mark.parametrize("with_handle", [False, True])
def test_autograd_gradient_is_the_kept_mask(device, weight_dtype, with_handle):
    """weights' gradient is grad where kept, +0 where dropped (exact), through the registered
    operator (device=) and the autograd.Function (handle=); expert_idx gets none."""
    g = torch.Generator().manual_seed(18)
    expert_idx = routing(g, 40, 4, 8)
    weights = tied_weights(g, (40, 4), weight_dtype).requires_grad_()
    handle = on(device)["handle"]  # skips an unavailable device
    if with_handle:  # the autograd.Function
        kwargs = {"handle": handle if handle is not None else infiniop.Handle(device)}
    else:  # torch.ops.infiniop's operator, where registered
        kwargs = {"device": device}
    kept, w_out = iop.moe_expert_capacity(expert_idx, 8, 6, weights=weights,
                                          drop_policy="probability", **kwargs)
    want_kept, want_w = oracle(expert_idx, weights.detach(), 8, 6, "probability")
    assert torch.equal(kept, want_kept) and same_bits(w_out.detach(), want_w)
    assert not kept.requires_grad and w_out.requires_grad
    grad = torch.randn(40, 4, generator=g).to(weight_dtype)
    w_out.backward(grad)
    want = torch.where(kept != 8, grad, torch.zeros((), dtype=weight_dtype))
    assert same_bits(weights.grad, want)


@pytest.mark.skipif(not (_ops.REGISTERED and _ops.COMPILABLE),
                    reason="torch.compile of the library's operators needs PyTorch 2.4")
def test_compiles_fullgraph_with_eager_bits():
    g = torch.Generator().manual_seed(19)
    expert_idx = routing(g, 32, 4, 8)
    weights = tied_weights(g, (32, 4), torch.float32).nan_to_num().requires_grad_()

    def step(idx, w):
        kept, w_out = iop.moe_expert_capacity(idx, 8, 5, weights=w, drop_policy="probability")
        return kept, w_out * 3.0

    grads = []
    results = []
    for function in (step, torch.compile(step, fullgraph=True),
                     torch.compile(step, fullgraph=True, dynamic=True)):
        kept, w_out = function(expert_idx, weights)
        w_out.backward(torch.arange(4.0).expand(32, 4))
        results.append((kept, w_out.detach()))
        grads.append(weights.grad)
        weights.grad = None
    for result, grad in zip(results[1:], grads[1:]):
        assert torch.equal(results[0][0], result[0])
        assert same_bits(results[0][1], result[1]) and same_bits(grads[0], grad)
    assert (results[0][0] == 8).any() and not grads[0][results[0][0] == 8].any()
