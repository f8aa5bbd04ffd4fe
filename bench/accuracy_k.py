# SPDX-License-Identifier: Apache-2.0
"""The K each operator needs: max F32 |got - truth| / (its bound at K = 1), tests/accuracy_bounds.json.

Usage: INFINIOP_CPU_ISA=AVX2 INFINIOP_LIBRARY=build/libinfiniop.so /usr/bin/python3 bench/accuracy_k.py cpu|opencl
"""
import sys
import pathlib
root = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(root / "tests" / "python")); sys.path.insert(0, str(root / "python"))
import numpy as np, torch
import helpers
K = dict(helpers._F32_BOUND_U)
for k in helpers._F32_BOUND_U: helpers._F32_BOUND_U[k] = 1
import test_swiglu as sw, test_gelu_mul as gm, test_clipped_swiglu as cs, test_gelu_backward as gb
import test_gelu as ge
import infiniop
dev = sys.argv[1]
rng = np.random.default_rng(7)
n = 1 << 18
def vals(n):
    v = helpers.random_values(rng, (n,))
    return np.concatenate([v, rng.uniform(-100, 100, n // 4), rng.standard_normal(n) * 2])
def ratio(got, truth, bound, name):
    """K the data needs, and the ulps: the largest error in F32 ulps of the truth once the
    cancellation floor is taken off, K u (terms (1 + c) - |truth|) (zero where nothing cancels)."""
    got = got.double().reshape(-1).numpy(); truth = truth.reshape(-1).numpy(); bound = bound.reshape(-1).numpy()
    ok = np.isfinite(truth) & np.isfinite(bound) & (bound > 0)
    error = np.abs(got - truth)[ok]
    floor = K[name] * np.maximum(bound[ok] - 2.0 ** -24 * np.abs(truth[ok]), 0)
    ulps = (np.maximum(error - floor, 0) / helpers.ulp_of(truth[ok], "float32")).max()
    return f"K {(error / bound[ok]).max():.2f}  ulp beyond the floor {ulps:.2f}"
x = torch.from_numpy(np.stack([vals(n), vals(n)], 1).astype(np.float32))  # (m, 2): halves on dim -1
m = x.shape[0]
g = torch.from_numpy(rng.standard_normal((m, 1)).astype(np.float32) * 3)
x64, g64 = x.double(), g.double()
# swiglu
yb, gb_ = sw.error_bounds(x64, g64, -1, "float32")
ty, tg = sw.torch_oracle(x, g, -1)
print("swiglu", ratio(infiniop.swiglu(x, dim=-1, device=dev), ty, yb, "swiglu"))
print("swiglu_backward", ratio(infiniop.swiglu_backward(g, x, dim=-1, device=dev), tg, gb_, "swiglu_backward"))
for approx in ["none", "tanh"]:
    yb, gb_ = gm.error_bounds(x64, g64, approx)
    ty, tg = gm.torch_oracle(x, g, approx)
    print("gelu_mul", approx, ratio(infiniop.gelu_mul(x, approximate=approx, device=dev), ty, yb, "gelu_mul"))
    print("gelu_mul_backward", approx, ratio(infiniop.gelu_mul_backward(g, x, approximate=approx, device=dev), tg, gb_, "gelu_mul_backward"))
for inter in [True, False]:
    yb, gbd, _, _ = cs.error_model(x64, g64, -1, 1.702, 7.0, 1.0, inter)
    ty, tg = cs.torch_oracle(x, g, -1, 1.702, 7.0, 1.0, inter)
    print("clipped_swiglu", inter, ratio(infiniop.clipped_swiglu(x, dim=-1, interleaved=inter, device=dev), ty, yb, "clipped_swiglu"))
    print("clipped_swiglu_backward", inter, ratio(infiniop.clipped_swiglu_backward(g, x, dim=-1, interleaved=inter, device=dev), tg, gbd, "clipped_swiglu_backward"))
xx = x[:, 0].contiguous(); gg = torch.from_numpy(rng.standard_normal(m).astype(np.float32))
truth = gb.gelu_backward_truth(xx.double().numpy(), gg.double().numpy())
bound = gb.allowed_error(xx.double().numpy(), gg.double().numpy(), truth, "float32")
print("gelu_backward", ratio(infiniop.gelu_backward(gg, xx, device=dev, approximate="tanh"), torch.from_numpy(truth), torch.from_numpy(bound), "gelu_backward"))
for approx in ["none", "tanh"]:
    yb, gb_ = (torch.from_numpy(b) for b in ge.error_bounds(xx.double(), gg.double(), approx))
    ty, tg = (torch.from_numpy(t) for t in ge.torch_oracle(xx, gg, approx))
    print("gelu", approx, ratio(infiniop.gelu(xx, approximate=approx, device=dev), ty, yb, "gelu"))
    print("gelu_backward_v2", approx, ratio(infiniop.gelu_backward_v2(gg, xx, approximate=approx, device=dev), tg, gb_, "gelu_backward_v2"))
