#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Expert parallel MoE on torch.distributed: a GPT-OSS-style MoE layer whose E = 4 experts are
split over 2 processes (2 each), forward and backward, with the routing in the library.

    PYTHONPATH=python /usr/bin/python3 examples/python/moe_expert_parallel.py

(the library: build/libinfiniop.so, or $INFINIOP_LIBRARY) launches 2 processes
(torch.multiprocessing, gloo over a FileStore in a temporary folder: no network port), prints
the largest differences against the same layer run in one process with every expert and against
float64 autograd, and exits 0 when they are within the tolerances below (1 otherwise). Started
as one of 2 processes with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (as
torch.distributed.run sets them) it joins that process group instead.

The layer (T tokens, hidden H, top-K of E experts, expert width I):
    logits = x @ W_r;  top, ids = topk(logits, K);  scales = softmax(top)
    out[t] = sum_k scales[t,k] * expert_{ids[t,k]}(x[t]),
    expert_e(v) = clipped_swiglu(v @ W1[e] + b1[e]) @ W2[e] + b2[e]
with a capacity of C slots per expert (drop/pad: a token routed to a full expert is dropped).

Each rank owns T/2 tokens (data parallel: its own x, the router weights replicated) and the
experts [rank*E/2, (rank+1)*E/2). Per rank:
  1. the router on its own tokens;
  2. all_gather of every token's ids and scales, so that each rank sees the routing of the
     whole batch (the capacity cut is a property of the whole batch, in token order);
  3. all_to_all_single moves each token's row to the ranks owning one of its experts (once per
     rank); the rows of tokens that no local expert needs stay zero;
  4. infiniop.torch.moe.dispatch (MoeInitRoutingV2, drop_pad_mode 1) over the whole batch: the
     same (E, C, H) layout and the same expanded_row_idx on every rank and in the single process;
     the rank keeps its experts' slots (2, C, H);
  5. the local experts: a batched matmul, ClippedSwiglu, a batched matmul;
  6. infiniop.torch.moe.combine with experts= the local ones: MoeFinalizeRoutingV2,
     drop_pad_mode 3, with expanded_row_idx rewritten to the local slots and -1 for every slot
     of another rank's expert (mode 3 reads -1 as a dropped token: a zero row): the rank's
     partial output, every token's contribution from the local experts;
  7. all_reduce sums the partial outputs; each rank keeps its own tokens' rows.
The collectives are autograd functions (backward: the reverse all_to_all_single, an all_reduce
for all_gather and for all_reduce), so loss.backward() runs the library's grad operators
(MoeFinalizeRoutingV2Grad, ClippedSwigluBackward, MoeInitRoutingV2Grad) through infiniop.torch.

gloo in torch 1.13 has all_gather, all_reduce and all_to_all_single (uneven splits too), but
not all_to_all (lists) nor reduce_scatter: all_to_all_single carries the rows, and the backward
of all_gather is an all_reduce and a slice where NCCL would use reduce_scatter.

Tolerances, per compared tensor, relative to its largest magnitude max|ref| (u = 2^-24, F32):
  - against the single process: 8 u. The two differ only in the order of a few F32 sums: the
    combine (an F32 fma chain over K in one process; per-rank chains summed by all_reduce here,
    one rounding more per term) and, for W_r, the batch sum split over the ranks and summed by
    all_reduce. (Measured: 1 u for out, 3.6 u for W_r; the routing and the other gradients
    came out bit for bit the same.)
  - against float64 autograd: 16 u, tests/python/test_moe_layer.py's bound for F32 (a few
    roundings of the activations on each path, the F32 sums of the matmuls and operators), with
    the router's softmax and its backward in F32 as well. (Measured: at most 3.6 u.)
