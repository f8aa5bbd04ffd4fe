#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch's figures for infiniop-bench's operators on the same machine, measured the same way:
best and median of repeated calls (about 1 s each, after a warm-up), GB/s counting every input
read once and every output written once, and the ratio to a copy of the same byte count
(dst.copy_(src) of bytes/2) timed in the same run.

    .venv/bin/python bench/compare_torch.py --mode eager,inductor --ops all
    /usr/bin/python3 bench/compare_torch.py          (Debian's PyTorch 1.13: eager only)

--mode eager (the default) runs each formula as written (PyTorch eager); --mode inductor runs
torch.compile(formula, fullgraph=True, dynamic=False) of the same formula (Inductor, CPU: C++
and OpenMP code generated and built for the run's thread count), compiled and warmed up before
the timing; --mode eager,inductor (or all) runs both, one row each. On PyTorch 1.x, which has no
torch.compile, the inductor rows are skipped with a message on stderr.

By default it times torch.ops.aten.gelu_backward(grad_output, input, approximate='tanh') at
4096x4096 in f32 and bf16 with 2 threads, both as called (allocating its result) and in its
out= form (grad_input preallocated, as infiniop-bench runs; eager only). --ops all adds the
split activations, composed from chunk + silu/gelu + mul, the clipped SwiGLU (strided even/odd
slices or chunk, clamp, sigmoid, mul, at alpha 1.702, limit 7, bias 1), the Gelu forms, and the
gradients of the split activations through autograd. The MoE finalize-routing pair
(moe_finalize_routing, moe_finalize_routing_grad) runs at --moe-shape RxKxH (default
4096x8x4096, 64 experts) as index_select + einsum, and autograd of it for the grad, with the
routing of infiniop-bench: a permutation of rows. The routers run at --gate-shape RxKxE (default
16384x8x256, infiniop-bench's; 65536x8x256 has 16M logits): moe_gating_top_k_softmax as
softmax (F32) + topk, y in x's dtype, int32 expert_idx and row_idx (renorm 0);
moe_gating_top_k as DeepSeek-V3's grouped router (sigmoid in F32, + bias, 8 groups scored by
their two largest, the best 4 groups' experts selectable, top-k, the k weights normalized
(eps 1e-20) and scaled by 2.5); their _grad rows are autograd of y with respect to x.

A gradient row (a name with _backward or _grad, but gelu_backward*, which is PyTorch's own
operator) times the backward pass alone, as the library's backward operators run:
torch.autograd.grad(y, inputs, grad_y, retain_graph=True) on a graph built once (with inductor,
the compiled backward of AOTAutograd), so the forward is not counted.

--csv writes one comma-separated line per case after a header (op, dtype, shape, elements, bytes,
best_ms, median_ms, gelem_s, gb_s, copy_gb_s, ratio, reps, threads, torch, mode), the columns
named as infiniop-bench --csv names them (torch: the version; mode: eager or inductor).
--sweep-max N (N, NK = N x 1024, NM = N x 2^20) runs each case at 4K, 16K, 64K, ... up to N
output elements, as infiniop-bench --sweep does: rows of --shape's columns for the elementwise
operators, R of --moe-shape (K and H kept) for the MoE ones (a size below one MoE row is
skipped; the routers keep --gate-shape), each timed for about --budget seconds (0.2 s in a
sweep, else 1 s).
"""
import argparse
import statistics
import sys
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


class Case:
    """One timed case: formula(*inputs), or with grad_of (the positions of the inputs to
    differentiate) the backward of formula's output against grad_y. bytes = inputs read once +
    outputs written once, elements = output elements. out_form: an eager-only variant (out=)."""

    def __init__(self, name, formula, inputs, nbytes, elements, grad_of=None, grad_y=None,
                 out_form=False):
        self.name, self.formula, self.inputs = name, formula, inputs
        self.bytes, self.elements = nbytes, elements
        self.grad_of, self.grad_y, self.out_form = grad_of, grad_y, out_form

    def runner(self, mode):
        """The function to time, compiled (and the graph built) before it is returned."""
        formula = self.formula
        if mode == "inductor":
            torch._dynamo.reset()  # a fresh compile per case (the formulas share code objects)
            formula = torch.compile(formula, fullgraph=True, dynamic=False)
        if self.grad_of is None:
            inputs = self.inputs
            return lambda: formula(*inputs)
        inputs = list(self.inputs)
        leaves = []
        for i in self.grad_of:
            inputs[i] = inputs[i].detach().requires_grad_()
            leaves.append(inputs[i])
        y, grad_y = formula(*inputs), self.grad_y
        return lambda: torch.autograd.grad(y, leaves, grad_y, retain_graph=True)


def cases(rows, cols, dtype):
    """The elementwise cases at rows x cols (the split ones read rows x 2 cols)."""
    g = torch.Generator().manual_seed(0)

    def uniform(r, c):  # signed values over [-10, 10], like infiniop-bench
        return (torch.rand(r, c, generator=g) * 20 - 10).to(dtype)

    x, dy, xx = uniform(rows, cols), uniform(rows, cols), uniform(rows, 2 * cols)
    dx = torch.empty_like(x)
    size = x.element_size()
    n = rows * cols
    gelu_backward = torch.ops.aten.gelu_backward

    def gelu_backward_tanh(dy_, x_):
        return gelu_backward(dy_, x_, approximate="tanh")

    def gelu_backward_erf(dy_, x_):
        return gelu_backward(dy_, x_, approximate="none")

    def gelu_backward_out(dy_, x_):
        return gelu_backward.grad_input(dy_, x_, approximate="tanh", grad_input=dx)

    yield Case("gelu_backward", gelu_backward_tanh, (dy, x), 3 * n * size, n)
    yield Case("gelu_backward(out=)", gelu_backward_out, (dy, x), 3 * n * size, n, out_form=True)

    silu = torch.nn.functional.silu
    gelu = torch.nn.functional.gelu

    def gelu_tanh(t):
        return torch.nn.functional.gelu(t, approximate="tanh")

    def split(act):
        def formula(t):
            a, b = t.chunk(2, -1)
            return act(a) * b
        return formula

    for name, act in (("swiglu", silu), ("gelu_mul", gelu), ("gelu_mul_tanh", gelu_tanh)):
        yield Case(name, split(act), (xx,), 3 * n * size, n)
        backward = name.replace("gelu_mul", "gelu_mul_backward") if "gelu" in name else \
            "swiglu_backward"
        yield Case(backward, split(act), (xx,), 5 * n * size, 2 * n, grad_of=(0,), grad_y=dy)
    yield Case("gelu", gelu, (x,), 2 * n * size, n)
    yield Case("gelu_tanh", gelu_tanh, (x,), 2 * n * size, n)
    yield Case("gelu_backward_v2", gelu_backward_erf, (dy, x), 3 * n * size, n)
    yield Case("gelu_backward_v2_tanh", gelu_backward_tanh, (dy, x), 3 * n * size, n)

    # ClippedSwiglu at the vendor API's defaults, x merged to [pre, L] around dim = -1 (here
    # already [rows, 2 cols]); interleaved: A = x[:, 0::2], B = x[:, 1::2]; halves: chunk.
    # clamp's gradient mask is inclusive, as infiniop's.
    alpha, limit, bias = 1.702, 7.0, 1.0

    def clipped(interleaved):
        def formula(t):
            a, b = (t[:, 0::2], t[:, 1::2]) if interleaved else t.chunk(2, -1)
            a = a.clamp(max=limit)
            b = b.clamp(-limit, limit)
            return a * torch.sigmoid(alpha * a) * (b + bias)
        return formula

    for suffix, interleaved in (("", True), ("_halves", False)):
        yield Case("clipped_swiglu" + suffix, clipped(interleaved), (xx,), 3 * n * size, n)
        yield Case("clipped_swiglu_backward" + suffix, clipped(interleaved), (xx,),
                   5 * n * size, 2 * n, grad_of=(0,), grad_y=dy)


def moe_cases(R, K, H, dtype, experts=64):
    """MoeFinalizeRoutingV2 (drop_pad_mode 0) and its grad."""
    g = torch.Generator().manual_seed(0)

    def uniform(*shape):
        return (torch.rand(*shape, generator=g) * 20 - 10).to(dtype)

    expanded_x, x1, x2 = uniform(R * K, H), uniform(R, H), uniform(R, H)
    bias, scales, grad_y = uniform(experts, H), uniform(R, K), uniform(R, H)
    permutation = torch.randperm(R * K, generator=g)
    expert = torch.randint(0, experts, (R, K), generator=g)
    size = expanded_x.element_size()
    index_bytes = 2 * R * K * 4  # expanded_row_idx, expert_idx (int32 in infiniop)

    def combine(ex, sc, rows, bias_, expert_):
        gathered = ex.index_select(0, rows.reshape(-1)).view(R, K, H)
        gathered = gathered + bias_.index_select(0, expert_.reshape(-1)).view(R, K, H)
        return torch.einsum("rk,rkh->rh", sc, gathered)

    def finalize(ex, sc, rows, bias_, expert_, x1_, x2_):
        return x1_ + x2_ + combine(ex, sc, rows, bias_, expert_)

    forward_rows = permutation.view(K, R).t()  # column layout: idx[k*R + r]
    yield Case("moe_finalize_routing", finalize,
               (expanded_x, scales, forward_rows, bias, expert, x1, x2),
               (R * K * H + 3 * R * H + experts * H + R * K) * size + index_bytes, R * H)
    grad_rows = permutation.view(R, K)  # row layout: idx[r*K + k]
    yield Case("moe_finalize_routing_grad", combine, (expanded_x, scales, grad_rows, bias, expert),
               (2 * R * K * H + R * H + experts * H + 2 * R * K) * size + index_bytes,
               R * K * H + R * K, grad_of=(0, 1), grad_y=grad_y)


def gate_cases(R, K, E, dtype):
    """The routers at infiniop-bench's configurations (bench/ops.cc): MoeGatingTopKSoftmax
    renorm 0 with row_idx; MoeGatingTopK as DeepSeek-V3 (sigmoid, bias, 8 groups scored by their
    two largest, k_group 4, routed_scaling_factor 2.5, eps 1e-20); and their grads."""
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(R, E, generator=g) * 20 - 10).to(dtype)
    bias = (torch.rand(E, generator=g) * 2 - 1).to(dtype)
    grad_y = (torch.rand(R, K, generator=g) * 2 - 1).to(dtype)
    size = x.element_size()
    groups, k_group, scaling, eps = 8, 4, 2.5, 1e-20

    def softmax_topk(x_):
        y, idx = torch.softmax(x_, -1, dtype=torch.float32).topk(K, -1)
        row_idx = torch.arange(K * R, dtype=torch.int32).view(K, R).t()
        return y.to(x_.dtype), idx.to(torch.int32), row_idx

    def softmax_topk_y(x_):
        return softmax_topk(x_)[0]

    def grouped(x_, bias_):
        p = torch.sigmoid(x_.float())
        v = p + bias_.float()
        scores = v.view(R, groups, E // groups).topk(2, -1).values.sum(-1)
        keep = torch.zeros_like(scores).scatter_(1, scores.topk(k_group, -1).indices, 1.0)
        keep = keep.unsqueeze(-1).expand(R, groups, E // groups).reshape(R, E)
        idx = v.masked_fill(keep == 0, float("-inf")).topk(K, -1).indices
        w = p.gather(1, idx)
        y = w / (w.sum(-1, keepdim=True) + eps) * scaling
        return y.to(x_.dtype), idx.to(torch.int32)

    def grouped_y(x_, bias_):
        return grouped(x_, bias_)[0]

    topk_bytes = R * K * (size + 4)  # y and int32 expert_idx
    yield Case("moe_gating_top_k_softmax", softmax_topk, (x,),
               R * E * size + topk_bytes + R * K * 4, 3 * R * K)
    yield Case("moe_gating_top_k_softmax_grad", softmax_topk_y, (x,),
               2 * R * E * size + topk_bytes, R * E, grad_of=(0,), grad_y=grad_y)
    yield Case("moe_gating_top_k", grouped, (x, bias), (R * E + E) * size + topk_bytes, 2 * R * K)
    yield Case("moe_gating_top_k_grad", grouped_y, (x, bias), 2 * R * E * size + topk_bytes,
               R * E, grad_of=(0,), grad_y=grad_y)


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


def parse_modes(text):
    """eager, inductor (compile is its alias), comma-separated, or all; in that order."""
    names = {"eager": "eager", "inductor": "inductor", "compile": "inductor"}
    asked = {"eager", "inductor"} if text == "all" else set()
    for name in text.split(",") if text != "all" else ():
        if name not in names:
            raise SystemExit(f"--mode: {name!r} is not eager, inductor (compile) or all")
        asked.add(names[name])
    if "inductor" in asked and not hasattr(torch, "compile"):
        print(f"# torch {torch.__version__} has no torch.compile (PyTorch 2 on): the inductor "
              "rows are skipped", file=sys.stderr)
        asked.discard("inductor")
    return [mode for mode in ("eager", "inductor") if mode in asked]


CSV_COLUMNS = ("op,dtype,shape,elements,bytes,best_ms,median_ms,gelem_s,gb_s,copy_gb_s,ratio,reps,"
               "threads,torch,mode")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="4096x4096", help="RxC (default 4096x4096 = 16M)")
    parser.add_argument("--moe-shape", default="4096x8x4096",
                        help="RxKxH of the MoE operators (default 4096x8x4096)")
    parser.add_argument("--gate-shape", default="16384x8x256",
                        help="RxKxE of the routers (default 16384x8x256)")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (2)")
    parser.add_argument("--reps", type=int, default=0, help="timed calls (default: ~--budget s)")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds of calls per case when --reps is 0 (1; 0.2 in a sweep)")
    parser.add_argument("--ops", default="gelu_backward",
                        help="comma-separated names, or 'all' (default gelu_backward)")
    parser.add_argument("--mode", default="eager",
                        help="eager, inductor (alias compile), comma-separated, or all "
                             "(default eager)")
    parser.add_argument("--csv", action="store_true", help="comma-separated lines, a header first")
    parser.add_argument("--sweep-max", default=None,
                        help="sweep 4K, 16K, ... up to this many output elements (e.g. 16M)")
    args = parser.parse_args()
    rows, cols = (int(v) for v in args.shape.split("x"))
    moe_r, moe_k, moe_h = (int(v) for v in args.moe_shape.split("x"))
    gate_r, gate_k, gate_e = (int(v) for v in args.gate_shape.split("x"))
    wanted = None if args.ops == "all" else set(args.ops.split(","))
    modes = parse_modes(args.mode)
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
        print(f"{'op':30s} {'type':4s} {'mode':8s} {'shape':12s} {'best_ms':>8s} "
              f"{'median_ms':>9s} {'Gelem/s':>7s} {'GB/s':>7s} {'copyGB/s':>8s} {'ratio':>5s} "
              f"{'reps':>5s}")
    names = {torch.float32: "f32", torch.bfloat16: "bf16"}

    def wants(prefix):
        return wanted is None or any(name.startswith(prefix) for name in wanted)

    for dtype in (torch.float32, torch.bfloat16):
        for index, (size_rows, size_r) in enumerate(sizes):
            groups = [(f"{size_rows}x{cols}", cases(size_rows, cols, dtype))]
            if wants("moe_finalize") and size_r > 0:
                groups.append((f"{size_r}x{moe_k}x{moe_h}", moe_cases(size_r, moe_k, moe_h, dtype)))
            if wants("moe_gating") and index == 0:  # the routers at their one shape
                groups.append((args.gate_shape, gate_cases(gate_r, gate_k, gate_e, dtype)))
            for shape, group in groups:
                for case in group:
                    if wanted is not None and case.name.split("(")[0] not in wanted:
                        continue
                    for mode in modes:
                        if case.out_form and mode != "eager":
                            continue
                        report(case, mode, shape, names[dtype], args, budget)


def report(case, mode, shape, dtype_name, args, budget):
    best, median, reps = measure(case.runner(mode), args.reps, budget)
    copy_best, _, _ = copy_time(case.bytes, reps, budget)
    gbs, copy_gbs = case.bytes / best / 1e9, case.bytes / copy_best / 1e9
    elements = case.elements
    if args.csv:
        print(f'"{case.name}",{dtype_name},{shape},{elements},{case.bytes},{best * 1e3:.6f},'
              f"{median * 1e3:.6f},{elements / best / 1e9:.4f},{gbs:.3f},"
              f"{copy_gbs:.3f},{gbs / copy_gbs:.4f},{reps},"
              f"{torch.get_num_threads()},{torch.__version__},{mode}", flush=True)
    else:
        print(f"{case.name:30s} {dtype_name:4s} {mode:8s} {shape:12s} {best * 1e3:8.3f} "
              f"{median * 1e3:9.3f} {elements / best / 1e9:7.3f} {gbs:7.2f} "
              f"{copy_gbs:8.2f} {gbs / copy_gbs:5.2f} {reps:5d}", flush=True)


if __name__ == "__main__":
    main()
