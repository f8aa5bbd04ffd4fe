# SPDX-License-Identifier: Apache-2.0
"""End to end: a GPT-OSS-style MoE layer whose routing runs in the library, forward and
backward, against the same layer in plain PyTorch float64 with autograd, on every device.

Layer (T tokens, hidden H, E experts, top-K, expert width I; GPT-OSS: interleaved clipped
SwiGLU, alpha 1.702, limit 7, linear bias +1):
    logits = x @ W_r;  top_vals, ids = torch.topk(logits, K)  (ids INT64)
    scales = softmax(top_vals)                                  (F32, or the activations' dtype)
    out[t] = sum_k scales[t, k] * expert_{ids[t, k]}(x[t]),
    expert_e(v) = clipped_swiglu(v @ W1[e] + b1[e]) @ W2[e] + b2[e]
dropless (Init mode 0 -> Finalize mode 2 / FinalizeGrad mode 0 / InitGrad mode 0), or drop/pad
(Init mode 1 with a capacity below the busiest expert's load -> Finalize mode 3 / FinalizeGrad
mode 1 / InitGrad mode 1), where a token's dropped slots contribute nothing.

Library side, with no PyTorch between the operators but the expert matmuls (computed in F32 from
the activations' dtype and rounded back to it, as a GEMM with F32 accumulation would; the
per-expert row ranges come from the Init's count output in mode 0 and its before-capacity
counts, capped at C, in mode 1):
    forward:  MoeInitRoutingV2 -> matmul W1 -> ClippedSwiglu -> matmul W2 -> MoeFinalizeRoutingV2
    backward: MoeFinalizeRoutingV2Grad -> matmul grads (W2, b2, act) -> ClippedSwigluBackward
              -> matmul grads (W1, b1, expanded x) -> MoeInitRoutingV2Grad
The router (logits, topk, softmax) is ordinary PyTorch before the first operator; the gradient
compared for x is the one through the experts (scales held as an input), the gradient for the
scales is the library's grad_scales.

Reference: the same layer in float64 on the same (rounded) inputs, its dispatch and capacity
drops derived independently (the stable order by expert), its gradients by autograd.

Inputs: x and W1 are small multiples of 2^-2 and 2^-1 and b1 of 2^-3, so that the first matmul
is exact in every dtype below |h| = 32 (beyond, every value is clipped or in the flat tail of the
negative side): the clamps then see the same values on both sides and the comparison has no
discontinuity. About 15% of the gate and linear values are clipped. W2, b2 are signed
random values spanning 2^-6 .. 2^1 with some zeros; x includes zeros.

Tolerances, per compared tensor, relative to its largest magnitude: max |got - ref| <=
16 eps * max |ref|, eps the unit roundoff of the activations' dtype (2^-24 F32, 2^-11 F16,
2^-8 BF16), for the few roundings of the activations on each path (h, act, the expert outputs,
their gradients) and the F32 sums of the matmuls and the operators:
    F32: 2^-20    F16: 2^-7    BF16: 2^-4                     (TOLERANCE)
Measured on every device: at most 1/4 (F32), 1/8 (F16) and 1/10 (BF16) of them.

test_routed_layer: the layer of examples/python/moe_router.py, routed through the library end
to end (router logits in PyTorch -> MoeGatingTopKSoftmax (GPT-OSS: top-4 of 32, renorm 1,
clipped SwiGLU) or MoeGatingTopK (DeepSeek-V3: sigmoid + F32 bias, 8 groups, k_group 4, top-8
of 256, routed_scaling_factor 2.5, SwiGLU) -> dispatch -> experts -> combine, and back through
all of them by autograd), against the float64 layer for the library's ids; out and the
gradients of x, W_r (through the router's grad operator), W1, b1, W2, b2 within the same
TOLERANCE (F32, BF16).
"""

import importlib.util
import math
import pathlib

import pytest
import torch

import infiniop

from helpers import DEVICES, TORCH_DTYPES, clamp_inclusive, on, rng_for

T, H, E, K, I = 64, 32, 4, 2, 16
ALPHA, LIMIT, LINEAR_BIAS = 1.702, 7.0, 1.0
TOLERANCE = {"float32": 16 * 2.0 ** -24, "float16": 16 * 2.0 ** -11, "bfloat16": 16 * 2.0 ** -8}