Inputs are chosen so that the logits and the first matmul are exact (multiples of powers of two),
so the routing and the clamps see the same values everywhere; about 10% of the clamps fire.
"""

import datetime
import math
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist

import infiniop.torch as ops  # differentiable clipped_swiglu, ...
from infiniop.torch import moe  # the MoE helper: dispatch and combine over infiniop.torch

T, H, E, K, I = 64, 32, 4, 2, 16  # tokens, hidden, experts, top-k, expert width
WORLD = 2
CLIP = {"alpha": 1.702, "limit": 7.0, "bias": 1.0, "interleaved": True}  # GPT-OSS
CAPACITY_FACTORS = (1.0, 2.0)  # C = factor * T*K/E: 1.0 drops tokens, 2.0 (C = T) none
U = 2.0 ** -24
TOLERANCE = {"single process": 8 * U, "float64": 16 * U}


# ----------------------------------------------------------------------------------------------
# Collectives, and as autograd functions

def clamp_inclusive(t, low, high):
    """t.clamp(low, high) whose gradient passes at the bounds themselves, as the library's
    ClippedSwiglu masks (docs/clipped_swiglu.md); PyTorch 2's clamp gives 0 there."""
    t = torch.where(t > high, t.new_tensor(high), t)
    return t if low is None else torch.where(t < low, t.new_tensor(low), t)


def all_gather(tensor):
    """[every rank's tensor] (same shapes), in rank order; no gradient."""
    parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, tensor.contiguous())
    return parts


class AllGather(torch.autograd.Function):
    """Every rank's (n, ...) shard, concatenated in rank order. Backward: the sum over the ranks
    of the gradient, this rank's rows (reduce_scatter, which gloo lacks: all_reduce + slice)."""

    @staticmethod
    def forward(ctx, shard):
        ctx.rows = shard.shape[0]
        return torch.cat(all_gather(shard))

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad)
        start = dist.get_rank() * ctx.rows
        return grad[start:start + ctx.rows]


class AllReduce(torch.autograd.Function):
    """The sum over the ranks; its gradient is the sum of the ranks' gradients."""

    @staticmethod
    def forward(ctx, tensor):
        tensor = tensor.contiguous().clone()
        dist.all_reduce(tensor)
        return tensor

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad)
        return grad


class AllToAll(torch.autograd.Function):
    """all_to_all_single on rows: send_counts[j] rows of `rows` go to rank j, recv_counts[j]
    come from rank j. Backward: the same exchange the other way."""

    @staticmethod
    def forward(ctx, rows, send_counts, recv_counts):
        ctx.counts = send_counts, recv_counts
        out = rows.new_empty((sum(recv_counts),) + rows.shape[1:])
        dist.all_to_all_single(out, rows.contiguous(), recv_counts, send_counts)
        return out

    @staticmethod
    def backward(ctx, grad):
        send_counts, recv_counts = ctx.counts
        grad_rows = grad.new_empty((sum(send_counts),) + grad.shape[1:])
        dist.all_to_all_single(grad_rows, grad.contiguous(), send_counts, recv_counts)
        return grad_rows, None, None


# ----------------------------------------------------------------------------------------------
# The layer: world = 1 is the single-process layer (every expert local, no collective)

