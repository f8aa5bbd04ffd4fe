# SPDX-License-Identifier: Apache-2.0
"""The K each operator needs in the relaxed mode, beside the strict mode's on the same data: the
largest F32 |got - truth| / (tests/python/test_relaxed.py's bound at K = 1), over uniform
[-12, 12] and the test's own data (docs/accuracy.md, "The relaxed mode").

Usage: INFINIOP_CPU_ISA=AVX2 INFINIOP_LIBRARY=build/libinfiniop.so /usr/bin/python3 bench/relaxed_k.py cpu|opencl
"""
import pathlib
import sys

root = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(root / "tests" / "python"))
sys.path.insert(0, str(root / "python"))
import torch  # noqa: E402

import infiniop  # noqa: E402
from test_relaxed import CASES, GRADIENT_CASES, hostile, rng_for  # noqa: E402

SHAPE, ROUNDS = (64, 8192), 6


def inputs(name, seed, shape):
    rng = rng_for("relaxed_k", name, seed)
    if seed % 2 == 0:
        return torch.from_numpy(rng.uniform(-12.0, 12.0, shape)).float()
    return hostile(rng, shape)


def worst(got, truth, bound):
    ok = torch.isfinite(truth) & (bound > 2.0 ** -100)
    return ((got.double() - truth).abs() / bound)[ok].max().item()


def main():
    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    strict, relaxed = infiniop.Handle(device), infiniop.Handle(device)
    relaxed.fpmath = "relaxed"
    where = f"{device} {infiniop.cpu_isa_name()}" if device == "cpu" else device
    for name, (run, truth_of, _) in sorted(CASES.items()):
        k = [0.0, 0.0]
        for seed in range(ROUNDS):
            x = inputs(name, seed, SHAPE)
            truth, bound = truth_of(x.double(), 1.0)
            for i, handle in enumerate((relaxed, strict)):
                k[i] = max(k[i], worst(run(x, handle), truth, bound))
        print(f"{where} {name}: K relaxed {k[0]:.2f}, strict {k[1]:.2f}")
    for name, (run, truth_of, _) in sorted(GRADIENT_CASES.items()):
        k = [0.0, 0.0]
        grad_shape = SHAPE if name.startswith("gelu_backward") else (SHAPE[0], SHAPE[1] // 2)
        for seed in range(ROUNDS):
            x = inputs(name, seed, SHAPE)
            y_grad = torch.from_numpy(rng_for("relaxed_k y_grad", name, seed)
                                      .uniform(-4.0, 4.0, grad_shape)).float()
            truth, bound = truth_of(x.double(), y_grad.double(), 1.0)
            for i, handle in enumerate((relaxed, strict)):
                k[i] = max(k[i], worst(run(y_grad, x, handle), truth, bound))
        print(f"{where} {name}: K relaxed {k[0]:.2f}, strict {k[1]:.2f}")


if __name__ == "__main__":
    main()