# (activations' dtype, scales' dtype)
VARIANTS = [("float32", "float32"), ("float16", "float16"), ("bfloat16", "bfloat16"),
            ("float16", "float32"), ("bfloat16", "float32")]


def dyadic(rng, shape, step, reach):
    """Multiples of `step` in [-reach, reach] (zeros included), uniform."""
    n = round(reach / step)
    return torch.from_numpy(rng.integers(-n, n + 1, shape) * step)


def spread(rng, shape):
    """Signed values of magnitude 2^-6 .. 2^1, about 5% exactly 0."""
    count = math.prod(shape)
    v = rng.choice([-1.0, 1.0], count) * 2.0 ** rng.uniform(-6.0, 1.0, count)
    v[rng.random(count) < 0.05] = 0.0
    return torch.from_numpy(v.reshape(shape))


def make_layer(rng, dtype):
    """The layer's inputs and weights, rounded to dtype (exactly, for x, W1, b1)."""
    p = {"x": dyadic(rng, (T, H), 0.25, 1.0), "W_r": spread(rng, (H, E)),
         "W1": dyadic(rng, (E, H, 2 * I), 0.5, 2.0), "b1": dyadic(rng, (E, 2 * I), 0.125, 2.0),
         "W2": spread(rng, (E, I, H)) / 4, "b2": spread(rng, (E, H))}
    return {name: t.to(dtype) for name, t in p.items()}


def route(p, scales_dtype):
    """Router in PyTorch: (ids INT64 (T, K), scales (T, K) of scales_dtype)."""
    logits = p["x"].float() @ p["W_r"].float()
    top_vals, ids = torch.topk(logits, K, dim=-1)
    assert ids.dtype == torch.int64
    return ids, torch.softmax(top_vals, dim=-1).to(scales_dtype)


def capacity_for(ids):
    """A capacity below the busiest expert's load (so tokens are dropped) and above the least
    one's (so slots are padded)."""
    load = torch.bincount(ids.reshape(-1), minlength=E)
    capacity = int(load.max()) - 5
    assert capacity > int(load.min()), load
    return capacity


def matmul(a, b, dtype):
    """An expert matmul: F32 accumulation, rounded to dtype."""
    return (a.float() @ b.float()).to(dtype)


# ----------------------------------------------------------------------------------------------
# The layer through the library

