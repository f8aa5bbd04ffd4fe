#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch's figures for infiniop-bench's operators on the same machine, measured the same way:
best and median of repeated calls (about 1 s each, after a warm-up), GB/s counting every input
read once and every output written once, and the ratio to a copy of the same byte count
(dst.copy_(src) of bytes/2) timed in the same run.

Run with Debian's interpreter, which carries torch: /usr/bin/python3 bench/compare_torch.py
By default it times torch.ops.aten.gelu_backward(grad_output, input, approximate='tanh') at
4096x4096 in f32 and bf16 with 2 threads, both as called (allocating its result) and in its
out= form (grad_input preallocated, as infiniop-bench runs). --ops all adds the split
activations, composed from chunk + silu/gelu + mul, the clipped SwiGLU (strided even/odd slices
or chunk, clamp, sigmoid, mul, at alpha 1.702, limit 7, bias 1), and their gradients through
autograd. The MoE finalize-routing pair (--ops moe_finalize_routing,moe_finalize_routing_grad,
or all) runs at --moe-shape RxKxH (default 4096x8x4096, 64 experts) as index_select + einsum,
and autograd of it for the grad, with the routing of infiniop-bench: a permutation of rows.

--csv writes one comma-separated line per case after a header (op, dtype, shape, elements, bytes,
best_ms, median_ms, gelem_s, gb_s, copy_gb_s, ratio, reps, threads, torch), the columns named as
infiniop-bench --csv names them. --sweep-max N (N, NK = N x 1024, NM = N x 2^20) runs each case
at 4K, 16K, 64K, ... up to N output elements, as infiniop-bench --sweep does: rows of --shape's
columns for the elementwise operators, R of --moe-shape (K and H kept) for the MoE ones (a size
below one MoE row is skipped), each timed for about --budget seconds (0.2 s in a sweep, else 1 s).
"""
import argparse
import statistics
import time

import torch


def measure(fn, reps, budget=1.0):
    """Best and median seconds of `reps` calls after a warm-up (reps 0: about `budget` s)."""
    fn()
    times = []
    while len(times) < reps if reps else (len(times) < 3 or sum(times) < budget):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times), len(times)


def cases(rows, cols, dtype):
    """(name, fn, bytes, elements) for each case: bytes = inputs read once + outputs written once,
    elements = output elements."""
    g = torch.Generator().manual_seed(0)

    def uniform(r, c):  # signed values over [-10, 10], like infiniop-bench
        return (torch.rand(r, c, generator=g) * 20 - 10).to(dtype)

    x, dy, xx = uniform(rows, cols), uniform(rows, cols), uniform(rows, 2 * cols)
    dx = torch.empty_like(x)
    size = x.element_size()
    n = rows * cols
    gelu_backward = torch.ops.aten.gelu_backward
    yield ("gelu_backward", lambda: gelu_backward(dy, x, approximate="tanh"), 3 * n * size, n)
    yield ("gelu_backward(out=)",
           lambda: gelu_backward.grad_input(dy, x, approximate="tanh", grad_input=dx),
           3 * n * size, n)

    def split_forward(act):
        def run():
            a, b = xx.chunk(2, -1)
            return act(a) * b
        return run

    def split_backward(act):
        def run():
            x_ = xx.detach().requires_grad_()
            a, b = x_.chunk(2, -1)
            (act(a) * b).backward(dy)
            return x_.grad
        return run

    silu = torch.nn.functional.silu
    gelu = torch.nn.functional.gelu

    def gelu_tanh(t):
        return torch.nn.functional.gelu(t, approximate="tanh")

    yield ("swiglu", split_forward(silu), 3 * n * size, n)
    yield ("swiglu_backward", split_backward(silu), 5 * n * size, n)
    yield ("gelu_mul", split_forward(gelu), 3 * n * size, n)
    yield ("gelu_mul_tanh", split_forward(gelu_tanh), 3 * n * size, n)
    yield ("gelu_mul_backward", split_backward(gelu), 5 * n * size, n)
    yield ("gelu_mul_backward_tanh", split_backward(gelu_tanh), 5 * n * size, n)
    yield ("gelu", lambda: gelu(x), 2 * n * size, n)
    yield ("gelu_tanh", lambda: gelu_tanh(x), 2 * n * size, n)
    yield ("gelu_backward_v2", lambda: gelu_backward(dy, x, approximate="none"), 3 * n * size, n)
    yield ("gelu_backward_v2_tanh", lambda: gelu_backward(dy, x, approximate="tanh"),
           3 * n * size, n)

    # ClippedSwiglu at the vendor API's defaults, x merged to [pre, L] around dim = -1 (here
    # already [rows, 2 cols]); interleaved: A = x[:, 0::2], B = x[:, 1::2]; halves: chunk.
    alpha, limit, bias = 1.702, 7.0, 1.0

    def interleaved(t):
        return t[:, 0::2], t[:, 1::2]

    def halves(t):
        return t.chunk(2, -1)

    def clipped(split, t):
        a, b = split(t)
        a = a.clamp(max=limit)
        b = b.clamp(-limit, limit)
        return a * torch.sigmoid(alpha * a) * (b + bias)

    def clipped_forward(split):
        return lambda: clipped(split, xx)

    def clipped_backward(split):
        def run():
            x_ = xx.detach().requires_grad_()
            clipped(split, x_).backward(dy)  # clamp's gradient mask is inclusive, as infiniop's
            return x_.grad
        return run

    yield ("clipped_swiglu", clipped_forward(interleaved), 3 * n * size, n)
    yield ("clipped_swiglu_halves", clipped_forward(halves), 3 * n * size, n)
    yield ("clipped_swiglu_backward", clipped_backward(interleaved), 5 * n * size, n)
    yield ("clipped_swiglu_backward_halves", clipped_backward(halves), 5 * n * size, n)


def moe_cases(R, K, H, dtype, experts=64):
    """(name, fn, bytes, elements) for MoeFinalizeRoutingV2 (drop_pad_mode 0) and its grad."""
    g = torch.Generator().manual_seed(0)

    def uniform(*shape):
        return (torch.rand(*shape, generator=g) * 20 - 10).to(dtype)

    expanded_x, x1, x2 = uniform(R * K, H), uniform(R, H), uniform(R, H)
    bias, scales, grad_y = uniform(experts, H), uniform(R, K), uniform(R, H)
    permutation = torch.randperm(R * K, generator=g)
    expert = torch.randint(0, experts, (R, K), generator=g)
    size = expanded_x.element_size()
    index_bytes = 2 * R * K * 4  # expanded_row_idx, expert_idx (int32 in infiniop)

    def combine(ex, sc, rows):
        gathered = ex.index_select(0, rows.reshape(-1)).view(R, K, H)
        gathered = gathered + bias.index_select(0, expert.reshape(-1)).view(R, K, H)
        return torch.einsum("rk,rkh->rh", sc, gathered)

    forward_rows = permutation.view(K, R).t()  # column layout: idx[k*R + r]
    yield ("moe_finalize_routing", lambda: x1 + x2 + combine(expanded_x, scales, forward_rows),
           (R * K * H + 3 * R * H + experts * H + R * K) * size + index_bytes, R * H)
    grad_rows = permutation.view(R, K)  # row layout: idx[r*K + k]

    def grad():
        ex = expanded_x.detach().requires_grad_()
        sc = scales.detach().requires_grad_()
        combine(ex, sc, grad_rows).backward(grad_y)
        return ex.grad, sc.grad

    yield ("moe_finalize_routing_grad", grad,
           (2 * R * K * H + R * H + experts * H + 2 * R * K) * size + index_bytes,
           R * K * H + R * K)


def copy_time(nbytes, reps, budget=1.0):
    src = torch.ones(max(nbytes // 2, 1), dtype=torch.uint8)
    dst = torch.zeros_like(src)
    return measure(lambda: dst.copy_(src), reps, budget)


def parse_count(text):
    """N, NK (N x 1024) or NM (N x 2^20), as infiniop-bench --sweep-max reads it."""
    scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:].upper(), 1)
    return int(text[:-1] if scale > 1 else text) * scale


def sweep_sizes(largest):
    """4K, 16K, 64K, ... up to largest: infiniop-bench's sweep sizes."""
    sizes, n = [], 4096
    while n <= largest:
        sizes.append(n)
        n *= 4
    return sizes


