#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""examples/python/swiglu_quant.py: infiniop.swiglu_quant, FP8 E4M3 per group of 128 with dynamic
scales and INT8 per token, from BF16, checked against PyTorch in float64: each scale is amax / qmax
rounded to F32, and each quantized value dequantizes to within half a step of the exact one.

    PYTHONPATH=python /usr/bin/python3 examples/python/swiglu_quant.py [cpu|cpu_reference|opencl]

The library is build/libinfiniop.so, or $INFINIOP_LIBRARY. Exit status 0 when every result
matches. On a PyTorch without torch.float8_e4m3fn the FP8 bytes come back as uint8 and are
decoded here.
"""
import sys

import torch

import infiniop


def fp8_values(y):
    """The values of e4m3fn bytes (uint8 or torch.float8_e4m3fn) as float64."""
    if y.dtype != torch.uint8:
        return y.double()
    b = y.to(torch.int64)
    e, m = (b >> 3) & 15, (b & 7).double()
    v = torch.where(e > 0, (1 + m / 8) * torch.pow(2.0, (e - 7).double()), m * 2.0**-9)
    return torch.where(b >= 128, -v, v)


def main(device="cpu"):
    torch.manual_seed(0)
    x = (torch.randn(16, 2 * 512) * 3).to(torch.bfloat16)
    x1, x2 = x.double().chunk(2, -1)
    z = torch.nn.functional.silu(x1) * x2
    bad = 0
    for name, dtype, group, qmax in (("fp8 per group of 128", "fp8", 128, 448.0),
                                     ("int8 per token", "int8", 0, 127.0)):
        y, scale = infiniop.swiglu_quant(x, dtype=dtype, group_size=group, device=device)
        zg = z.reshape(16, -1, group or 512)
        want_scale = (zg.abs().amax(-1) / qmax).float()
        values = (fp8_values(y) if dtype == "fp8" else y.double()).reshape(zg.shape)
        v = zg / scale.double().unsqueeze(-1)
        half_step = (v.abs() * 2.0**-4).clamp(min=2.0**-10) if dtype == "fp8" else 0.5
        ok = torch.equal(scale, want_scale) and bool(((values - v).abs() <= half_step).all())
        print(f"{name:22s} {'matches' if ok else 'MISMATCH'}: scale[0] = {scale[0].tolist()}")
        bad += not ok
    return bad


if __name__ == "__main__":
    sys.exit(1 if main(*sys.argv[1:2]) else 0)
