#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""examples/python/moe_router.py: a MoE layer routed through the library end to end, forward and
backward, for GPT-OSS and DeepSeek-V3, checked against the same layer in float64 PyTorch.

    python3 examples/python/moe_router.py [cpu|cpu_reference|opencl]

Self-contained: it imports torch, infiniop and infiniop.torch only. Exit status 0 when every
compared tensor is within the tolerance, 1 otherwise.

The layer (T tokens, hidden H, E experts, top K, expert width I):
    logits = x @ W_r                                      (PyTorch matmul, F32)
    scales, ids = router(logits)                          (the library, infiniop.torch)
    out[t] = sum_k scales[t, k] * expert_{ids[t, k]}(x[t]),
    expert_e(v) = act(v @ W1[e] + b1[e]) @ W2[e] + b2[e]  (PyTorch matmuls, the library's act)
routed as: gating -> moe.dispatch (MoeInitRoutingV2) -> per-expert matmuls (torch) ->
activation (infiniop.torch) -> per-expert matmuls -> moe.combine (MoeFinalizeRoutingV2, the
router's y as scales). loss.backward() runs MoeFinalizeRoutingV2Grad, the activation's backward,
MoeInitRoutingV2Grad and the router's grad (MoeGatingTopKSoftmaxGrad / MoeGatingTopKGrad), so x
gets the gradient of both paths (the experts' and the router's) and W_r its gradient through
the router's values; the selection itself (ids) is discrete and not differentiated.

    GPT-OSS      E = 32, K = 4: moe_gating_top_k_softmax(logits, 4, renorm=1) (top-4 of the
                 logits, softmax over the 4: torch_npu's V2 with renorm 1); act = clipped SwiGLU
                 (interleaved, alpha 1.702, limit 7, linear bias 1)
    DeepSeek-V3  E = 256, K = 8: moe_gating_top_k(logits, 8, bias, k_group=4, group_count=8,
                 group_select_mode=1, norm_type=1 (sigmoid), routed_scaling_factor=2.5);
                 bias (e_score_correction_bias, F32) steers the selection only; act = SwiGLU

The reference: the same layer in float64 on the same (rounded) inputs, with the library's ids
(the routing is discrete), the router's values by its formulas (softmax of the K selected
logits; sigmoid, normalized over the K, times 2.5), gradients by autograd. Per tensor (out and
the gradients of x, W_r, W1, b1, W2, b2): max |got - ref| <= 16 eps max |ref|, eps the unit
roundoff of the activations' dtype (2^-24 F32, 2^-8 BF16), the tolerance of
tests/python/test_moe_layer.py (which runs this layer on every device), for the few roundings of
the activations on each path and the F32 sums of the matmuls and the operators. x and W1 are
small multiples of powers of two, so the first expert matmul is exact and the clamps see the
same values in both layers.
"""
import math
import sys

import torch

import infiniop
import infiniop.torch as iop
from infiniop.torch import moe

T, H, I = 64, 32, 16  # tokens, hidden, expert width
CLIP = {"alpha": 1.702, "limit": 7.0, "bias": 1.0, "interleaved": True}  # GPT-OSS
CONFIGS = {
    "gpt_oss": {"experts": 32, "top_k": 4, "router": "softmax", "activation": "clipped_swiglu"},
    "deepseek_v3": {"experts": 256, "top_k": 8, "router": "grouped", "activation": "swiglu",
                    "k_group": 4, "group_count": 8, "group_select_mode": 1, "norm_type": 1,
                    "routed_scaling_factor": 2.5},
}
EPS = {torch.float32: 2.0 ** -24, torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}
TOLERANCE = 16  # x eps x max |ref|, per tensor
GRADIENTS = ("x", "W_r", "W1", "b1", "W2", "b2")


def clamp_inclusive(t, low, high):
    """t.clamp(low, high) whose gradient passes at the bounds themselves, as the library's
    ClippedSwiglu masks (docs/clipped_swiglu.md); PyTorch 2's clamp gives 0 there."""
    t = torch.where(t > high, t.new_tensor(high), t)
    return t if low is None else torch.where(t < low, t.new_tensor(low), t)


def make_params(config, dtype, seed=0):
    """The layer's inputs and weights: x, W1, b1 (dyadic: exact in every dtype) and W2, b2 of
    `dtype`; the router's W_r and (DeepSeek-V3) bias in float32."""
    g = torch.Generator().manual_seed(seed)
    experts = config["experts"]

    def dyadic(shape, step, reach):  # multiples of step in [-reach, reach]
        n = round(reach / step)
        return torch.randint(-n, n + 1, shape, generator=g).double() * step

    def spread(shape):  # signed, magnitudes 2^-6 .. 2^1
        sign = torch.randint(0, 2, shape, generator=g).double() * 2 - 1
        return sign * 2.0 ** (torch.rand(shape, generator=g, dtype=torch.float64) * 7 - 6)

    p = {"x": dyadic((T, H), 0.25, 1.0).to(dtype),
         "W_r": (torch.randn(H, experts, generator=g, dtype=torch.float64) / H ** 0.5).float(),
         "W1": dyadic((experts, H, 2 * I), 0.5, 2.0).to(dtype),
         "b1": dyadic((experts, 2 * I), 0.125, 2.0).to(dtype),
         "W2": (spread((experts, I, H)) / 4).to(dtype), "b2": spread((experts, H)).to(dtype)}
    if config["router"] == "grouped":
        p["bias"] = (torch.rand(experts, generator=g, dtype=torch.float64) * 0.2 - 0.1).float()
    return p


def route(logits, p, config, device="cpu"):
    """(scales (T, K) float32, ids (T, K) int32): the router through the library."""
    if config["router"] == "softmax":  # GPT-OSS: top-K of the logits, softmax over the K
        scales, ids, _ = iop.moe_gating_top_k_softmax(logits, config["top_k"], renorm=1,
                                                      device=device)
        return scales, ids
    scales, ids, _ = iop.moe_gating_top_k(
        logits, config["top_k"], p["bias"], config["k_group"], config["group_count"],
        config["group_select_mode"], 0, config["norm_type"],
        routed_scaling_factor=config["routed_scaling_factor"], device=device)
    return scales, ids


def expert_matmul(rows, weight, bias):
    """One expert's linear map: F32 accumulation, rounded to the activations' dtype."""
    return (rows.float() @ weight.float() + bias.float()).to(rows.dtype)


def library_layer(p, config, device="cpu"):
    """(out, ids) of the layer with the routing in the library (differentiable: see the
    module docstring)."""
    logits = p["x"].float() @ p["W_r"]
    scales, ids = route(logits, p, config, device)
    routed = moe.dispatch(p["x"], ids, config["experts"], device=device)
    h = routed.map_experts(lambda e, rows: expert_matmul(rows, p["W1"][e], p["b1"][e]))
    if config["activation"] == "clipped_swiglu":
        act = iop.clipped_swiglu(h, -1, **CLIP, device=device)
    else:
        act = iop.swiglu(h, -1, device=device)
    expert_out = routed.map_experts(lambda e, rows: expert_matmul(rows, p["W2"][e], p["b2"][e]),
                                    act)
    return moe.combine(expert_out, routed, scales), ids


def reference_layer(p, ids, config):
    """The layer in float64 for the given ids: out (differentiable in every tensor of p)."""
    logits = p["x"] @ p["W_r"]
    ids = ids.long()
    if config["router"] == "softmax":
        scales = torch.softmax(logits.gather(1, ids), -1)
    else:
        w = torch.sigmoid(logits).gather(1, ids)
        scales = w / (w.sum(-1, keepdim=True) + 1e-20) * config["routed_scaling_factor"]
    h = torch.einsum("th,tkhi->tki", p["x"], p["W1"][ids]) + p["b1"][ids]
    if config["activation"] == "clipped_swiglu":
        a = clamp_inclusive(h[..., 0::2], None, CLIP["limit"])
        b = clamp_inclusive(h[..., 1::2], -CLIP["limit"], CLIP["limit"])
        act = a * torch.sigmoid(CLIP["alpha"] * a) * (b + CLIP["bias"])
    else:
        a, b = h.chunk(2, dim=-1)
        act = torch.nn.functional.silu(a) * b
    expert_out = torch.einsum("tki,tkih->tkh", act, p["W2"][ids]) + p["b2"][ids]
    return (scales.unsqueeze(-1) * expert_out).sum(1)


def run(config, dtype, device="cpu", seed=0):
    """({name: (got, ref)} for out and the gradients, ids): the library's layer and the float64
    one, both run backward with the same upstream gradient."""
    p = make_params(config, dtype, seed)
    leaves = {n: t.clone().requires_grad_(n in GRADIENTS) for n, t in p.items()}
    out, ids = library_layer(leaves, config, device)
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed + 1),
                           dtype=torch.float64)
    out.backward(grad_out.to(out.dtype))
    ref_leaves = {n: t.detach().double().requires_grad_(n in GRADIENTS) for n, t in p.items()}
    ref = reference_layer(ref_leaves, ids, config)
    ref.backward(grad_out)
    pairs = {"out": (out.detach(), ref.detach())}
    pairs.update({n: (leaves[n].grad, ref_leaves[n].grad) for n in GRADIENTS})
    return pairs, ids


