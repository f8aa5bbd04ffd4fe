#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Per-call cost of the Python binding at a tiny shape (F32 torch tensors of 1x64, the split
operators' inputs 1x128, cpu device): the functional call (infiniop.<op>), the same call on a
descriptor created once and passed raw pointers (what the binding cannot go below), torch's own
op for the same math, and for the forward operators the autograd layer (infiniop.torch.<op> on
an input that requires grad: the forward with its graph node) and its ratio to the functional
call.

A second table follows: SwiGlu on a 1x128 input that does not require grad through each path a
torch user has, in the same rounds: the functional call, torch.ops.infiniop.swiglu (the custom
op, eager), infiniop.torch.swiglu (eager: its autograd.Function), torch.compile(fullgraph=True,
dynamic=False) of a function calling infiniop.torch.swiglu (the compiled graph calls the custom
op), and torch's own F.silu(a) * b eager and compiled the same way. It needs PyTorch 2.4 or later
(torch.compile and the custom op's fake kernel); --no-compile leaves out the compiled rows.

    python3 bench/python_overhead.py [--calls 500] [--repeats 30] [--device cpu] [--csv] [--wall]
                                     [--no-compile]

Each figure is the best over --repeats (default 30) of the mean over --calls (default 500)
calls, in microseconds of the calling thread's CPU time (time.thread_time: a shared machine's
other processes do not count; --wall for wall-clock time): the best run is the one least
disturbed. At this size the kernels themselves take well under a microsecond, so this is the
binding's (and torch's dispatcher's, and the compiled graph's guards') overhead.
"""

import argparse
import ctypes
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import infiniop  # noqa: E402
import infiniop.torch as iop  # noqa: E402
from infiniop.torch import _ops as torch_ops  # noqa: E402 (COMPILABLE: torch.compile can trace)


def _problems(device):
    """(name, infiniop call, torch call, (descriptor class, arrays, attributes)) per operator."""
    g = torch.Generator().manual_seed(0)

    def rand(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g, dtype=dtype)

    x64, dy64, x128 = rand(1, 64), rand(1, 64), rand(1, 128)
    y64 = torch.empty(1, 64)
    R, K, E, H = 1, 2, 4, 64
    topk = torch.tensor([[1, 3]])
    scales = rand(R, K)
    ex = rand(R * K, H)
    row_idx = torch.tensor([0, 1])
    moe_kw = dict(expert_num=E, active_num=0, expert_capacity=0, drop_pad_mode=0)

    def torch_swiglu(x):
        a, b = x.chunk(2, -1)
        return F.silu(a) * b

    def torch_swiglu_backward(dy, x):
        a, b = x.chunk(2, -1)
        s = torch.sigmoid(a)
        return torch.cat((dy * b * (s + a * s * (1 - s)), dy * a * s), -1)

    def torch_gelu_mul(x):
        a, b = x.chunk(2, -1)
        return F.gelu(a) * b

    def torch_clipped(x):
        a, b = x[..., ::2].clamp(max=7.0), x[..., 1::2].clamp(-7.0, 7.0)
        return a * torch.sigmoid(1.702 * a) * (b + 1)

    def torch_finalize(ex, idx, scales):
        return (ex[idx].view(R, K, H) * scales.unsqueeze(-1)).sum(1)

    def torch_init(x, topk):
        order = topk.flatten().argsort(stable=True)
        return x[order // K], order

    gx = torch.empty(R * K, H)
    x64g, x128g, exg = (t.clone().requires_grad_() for t in (x64, x128, ex))
    scalesg = scales.clone().requires_grad_()
    autograd = {
        "gelu": lambda: iop.gelu(x64g, device=device),
        "swiglu": lambda: iop.swiglu(x128g, device=device),
        "gelu_mul": lambda: iop.gelu_mul(x128g, device=device),
        "clipped_swiglu": lambda: iop.clipped_swiglu(x128g, device=device),
        "moe_init_routing_v2": lambda: iop.moe_init_routing_v2(x64g, topk, device=device,
                                                               **moe_kw),
        "moe_finalize_routing_v2": lambda: iop.moe_finalize_routing_v2(
            exg, row_idx, scales=scalesg, device=device),
    }
    return autograd, [
        ("gelu_backward", lambda: infiniop.gelu_backward(dy64, x64, approximate="tanh",
                                                         device=device),
         lambda: torch.ops.aten.gelu_backward(dy64, x64, approximate="tanh"),
         (infiniop.GeluBackward, [y64, x64, dy64], {})),
        ("gelu", lambda: infiniop.gelu(x64, device=device), lambda: F.gelu(x64),
         (infiniop.Gelu, [y64, x64], {"approximate": 0})),
        ("gelu_backward_v2", lambda: infiniop.gelu_backward_v2(dy64, x64, device=device),
         lambda: torch.ops.aten.gelu_backward(dy64, x64),
         (infiniop.GeluBackwardV2, [y64, x64, dy64], {"approximate": 0})),
        ("swiglu", lambda: infiniop.swiglu(x128, device=device), lambda: torch_swiglu(x128),
         (infiniop.SwiGlu, [y64, x128], {"dim": -1})),
        ("swiglu_backward", lambda: infiniop.swiglu_backward(dy64, x128, device=device),
         lambda: torch_swiglu_backward(dy64, x128),
         (infiniop.SwiGluBackward, [torch.empty(1, 128), dy64, x128], {"dim": -1})),
        ("gelu_mul", lambda: infiniop.gelu_mul(x128, device=device),
         lambda: torch_gelu_mul(x128), (infiniop.GeluMul, [y64, x128], {"approximate": 0})),
        ("gelu_mul_backward", lambda: infiniop.gelu_mul_backward(dy64, x128, device=device),
         None, (infiniop.GeluMulBackward, [torch.empty(1, 128), dy64, x128],
                {"approximate": 0})),
        ("clipped_swiglu", lambda: infiniop.clipped_swiglu(x128, device=device),
         lambda: torch_clipped(x128), (infiniop.ClippedSwiglu, [y64, x128], {})),
        ("clipped_swiglu_backward",
         lambda: infiniop.clipped_swiglu_backward(dy64, x128, device=device), None,
         (infiniop.ClippedSwigluBackward, [torch.empty(1, 128), dy64, x128], {})),
        ("moe_init_routing_v2",
         lambda: infiniop.moe_init_routing_v2(x64, topk, device=device, **moe_kw),
         lambda: torch_init(x64, topk),
         (infiniop.MoeInitRoutingV2, [gx, row_idx.clone(), None, None, x64, topk], moe_kw)),
        ("moe_init_routing_v2_grad",
         lambda: infiniop.moe_init_routing_v2_grad(ex, row_idx, top_k=K, device=device),
         None, (infiniop.MoeInitRoutingV2Grad, [y64, ex, row_idx], {"top_k": K})),
        ("moe_finalize_routing_v2",
         lambda: infiniop.moe_finalize_routing_v2(ex, row_idx, scales=scales, device=device),
         lambda: torch_finalize(ex, row_idx, scales),
         (infiniop.MoeFinalizeRoutingV2, [y64, ex, row_idx, None, None, None, scales], {})),
        ("moe_finalize_routing_v2_grad",
         lambda: infiniop.moe_finalize_routing_v2_grad(dy64, row_idx, ex, scales,
                                                       device=device),
         None, (infiniop.MoeFinalizeRoutingV2Grad,
                [gx, torch.empty(R, K), dy64, row_idx, ex, scales], {})),
    ]


def _swiglu_paths(device, compile_too):
    """(label, call) per path of SwiGlu at 1x128 F32 (see the module docstring)."""
    x = torch.randn(1, 128, generator=torch.Generator().manual_seed(1))

    def torch_swiglu(t):
        a, b = t.chunk(2, -1)
        return F.silu(a) * b

    def library_swiglu(t):
        return iop.swiglu(t, device=device)

    paths = [("infiniop.swiglu (functional)", lambda: infiniop.swiglu(x, device=device))]
    if hasattr(torch.ops.infiniop, "swiglu"):
        custom = torch.ops.infiniop.swiglu
        paths.append(("torch.ops.infiniop.swiglu, eager", lambda: custom(x, device=device)))
    paths.append(("infiniop.torch.swiglu, eager", lambda: library_swiglu(x)))
    if compile_too:
        compiled = torch.compile(library_swiglu, fullgraph=True, dynamic=False)
        paths.append(("infiniop.torch.swiglu, torch.compile", lambda: compiled(x)))
    paths.append(("torch F.silu(a) * b, eager", lambda: torch_swiglu(x)))
    if compile_too:
        compiled_torch = torch.compile(torch_swiglu, fullgraph=True, dynamic=False)
        paths.append(("torch F.silu(a) * b, torch.compile", lambda: compiled_torch(x)))
    return paths


def _mean_us(call, calls, clock):
    start = clock()
    for _ in range(calls):
        call()
    return (clock() - start) / calls * 1e6


def _raw_call(device, cls, arrays, attributes):
    """A descriptor made once; each call is the bare C calculate on the arrays' pointers."""
    handle = infiniop.Handle(device)
    op = cls.for_arrays(handle, *arrays, **attributes)
    function = getattr(op._lib, f"infiniop{op._NAME}")
    raw, workspace_size = op.value, op.workspace_size
    workspace = ctypes.create_string_buffer(max(workspace_size, 1))
    pointers = [None if a is None else a.data_ptr() for a in arrays]
    pointers += [None] * (len(cls._ARGUMENTS) - len(pointers))  # absent trailing tensors

    def call():
        function(raw, workspace, workspace_size, *pointers, None)

    return call, (handle, op, workspace, arrays)  # keep them alive


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--csv", action="store_true", help="comma-separated output")
    parser.add_argument("--wall", action="store_true", help="wall-clock time, not CPU time")
    parser.add_argument("--no-compile", action="store_true",
                        help="leave out the torch.compile rows of the SwiGlu table")
    args = parser.parse_args()
    compile_too = not args.no_compile and getattr(torch_ops, "COMPILABLE", False)
    if not args.no_compile and not compile_too:
        print(f"# torch {torch.__version__}: no torch.compile of infiniop.torch (PyTorch 2.4 on); "
              "the compiled rows are left out", file=sys.stderr)
    clock = time.perf_counter if args.wall else time.thread_time
    torch.set_num_threads(1)
    columns = ("operator", "infiniop_us", "raw_c_us", "torch_us", "autograd_us", "autograd_ratio")
    problems = []
    autograd, table = _problems(args.device)
    for name, call, torch_call, raw in table:
        raw_call, keep = _raw_call(args.device, *raw)
        calls = [call, raw_call, torch_call, autograd.get(name)]
        problems.append((name, calls, keep))
        for function in calls:
            if function is not None:
                function()  # warm: library load, descriptor cache, torch's first-call paths
    paths = _swiglu_paths(args.device, compile_too)
    for _, function in paths:
        function()  # warm: the compiled ones compile here
    # Rounds over every operator, best of each: a slow spell of the machine hits every row
    # alike instead of one row's whole measurement.
    best = {name: [float("inf")] * 4 for name, _, _ in problems}
    best_path = [float("inf")] * len(paths)
    for _ in range(args.repeats):
        for name, calls, _ in problems:
            for column, function in enumerate(calls):
                if function is not None:
                    best[name][column] = min(best[name][column],
                                             _mean_us(function, args.calls, clock))
        for index, (_, function) in enumerate(paths):
            best_path[index] = min(best_path[index], _mean_us(function, args.calls, clock))
    rows = []
    for name, _, _ in problems:
        values = [None if v == float("inf") else v for v in best[name]]
        ratio = values[3] / values[0] if values[3] is not None else None
        rows.append((name, *values, ratio))
    print(f"# 1x64 F32 torch tensors (split operators' inputs 1x128), device {args.device}, "
          f"best of {args.repeats} x {args.calls} calls, microseconds of "
          f"{'wall' if args.wall else 'thread CPU'} time per call; cpu ISA "
          f"{infiniop.cpu_isa_name()}, {os.cpu_count()} cpus, torch {torch.__version__}")
    if args.csv:
        print(",".join(columns))
        for row in rows:
            print(",".join([row[0]] + ["" if v is None else f"{v:.2f}" for v in row[1:]]))
    else:
        print(f"{columns[0]:30} {columns[1]:>12} {columns[2]:>10} {columns[3]:>10} "
              f"{columns[4]:>12} {columns[5]:>15}")
        for row in rows:
            cells = ["-" if v is None else f"{v:.2f}" for v in row[1:]]
            print(f"{row[0]:30} {cells[0]:>12} {cells[1]:>10} {cells[2]:>10} {cells[3]:>12} "
                  f"{cells[4]:>15}")
    print("\n# SwiGlu, 1x128 F32 input (no grad), per path")
    if args.csv:
        print("path,us")
        for (label, _), value in zip(paths, best_path):
            print(f'"{label}",{value:.2f}')
    else:
        print(f"{'path':40} {'us':>8}")
        for (label, _), value in zip(paths, best_path):
            print(f"{label:40} {value:8.2f}")


if __name__ == "__main__":
    main()
