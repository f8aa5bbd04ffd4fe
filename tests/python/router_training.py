#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A MoE layer trained for 100 steps through infiniop.torch.moe.Router: the same bits at every
Highway target, thread count and on opencl, and every step within the documented bounds of a
float64 PyTorch router (issue 45's done-when; docs/moe_router.md).

    python3 tests/python/router_training.py            # every variant, compared (ctest
                                                        # python.router_training)
    python3 tests/python/router_training.py --digest   # one run here: one digest per config

The layer (T = seq_length x batch tokens in Megatron's (seq, batch) order, hidden H, E experts,
top k, expert width I):
    out = router(x)                                        the library, forward and backward
    y[t] = sum_j out.weights[t, j] * expert_{ids[t, j]}(x[t]),
    expert_e(v) = swiglu(v @ W1[e]) @ W2[e]                (torch matmuls, the library's swiglu)
    loss = mean((y - target)^2) + out.aux_loss + out.z_loss
plain SGD on every parameter, then router.update_expert_bias(). Each step's tokens come from a
seeded generator, the targets from a fixed linear map of them (the layer learns it). Configurations:
    deepseek_v3       sigmoid, 8 groups (top-4 by their top-2 sums), top-8 of 256, bias update,
                      sequence-level aux loss, z-loss, scaling 2.5
    deepseek_v4       sqrtsoftplus, ungrouped top-6 of 256, bias update, switch aux loss counted
                      on a separate unbiased top-k, z-loss, scaling 1.5
    deepseek_v4_hash  DeepSeek-V4's hash layer: expert_idx = tid2eid[token_ids] (replayed
                      routing), weights by sqrtsoftplus for those experts, z-loss
    megatron_softmax  softmax, top-2 of 64 after the softmax of the two logits, switch aux loss
Each run's digest is SHA-256 over the 100 losses' F32 bytes, every parameter and the bias after
the last step. --digest also checks every step of the first process against float64: the
library's weights (for its own selection), aux loss and z-loss within TOLERANCE x u x the largest
magnitude of each, u = 2^-24 (F32), and the gradient of the logits (the router's, the aux loss's
and the z-loss's together) within TOLERANCE x u x its terms per element (gradient_terms: the
weights' gradient cancels where they are normalized, so it is judged by what it sums).
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys

import torch

import infiniop
import infiniop.torch as iop
from infiniop.torch import moe

STEPS, SEQ, BATCH, H, I = 100, 16, 4, 32, 16
LR = 3.0
CONFIGS = {
    "deepseek_v3": dict(num_experts=256, topk=8, score_function="sigmoid", num_groups=8,
                        group_topk=4, group_score="top2", expert_bias=True,
                        aux_loss_type="seq", aux_loss_coeff=1e-4, seq_length=SEQ,
                        z_loss_coeff=1e-3, scaling_factor=2.5),
    "deepseek_v4": dict(num_experts=256, topk=6, score_function="sqrtsoftplus",
                        expert_bias=True, aux_loss_type="switch", aux_loss_coeff=1e-3,
                        aux_loss_counts="unbiased", z_loss_coeff=1e-3, scaling_factor=1.5),
    "deepseek_v4_hash": dict(num_experts=256, topk=6, score_function="sqrtsoftplus",
                             z_loss_coeff=1e-3, scaling_factor=1.5),
    "megatron_softmax": dict(num_experts=64, topk=2, score_function="softmax",
                             aux_loss_type="switch", aux_loss_coeff=1e-2),
}
VOCAB = 1000
U = 2.0 ** -24
TOLERANCE = 16


class Layer(torch.nn.Module):
    def __init__(self, config, device):
        super().__init__()
        E = config["num_experts"]
        self.router = moe.Router(H, E, config["topk"], device=device,
                                 **{k: v for k, v in config.items()
                                    if k not in ("num_experts", "topk")})
        g = torch.Generator().manual_seed(1)
        self.W1 = torch.nn.Parameter(torch.randn(E, H, 2 * I, generator=g) * H ** -0.5)
        self.W2 = torch.nn.Parameter(torch.randn(E, I, H, generator=g) * I ** -0.5)
        self.tid2eid = torch.randint(0, E, (VOCAB, config["topk"]), generator=g,
                                     dtype=torch.int32)

    def forward(self, x, token_ids=None):
        replay = self.tid2eid[token_ids] if token_ids is not None else None
        out = self.router(x, replay)
        ids = out.expert_idx.long()                                   # (T, k)
        h = torch.einsum("th,tkhi->tki", x, self.W1[ids])             # (T, k, 2I)
        act = iop.swiglu(h)                                           # (T, k, I)
        y = torch.einsum("tki,tkih->tkh", act, self.W2[ids])
        return (out.weights.unsqueeze(-1) * y).sum(1), out


def scores64(router, x):
    """The router's scores p of float64 logits x, by its score function's definition."""
    f = router.score_function
    if f == "softmax":
        return torch.softmax(x, -1)
    if f == "sigmoid":
        return torch.sigmoid(x)
    return torch.sqrt(torch.nn.functional.softplus(x))


def weights64(router, x, ids):
    """The weights of the experts ids from float64 logits x (Megatron-LM's and DeepSeek's
    definitions): p of the selected, renormalized as the router's options say, times c."""
    f = router.score_function
    if f == "softmax" and not router.pre_softmax:  # Megatron: the softmax of the k logits
        return torch.softmax(x.gather(-1, ids.long()), -1) * router.scaling_factor
    w = scores64(router, x).gather(-1, ids.long())
    if f != "softmax" and router.normalize:
        w = w / (w.sum(-1, keepdim=True) + router.eps)
    return w * router.scaling_factor


def reference_router(router, logits, ids, counts_aux):
    """The router's outputs for the library's selection `ids`, in float64 from the definitions
    (Megatron-LM's, DeepSeek's): weights, aux loss, z-loss."""
    x = logits.double()
    w = weights64(router, x, ids)
    aux = None
    if router.aux_loss_type:
        T, E, k = x.shape[0], x.shape[1], router.topk
        p = scores64(router, x)
        s = p if router.score_function == "softmax" else p / (p.sum(-1, keepdim=True) + 1e-20)
        n = counts_aux.double()
        if router.aux_loss_type == "switch":
            aux = (s.sum(0) * n).sum() * (E * router.aux_loss_coeff / (k * T * T))
        else:  # Megatron's sequence_load_balancing_loss_func, rows (seq, batch)
            L = router.seq_length
            B = T // L
            cost = n.view(B, E) / (L * k / E)
            aux = (cost * s.view(L, B, E).mean(0)).sum(1).mean() * router.aux_loss_coeff
    z = None
    if router.z_loss_coeff:
        z = torch.logsumexp(x, -1).square().mean() * router.z_loss_coeff
    return w, aux, z


def gradient_terms(router, x64, ids, g, losses, replayed=False):
    """Per element of the logits' gradient, the sum of the magnitudes of its terms (what its
    rounding errors scale with; the gradient itself cancels where the weights are normalized),
    after the routers' pages (moe_gating_top_k.md, moe_gating_top_k_softmax.md): the weights'
    chain for this router's path, times (TOLERANCE + 2 k) / TOLERANCE for the k-term sums, plus
    the largest magnitude of each loss's gradient and p's floor through 1 / D."""
    x = x64.detach()
    p, idx, ga = scores64(router, x), ids.long(), g.double().abs()
    c, k, f = abs(router.scaling_factor), router.topk, router.score_function
    w = p.gather(-1, idx)
    renormalized = router.normalize if f != "softmax" else not router.pre_softmax
    if f == "softmax" and renormalized and not replayed and not router._grouped():
        y = w / w.sum(-1, keepdim=True)  # MoeGatingTopKSoftmax renorm 1: softmax of the k
        d = (ga * y).sum(-1, keepdim=True)
        magnitude = torch.zeros_like(p).scatter_add(-1, idx, c * y * (ga + d))
        D = torch.ones_like(d)
    else:
        if renormalized:
            D = w.sum(-1, keepdim=True) + (0.0 if f == "softmax" else router.eps)
            mw = c / D * (ga + (ga * w).sum(-1, keepdim=True) / D)  # grad_w_i's terms
        else:
            D, mw = torch.ones_like(w[:, :1]), c * ga
        mgp = torch.zeros_like(p).scatter_add(-1, idx, mw)
        if f == "sigmoid":
            magnitude = mgp * p * (1 + p)
        elif f == "sqrtsoftplus":  # slope sigmoid / (2 p) <= 1 / (2 p)
            magnitude = mgp / p.clamp_min(2.0 ** -126)
        else:
            magnitude = p * (mgp + (mw * w).sum(-1, keepdim=True))
    terms = magnitude * (TOLERANCE + 2 * k) / TOLERANCE
    terms = terms + 2.0 ** -120 * (c / D + 1) * ga.sum(-1, keepdim=True) / (TOLERANCE * U)
    for loss in losses:
        (grad,) = torch.autograd.grad(loss, x64, retain_graph=True)
        terms = terms + grad.abs().max()
    return terms


def check_close(name, got, ref, step, failures, terms=None):
    """|got - ref| <= TOLERANCE u x (the largest |ref|, or each element's terms)."""
    ref = ref.detach()
    err = (got.detach().double() - ref).abs()
    scale = ref.abs().max() if terms is None else terms
    bad = err > TOLERANCE * U * scale + 2.0 ** -120
    if bad.any():
        i = int(bad.flatten().nonzero()[0])
        failures.append(f"step {step}: {name}: error {err.flatten()[i].item():.3g} > {TOLERANCE} u "
                        f"x {torch.as_tensor(scale).expand_as(err).flatten()[i].item():.3g}")


def train(name, device, check):
    torch.manual_seed(0)
    torch.set_num_threads(1)  # torch's own ops: one fixed order for every variant
    config = CONFIGS[name]
    layer = Layer(config, device)
    router = layer.router
    data = torch.Generator().manual_seed(2)
    teacher = torch.randn(H, H, generator=torch.Generator().manual_seed(3)) * H ** -0.5
    losses, failures = [], []
    for step in range(STEPS):
        x = torch.randn(SEQ * BATCH, H, generator=data)
        target = x @ teacher  # a fixed map to learn
        token_ids = torch.randint(0, VOCAB, (SEQ * BATCH,), generator=data) \
            if name.endswith("_hash") else None
        captured = {}
        if check:  # the logits and the weights' incoming gradient, for the float64 check
            original = router.route

            def route(logits, expert_idx=None):
                logits.retain_grad()
                captured["logits"] = logits
                weights, ids = original(logits, expert_idx)
                weights.retain_grad()
                captured["weights"], captured["ids"] = weights, ids
                return weights, ids
            router.route = route
        y, out = layer(x, token_ids)
        if check:
            router.route = original
        loss = torch.mean((y - target) ** 2)
        for extra in (out.aux_loss, out.z_loss):
            if extra is not None:
                loss = loss + extra
        for p in layer.parameters():
            p.grad = None
        loss.backward()
        if check:
            logits = captured["logits"]
            counts_aux = _aux_counts(router, logits, captured["ids"])
            x64 = logits.detach().double().requires_grad_()
            w, aux, z = reference_router(router, x64, captured["ids"], counts_aux)
            check_close("weights", captured["weights"], w, step, failures)
            g = captured["weights"].grad
            total = (w * g.double()).sum()
            loss_refs = [ref for ref in (aux, z) if ref is not None]
            for got, ref, what in ((out.aux_loss, aux, "aux_loss"), (out.z_loss, z, "z_loss")):
                if ref is not None:
                    check_close(what, got, ref, step, failures)
                    total = total + ref
            terms = gradient_terms(router, x64, captured["ids"], g, loss_refs,
                                   replayed=token_ids is not None)
            (grad64,) = torch.autograd.grad(total, x64)
            check_close("grad logits", logits.grad, grad64, step, failures, terms)
        with torch.no_grad():
            for p in layer.parameters():
                if p.grad is not None:
                    p -= LR * p.grad
        if router.expert_bias is not None:
            router.update_expert_bias()
        losses.append(loss.detach().float())
    digest = hashlib.sha256(torch.stack(losses).numpy().tobytes())
    for tensor in [*layer.parameters(), *layer.buffers()]:
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return digest.hexdigest(), [float(v) for v in losses], failures


def _aux_counts(router, logits, ids):
    """The counts the aux loss was given (the Router's rule), recomputed for the oracle."""
    if router.aux_loss_counts == "unbiased":
        _, ids, _ = iop.moe_gating_top_k(logits.detach(), router.topk,
                                         norm_type=SCORE[router.score_function])
    E = router.num_experts
    if router.aux_loss_type == "seq":
        L = router.seq_length
        B = ids.shape[0] // L
        rows = torch.arange(ids.shape[0]).remainder(B)
        return torch.zeros(B, E, dtype=torch.int64).index_put_(
            (rows.unsqueeze(1).expand_as(ids), ids.long()), torch.ones_like(ids, dtype=torch.int64),
            accumulate=True).view(-1)
    return torch.bincount(ids.long().flatten(), minlength=E)


SCORE = {"softmax": 0, "sigmoid": 1, "sqrtsoftplus": 2}


def variants():
    """(label, environment, device): every Highway target this library and processor run (the
    library's own list, best first), one thread at the best, and opencl where it works."""
    probe = subprocess.run([sys.executable, "-c", "import infiniop\ntry:\n"
                            "    infiniop.Handle('cpu').close()\nexcept Exception as e:\n"
                            "    print(e.message.split('(best first): ')[-1].split(', or unset')[0])"],
                           env={**os.environ, "INFINIOP_CPU_ISA": "none"}, capture_output=True,
                           text=True, check=True)
    targets = [t.strip() for t in probe.stdout.strip().split(",") if t.strip()]
    runs = [(f"cpu {t}", {"INFINIOP_CPU_ISA": t}, "cpu") for t in targets]
    runs.append(("cpu, 1 thread", {"INFINIOP_NUM_THREADS": "1"}, "cpu"))
    runs.append(("cpu, 3 threads", {"INFINIOP_NUM_THREADS": "3"}, "cpu"))
    try:
        infiniop.Handle("opencl").close()
        runs.append(("opencl", {}, "opencl"))
    except (infiniop.InfiniopError, AttributeError) as error:
        print(f"opencl: not compared ({error})")
    return runs


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--digest", action="store_true", help="one run: print the digests")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--check", action="store_true", help="also check against float64")
    args = parser.parse_args()
    if args.digest:
        result = {}
        for name in CONFIGS:
            digest, losses, failures = train(name, args.device, args.check)
            result[name] = {"digest": digest, "first": losses[0], "last": losses[-1],
                            "failures": failures[:5], "failed": len(failures)}
        print(json.dumps(result))
        return 0
    results, status = {}, 0
    for i, (label, env, device) in enumerate(variants()):
        command = [sys.executable, os.path.abspath(__file__), "--digest", "--device", device]
        if i == 0:
            command.append("--check")
        run = subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True)
        if run.returncode:
            print(f"{label}: failed\n{run.stdout}{run.stderr}")
            return 1
        results[label] = json.loads(run.stdout.strip().splitlines()[-1])
    first_label = next(iter(results))
    for name in CONFIGS:
        first = results[first_label][name]
        print(f"{name}: loss {first['first']:.6f} -> {first['last']:.6f} in {STEPS} steps, "
              f"digest {first['digest'][:16]}")
        if first["failed"]:
            status = 1
            print(f"  float64 check: {first['failed']} failures, e.g.", *first["failures"],
                  sep="\n    ")
        for label, result in results.items():
            same = result[name]["digest"] == first["digest"]
            status |= not same
            print(f"  {label:16} {'same bits' if same else 'DIFFERENT: ' + result[name]['digest']}")
    return status


if __name__ == "__main__":
    sys.exit(main())
