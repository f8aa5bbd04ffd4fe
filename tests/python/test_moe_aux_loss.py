# SPDX-License-Identifier: Apache-2.0
"""MoeAuxLoss and MoeAuxLossGrad from Python (docs/moe_aux_loss.md): against a float64 torch
implementation of Megatron-LM's switch_load_balancing_loss_func and
sequence_load_balancing_loss_func on the scores of compute_routing_scores_for_aux_loss, its
gradient by torch autograd in float64, on every device and dtype, B = 1 and B > 1, the same
bits on every device, infiniop.torch.moe_aux_loss under autograd and torch.compile, and the
errors."""

import pytest
import torch

import infiniop
import infiniop.torch as iop
from infiniop import Status

from helpers import DEVICES, expect_error, on

COMPILABLE = hasattr(torch.library, "register_fake") and hasattr(torch.library,
                                                                 "register_autograd")


# ---- the float64 oracle, written from Megatron-LM's functions --------------------------------

def aux_scores(logits, score_function):
    """compute_routing_scores_for_aux_loss: softmax, or sigmoid normalized with 1e-20."""
    if score_function == "softmax":
        return torch.softmax(logits, dim=-1)
    if score_function == "sigmoid":
        scores = torch.sigmoid(logits)
    else:  # sqrtsoftplus (DeepSeek-V4), normalized as the sigmoid
        scores = torch.sqrt(torch.logaddexp(logits, torch.zeros_like(logits)))
    return scores / (scores.sum(dim=-1, keepdim=True) + 1e-20)


def switch_loss(probs, tokens_per_expert, total_num_tokens, topk, coeff):
    """switch_load_balancing_loss_func."""
    num_experts = probs.shape[-1]
    aggregated_probs_per_expert = probs.sum(dim=0)
    return torch.sum(aggregated_probs_per_expert * tokens_per_expert) * (
        num_experts * coeff / (topk * total_num_tokens * total_num_tokens))


def sequence_loss(probs, routing_counts, batch_size, seq_length, topk, coeff):
    """sequence_load_balancing_loss_func, with routing_map.sum(dim=0) given as routing_counts
    (B, E): probs viewed (seq, batch, E)."""
    num_experts = probs.shape[-1]
    probs_for_aux_loss = probs.view(seq_length, batch_size, -1)
    cost_coeff = routing_counts / (seq_length * topk / num_experts)
    return (cost_coeff * probs_for_aux_loss.mean(dim=0)).sum(dim=1).mean() * coeff


def oracle(x, counts, topk, score_function, total_tokens, coeff, grad_loss=1.0):
    """(loss, grad_x) in float64 from x as given (its dtype's values)."""
    x64 = x.detach().to(torch.float64).reshape(-1, x.shape[-1]).requires_grad_()
    n = counts.to(torch.float64)
    probs = aux_scores(x64, score_function)
    if counts.dim() == 1:
        loss = switch_loss(probs, n, total_tokens, topk, coeff)
    else:
        batch = counts.shape[0]
        loss = sequence_loss(probs, n, batch, x64.shape[0] // batch, topk, coeff)
    (grad,) = torch.autograd.grad(loss * grad_loss, x64)
    return loss.detach(), grad.reshape(x.shape)


def logits_of(shape, dtype, scale, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64) * scale
    x[..., ::7] *= 1e-3  # near zero
    return x.to(dtype)


def counts_of(shape, top, seed, dtype=torch.int64):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, top, shape, generator=g, dtype=dtype)


def loss_bound(T, E, exact, K, n_max, score_function):
    """The doc's bound: (E / 16 + T / 256 + 300) 2^-23 |exact| + K T E n 2^-124 / D (the
    scores' floor, D = 1 for softmax, 1e-20 for the normalized sigmoids) + T n 2^-149 + 2^-149."""
    d = 1.0 if score_function == "softmax" else 1e-20
    return ((E / 16 + T / 256 + 300) * 2.0 ** -23 * abs(exact)
            + abs(K) * T * E * n_max * 2.0 ** -124 / d + T * n_max * 2.0 ** -149 + 2.0 ** -149)


