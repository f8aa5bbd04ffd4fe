# SPDX-License-Identifier: Apache-2.0
"""infiniop.torch.moe.Router, every option, against the float64 router of its definitions
(router_training.reference_router: Megatron-LM's and DeepSeek's formulas) for the library's
selection: the weights, the aux loss, the z-loss and the gradient of the logits through all of
them, within TOLERANCE u of each tensor's largest magnitude (F32, u = 2^-24), on every device;
the selection itself against the definitions (the top k of the scores, groups, bias); the
bias update; bad options."""
import pytest
import torch

import infiniop
from helpers import DEVICES, shared_handle
from infiniop.torch import _ops, moe
from router_training import TOLERANCE, U, _aux_counts, gradient_terms, reference_router

H, T = 24, 48  # hidden, tokens (seq 12 x batch 4)

CASES = {
    "softmax_post": dict(num_experts=16, topk=2),
    "softmax_pre_scaled": dict(num_experts=16, topk=3, pre_softmax=True, scaling_factor=2.0,
                               aux_loss_type="switch", aux_loss_coeff=1e-2),
    "softmax_grouped_pre": dict(num_experts=16, topk=2, pre_softmax=True, num_groups=4,
                                group_topk=2, group_score="max", z_loss_coeff=1e-3),
    "softmax_grouped_post": dict(num_experts=16, topk=2, num_groups=4, group_topk=2,
                                 group_score="max"),
    "sigmoid_top1_megatron": dict(num_experts=8, topk=1, score_function="sigmoid",
                                  aux_loss_type="switch", aux_loss_coeff=1e-2),
    "sigmoid_top1_hf": dict(num_experts=8, topk=1, score_function="sigmoid", normalize=True),
    "deepseek_v3": dict(num_experts=32, topk=4, score_function="sigmoid", num_groups=4,
                        group_topk=2, group_score="top2", expert_bias=True, scaling_factor=2.5,
                        aux_loss_type="seq", aux_loss_coeff=1e-3, seq_length=12,
                        z_loss_coeff=1e-3),
    "megatron_group_topk": dict(num_experts=32, topk=6, score_function="sigmoid", num_groups=8,
                                group_topk=3, group_score="topk", expert_bias=True,
                                aux_loss_type="switch", aux_loss_coeff=1e-2,
                                aux_loss_counts="unbiased"),
    "deepseek_v4": dict(num_experts=24, topk=6, score_function="sqrtsoftplus",
                        expert_bias=True, scaling_factor=1.5, aux_loss_type="switch",
                        aux_loss_coeff=1e-3, z_loss_coeff=1e-3),
    "sqrtsoftplus_unnormalized": dict(num_experts=24, topk=2, score_function="sqrtsoftplus",
                                      normalize=False),
}


def _close(name, got, ref, terms=None):
    """|got - ref| <= TOLERANCE u x (the largest |ref|, or each element's terms)."""
    ref = ref.detach()
    err = (got.detach().double() - ref).abs()
    scale = ref.abs().max() if terms is None else terms
    bad = err > TOLERANCE * U * scale + 2.0 ** -120
    assert not bad.any(), f"{name}: errors {err[bad][:4].tolist()}, scales " \
        f"{torch.as_tensor(scale).expand_as(err)[bad][:4].tolist()}"


def _check(router, hidden, replay=None):
    captured = {}
    original = router.route

    def route(logits, expert_idx=None):
        logits.retain_grad()
        weights, ids = original(logits, expert_idx)
        weights.retain_grad()
        captured.update(logits=logits, weights=weights, ids=ids)
        return weights, ids
    router.route = route
    out = router(hidden, replay)
    router.route = original
    g = torch.linspace(-1, 1, out.weights.numel()).reshape(out.weights.shape)
    loss = (out.weights * g).sum()
    for extra in (out.aux_loss, out.z_loss):
        if extra is not None:
            loss = loss + extra
    loss.backward()
    logits, ids = captured["logits"], captured["ids"]
    x64 = logits.detach().double().requires_grad_()
    w, aux, z = reference_router(router, x64, ids, _aux_counts(router, logits, ids))
    _close("weights", out.weights, w)
    total = (w * g.double()).sum()
    for got, ref, what in ((out.aux_loss, aux, "aux_loss"), (out.z_loss, z, "z_loss")):
        assert (got is None) == (ref is None), what
        if ref is not None:
            _close(what, got, ref)
            total = total + ref
    terms = gradient_terms(router, x64, ids, g, [r for r in (aux, z) if r is not None],
                           replayed=replay is not None)
    (grad64,) = torch.autograd.grad(total, x64)
    _close("grad of the logits", logits.grad, grad64, terms)
    return out, logits.detach()


