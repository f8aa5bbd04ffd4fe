#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""examples/python/swiglu.py: infiniop.swiglu and infiniop.swiglu_backward on a split of the last
dim and of dim 0, F32 and BF16, checked against PyTorch (silu(x1) * x2 and its autograd).

    PYTHONPATH=python /usr/bin/python3 examples/python/swiglu.py [cpu|cpu_reference|opencl]

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
        for dim in (-1, 0):
            x = (torch.randn(32, 96) * 4).to(dtype)
            y = infiniop.swiglu(x, dim=dim, device=device)
            y_grad = torch.randn_like(y)
            x_grad = infiniop.swiglu_backward(y_grad, x, dim=dim, device=device)

            x_ref = x.double().requires_grad_()  # float64: a new tensor
            x1, x2 = x_ref.chunk(2, dim)
            y_ref = torch.nn.functional.silu(x1) * x2
            y_ref.backward(y_grad.double())
            for name, got, want in (("y", y, y_ref.detach()), ("x_grad", x_grad, x_ref.grad)):
                try:
                    torch.testing.assert_close(got, want.to(dtype), **TOLERANCE[dtype])
                    print(f"{name:6s} dim {dim:2d} {str(dtype):14s} matches torch")
                except AssertionError as error:
                    print(f"{name} dim {dim} {dtype}: MISMATCH\n{error}")
                    bad += 1
    return bad


if __name__ == "__main__":
    sys.exit(1 if main(*sys.argv[1:2]) else 0)