def moe_layer(x, W_r, W1, b1, W2, b2, capacity, rank=0, world=1):
    """out (n, H) for this rank's tokens x (n, H); W1, b1, W2, b2 are the local experts'
    (E / world of them); W_r (H, E) the router. Returns (out, scales) (scales: this rank's
    tokens' top-K weights, for their gradient)."""
    n = x.shape[0]
    local = W1.shape[0]
    first = rank * local  # the local experts are [first, first + local)

    # 1. router (this rank's tokens)
    top, ids = torch.topk(x @ W_r, K, dim=-1)  # ids int64 (n, K)
    scales = torch.softmax(top, dim=-1)

    if world == 1:
        x_all, ids_all, scales_all = x, ids, scales
    else:
        # 2. the whole batch's routing on every rank
        ids_all = torch.cat(all_gather(ids))
        scales_all = AllGather.apply(scales)
        # 3. token rows to the ranks that own one of their experts
        needs = torch.stack([((ids_all // local) == j).any(dim=1) for j in range(world)])
        mine = slice(rank * n, (rank + 1) * n)
        send = torch.cat([needs[j, mine].nonzero().flatten() for j in range(world)])
        send_counts = [int(needs[j, mine].sum()) for j in range(world)]
        recv_counts = [int(needs[rank, s * n:(s + 1) * n].sum()) for s in range(world)]
        received = AllToAll.apply(x[send], send_counts, recv_counts)
        tokens = needs[rank].nonzero().flatten()  # in token order, as they arrive
        x_all = x.new_zeros(world * n, H).index_copy(0, tokens, received)

    # 4. dispatch: (E, C, H) over the whole batch; this rank's experts' slots
    routed = moe.dispatch(x_all, ids_all, E, expert_capacity=capacity, drop_pad_mode=1)
    rows = routed.expanded_x[first:first + local]  # (local, C, H)

    # 5. the local experts, batched over their slots (unfilled ones: zero rows, outputs unread)
    h = torch.baddbmm(b1.unsqueeze(1), rows, W1)
    act = ops.clipped_swiglu(h, **CLIP)
    expert_out = torch.baddbmm(b2.unsqueeze(1), act, W2)  # (local, C, H)

    # 6. combine the local experts' contributions: another rank's slots are -1 (a zero row)
    partial = moe.combine(expert_out, routed, scales_all,
                          experts=range(first, first + local))  # (world * n, H)
    if world == 1:
        return partial, scales
    # 7. sum the ranks' partial outputs; keep this rank's tokens
    return AllReduce.apply(partial)[mine], scales


# ----------------------------------------------------------------------------------------------
# Inputs, the run, the references

def make_inputs(seed=2047):
    """Full-size F32 inputs, weights and upstream gradient, the same on every rank. x, W_r, W1
    and b1 are small multiples of powers of two: the logits and h = x W1 + b1 are exact."""
    g = torch.Generator().manual_seed(seed)

    def dyadic(shape, step, reach):
        n = round(reach / step)
        return torch.randint(-n, n + 1, shape, generator=g).float() * step

    def spread(shape):  # signed, magnitudes 2^-6 .. 2^1
        sign = torch.randint(0, 2, shape, generator=g).float() * 2 - 1
        return sign * 2.0 ** (torch.rand(shape, generator=g) * 7 - 6)

    return {"x": dyadic((T, H), 0.25, 1.0), "W_r": dyadic((H, E), 1 / 32, 0.5),
            "W1": dyadic((E, H, 2 * I), 0.5, 2.0), "b1": dyadic((E, 2 * I), 0.125, 2.0),
            "W2": spread((E, I, H)) / 4, "b2": spread((E, H)), "grad_out": spread((T, H))}


def run_layer(p, capacity, rank=0, world=1):
    """Forward and backward on this rank's share: (out, {name: gradient}) of the rank's tokens
    and experts."""
    n, local = T // world, E // world
    tokens, experts = slice(rank * n, (rank + 1) * n), slice(rank * local, (rank + 1) * local)
    leaves = {name: p[name][tokens if name == "x" else experts].clone().requires_grad_()
              for name in ("x", "W1", "b1", "W2", "b2")}
    leaves["W_r"] = p["W_r"].clone().requires_grad_()
    out, scales = moe_layer(leaves["x"], leaves["W_r"], leaves["W1"], leaves["b1"],
                            leaves["W2"], leaves["b2"], capacity, rank, world)
    scales.retain_grad()
    loss = (out * p["grad_out"][tokens]).sum()
    loss.backward()
    grads = {name: t.grad for name, t in leaves.items()}
    grads["scales"] = scales.grad
    return out.detach(), grads


def reference64(p, ids, capacity):
    """The layer in float64 with autograd on the full batch, the routing ids given (those of
    the F32 run: topk's ties are then no question) and the capacity cut derived directly."""
    leaves = {name: p[name].double().clone().requires_grad_()
              for name in ("x", "W_r", "W1", "b1", "W2", "b2")}
    x, W_r, W1, b1, W2, b2 = (leaves[n] for n in ("x", "W_r", "W1", "b1", "W2", "b2"))
    scales = torch.softmax((x @ W_r).gather(1, ids), dim=-1)
    scales.retain_grad()
    h = torch.einsum("th,tkhi->tki", x, W1[ids]) + b1[ids]
    a = clamp_inclusive(h[..., 0::2], None, CLIP["limit"])
    b = clamp_inclusive(h[..., 1::2], -CLIP["limit"], CLIP["limit"])
    act = a * torch.sigmoid(CLIP["alpha"] * a) * (b + CLIP["bias"])
    expert_out = torch.einsum("tki,tkih->tkh", act, W2[ids]) + b2[ids]
    out = (scales.unsqueeze(-1) * expert_out * kept(ids, capacity).unsqueeze(-1)).sum(1)
    out.backward(p["grad_out"].double())
    grads = {name: t.grad for name, t in leaves.items()}
    grads["scales"] = scales.grad
    clipped = ((h[..., 0::2] > CLIP["limit"]).sum() + (h[..., 1::2].abs() > CLIP["limit"]).sum())
    return out.detach(), grads, clipped.item() / h.numel()


def kept(ids, capacity):
    """(T, K) bool: the (t, k) among the first `capacity` of its expert in the order t*K + k."""
    seen, keep = [0] * E, []
    for e in ids.reshape(-1).tolist():
        keep.append(seen[e] < capacity)
        seen[e] += 1
    return torch.tensor(keep).reshape(ids.shape)


def max_error(got, ref):
    """max |got - ref| / max |ref|."""
    ref = ref.double()
    return ((got.double() - ref).abs().max() / ref.abs().max()).item()


def worker(rank, world, init_file=None):
    """One rank: the expert parallel layer, then (rank 0) the comparisons. Returns 0 / 1."""
    torch.set_num_threads(1)
    if init_file is not None:
        dist.init_process_group("gloo", store=dist.FileStore(init_file, world), rank=rank,
                                world_size=world, timeout=datetime.timedelta(seconds=60))
    else:  # torch.distributed.run: the launcher's environment
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
        rank, world = dist.get_rank(), dist.get_world_size()
    assert world == WORLD and T % world == 0 and E % world == 0
    p = make_inputs()
    failed = False
    for factor in CAPACITY_FACTORS:
        capacity = math.ceil(factor * T * K / E)
        out, grads = run_layer(p, capacity, rank, world)
        # every rank's tokens and experts, gathered; W_r's gradient summed (data parallel)
        out = torch.cat(all_gather(out))
        for name in ("x", "scales", "W1", "b1", "W2", "b2"):
            grads[name] = torch.cat(all_gather(grads[name]))
        dist.all_reduce(grads["W_r"])
        if rank != 0:
            continue
        ref_out, ref_grads = run_layer(p, capacity)  # one process, every expert
        ids = torch.topk(p["x"] @ p["W_r"], K, dim=-1)[1]
        out64, grads64, clipped = reference64(p, ids, capacity)
        dropped = int((~kept(ids, capacity)).sum())
        print(f"capacity {capacity} ({factor:g} x T*K/E): {dropped} of {T * K} routed tokens "
              f"dropped, {clipped:.0%} of the clamps active")
        for against, ref, ref_g in (("single process", ref_out, ref_grads),
                                    ("float64", out64, grads64)):
            errors = {"out": max_error(out, ref)}
            errors.update({f"grad {name}": max_error(grads[name], ref_g[name])
                           for name in ("x", "W_r", "scales", "W1", "b1", "W2", "b2")})
            worst = max(errors.values())
            ok = worst <= TOLERANCE[against]
            failed |= not ok
            print(f"  vs {against:14s} max |diff| / max |ref|: "
                  + ", ".join(f"{k} {v / U:.2g}" for k, v in errors.items())
                  + f" (units of 2^-24; tolerance {TOLERANCE[against] / U:g}) "
                  + ("ok" if ok else "FAILED"))
        if (dropped == 0) != (factor >= 2) or not 0.05 < clipped < 0.5:
            print("  the inputs no longer exercise the drops or the clamps as intended")
            failed = True
    dist.destroy_process_group()
    return 1 if failed else 0


def _spawned(rank, world, init_file):
    status = worker(rank, world, init_file)
    if status:
        sys.exit(status)


def main():
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # under torch.distributed.run
        return worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    import torch.multiprocessing as mp

    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        try:
            mp.spawn(_spawned, args=(WORLD, os.path.join(folder, "store")), nprocs=WORLD)
        except Exception as error:  # a rank failed: mp.spawn has ended the other one
            print(f"expert parallel run failed: {error}", file=sys.stderr)
            return 1
    print(f"{WORLD} processes agree ({time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
