#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""examples/python/train_moe_mlp.py: train a two-layer MoE MLP with loss.backward() through
the library's operators (infiniop.torch), checked against the same model in float64 PyTorch.

    python3 examples/python/train_moe_mlp.py [cpu|cpu_reference|opencl]

Self-contained: it imports torch, infiniop and infiniop.torch only, so it runs wherever the
package is installed (`pip install ./python`; the library found as infiniop finds it, e.g.
$INFINIOP_LIBRARY or the dynamic loader). Exit status 0 when both checks pass, 1 otherwise.

The model (T tokens, hidden H, E experts per layer, top K, expert width I):
    layer(v) = sum_k p[t, k] * expert_{ids[t, k]}(v[t]) + b2[ids[t, k]],
        probs = softmax(v @ W_r);  p, ids = topk(probs, K)            (router: torch)
        expert_e(u) = act(u @ W1[e] + b1[e]) @ W2[e]
    z = layer_1(x)                  act = clipped_swiglu (interleaved, alpha 1.702, linear
                                          bias 1 as GPT-OSS; limit 2 where GPT-OSS has 7, for
                                          |h| ~ 1 here: about 6% of the clamps fire)
    y = z + layer_2(z)              act = swiglu (halves), residual z
    loss = mean((y - target)^2)
Each layer, through the MoE helper infiniop.torch.moe: moe.dispatch (MoeInitRoutingV2,
dropless: tokens grouped by expert, each expert's rows as Python ints) -> per-expert matmul
(torch, Dispatched.map_experts) -> the activation (infiniop.torch) -> per-expert matmul ->
moe.combine (MoeFinalizeRoutingV2 in the mode that reads the dispatch's index, here 2;
scales = the top-k probabilities, bias = b2 by expert, x1 = the residual). loss.backward() runs
MoeFinalizeRoutingV2Grad, SwiGluBackward / ClippedSwigluBackward and MoeInitRoutingV2Grad; the
router's softmax and topk and the matmuls are torch's own autograd.

Checks:
 (a) step 0: the loss and every parameter's gradient against the same model in float64 autograd
     (the same F32 weights, converted exactly; the einsum form, each token's experts gathered by
     id, no routing operator), the routing ids taken from the F32 run (topk's choice is
     discrete and not differentiated). Per tensor, max |got - ref| <= 16 u max |ref|,
     u = 2^-24: tests/python/test_moe_layer.py's F32 bound for one such layer (a few roundings
     of the activations on each path and the F32 sums of the matmuls). x and layer 1's W1, b1
     are small multiples of powers of two, so layer 1's first matmul is exact and its clamps
     see the same values in both; layer 2's input carries layer 1's rounding, so it uses
     swiglu, which has no kink. The weights keep the activations O(1) (|y| < 1 at step 0): at the
     scale of 30-100 the condition of the two stacked layers' gradients grows and even the
     same model in plain torch F32 came out 14-26 u from float64. (Measured on the cpu
     device's AVX2, SSE4 and SCALAR targets (INFINIOP_CPU_ISA) and on cpu_reference: at most
     5.7 u, the loss 0.02 u; over 8 seeds at most 8.1 u, the same model in plain torch F32 at
     most 9.0 u.)
 (b) training: Adam (lr 0.01, F32) for STEPS steps on a fixed batch whose target is a random
     smooth function of x; the final loss must be below half the initial one.
"""
import math
import os
import sys
import time

import torch

import infiniop
import infiniop.torch as iop
from infiniop.torch import moe

T, H, E, K, I = 64, 32, 4, 2, 16  # tokens, hidden, experts, top-k, expert width
STEPS, LR = 40, 0.01
U = 2.0 ** -24
TOLERANCE = 16 * U  # per tensor, relative to its largest magnitude
CLIP = {"alpha": 1.702, "limit": 2.0, "bias": 1.0, "interleaved": True}  # see above


class MoeLayer(torch.nn.Module):
    """A top-K MoE feed-forward layer: the router and the expert matmuls in torch, dispatch,
    activation and combine through infiniop.torch."""

    def __init__(self, activation, generator):
        super().__init__()
        self.activation = activation  # "clipped_swiglu" or "swiglu"

        def dyadic(shape, step, reach):  # multiples of step in [-reach, reach]
            n = round(reach / step)
            return torch.randint(-n, n + 1, shape, generator=generator).float() * step

        def normal(shape, std):
            return torch.randn(shape, generator=generator) * std

        self.W_r = torch.nn.Parameter(normal((H, E), H ** -0.5))
        self.W1 = torch.nn.Parameter(dyadic((E, H, 2 * I), 0.0625, 0.5))
        self.b1 = torch.nn.Parameter(dyadic((E, 2 * I), 0.125, 0.5))
        self.W2 = torch.nn.Parameter(normal((E, I, H), 0.25 * I ** -0.5))
        self.b2 = torch.nn.Parameter(normal((E, H), 0.1))

    def route(self, v):
        """(top-K probabilities (T, K) F32, expert ids (T, K) INT64)."""
        return torch.topk(torch.softmax(v @ self.W_r, dim=-1), K, dim=-1)

    def forward(self, v, residual=None, device="cpu"):
        scales, ids = self.route(v)
        routed = moe.dispatch(v, ids, E, device=device)  # dropless: rows grouped by expert
        h = routed.map_experts(lambda e, rows: rows @ self.W1[e] + self.b1[e])
        if self.activation == "clipped_swiglu":
            act = iop.clipped_swiglu(h, -1, **CLIP, device=device)
        else:
            act = iop.swiglu(h, -1, device=device)
        expert_out = routed.map_experts(lambda e, rows: rows @ self.W2[e], act)
        out = moe.combine(expert_out, routed, scales, x1=residual, bias=self.b2)
        return out, ids


class MoeMlp(torch.nn.Module):
    def __init__(self, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.layer1 = MoeLayer("clipped_swiglu", g)
        self.layer2 = MoeLayer("swiglu", g)

    def forward(self, x, device="cpu"):
        z, ids1 = self.layer1(x, device=device)
        y, ids2 = self.layer2(z, residual=z, device=device)
        return y, (ids1, ids2)


# ----------------------------------------------------------------------------------------------
# The same model in float64, plain torch (no infiniop), the routing ids given

def clamp_inclusive(t, low, high):
    """t.clamp(low, high) whose gradient passes at the bounds themselves, as the library's
    ClippedSwiglu masks (docs/clipped_swiglu.md); PyTorch 2's clamp gives 0 there."""
    t = torch.where(t > high, t.new_tensor(high), t)
    return t if low is None else torch.where(t < low, t.new_tensor(low), t)


