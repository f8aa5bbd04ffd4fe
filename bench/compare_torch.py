#!/usr/bin/env python3
"""Times PyTorch's kernels for infiniop's operators at 16M output elements, so that
infiniop-bench's figures have a baseline from the same machine: GeluBackward through
torch.ops.aten.gelu_backward, the split activations as composed ops (chunk + silu/gelu + mul)
and their gradients through autograd. Run with Debian's python3 (it carries torch)."""
import argparse
import time

import torch


def best_time(fn, reps):
    fn()
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def cases(rows, cols, dtype):
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(rows, cols, generator=g) * 20 - 10).to(dtype)
    dy = (torch.rand(rows, cols, generator=g) * 8 - 4).to(dtype)
    xx = (torch.rand(rows, 2 * cols, generator=g) * 20 - 10).to(dtype)

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
    gelu_tanh = lambda t: torch.nn.functional.gelu(t, approximate="tanh")  # noqa: E731
    size = torch.tensor([], dtype=dtype).element_size()
    n = rows * cols
    return [
        ("gelu_backward", lambda: torch.ops.aten.gelu_backward(dy, x, approximate="tanh"), 3 * n * size),
        ("swiglu", split_forward(silu), 3 * n * size),
        ("swiglu_backward", split_backward(silu), 5 * n * size),
        ("gelu_mul", split_forward(gelu), 3 * n * size),
        ("gelu_mul_tanh", split_forward(gelu_tanh), 3 * n * size),
        ("gelu_mul_backward", split_backward(gelu), 5 * n * size),
        ("gelu_mul_backward_tanh", split_backward(gelu_tanh), 5 * n * size),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shape", default="4096x4096")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    rows, cols = (int(v) for v in args.shape.split("x"))
    torch.set_num_threads(args.threads)
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, shape {args.shape}")
    print(f"{'op':24s} {'dtype':9s} {'best_ms':>9s} {'Gelem/s':>8s} {'GB/s':>7s}")
    for dtype in (torch.float32, torch.bfloat16):
        for name, fn, nbytes in cases(rows, cols, dtype):
            t = best_time(fn, args.reps)
            print(f"{name:24s} {str(dtype)[6:]:9s} {t * 1e3:9.3f} {rows * cols / t / 1e9:8.3f} "
                  f"{nbytes / t / 1e9:7.2f}")


if __name__ == "__main__":
    main()