def relative_errors(pairs):
    """{name: max |got - ref| / max |ref|}."""
    return {n: ((got.double() - ref).abs().max() / ref.abs().max()).item()
            for n, (got, ref) in pairs.items()}


def main(device="cpu"):
    failed = False
    print(f"infiniop {infiniop.__version__} on {device}: a MoE layer routed through the library, "
          f"T={T} H={H} I={I}; library {infiniop.get_library().infiniop_path}")
    for name, config in CONFIGS.items():
        for dtype in (torch.float32, torch.bfloat16):
            pairs, ids = run(config, dtype, device)
            errors = relative_errors(pairs)
            eps = EPS[dtype]
            ok = all(math.isfinite(e) and e <= TOLERANCE * eps for e in errors.values())
            failed |= not ok
            load = torch.bincount(ids.long().reshape(-1), minlength=config["experts"])
            print(f"{name:12s} {str(dtype)[6:]:8s} E={config['experts']} K={config['top_k']} "
                  f"(busiest expert {int(load.max())} tokens): max |diff| / max |ref| in eps "
                  f"(tolerance {TOLERANCE}): "
                  + ", ".join(f"{n} {e / eps:.2g}" for n, e in errors.items())
                  + (" ok" if ok else " FAILED"))
    print("FAILED" if failed else "ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