CSV_COLUMNS = ("op,dtype,shape,elements,bytes,best_ms,median_ms,gelem_s,gb_s,copy_gb_s,ratio,reps,"
               "threads,torch")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="4096x4096", help="RxC (default 4096x4096 = 16M)")
    parser.add_argument("--moe-shape", default="4096x8x4096",
                        help="RxKxH of the MoE operators (default 4096x8x4096)")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (2)")
    parser.add_argument("--reps", type=int, default=0, help="timed calls (default: ~--budget s)")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds of calls per case when --reps is 0 (1; 0.2 in a sweep)")
    parser.add_argument("--ops", default="gelu_backward",
                        help="comma-separated names, or 'all' (default gelu_backward)")
    parser.add_argument("--csv", action="store_true", help="comma-separated lines, a header first")
    parser.add_argument("--sweep-max", default=None,
                        help="sweep 4K, 16K, ... up to this many output elements (e.g. 16M)")
    args = parser.parse_args()
    rows, cols = (int(v) for v in args.shape.split("x"))
    moe_r, moe_k, moe_h = (int(v) for v in args.moe_shape.split("x"))
    wanted = None if args.ops == "all" else set(args.ops.split(","))
    budget = args.budget if args.budget is not None else (0.2 if args.sweep_max else 1.0)
    torch.set_num_threads(args.threads)
    # (elementwise rows, MoE R) per size: the given shapes, or the sweep's
    if args.sweep_max:
        sizes = [(max(n // cols, 1), n // moe_h) for n in sweep_sizes(parse_count(args.sweep_max))]
    else:
        sizes = [(rows, moe_r)]
    if args.csv:
        print(CSV_COLUMNS)
    else:
        print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads")
        print(f"{'op':30s} {'type':4s} {'shape':10s} {'best_ms':>8s} {'median_ms':>9s} "
              f"{'Gelem/s':>7s} {'GB/s':>7s} {'copyGB/s':>8s} {'ratio':>5s} {'reps':>5s}")
    names = {torch.float32: "f32", torch.bfloat16: "bf16"}
    wants_moe = wanted is None or any(name.startswith("moe") for name in wanted)
    for dtype in (torch.float32, torch.bfloat16):
        for size_rows, size_r in sizes:
            moe = moe_cases(size_r, moe_k, moe_h, dtype) if wants_moe and size_r > 0 else []
            for name, fn, nbytes, elements in list(cases(size_rows, cols, dtype)) + list(moe):
                if wanted is not None and name.split("(")[0] not in wanted:
                    continue
                shape = (f"{size_r}x{moe_k}x{moe_h}" if name.startswith("moe")
                         else f"{size_rows}x{cols}")
                best, median, reps = measure(fn, args.reps, budget)
                copy_best, _, _ = copy_time(nbytes, reps, budget)
                gbs, copy_gbs = nbytes / best / 1e9, nbytes / copy_best / 1e9
                if args.csv:
                    print(f'"{name}",{names[dtype]},{shape},{elements},{nbytes},{best * 1e3:.6f},'
                          f"{median * 1e3:.6f},{elements / best / 1e9:.4f},{gbs:.3f},"
                          f"{copy_gbs:.3f},{gbs / copy_gbs:.4f},{reps},"
                          f"{torch.get_num_threads()},{torch.__version__}", flush=True)
                else:
                    print(f"{name:30s} {names[dtype]:4s} {shape:10s} {best * 1e3:8.3f} "
                          f"{median * 1e3:9.3f} {elements / best / 1e9:7.3f} {gbs:7.2f} "
                          f"{copy_gbs:8.2f} {gbs / copy_gbs:5.2f} {reps:5d}", flush=True)


if __name__ == "__main__":
    main()
