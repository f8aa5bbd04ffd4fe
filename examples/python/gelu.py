#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""examples/python/gelu.py: infiniop.gelu and infiniop.gelu_backward_v2, both approximations, F32
and BF16, checked against PyTorch (torch.nn.functional.gelu and its autograd).

    PYTHONPATH=python /usr/bin/python3 examples/python/gelu.py [cpu|cpu_reference|opencl]

The library is build/libinfiniop.so, or $INFINIOP_LIBRARY. Exit status 0 when every result
matches.
"""
import sys

import torch

import infiniop

TOLERANCE = {torch.float32: dict(rtol=1e-5, atol=1e-6), torch.bfloat16: dict(rtol=1e-2, atol=1e-2)}


def main(device="cpu"):
    torch.manual_seed(0)
    bad = 0
    for dtype in (torch.float32, torch.bfloat16):
        x = (torch.randn(64, 257) * 3).to(dtype)
        dy = torch.randn(64, 257).to(dtype)
        for approximate in ("none", "tanh"):
            y = infiniop.gelu(x, approximate=approximate, device=device)
            dx = infiniop.gelu_backward_v2(dy, x, approximate=approximate, device=device)

            # PyTorch in float64 with autograd, rounded to the dtype.
            x_ref = x.double().requires_grad_()  # float64: a new tensor
            y_ref = torch.nn.functional.gelu(x_ref, approximate=approximate)
            y_ref.backward(dy.double())
            for name, got, want in (("gelu", y, y_ref.detach()), ("gelu'", dx, x_ref.grad)):
                try:
                    torch.testing.assert_close(got, want.to(dtype), **TOLERANCE[dtype])
                    print(f"{name:6s} {approximate:4s} {str(dtype):14s} matches torch")
                except AssertionError as error:
                    print(f"{name} {approximate} {dtype}: MISMATCH\n{error}")
                    bad += 1
    return bad


if __name__ == "__main__":
    sys.exit(1 if main(*sys.argv[1:2]) else 0)
