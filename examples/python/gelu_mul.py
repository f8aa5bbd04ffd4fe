#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""examples/python/gelu_mul.py: infiniop.gelu_mul and infiniop.gelu_mul_backward (the GeGLU of
the last dim's halves, erf and tanh), F32 and BF16, checked against PyTorch float64 autograd of
gelu(x1) * x2.

    PYTHONPATH=python /usr/bin/python3 examples/python/gelu_mul.py [cpu|cpu_reference|opencl]

The library is build/libinfiniop.so, or $INFINIOP_LIBRARY. Exit status 0 when every result
matches.
"""
import sys

import torch

import infiniop

TOLERANCE = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=1e-2, atol=2e-2)}


def main(device="cpu"):
    torch.manual_seed(0)
    bad = 0
    for dtype in (torch.float32, torch.bfloat16):
        for approximate in ("none", "tanh"):
            x = (torch.randn(16, 2, 130) * 3).to(dtype)  # any rank; the last dim is split
            out = infiniop.gelu_mul(x, approximate=approximate, device=device)
            out_grad = torch.randn_like(out)
            x_grad = infiniop.gelu_mul_backward(out_grad, x, approximate=approximate,
                                                device=device)

            x_ref = x.double().requires_grad_()
            x1, x2 = x_ref.chunk(2, -1)
            out_ref = torch.nn.functional.gelu(x1, approximate=approximate) * x2
            out_ref.backward(out_grad.double())
            for name, got, want in (("out", out, out_ref.detach()), ("x_grad", x_grad, x_ref.grad)):
                try:
                    torch.testing.assert_close(got, want.to(dtype), **TOLERANCE[dtype])
                    print(f"{name:6s} {approximate:4s} {str(dtype):14s} matches torch")
                except AssertionError as error:
                    print(f"{name} {approximate} {dtype}: MISMATCH\n{error}")
                    bad += 1
    return bad


if __name__ == "__main__":
    sys.exit(1 if main(*sys.argv[1:2]) else 0)