def check_grad(got, want, x, counts, topk, score_function, K_g, dtype):
    """The doc's bound: (E / 16 + 32) 2^-23 |K g| a (n + w) + ulp + floor."""
    E = x.shape[-1]
    x64 = x.detach().to(torch.float64).reshape(-1, E)
    p = aux_scores(x64, score_function)
    rows = x64.shape[0]
    n = counts.to(torch.float64)
    n = n.expand(rows, E) if counts.dim() == 1 else n.repeat(rows // counts.shape[0], 1)
    w = (p * n).sum(dim=-1, keepdim=True)
    if score_function == "softmax":
        a, d = p, torch.ones_like(w)
    elif score_function == "sigmoid":
        s = torch.sigmoid(x64)
        d = s.sum(dim=-1, keepdim=True) + 1e-20
        a = s * torch.sigmoid(-x64) / d
    else:
        r = torch.sqrt(torch.logaddexp(x64, torch.zeros_like(x64)))
        d = r.sum(dim=-1, keepdim=True) + 1e-20
        a = torch.where(r > 0, torch.sigmoid(x64) / (2 * r), torch.zeros_like(r)) / d
    scale = abs(K_g) * (n + w)
    # The spacing of grad_x's dtype at the exact value (subnormal spacing below its normals).
    ulp, tiny = {torch.float32: (2.0 ** -23, 2.0 ** -149), torch.float16: (2.0 ** -10, 2.0 ** -24),
                 torch.bfloat16: (2.0 ** -7, 2.0 ** -133)}[dtype]
    want = want.reshape(-1, E)
    tol = ((E / 16 + 32) * 2.0 ** -23 * scale * a + (ulp * want.abs()).clamp(min=tiny)
           + scale * 2.0 ** -125 / d + 2.0 ** -149)
    err = (got.to(torch.float64).reshape(-1, E) - want).abs()
    assert bool((err <= tol).all()), f"worst excess {(err - tol).max().item()}"


CASES = [  # (x shape, counts shape or None for (E), topk, total_tokens, coeff)
    ((300, 64), None, 6, None, 1e-2),
    ((130, 40), None, 2, 4096, 1e-2),  # a global N
    ((512, 64), 4, 6, None, 1e-3),     # sequence-level, B = 4
    ((24, 4, 32), 4, 4, None, 1e-2),   # (L, B, E): B = 4, the (seq, batch) order
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("score_function", ["softmax", "sigmoid", "sqrtsoftplus"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_loss_and_grad_match_megatron(device, dtype, score_function, case):
    shape, B, topk, total, coeff = CASES[case]
    E = shape[-1]
    rows = 1
    for d in shape[:-1]:
        rows *= d
    x = logits_of(shape, dtype, 6.0, 10 + case)
    counts = counts_of((E,) if B is None else (B, E), 2 * rows * topk // E + 1, 20 + case)
    total_tokens = rows if total is None else total
    loss = infiniop.moe_aux_loss(x, counts, topk, score_function=score_function,
                                 total_tokens=total, coeff=coeff, **on(device))
    assert loss.dtype == torch.float32 and loss.shape == ()
    exact, grad = oracle(x, counts, topk, score_function, total_tokens, coeff, 0.75)
    Bn = 1 if B is None else B
    L = total_tokens if B is None else rows // B
    K = coeff * E / (topk * Bn * L * L)
    assert abs(loss.item() - exact.item()) <= loss_bound(rows, E, exact.item(), K,
                                                         counts.max().item(), score_function)
    grad_loss = torch.tensor(0.75, dtype=torch.float32)
    grad_x = infiniop.moe_aux_loss_grad(grad_loss, x, counts, topk,
                                        score_function=score_function, total_tokens=total,
                                        coeff=coeff, **on(device))
    assert grad_x.dtype == dtype and grad_x.shape == x.shape
    check_grad(grad_x, grad, x, counts, topk, score_function, 0.75 * K, dtype)


@pytest.mark.parametrize("score_function", ["softmax", "sigmoid", "sqrtsoftplus"])
def test_same_bits_on_every_device(score_function):
    x = logits_of((1000, 96), torch.float32, 20.0, 5)
    counts = counts_of((8, 96), 200, 6, torch.int32)
    results = []
    for device in DEVICES:
        if isinstance(device, str) and device == "cpu_reference":
            continue
        try:
            kwargs = on(device if isinstance(device, str) else device.values[0])
        except Exception:  # a skipped device
            continue
        loss = infiniop.moe_aux_loss(x, counts, 8, score_function=score_function, coeff=0.1,
                                     **kwargs)
        grad = infiniop.moe_aux_loss_grad(torch.tensor(2.0), x, counts, 8,
                                          score_function=score_function, coeff=0.1, **kwargs)
        results.append((loss, grad))
    for loss, grad in results[1:]:
        assert torch.equal(loss.view(torch.int32), results[0][0].view(torch.int32))
        assert torch.equal(grad.view(torch.int32), results[0][1].view(torch.int32))


def test_counts_per_sequence_feed_the_sequence_loss():
    """MoeExpertCounts (B, E) gives Megatron's routing_map.sum over the sequence: row t in
    sequence t % B."""
    L, B, E, k = 32, 4, 16, 2
    x = logits_of((L * B, E), torch.float32, 3.0, 7)
    _, top = torch.topk(aux_scores(x.double(), "softmax"), k, dim=-1)
    counts = infiniop.moe_expert_counts(top.view(L, B, k), E,
                                        out=torch.empty(B, E, dtype=torch.int64))
    routing_map = torch.zeros(L * B, E).scatter(1, top, 1).view(L, B, E).sum(dim=0)
    assert torch.equal(counts, routing_map.long())
    for counted in (infiniop.moe_expert_counts(top, E, sequences=B),
                    iop.moe_expert_counts(top, E, sequences=B),
                    torch.ops.infiniop.moe_expert_counts(top, E, sequences=B)):
        assert torch.equal(counted, counts)
    loss = iop.moe_aux_loss(x, counts, k, coeff=1e-2)
    exact, _ = oracle(x, counts, k, "softmax", L * B, 1e-2)
    K = 1e-2 * E / (k * B * L * L)
    assert abs(loss.item() - exact.item()) <= loss_bound(L * B, E, exact.item(), K,
                                                         counts.max().item(), "softmax")


def test_torch_autograd_adds_to_the_router_gradient():
    x = logits_of((64, 16), torch.float32, 2.0, 8).requires_grad_()
    counts = counts_of((16,), 20, 9)
    task = (x * x).sum()
    aux = iop.moe_aux_loss(x, counts, 2, score_function="sigmoid", coeff=0.5)
    assert aux.requires_grad and aux.shape == ()
    (task + 3.0 * aux).backward()
    aux_grad = infiniop.moe_aux_loss_grad(torch.tensor(3.0), x.detach(), counts, 2,
                                          score_function="sigmoid", coeff=0.5)
    # autograd adds x, x and aux_grad in an order of its own: a few roundings of 2x.
    torch.testing.assert_close(x.grad, 2 * x.detach() + aux_grad, rtol=2e-6, atol=0)
    leaf = x.detach().clone().requires_grad_()
    (3.0 * iop.moe_aux_loss(leaf, counts, 2, score_function="sigmoid", coeff=0.5)).backward()
    assert torch.equal(leaf.grad, aux_grad)  # the library's bits, through autograd


def test_numpy_arrays():
    x = logits_of((40, 8), torch.float32, 2.0, 11).numpy()
    counts = counts_of((8,), 10, 12).numpy()
    loss = infiniop.moe_aux_loss(x, counts, 2, coeff=0.1)
    assert loss.shape == () and str(loss.dtype) == "float32"
    exact, _ = oracle(torch.from_numpy(x), torch.from_numpy(counts), 2, "softmax", 40, 0.1)
    assert abs(float(loss) - exact.item()) <= loss_bound(40, 8, exact.item(), 0.1 * 8 / (2 * 40 * 40),
                                                         int(counts.max()), "softmax")


@pytest.mark.parametrize("device", DEVICES)
def test_errors(device):
    x = torch.randn(12, 4)
    counts = torch.tensor([1, 2, 0, 3])
    expect_error(Status.BAD_PARAM, infiniop.moe_aux_loss, x, counts, 0, **on(device))
    expect_error(Status.BAD_PARAM, infiniop.moe_aux_loss, x, counts, 2, score_function=5,
                 **on(device))
    expect_error(Status.BAD_PARAM, infiniop.moe_aux_loss, x, torch.tensor([1, -2, 0, 3]), 2,
                 **on(device))
    expect_error(Status.BAD_PARAM, infiniop.moe_aux_loss, x, torch.ones(3, 4, dtype=torch.int64),
                 2, total_tokens=24, **on(device))
    expect_error(Status.BAD_TENSOR_SHAPE, infiniop.moe_aux_loss, x,
                 torch.ones(5, 4, dtype=torch.int64), 2, **on(device))
    expect_error(Status.BAD_TENSOR_DTYPE, infiniop.moe_aux_loss, x, counts.float(), 2,
                 **on(device))
    with pytest.raises(ValueError):
        infiniop.moe_aux_loss(x, counts, 2, score_function="tanh")


@pytest.mark.skipif(not COMPILABLE, reason="torch.compile support needs PyTorch 2.4 or later")
def test_torch_compile_fullgraph_eager_bits():
    import torch._dynamo

    torch._dynamo.reset()
    counts = counts_of((4, 32), 30, 13)

    def step(x):
        return iop.moe_aux_loss(x, counts, 4, score_function="sigmoid", coeff=1e-2) * 2.0

    x = logits_of((64, 32), torch.float32, 3.0, 14)
    results = []
    for fn in (step, torch.compile(step, fullgraph=True)):
        leaf = x.clone().requires_grad_()
        out = fn(leaf)
        out.backward()
        results.append((out.detach(), leaf.grad))
    assert torch.equal(results[0][0], results[1][0])
    assert torch.equal(results[0][1], results[1][1])
    torch._dynamo.reset()


@pytest.mark.skipif(not COMPILABLE, reason="torch.library.opcheck needs PyTorch 2.4 or later")
def test_opcheck():
    x = logits_of((12, 8), torch.float32, 2.0, 15).requires_grad_()
    counts = counts_of((8,), 6, 16)
    torch.library.opcheck(torch.ops.infiniop.moe_aux_loss.default, (x, counts, 2),
                          {"score_function": 1, "coeff": 0.1})
    torch.library.opcheck(torch.ops.infiniop.moe_aux_loss_grad.default,
                          (torch.tensor(1.0), x.detach(), counts, 2), {"coeff": 0.1})