def library_layer(p, ids, scales, grad_out, device, drop_pad):
    """(out, {gradient name: tensor}) with the routing in the library (see the docstring)."""
    dtype = p["x"].dtype
    lib = on(device)
    clip = {"alpha": ALPHA, "limit": LIMIT, "bias": LINEAR_BIAS, "interleaved": True}
    if not drop_pad:
        expanded_x, row_idx, counts, _ = infiniop.moe_init_routing_v2(
            p["x"], ids, expert_num=E, drop_pad_mode=0, expert_tokens_count_or_cumsum_flag=2,
            **lib)
        assert row_idx.dtype == torch.int64 and counts.dtype == torch.int64
        ends = torch.cumsum(counts, 0).tolist()
        ranges = [(e, slice(start, end)) for e, (start, end)
                  in enumerate(zip([0] + ends[:-1], ends))]
        rows_of = expanded_x  # (T*K, H): expert e owns the rows ranges[e]
        group_index = counts  # ClippedSwiglu: only the sum (all T*K rows) matters
        attrs = {}
    else:
        capacity = capacity_for(ids)
        expanded_x, row_idx, _, before = infiniop.moe_init_routing_v2(
            p["x"], ids, expert_num=E, expert_capacity=capacity, drop_pad_mode=1,
            expert_tokens_before_capacity_flag=True, **lib)
        filled = before.clamp(max=capacity).tolist()
        rows_of = expanded_x.reshape(E * capacity, H)
        ranges = [(e, slice(e * capacity, e * capacity + filled[e])) for e in range(E)]
        group_index = None
        attrs = {"expert_num": E, "expert_capacity": capacity}
    n_rows = rows_of.shape[0]

    # forward
    h = torch.zeros(n_rows, 2 * I, dtype=dtype)
    for e, rows in ranges:
        h[rows] = (rows_of[rows].float() @ p["W1"][e].float() + p["b1"][e].float()).to(dtype)
    act = infiniop.clipped_swiglu(h, group_index=group_index, **clip, **lib)
    expert_out = torch.zeros(n_rows, H, dtype=dtype)
    for e, rows in ranges:
        expert_out[rows] = (act[rows].float() @ p["W2"][e].float()
                            + p["b2"][e].float()).to(dtype)
    finalize_in = expert_out if not drop_pad else expert_out.reshape(E, -1, H)
    out = infiniop.moe_finalize_routing_v2(finalize_in, row_idx, scales=scales,
                                           drop_pad_mode=3 if drop_pad else 2, **lib)

    # backward
    grad_expert_out, grad_scales = infiniop.moe_finalize_routing_v2_grad(
        grad_out, row_idx, finalize_in, scales, drop_pad_mode=1 if drop_pad else 0, **attrs,
        **lib)
    assert grad_scales.dtype == scales.dtype
    grad_expert_out = grad_expert_out.reshape(n_rows, H)
    grads = {"W1": torch.zeros(E, H, 2 * I), "b1": torch.zeros(E, 2 * I),
             "W2": torch.zeros(E, I, H), "b2": torch.zeros(E, H)}
    grad_act = torch.zeros(n_rows, I, dtype=dtype)
    for e, rows in ranges:
        g = grad_expert_out[rows].float()
        grads["W2"][e] = act[rows].float().t() @ g
        grads["b2"][e] = g.sum(0)
        grad_act[rows] = matmul(g, p["W2"][e].t(), dtype)
    grad_h = infiniop.clipped_swiglu_backward(grad_act, h, group_index=group_index, **clip,
                                              **lib)
    grad_expanded_x = torch.zeros(n_rows, H, dtype=dtype)
    for e, rows in ranges:
        g = grad_h[rows].float()
        grads["W1"][e] = rows_of[rows].float().t() @ g
        grads["b1"][e] = g.sum(0)
        grad_expanded_x[rows] = matmul(g, p["W1"][e].t(), dtype)
    grad_x = infiniop.moe_init_routing_v2_grad(
        grad_expanded_x.reshape(expanded_x.shape), row_idx, top_k=K,
        drop_pad_mode=1 if drop_pad else 0, **lib)
    grads.update(x=grad_x, scales=grad_scales)
    return out, grads


# ----------------------------------------------------------------------------------------------
# The reference: plain PyTorch float64, autograd

def clipped_swiglu64(h):
    a = clamp_inclusive(h[..., 0::2], max=LIMIT)
    b = clamp_inclusive(h[..., 1::2], -LIMIT, LIMIT)
    return a * torch.sigmoid(ALPHA * a) * (b + LINEAR_BIAS)


def kept_slots(ids, capacity):
    """(T, K) bool: the slot is among the first `capacity` of its expert in position order
    p = t*K + k (the stable order by expert); all True without a capacity."""
    flat = ids.reshape(-1)
    if capacity is None:
        return torch.ones(ids.shape, dtype=torch.bool)
    rank = torch.zeros_like(flat)
    seen = [0] * E
    for p_, e in enumerate(flat.tolist()):
        rank[p_] = seen[e]
        seen[e] += 1
    return (rank < capacity).reshape(ids.shape)


def reference_layer(p, ids, scales, grad_out, capacity):
    leaves = {name: t.double().clone().requires_grad_() for name, t in p.items()
              if name != "W_r"}
    leaves["scales"] = scales.double().clone().requires_grad_()
    x, W1, b1, W2, b2 = (leaves[n] for n in ("x", "W1", "b1", "W2", "b2"))
    h = torch.einsum("th,tkhi->tki", x, W1[ids]) + b1[ids]
    act = clipped_swiglu64(h)
    expert_out = torch.einsum("tki,tkih->tkh", act, W2[ids]) + b2[ids]
    keep = kept_slots(ids, capacity).unsqueeze(-1)
    out = (leaves["scales"].unsqueeze(-1) * expert_out * keep).sum(1)
    out.backward(grad_out.double())
    clipped = ((h[..., 0::2] > LIMIT).sum() + (h[..., 1::2].abs() > LIMIT).sum()).item()
    return out.detach(), {n: t.grad for n, t in leaves.items()}, clipped / h.numel()


# ----------------------------------------------------------------------------------------------

