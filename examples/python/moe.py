#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""examples/python/moe.py: a mixture-of-experts layer whose routing runs in the library, forward
and backward, checked against the same layer in PyTorch float64 autograd.

    forward:  infiniop.moe_init_routing_v2 -> the experts (torch matmuls on each expert's rows)
              -> infiniop.moe_finalize_routing_v2
    backward: infiniop.moe_finalize_routing_v2_grad -> the experts' backward (torch)
              -> infiniop.moe_init_routing_v2_grad

T tokens, hidden size H, E experts, top K; the router (softmax + topk: F32 weights, INT64 ids) is
plain PyTorch; expert e is the matrix W[e]. Dropless: Init mode 0 writes the index in the row
layout t*K + k, which Finalize reads in mode 2 and FinalizeGrad and InitGrad in mode 0.

Then the same layer with the MoE helper, infiniop.torch.moe: dispatch / map_experts / combine,
which choose those modes and the experts' row ranges themselves, and autograd, which runs the
same four operators for loss.backward(); checked against the same float64 results.

    PYTHONPATH=python /usr/bin/python3 examples/python/moe.py [cpu|cpu_reference|opencl]

The library is build/libinfiniop.so, or $INFINIOP_LIBRARY. Exit status 0 when every result
matches.
"""
import sys

import torch

import infiniop
from infiniop.torch import moe

T, H, E, K = 48, 32, 4, 2


def main(device="cpu"):
    torch.manual_seed(0)
    x = torch.randn(T, H)
    residual = torch.randn(T, H)
    w = torch.randn(E, H, H) / H ** 0.5
    weights, ids = torch.topk(torch.randn(T, E).softmax(-1), K)  # (T, K) F32, (T, K) INT64
    grad_out = torch.randn(T, H)

    # Forward: dispatch, experts, combine.
    expanded_x, row_idx, cumsum, _ = infiniop.moe_init_routing_v2(
        x, ids, expert_num=E, drop_pad_mode=0, expert_tokens_count_or_cumsum_flag=1,
        device=device)
    bounds = [0] + cumsum.tolist()  # expert e's rows: expanded_x[bounds[e]:bounds[e + 1]]
    expert_out = torch.empty_like(expanded_x)
    for e in range(E):
        rows = slice(bounds[e], bounds[e + 1])
        expert_out[rows] = expanded_x[rows] @ w[e]
    out = infiniop.moe_finalize_routing_v2(expert_out, row_idx, x1=residual, scales=weights,
                                           drop_pad_mode=2, device=device)

    # Backward: the combine's gradient, the experts' (by hand), the dispatch's.
    grad_expert_out, grad_weights = infiniop.moe_finalize_routing_v2_grad(
        grad_out, row_idx, expanded_x=expert_out, scales=weights, drop_pad_mode=0, device=device)
    grad_expanded_x = torch.empty_like(grad_expert_out)
    for e in range(E):
        rows = slice(bounds[e], bounds[e + 1])
        grad_expanded_x[rows] = grad_expert_out[rows] @ w[e].t()
    grad_x = infiniop.moe_init_routing_v2_grad(grad_expanded_x, row_idx, top_k=K, device=device)

    # The same layer with the helper: the glue above (the row ranges, the modes of the combine
    # and of the three grads) is done by moe.dispatch / moe.combine, the backward by autograd.
    x_h = x.clone().requires_grad_()
    weights_h = weights.clone().requires_grad_()
    routed = moe.dispatch(x_h, ids, E, device=device)  # Init mode 0
    spans_ok = routed.spans == list(zip(bounds[:-1], bounds[1:]))  # expert e's rows: ints
    out_h = moe.combine(routed.map_experts(lambda e, rows: rows @ w[e]), routed, weights_h,
                        x1=residual)  # Finalize mode 2
    out_h.backward(grad_out)  # FinalizeGrad mode 0, then InitGrad mode 0

    # The same layer in float64: out[t] = residual[t] + sum_k weights[t, k] x[t] W[ids[t, k]].
    x64 = x.double().requires_grad_()
    weights64 = weights.double().requires_grad_()
    per_choice = torch.einsum("th,tkhj->tkj", x64, w.double()[ids])
    out64 = residual.double() + (weights64.unsqueeze(-1) * per_choice).sum(1)
    out64.backward(grad_out.double())
    # The dispatch order: stable by expert, position t*K + k.
    order = torch.sort(ids.flatten(), stable=True).indices
    want_row_idx = torch.empty_like(order)
    want_row_idx[order] = torch.arange(T * K)

    bad = 0
    checks = (("expanded_row_idx", row_idx, want_row_idx),
              ("cumsum", cumsum, torch.bincount(ids.flatten(), minlength=E).cumsum(0)),
              ("expanded_x", expanded_x, x[order // K]),
              ("out", out, out64.detach()),
              ("grad_scales", grad_weights, weights64.grad),
              ("grad_x", grad_x, x64.grad),
              ("helper out", out_h.detach(), out64.detach()),
              ("helper grad_scales", weights_h.grad, weights64.grad),
              ("helper grad_x", x_h.grad, x64.grad))
    for name, got, want in checks:
        try:
            torch.testing.assert_close(got, want.to(got.dtype), rtol=1e-5, atol=1e-5)
            print(f"{name:18s} matches torch")
        except AssertionError as error:
            print(f"{name}: MISMATCH\n{error}")
            bad += 1
    print("helper spans       match the cumsum" if spans_ok else "helper spans: MISMATCH")
    return bad + (not spans_ok)


if __name__ == "__main__":
    sys.exit(1 if main(*sys.argv[1:2]) else 0)