def reference_layer(p, v, ids, activation):
    scales = torch.softmax(v @ p["W_r"], dim=-1).gather(1, ids)
    h = torch.einsum("th,tkhi->tki", v, p["W1"][ids]) + p["b1"][ids]
    if activation == "clipped_swiglu":
        a = clamp_inclusive(h[..., 0::2], None, CLIP["limit"])
        b = clamp_inclusive(h[..., 1::2], -CLIP["limit"], CLIP["limit"])
        act = a * torch.sigmoid(CLIP["alpha"] * a) * (b + CLIP["bias"])
    else:
        a, b = h.chunk(2, dim=-1)
        act = torch.nn.functional.silu(a) * b
    expert_out = torch.einsum("tki,tkih->tkh", act, p["W2"][ids]) + p["b2"][ids]
    return (scales.unsqueeze(-1) * expert_out).sum(1)


def reference_gradients(model, x, target, ids):
    """(loss, {parameter name: gradient}) of the float64 model with model's current weights."""
    p = {name: t.detach().double().requires_grad_() for name, t in model.named_parameters()}
    layer = lambda prefix: {n.split(".")[1]: t for n, t in p.items() if n.startswith(prefix)}
    z = reference_layer(layer("layer1."), x.double(), ids[0], "clipped_swiglu")
    y = z + reference_layer(layer("layer2."), z, ids[1], "swiglu")
    loss = ((y - target.double()) ** 2).mean()
    loss.backward()
    return loss.detach(), {name: t.grad for name, t in p.items()}


def relative_error(got, ref):
    """max |got - ref| / max |ref|."""
    return ((got.double() - ref).abs().max() / ref.abs().max()).item()


# ----------------------------------------------------------------------------------------------

def make_data(seed=1):
    """A fixed batch: x (multiples of 1/4 in [-1, 1]) and a smooth random target of it."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-4, 5, (T, H), generator=g).float() / 4
    A = torch.randn(H, H, generator=g) / H ** 0.5
    B = torch.randn(H, H, generator=g) / H ** 0.5
    return x, torch.tanh(2 * x @ A) @ B


def main(device="cpu"):
    start = time.perf_counter()
    torch.manual_seed(0)
    model = MoeMlp()
    x, target = make_data()
    failed = False

    # (a) step 0 against float64
    y, ids = model(x, device=device)
    loss = ((y - target) ** 2).mean()
    loss.backward()
    loss64, grads64 = reference_gradients(model, x, target, ids)
    errors = {"loss": relative_error(loss.detach(), loss64)}
    errors.update({name: relative_error(t.grad, grads64[name])
                   for name, t in model.named_parameters()})
    worst = max(errors.values())
    ok = worst <= TOLERANCE
    failed |= not ok
    print(f"infiniop {infiniop.__version__} on {device}: two-layer MoE MLP, T={T} H={H} E={E} "
          f"K={K} I={I}, {sum(t.numel() for t in model.parameters())} parameters")
    print(f"  package {os.path.dirname(infiniop.__file__)}, "
          f"library {infiniop.get_library().infiniop_path}")
    print(f"step 0 vs float64, max |diff| / max |ref| in u = 2^-24 (tolerance {TOLERANCE / U:g}): "
          + ", ".join(f"{name} {e / U:.2g}" for name, e in errors.items())
          + (" ok" if ok else " FAILED"))

    # (b) training
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        y, _ = model(x, device=device)
        loss = ((y - target) ** 2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    with torch.no_grad():
        final = ((model(x, device=device)[0] - target) ** 2).mean().item()
    ok = all(map(math.isfinite, losses + [final])) and final < 0.5 * losses[0]
    failed |= not ok
    print(f"Adam lr {LR}, {STEPS} steps: loss {losses[0]:.4g} -> {final:.4g} "
          f"({final / losses[0]:.2f} of the initial; must be < 0.5)" + (" ok" if ok else " FAILED"))
    print(f"{'FAILED' if failed else 'ok'} ({time.perf_counter() - start:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
