# SPDX-License-Identifier: Apache-2.0
"""Every F32 result of the activation operators within 2 ulp of the float64 truth once each
operator's cancellation floor is taken off (docs/accuracy.md, "F32 within 2 ulp").

The floor is the part of the documented bound that is not relative to |truth|:
`bound - K u |truth|` (K u terms (1 + c) plus the absolute floors, less K u |truth|), zero where
nothing cancels; the error beyond it, in F32 ulps of the truth, must be at most 2. The data are
the suite's signed mix, [-100, 100] and 2 x normal; `bench/accuracy_k.py` prints the same figure
on more elements. The suite runs this once per cpu target (INFINIOP_CPU_ISA) and on opencl.
"""
import numpy as np
import pytest
import torch

import infiniop

import test_clipped_swiglu as clipped
import test_gelu as gelu
import test_gelu_backward as gelu_backward
import test_gelu_mul as gelu_mul
import test_swiglu as swiglu
from helpers import FAST_DEVICES, f32_bound, on, random_values, ulp_of

N = 1 << 14


def inputs():
    rng = np.random.default_rng(2026)

    def values():
        return np.concatenate([random_values(rng, (N,)), rng.uniform(-100, 100, N // 4),
                               rng.standard_normal(N) * 2])

    x = torch.from_numpy(np.stack([values(), values()], 1).astype(np.float32))
    g = torch.from_numpy(rng.standard_normal((x.shape[0], 1)).astype(np.float32) * 3)
    return x, g


def ulps_beyond_floor(got, truth, bound, operator):
    got = got.double().reshape(-1).numpy()
    truth, bound = np.asarray(truth).reshape(-1), np.asarray(bound).reshape(-1)
    ok = np.isfinite(truth) & np.isfinite(bound)
    floor = np.maximum(bound[ok] - f32_bound(operator) * np.abs(truth[ok]), 0)
    error = np.maximum(np.abs(got[ok] - truth[ok]) - floor, 0)
    return float((error / ulp_of(truth[ok], "float32")).max())


def cases(device):
    """(name, ulps) of every operator and output on `device`."""
    x, g = inputs()
    x64, g64 = x.double(), g.double()
    yield_bound, grad_bound = swiglu.error_bounds(x64, g64, -1, "float32")
    y, grad = swiglu.torch_oracle(x, g, -1)
    yield "swiglu", ulps_beyond_floor(infiniop.swiglu(x, dim=-1, **on(device)), y, yield_bound,
                                      "swiglu")
    yield "swiglu_backward", ulps_beyond_floor(
        infiniop.swiglu_backward(g, x, dim=-1, **on(device)), grad, grad_bound, "swiglu_backward")
    for approximate in ["none", "tanh"]:
        yield_bound, grad_bound = gelu_mul.error_bounds(x64, g64, approximate)
        y, grad = gelu_mul.torch_oracle(x, g, approximate)
        yield f"gelu_mul {approximate}", ulps_beyond_floor(
            infiniop.gelu_mul(x, approximate=approximate, **on(device)), y, yield_bound, "gelu_mul")
        yield f"gelu_mul_backward {approximate}", ulps_beyond_floor(
            infiniop.gelu_mul_backward(g, x, approximate=approximate, **on(device)), grad,
            grad_bound, "gelu_mul_backward")
    for interleaved in [True, False]:
        yield_bound, grad_bound, _, _ = clipped.error_model(x64, g64, -1, 1.702, 7.0, 1.0,
                                                            interleaved)
        y, grad = clipped.torch_oracle(x, g, -1, 1.702, 7.0, 1.0, interleaved)
        yield f"clipped_swiglu {interleaved}", ulps_beyond_floor(
            infiniop.clipped_swiglu(x, dim=-1, interleaved=interleaved, **on(device)), y,
            yield_bound, "clipped_swiglu")
        yield f"clipped_swiglu_backward {interleaved}", ulps_beyond_floor(
            infiniop.clipped_swiglu_backward(g, x, dim=-1, interleaved=interleaved, **on(device)),
            grad, grad_bound, "clipped_swiglu_backward")
    xx, gg = x[:, 0].contiguous(), g[:, 0].contiguous()
    truth = gelu_backward.gelu_backward_truth(xx.double().numpy(), gg.double().numpy())
    bound = gelu_backward.allowed_error(xx.double().numpy(), gg.double().numpy(), truth, "float32")
    yield "gelu_backward", ulps_beyond_floor(infiniop.gelu_backward(gg, xx, **on(device), approximate="tanh"), truth,
                                             bound, "gelu_backward")
    for approximate in ["none", "tanh"]:
        y_bound, grad_bound = gelu.error_bounds(xx.double(), gg.double(), approximate)
        y, grad = gelu.torch_oracle(xx, gg, approximate)
        yield f"gelu {approximate}", ulps_beyond_floor(
            infiniop.gelu(xx, approximate=approximate, **on(device)), y, y_bound, "gelu")
        yield f"gelu_backward_v2 {approximate}", ulps_beyond_floor(
            infiniop.gelu_backward_v2(gg, xx, approximate=approximate, **on(device)), grad,
            grad_bound, "gelu_backward_v2")


@pytest.mark.parametrize("device", FAST_DEVICES)
def test_f32_within_two_ulp_beyond_the_floor(device):
    figures = dict(cases(device))
    print(f"\n{device} ({infiniop.cpu_isa_name()}): " +
          ", ".join(f"{name} {ulps:.2f}" for name, ulps in figures.items()))
    assert all(ulps <= 2.0 for ulps in figures.values()), figures
