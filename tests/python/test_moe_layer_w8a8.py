# SPDX-License-Identifier: Apache-2.0
"""End to end: a W8A8 MoE layer (vLLM-Ascend's path) through the library, against float64 PyTorch.

Layer (T tokens, hidden H, E experts, top-K, expert width I; SwiGLU experts, INT8 weights with a
per-output-channel F32 scale, INT8 activations with a per-token F32 scale):
    logits = x @ W_r (F32, PyTorch);  w, ids = MoeGatingTopKSoftmax(logits, K, renorm 1)
    xq, row_idx, counts, xs = MoeInitRoutingQuantV2(x, ids, dynamic, INT8)   per expanded row
    acc1 = xq @ W1q[e]            (INT32: PyTorch, exact: the sums stay far below 2^53)
    hq, hs = DequantSwigluQuant(acc1, weight_scale W1s (E, 2I), activation_scale xs, group_index
                                counts, activate_left 1, dynamic, INT8)       per expanded row
    acc2 = hq @ W2q[e]            (INT32: PyTorch, exact)
    h = acc2 W2s[e] hs            (F32, PyTorch: the second matmul's dequantization)
    out = MoeFinalizeRoutingV2(h, row_idx, scales w, expert_idx ids)          (F32)

Two float64 references, on the library's ids (the router is tested on its own):
- emulated: the same quantized pipeline in float64 PyTorch, each quantization written out (the
  scale amax / 127 rounded to F32, the byte x / s rounded half to even and saturated, the
  dequantization ((acc w) s_a) in that order). The library's quantized bytes and scales must
  equal it exactly (xq, xs, hq, hs): both are the float64 values of the same formulas
  (docs/quantization.md). Its output then differs from the library's only by the F32 roundings
  of h and of the combine: max |got - ref| <= 2^-20 max |ref| (EMULATED_TOLERANCE, a few F32
  roundings of sums of T K terms; measured 2^-23.4 at most, every device and seed).
- real: the layer in float64 without activation quantization (the dequantized weights
  W1q W1s and W2q W2s, which are the layer's weights). The library's output must lie within the
  quantization error: two per-token INT8 roundings, each at most 1/2 of a step of 1/127 of its
  row's amax (2^-8 of it), each carried through a matmul: max |got - ref| <= 2^-5 max |ref|
  (REAL_TOLERANCE; measured 2^-6.2 on every device and seed: the exact check is the emulated
  one, this one says the quantized layer is the layer).
Every step's output is the same bits on cpu and opencl; the exact steps (the routing's indices
and counts, every quantized byte and scale) on cpu_reference too.
"""

import pytest
import torch

import infiniop

from helpers import DEVICES, OPENCL_AVAILABLE, on, rng_for

T, H, E, K, I = 48, 64, 4, 2, 32
EMULATED_TOLERANCE = 2.0 ** -20
REAL_TOLERANCE = 2.0 ** -5


def signed(rng, shape, low=-6.0, high=1.0, zeros=0.05):
    """Signed values of magnitude 2^low .. 2^high, about `zeros` of them exactly 0 (float64)."""
    count = 1
    for n in shape:
        count *= n
    v = rng.choice([-1.0, 1.0], count) * 2.0 ** rng.uniform(low, high, count)
    v[rng.random(count) < zeros] = 0.0
    return torch.from_numpy(v.reshape(shape))


def quantized_weight(w):
    """(INT8 w, F32 scale per output channel (last dim)): symmetric, amax / 127."""
    scale = (w.abs().amax(dim=-2) / 127).to(torch.float32)
    q = torch.round(w / scale.double().unsqueeze(-2)).clamp(-127, 127).to(torch.int8)
    return q, scale


def make_layer(seed):
    rng = rng_for("w8a8", seed)
    W1q, W1s = quantized_weight(signed(rng, (E, H, 2 * I), -4.0, 0.0))
    W2q, W2s = quantized_weight(signed(rng, (E, I, H), -4.0, 0.0))
    return {"x": signed(rng, (T, H), -6.0, 2.0).to(torch.float32),
            "W_r": signed(rng, (H, E), -3.0, 0.0).to(torch.float32),
            "W1q": W1q, "W1s": W1s, "W2q": W2q, "W2s": W2s}


def int_matmul(a, b):
    """INT8 x INT8 -> INT32, exactly (float64 holds every partial sum of these sizes)."""
    return (a.double() @ b.double()).to(torch.int32)


def per_expert(rows, counts, fn):
    """fn(e, rows of expert e) for each expert's segment of the expanded rows, concatenated."""
    ends = torch.cumsum(counts.to(torch.int64), 0).tolist()
    return torch.cat([fn(e, rows[start:end])
                      for e, (start, end) in enumerate(zip([0] + ends[:-1], ends))])


def library_layer(p, device):
    lib = on(device)
    logits = p["x"] @ p["W_r"]
    w, ids, _ = infiniop.moe_gating_top_k_softmax(logits, K, renorm=1, index_dtype="int64", **lib)
    xq, row_idx, counts, _, xs = infiniop.moe_init_routing_quant_v2(
        p["x"], ids, expert_num=E, quant_mode="dynamic", dtype="int8",
        expert_tokens_count_or_cumsum_flag=2, **lib)
    acc1 = per_expert(xq, counts, lambda e, rows: int_matmul(rows, p["W1q"][e]))
    hq, hs = infiniop.dequant_swiglu_quant(
        acc1, weight_scale=p["W1s"], activation_scale=xs.reshape(-1), group_index=counts,
        activate_left=True, dtype="int8", **lib)
    acc2 = per_expert(hq, counts, lambda e, rows: int_matmul(rows, p["W2q"][e]))
    expert = torch.repeat_interleave(torch.arange(E), counts.to(torch.int64))  # dropless: sorted
    w2s = p["W2s"][expert]
    h = (acc2.to(torch.float32) * w2s) * hs.reshape(-1, 1)
    out = infiniop.moe_finalize_routing_v2(h, row_idx, scales=w, expert_idx=ids, drop_pad_mode=2,
                                           **lib)  # 2: dropless, row_idx in row layout (r*K + k)
    return {"ids": ids, "w": w, "xq": xq, "xs": xs.reshape(-1), "hq": hq, "hs": hs.reshape(-1),
            "counts": counts, "row_idx": row_idx, "out": out}


