#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""examples/python/clipped_swiglu.py: infiniop.clipped_swiglu and infiniop.clipped_swiglu_backward,
the GPT-OSS activation (alpha 1.702, limit 7, bias 1; gate and up columns interleaved, or in
halves), with a group_index that leaves the last rows out, F32 and BF16, checked against PyTorch
float64 autograd of the composed expression.

    PYTHONPATH=python /usr/bin/python3 examples/python/clipped_swiglu.py [cpu|cpu_reference|opencl]

The library is build/libinfiniop.so, or $INFINIOP_LIBRARY. Exit status 0 when every result
matches.
"""
import sys

import torch

import infiniop

ALPHA, LIMIT, BIAS = 1.702, 7.0, 1.0
TOLERANCE = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=1e-2, atol=5e-2)}


def reference(x, interleaved):
    a, b = (x[..., 0::2], x[..., 1::2]) if interleaved else x.chunk(2, -1)
    # a.clamp(max=LIMIT) and b.clamp(-LIMIT, LIMIT) whose gradients pass at the limits themselves,
    # as the library's (docs/clipped_swiglu.md): PyTorch 2's clamp gives 0 there, and 7.0 is a
    # BF16 value
    a = torch.where(a > LIMIT, LIMIT, a)
    b = torch.where(b > LIMIT, LIMIT, torch.where(b < -LIMIT, -LIMIT, b))
    return a * torch.sigmoid(ALPHA * a) * (b + BIAS)


def main(device="cpu"):
    torch.manual_seed(0)
    bad = 0
    group_index = torch.tensor([5, 0, 17, 3], dtype=torch.int64)  # 25 of the 32 rows are computed
    rows = int(group_index.sum())
    for dtype in (torch.float32, torch.bfloat16):
        for interleaved in (True, False):
            x = (torch.randn(32, 2 * 72) * 5).to(dtype)  # about 16% beyond the limit
            options = dict(dim=-1, alpha=ALPHA, limit=LIMIT, bias=BIAS, interleaved=interleaved,
                           group_index=group_index, device=device)
            y = infiniop.clipped_swiglu(x, **options)
            y_grad = torch.randn_like(y)
            x_grad = infiniop.clipped_swiglu_backward(y_grad, x, **options)

            x_ref = x.double().requires_grad_()
            y_ref = reference(x_ref, interleaved)
            y_ref.backward(y_grad.double())
            y_want, x_grad_want = y_ref.detach(), x_ref.grad
            y_want[rows:] = 0  # rows past the group_index sum are zero-filled
            x_grad_want[rows:] = 0
            for name, got, want in (("y", y, y_want), ("x_grad", x_grad, x_grad_want)):
                layout = "interleaved" if interleaved else "halves"
                try:
                    torch.testing.assert_close(got, want.to(dtype), **TOLERANCE[dtype])
                    print(f"{name:6s} {layout:11s} {str(dtype):14s} matches torch")
                except AssertionError as error:
                    print(f"{name} {layout} {dtype}: MISMATCH\n{error}")
                    bad += 1
    return bad


if __name__ == "__main__":
    sys.exit(1 if main(*sys.argv[1:2]) else 0)