def _selection(router, logits):
    """The definitions' selection: the top k of the scores plus the bias among the best groups
    (group score: max, top-2 sum or top k/group_topk sum), ties to the lower index."""
    x = logits.double()
    f = router.score_function
    p = torch.softmax(x, -1) if f == "softmax" else torch.sigmoid(x) if f == "sigmoid" else \
        torch.sqrt(torch.nn.functional.softplus(x))
    v = p + (router.expert_bias.double() if router.expert_bias is not None else 0)
    if router.num_groups > 1:
        groups = v.view(v.shape[0], router.num_groups, -1)
        best = {"max": 1, "top2": 2, "topk": router.topk // router.group_topk}[router.group_score]
        score = groups.topk(best, -1).values.sum(-1)
        kept = torch.zeros_like(score).scatter(1, score.topk(router.group_topk, -1).indices, 1)
        v = v.masked_fill(~kept.bool().repeat_interleave(groups.shape[-1], 1), -float("inf"))
    return v.topk(router.topk, -1).indices


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("device", DEVICES)
def test_router_matches_float64(case, device):
    torch.manual_seed(0)
    router = moe.Router(H, device=device, seq_length=CASES[case].get("seq_length"),
                        **{k: v for k, v in CASES[case].items() if k != "seq_length"})
    if router.expert_bias is not None:
        router.expert_bias.copy_(torch.randn(router.num_experts) * 0.05)
    hidden = torch.randn(T, H) * 2
    out, logits = _check(router, hidden)
    assert torch.equal(out.expert_idx.long().sort(-1).values,
                       _selection(router, logits).sort(-1).values)
    assert torch.equal(out.tokens_per_expert,
                       torch.bincount(out.expert_idx.long().flatten(), minlength=router.num_experts))
    assert router.weight.grad is not None
    # A normalized top-1 weight is exactly 1 and has no aux or z loss: its exact gradient is 0
    # (a device's is 0 or rounding noise, within the terms' bound _check applied); any other
    # case's gradient reaches the router's weight.
    constant = router.topk == 1 and CASES[case].get("normalize") and out.aux_loss is None \
        and out.z_loss is None
    if not constant:
        assert router.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("case", ["softmax_post", "softmax_pre_scaled", "deepseek_v3",
                                  "deepseek_v4", "sigmoid_top1_megatron",
                                  "sqrtsoftplus_unnormalized"])
@pytest.mark.parametrize("device", DEVICES)
def test_replay_gives_the_forward_bits(case, device):
    """forward(hidden, expert_idx) with the router's own selection: the same weights and
    losses, bit for bit (Megatron's RouterReplay), except softmax after the top-k, whose forward
    (MoeGatingTopKSoftmax, renorm 1) sums the k exponentials of the selected logits and whose
    replay (MoeGatingWeights) divides their p by its sum: the same real number, within the
    bound; and any given indices get the float64 weights and gradient."""
    torch.manual_seed(1)
    options = {k: v for k, v in CASES[case].items() if k != "seq_length"}
    router = moe.Router(H, device=device, seq_length=CASES[case].get("seq_length"), **options)
    hidden = torch.randn(T, H)
    first = router(hidden)
    again = router(hidden, first.expert_idx)
    if case == "softmax_post":
        _close("replayed weights", again.weights, first.weights.double())
    else:
        assert torch.equal(again.weights, first.weights)
    for a, b in ((first.aux_loss, again.aux_loss), (first.z_loss, again.z_loss)):
        assert (a is None and b is None) or torch.equal(a, b)
    hashed = torch.randint(0, router.num_experts, (T, router.topk), dtype=torch.int32)
    _check(router, hidden, hashed)


def test_bias_update_is_deepseek_v3s_step():
    torch.manual_seed(2)
    router = moe.Router(H, 16, 4, score_function="sigmoid", expert_bias=True,
                        bias_update_rate=1e-3)
    counts = torch.zeros(16, dtype=torch.int64)
    for _ in range(3):
        counts += router(torch.randn(T, H)).tokens_per_expert
    assert torch.equal(router.tokens_since_update, counts)
    router.update_expert_bias()
    mean = counts.double().mean()
    want = (torch.sign(mean - counts.double()) * torch.tensor(1e-3, dtype=torch.float32)).float()
    assert torch.equal(router.expert_bias, want)
    assert not router.tokens_since_update.any()
    router.eval()  # no accumulation outside training
    router(torch.randn(T, H))
    assert not router.tokens_since_update.any()


@pytest.mark.parametrize("options, message", [
    (dict(score_function="tanh"), "score_function"),
    (dict(group_score="mean"), "group_score"),
    (dict(aux_loss_type="global"), "aux_loss_type"),
    (dict(aux_loss_type="seq", aux_loss_coeff=1e-3), "seq_length"),
    (dict(normalize=True), "normalize"),
    (dict(aux_loss_counts="all"), "aux_loss_counts"),
])
def test_bad_options(options, message):
    with pytest.raises(ValueError, match=message):
        moe.Router(H, 16, 2, **options)


def test_update_without_bias_is_an_error():
    with pytest.raises(RuntimeError, match="expert_bias"):
        moe.Router(H, 16, 2).update_expert_bias()


@pytest.mark.skipif(not (_ops.REGISTERED and _ops.COMPILABLE),
                    reason="torch.compile of the library's operators needs PyTorch 2 "
                           "(torch.library custom ops)")
def test_router_compiles_fullgraph_with_eager_bits():
    """DeepSeek-V3's router under torch.compile(fullgraph=True): one graph (the operators' fake
    kernels), the weights, indices and both losses with eager's bits, and the bias counts
    accumulated as in eager."""
    torch.manual_seed(3)
    options = {k: v for k, v in CASES["deepseek_v3"].items() if k != "seq_length"}
    router = moe.Router(H, seq_length=12, **options)
    hidden = torch.randn(T, H)

    def step(x):
        out = router(x)
        return out.weights, out.expert_idx, out.aux_loss, out.z_loss

    eager = step(hidden)
    counts = router.tokens_since_update.clone()
    compiled = torch.compile(step, fullgraph=True)(hidden)
    for want, got in zip(eager, compiled):
        assert torch.equal(want, got)
    assert torch.equal(router.tokens_since_update, 2 * counts)


# --------------------------------------------------------------------------------------------
# Expert capacity (capacity_factor, drop_policy, min_capacity): the router's routing, then
# MoeExpertCapacity (tests/python/test_moe_capacity.py checks that operator against its oracle)

CAPACITY_CASES = [("softmax_post", "probs"), ("softmax_pre_scaled", "position"),
                  ("deepseek_v3", "probs"), ("megatron_group_topk", "position"),
                  ("sigmoid_top1_megatron", "probs")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case, policy", CAPACITY_CASES)
def test_capacity_drops_the_dropless_routing(case, policy, device):
    """A router with capacity_factor gives the dropless router's routing with MoeExpertCapacity
    applied at C = expert_capacity(T, E, k, factor): expert_idx E and weight +0 at the dropped
    slots, tokens_per_expert (and the bias counts) of the kept slots, the aux loss and z-loss of
    the selection (unchanged), and the gradient of the dropless router's weights times the kept
    mask, bit for bit."""
    torch.manual_seed(21)
    options = CASES[case]
    E, k = options["num_experts"], options["topk"]
    dropless = moe.Router(H, device=device, **options)
    capped = moe.Router(H, device=device, capacity_factor=1.0, drop_policy=policy, **options)
    capped.load_state_dict(dropless.state_dict())
    hidden = torch.randn(T, H)
    a, b = dropless(hidden), capped(hidden)
    capacity = infiniop.expert_capacity(T, E, k, 1.0)
    assert capped.capacity(T) == capacity
    want_idx, want_w = infiniop.moe_expert_capacity(
        a.expert_idx, E, capacity, weights=a.weights.detach(),
        drop_policy={"probs": "probability", "position": "position"}[policy], device=device,
        handle=shared_handle(device))
    assert torch.equal(b.expert_idx, want_idx) and (b.expert_idx == E).any()
    assert torch.equal(b.weights.detach().view(torch.int32), want_w.view(torch.int32))
    kept = b.expert_idx != E
    want_counts = torch.bincount(b.expert_idx[kept].long(), minlength=E)
    assert torch.equal(b.tokens_per_expert, want_counts)
    if capped.expert_bias is not None:
        assert torch.equal(capped.tokens_since_update, want_counts)
    for x, y in ((a.aux_loss, b.aux_loss), (a.z_loss, b.z_loss)):
        assert (x is None and y is None) or torch.equal(x, y)
    g = torch.randn(T, k)
    loss_a = (a.weights * torch.where(kept, g, torch.zeros(()))).sum()
    loss_b = (b.weights * g).sum()
    for out, loss in ((a, loss_a), (b, loss_b)):
        for extra in (out.aux_loss, out.z_loss):
            if extra is not None:
                loss = loss + extra
        loss.backward()
    assert torch.equal(dropless.weight.grad.view(torch.int32),
                       capped.weight.grad.view(torch.int32))


def test_capacity_options():
    """min_capacity raises C; a factor large enough drops nothing (the dropless routing);
    a replay applies no capacity; bad options are ValueErrors."""
    torch.manual_seed(22)
    options = CASES["softmax_post"]
    router = moe.Router(H, capacity_factor=0.01, min_capacity=5, **options)
    assert router.capacity(T) == 5
    out = router(torch.randn(T, H))
    assert out.tokens_per_expert.max() <= 5 and (out.expert_idx == 16).any()
    dropless = moe.Router(H, **options)
    wide = moe.Router(H, capacity_factor=16.0, **options)
    wide.load_state_dict(dropless.state_dict())
    hidden = torch.randn(T, H)
    a, b = dropless(hidden), wide(hidden)
    assert torch.equal(a.expert_idx, b.expert_idx) and torch.equal(a.weights, b.weights)
    c = router(hidden, a.expert_idx)  # replay: no capacity
    assert torch.equal(c.expert_idx, a.expert_idx)
    assert torch.equal(c.tokens_per_expert, a.tokens_per_expert)
    for bad, message in ((dict(capacity_factor=0.0), "capacity_factor"),
                         (dict(capacity_factor=-1.0), "capacity_factor"),
                         (dict(capacity_factor=float("nan")), "capacity_factor"),
                         (dict(drop_policy="random"), "drop_policy"),
                         (dict(capacity_factor=1.0, min_capacity=-1), "min_capacity")):
        with pytest.raises(ValueError, match=message):
            moe.Router(H, 16, 2, **bad)


@pytest.mark.skipif(not (_ops.REGISTERED and _ops.COMPILABLE),
                    reason="torch.compile of the library's operators needs PyTorch 2 "
                           "(torch.library custom ops)")
def test_router_with_capacity_compiles_fullgraph_with_eager_bits():
    torch.manual_seed(23)
    options = {k: v for k, v in CASES["deepseek_v3"].items() if k != "seq_length"}
    router = moe.Router(H, seq_length=12, capacity_factor=1.0, drop_policy="probs", **options)
    hidden = torch.randn(T, H)

    def step(x):
        out = router(x)
        return out.weights, out.expert_idx, out.aux_loss, out.z_loss, out.tokens_per_expert

    eager = step(hidden)
    assert (eager[1] == router.num_experts).any()
    compiled = torch.compile(step, fullgraph=True)(hidden)
    for want, got in zip(eager, compiled):
        assert torch.equal(want, got)
    dynamic = torch.compile(step, fullgraph=True, dynamic=True)  # C follows T symbolically
    for rows in (T, 36):
        x = torch.randn(rows, H)
        for want, got in zip(step(x), dynamic(x)):
            assert torch.equal(want, got)