def quantize_rows(v):
    """(INT8 bytes, F32 scales) of each row of the float64 v: s = amax / 127 rounded to F32 (at
    least 2^-126), byte = v / s rounded half to even, saturated."""
    s = (v.abs().amax(dim=-1) / 127).to(torch.float32).clamp(min=2.0 ** -126)
    q = torch.round(v / s.double().unsqueeze(-1)).clamp(-127, 127).to(torch.int8)
    return q, s


def emulated_layer(p, lib):
    """The quantized pipeline in float64 on the library's routing (ids, w, row_idx)."""
    ids, row_idx = lib["ids"], lib["row_idx"]
    # expanded row s(p) holds token p // K; its expert is ids.flatten()[p]
    source = torch.empty(T * K, dtype=torch.int64)
    source[row_idx] = torch.arange(T * K) // K
    expert = torch.empty(T * K, dtype=torch.int64)
    expert[row_idx] = ids.reshape(-1)
    xq, xs = quantize_rows(p["x"].double()[source])
    acc1 = torch.stack([int_matmul(xq[i], p["W1q"][expert[i]]) for i in range(T * K)])
    d = (acc1.double() * p["W1s"].double()[expert]) * xs.double().unsqueeze(-1)
    z = torch.nn.functional.silu(d[:, :I]) * d[:, I:]
    hq, hs = quantize_rows(z)
    acc2 = torch.stack([int_matmul(hq[i], p["W2q"][expert[i]]) for i in range(T * K)])
    h = acc2.double() * p["W2s"].double()[expert] * hs.double().unsqueeze(-1)
    out = (h[row_idx].reshape(T, K, H) * lib["w"].double().unsqueeze(-1)).sum(1)
    return {"xq": xq, "xs": xs, "hq": hq, "hs": hs, "out": out}


def real_layer(p, lib):
    """The layer in float64 without activation quantization, on the library's ids and weights."""
    x = p["x"].double()
    W1 = p["W1q"].double() * p["W1s"].double().unsqueeze(1)
    W2 = p["W2q"].double() * p["W2s"].double().unsqueeze(1)
    out = torch.zeros(T, H, dtype=torch.float64)
    for k in range(K):
        e = lib["ids"][:, k]
        hidden = torch.einsum("th,thj->tj", x, W1[e])
        act = torch.nn.functional.silu(hidden[:, :I]) * hidden[:, I:]
        out += lib["w"][:, k].double().unsqueeze(-1) * torch.einsum("ti,tih->th", act, W2[e])
    return out


def relative_error(got, ref):
    return float((got.double() - ref).abs().max() / ref.abs().max())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed", [0, 1])
def test_w8a8_layer(device, seed):
    p = make_layer(seed)
    lib = library_layer(p, device)
    # the routing is real: every token its K distinct experts, every expert some rows
    assert all(len(set(row)) == K for row in lib["ids"].tolist())
    assert int(lib["counts"].sum()) == T * K
    emulated = emulated_layer(p, lib)
    for name in ("xq", "hq"):
        assert torch.equal(lib[name], emulated[name]), f"{device}: {name} bytes"
    for name in ("xs", "hs"):
        assert torch.equal(lib[name].view(torch.int32), emulated[name].view(torch.int32)), \
            f"{device}: {name} scale bits"
    assert 0 < int((lib["hq"] != 0).sum()) and int(lib["hq"].abs().max()) == 127
    error = relative_error(lib["out"], emulated["out"])
    assert error <= EMULATED_TOLERANCE, f"{device}: out vs emulated: {error:.3g}"
    error = relative_error(lib["out"], real_layer(p, lib))
    assert error <= REAL_TOLERANCE, f"{device}: out vs float64: {error:.3g}"


# The layer's exact steps: the routing's indices and counts and every quantized byte and scale.
# The router's F32 weights and the combine's F32 sums are the same bits on the cpu device's
# targets and opencl (their fixed operation order, docs/devices.md); cpu_reference computes them
# in double and rounds once, so only the exact steps are compared with it.
EXACT = ("ids", "counts", "row_idx", "xq", "xs", "hq", "hs")


def test_w8a8_layer_devices_agree():
    """Every step's outputs the same bits on cpu and opencl, the exact ones on cpu_reference."""
    p = make_layer(2)
    available = [d.name for d in infiniop.devices() if d.host_memory]
    available += ["opencl"] if OPENCL_AVAILABLE else []
    assert len(available) >= 2, available
    runs = {device: library_layer(p, device) for device in available}
    bits = lambda t: t.view(torch.uint8) if t.is_floating_point() else t  # noqa: E731
    for device, run in runs.items():
        names = EXACT if device == "cpu_reference" else run
        for name in names:
            assert torch.equal(bits(run[name]), bits(runs["cpu"][name])), f"{device} vs cpu: {name}"