def assert_close(got, ref, dtype_name, what):
    got = got.double()
    scale = ref.abs().max().item()
    error = (got - ref).abs().max().item()
    assert torch.isfinite(got).all(), f"{what}: non-finite values"
    assert scale > 0, f"{what}: the reference is all zero (a vacuous case)"
    assert error <= TOLERANCE[dtype_name] * scale, \
        f"{what}: max error {error:.3g} = {error / scale:.3g} x max |ref| {scale:.3g} " \
        f"(tolerance {TOLERANCE[dtype_name]:.3g})"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: f"{v[0]}-scales_{v[1]}")
@pytest.mark.parametrize("drop_pad", [False, True], ids=["dropless", "drop_pad"])
def test_moe_layer(device, variant, drop_pad):
    dtype_name, scales_name = variant
    dtype = TORCH_DTYPES[dtype_name]
    rng = rng_for("moe-layer", variant, drop_pad)
    p = make_layer(rng, dtype)
    ids, scales = route(p, TORCH_DTYPES[scales_name])
    grad_out = spread(rng, (T, H)).to(dtype)
    capacity = capacity_for(ids) if drop_pad else None
    out, grads = library_layer(p, ids, scales, grad_out, device, drop_pad)
    ref_out, ref_grads, clipped = reference_layer(p, ids, scales, grad_out, capacity)
    assert 0.05 < clipped < 0.5, f"clipped fraction {clipped:.2f}: the clamps are not exercised"
    if drop_pad:
        assert not kept_slots(ids, capacity).all(), "no token dropped"
    what = f"{device} {dtype_name} scales {scales_name} {'drop/pad' if drop_pad else 'dropless'}"
    assert out.dtype == dtype
    assert_close(out, ref_out, dtype_name, f"{what}: out")
    for name in ("x", "scales", "W1", "b1", "W2", "b2"):
        assert_close(grads[name], ref_grads[name], dtype_name, f"{what}: grad {name}")
    if drop_pad:  # a token's dropped slots get exactly zero scales gradient
        dropped = ~kept_slots(ids, capacity)
        assert (grads["scales"][dropped] == 0).all()


@pytest.mark.parametrize("device", DEVICES)
def test_moe_layer_devices_agree(device):
    """Every device gives the cpu_reference device's routing bits (Init, InitGrad, the index
    outputs), so the layer's dispatch is device-independent."""
    rng = rng_for("moe-layer-agree")
    p = make_layer(rng, torch.bfloat16)
    ids, scales = route(p, torch.float32)
    for mode, kwargs in ((0, {"expert_tokens_count_or_cumsum_flag": 1}),
                         (1, {"expert_capacity": capacity_for(ids),
                              "expert_tokens_before_capacity_flag": True})):
        want = infiniop.moe_init_routing_v2(p["x"], ids, expert_num=E, drop_pad_mode=mode,
                                            **kwargs, device="cpu_reference")
        got = infiniop.moe_init_routing_v2(p["x"], ids, expert_num=E, drop_pad_mode=mode,
                                           **kwargs, **on(device))
        for a, b in zip(want, got):
            assert (a is None and b is None) or torch.equal(a, b)


def _example():
    """examples/python/moe_router.py as a module (the example is the layer under test)."""
    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / "moe_router.py"
    spec = importlib.util.spec_from_file_location("moe_router_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model", ["gpt_oss", "deepseek_v3"])
@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_routed_layer(device, model, dtype_name):
    example = _example()
    config = example.CONFIGS[model]
    on(device)  # skips a device this machine lacks; the example uses its default handle
    pairs, ids = example.run(config, TORCH_DTYPES[dtype_name], device)
    # the routing is real: every token its K distinct experts, DeepSeek-V3's from 4 groups
    k = config["top_k"]
    assert ids.shape == (example.T, k)
    assert all(len(set(row)) == k for row in ids.tolist())
    if model == "deepseek_v3":
        groups = ids.long() // (config["experts"] // config["group_count"])
        assert all(len(set(row)) <= config["k_group"] for row in groups.tolist())
    what = f"{device} {model} {dtype_name}"
    for name, (got, ref) in pairs.items():
        assert_close(got, ref, dtype_name, f"{what}: {'out' if name == 'out' else 'grad ' + name}")
