#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""examples/python/compile_moe.py: a GPT-OSS-style MoE block trained under torch.compile
(PyTorch 2.4 or later), with the library's router, dispatch, clipped SwiGLU and combine inside
one compiled graph, checked bit for bit against the same steps in eager mode.

    .venv/bin/python examples/python/compile_moe.py [cpu|cpu_reference|opencl]

The block (T tokens, hidden H, E experts, top K, expert width I):
    scales, ids = moe_gating_top_k_softmax(x @ W_r, K, renorm=1)   (the library's router)
    d = moe.dispatch(x, ids, E)                                     (MoeInitRoutingV2)
    h = d.map_experts(lambda e, rows: rows @ W1[e])                 (each expert's rows)
    y = d.map_experts(lambda e, rows: rows @ W2[e], clipped_swiglu(h))
    out = moe.combine(y, d, scales, x1=x)                           (MoeFinalizeRoutingV2)
torch.compile(block, fullgraph=True) traces every library call as one operator (their fake
kernels give the sizes; each expert's row count is a data-dependent size) and the backward
through the library's grad operators, so the compiled block's loss and gradients are eager
mode's, bit for bit, and Dynamo reports no graph break (docs/python.md, "torch.compile").
Exit status 0 when both hold, 1 otherwise (0 with a message on a PyTorch without
torch.compile support).
"""
import sys

import torch

import infiniop.torch as iop
from infiniop.torch import _ops, moe

T, H, E, K, I = 32, 32, 4, 2, 24


def block(x, w, device):
    scales, ids, _ = iop.moe_gating_top_k_softmax(x @ w["router"], K, None, 1, device=device)
    d = moe.dispatch(x, ids, E, device=device)
    h = d.map_experts(lambda e, rows: rows @ w["up"][e])
    act = iop.clipped_swiglu(h, limit=7.0, device=device)  # GPT-OSS: interleaved, alpha 1.702
    y = d.map_experts(lambda e, rows: rows @ w["down"][e], act)
    return moe.combine(y, d, scales, x1=x)


def train(fn, steps, device):
    """`steps` SGD steps of a fresh model through fn: (losses, final weights)."""
    g = torch.Generator().manual_seed(0)
    w = {"router": torch.randn(H, E, generator=g) / H ** 0.5,
         "up": torch.randn(E, H, 2 * I, generator=g) / H ** 0.5,
         "down": torch.randn(E, I, H, generator=g) / I ** 0.5}
    for t in w.values():
        t.requires_grad_()
    losses = []
    for step in range(steps):
        x = torch.randn(T, H, generator=g)
        target = torch.randn(T, H, generator=g)
        loss = (fn(x, w, device) - target).pow(2).mean()
        loss.backward()
        with torch.no_grad():
            for t in w.values():
                t -= 0.1 * t.grad
                t.grad = None
        losses.append(loss.detach())
    return losses, w


def main(device="cpu"):
    if not _ops.COMPILABLE:
        print(f"torch {torch.__version__}: torch.compile support needs PyTorch 2.4 or later")
        return 0
    x = torch.randn(T, H)
    w = train(block, 0, device)[1]
    # explain() traces without fullgraph: it needs capture_scalar_outputs to keep the experts'
    # row counts (data) in the graph, which fullgraph=True does by itself.
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        explained = torch._dynamo.explain(block)(x, w, device)
    print(f"graph breaks: {explained.graph_break_count}")
    compiled = torch.compile(block, fullgraph=True, dynamic=True)
    eager_losses, eager_w = train(block, 3, device)
    compiled_losses, compiled_w = train(compiled, 3, device)
    same = all(torch.equal(a, b) for a, b in zip(eager_losses, compiled_losses)) and all(
        torch.equal(eager_w[name], compiled_w[name]) for name in eager_w)
    print("losses: " + ", ".join(f"{loss.item():.6f}" for loss in compiled_losses))
    print(f"compiled = eager, losses and weights bit for bit: {same}")
    return 0 if same and explained.graph_break_count == 0 else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
