# SPDX-License-Identifier: Apache-2.0
"""infiniop.torch: the autograd.Functions over the operator pairs, their torch_npu-named aliases
and torch.ops.infiniop.*, against float64 PyTorch autograd of the same math.

Oracles and error models are the operator tests' own (imported, not restated): test_swiglu,
test_gelu, test_gelu_mul and test_clipped_swiglu's torch_oracle / error bounds, whose F32 bounds
K u come from tests/accuracy_bounds.json (helpers.f32_bound), F16/BF16 adding one ulp of the
output type (helpers.assert_matches). What is new here is the path: y = infiniop.torch.op(x)
under autograd, then y.backward(g), so the forward is the library's forward operator and x.grad
its backward operator, and both must be within those bounds of the float64 truth.

Composite checks (an MLP, a MoE layer: matmuls in PyTorch, routing and activations in the
library) use test_moe_layer's tolerance (assert_close / TOLERANCE): max |got - ref| <=
16 eps max |ref|, eps the unit roundoff of the dtype (2^-20 in F32), for the few roundings of the
activations on each path and the F32 sums of the matmuls, against the float64 layer.
Their first matmul is exact (dyadic inputs, as test_moe_layer's), so the clamps see the same
values on both sides. Measured: at most 1/4 of that tolerance (MLPs 0.20, MoE layer 0.25).

gradcheck (finite differences) runs on F32 inputs, since the library has no F64: central
differences with eps = 1e-2 on inputs in [-3, 3] away from the clamps' kinks have a truncation
error eps^2 / 6 |f'''| < 1e-4 there and a rounding error of about 2 * (a few u |f|) / (2 eps)
< 1e-4 (|f| < 30, u = 2^-24), and the perturbed input itself is rounded to F32 (relative
error u |x| / eps < 2e-5); atol = rtol = 1e-3 leaves a margin of 5 over their sum (measured:
the smooth ones pass at 3e-5, clipped_swiglu at 1e-4). The MoE functions are linear (bilinear
in expanded_x and scales): no truncation error at all.

Devices: cpu, one case on cpu_reference, one small case on opencl (skipped without a platform).
"""

import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import infiniop
import infiniop.torch as itorch

import test_clipped_swiglu as clipped_tests
import test_gelu as gelu_tests
import test_gelu_mul as gelu_mul_tests
import test_swiglu as swiglu_tests
from helpers import clamp_inclusive, on, random_tensor, rng_for
from test_moe_layer import TOLERANCE, assert_close, dyadic, spread


def opencl_count():
    try:
        return infiniop.device_info("opencl").count
    except Exception:  # not built, no library: no opencl
        return 0


OPENCL = pytest.param("opencl", marks=pytest.mark.skipif(
    opencl_count() == 0, reason="no OpenCL device (infiniop.device_info('opencl').count == 0)"))


def leaf(t):
    """A fresh leaf requiring grad, of t's values and layout (strides kept)."""
    return t.detach().clone().requires_grad_() if t.is_contiguous() else \
        t.detach().requires_grad_()


# ----------------------------------------------------------------------------------------------
# The split/elementwise pairs: forward and x.grad within the operator tests' bounds

def run(function, x, g, device="cpu", **kwargs):
    """(y, x.grad) of function(x) under autograd, y.backward(g); x a leaf (any strides)."""
    x = leaf(x)
    y = function(x, **kwargs, **on(device))
    assert y.requires_grad and y.grad_fn is not None
    y.backward(g)
    return y.detach(), x.grad


def check_swiglu(device, dtype_name, x, g, dim):
    y, grad = run(itorch.swiglu, x, g, device, dim=dim)
    what = f"infiniop.torch.swiglu {device} {dtype_name} dim={dim}"
    swiglu_tests.check_forward(y, x.double(), dim, dtype_name, what)
    swiglu_tests.check_backward(grad, g.double(), x.double(), dim, dtype_name, what)


@pytest.mark.parametrize("device", ["cpu", "cpu_reference"])
@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_swiglu(device, dtype_name, dim):
    rng = rng_for("torch-swiglu", device, dtype_name, dim)
    x = random_tensor(rng, (6, 8, 10), dtype_name)
    g = random_tensor(rng, swiglu_tests.halved((6, 8, 10), dim), dtype_name)
    check_swiglu(device, dtype_name, x, g, dim)


@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(dtype_name, approximate):
    rng = rng_for("torch-gelu", dtype_name, approximate)
    x, g = (random_tensor(rng, (16, 24), dtype_name) for _ in range(2))
    y, grad = run(itorch.gelu, x, g, approximate=approximate)
    gelu_tests.check(y, grad, x, g, approximate, dtype_name, "infiniop.torch.gelu")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_mul(approximate):
    rng = rng_for("torch-gelu-mul", approximate)
    x, g = random_tensor(rng, (12, 32), "float32"), random_tensor(rng, (12, 16), "float32")
    y, grad = run(itorch.gelu_mul, x, g, approximate=approximate)
    what = "infiniop.torch.gelu_mul"
    gelu_mul_tests.check_forward(y, x.double(), approximate, "float32", what)
    gelu_mul_tests.check_backward(grad, g.double(), x.double(), approximate, "float32", what)


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("group_index", [None, [3, 4]], ids=["all_rows", "group_index"])
def test_clipped_swiglu(interleaved, group_index):
    """SMALL_LIMIT clips A from above and B on both sides often (masked gradients exactly 0);
    with group_index only the first 7 of 10 rows are computed, the others (and their gradients)
    are 0."""
    rng = rng_for("torch-clipped", interleaved, group_index)
    attrs = clipped_tests.SMALL_LIMIT
    x = random_tensor(rng, (10, 16), "float32", limit=attrs["limit"])
    g = random_tensor(rng, (10, 8), "float32")
    counts = None if group_index is None else torch.tensor(group_index)
    y, grad = run(itorch.clipped_swiglu, x, g, dim=-1, interleaved=interleaved,
                  group_index=counts, **attrs)
    clipped_tests.check(y, grad, x.double(), g.double(), -1, attrs, interleaved, "float32",
                  "infiniop.torch.clipped_swiglu", group_index=counts)


@pytest.mark.parametrize("interleaved", [True, False])
def test_clipped_swiglu_clamp_mode_one(interleaved):
    """clamp_mode=1: autograd of silu(A).clamp(max=limit) * B.clamp(-limit, limit) in float64
    (the gate's clamp zeroes dA where silu(A) > limit), group_index too."""
    rng = rng_for("torch-clipped-after", interleaved)
    attrs = dict(clipped_tests.SMALL_LIMIT, clamp_mode=1)
    x = random_tensor(rng, (10, 16), "float32", limit=attrs["limit"])
    g = random_tensor(rng, (10, 8), "float32")
    counts = torch.tensor([2, 6])
    y, grad = run(itorch.clipped_swiglu, x, g, dim=-1, interleaved=interleaved,
                  group_index=counts, **attrs)
    clipped_tests.check(y, grad, x.double(), g.double(), -1, attrs, interleaved, "float32",
                        "infiniop.torch.clipped_swiglu clamp_mode=1", group_index=counts)


@pytest.mark.parametrize("device", [OPENCL])
def test_on_opencl(device):
    """One small swiglu and gelu case on opencl (staged through device memory)."""
    rng = rng_for("torch-opencl")
    x = random_tensor(rng, (4, 12), "float32")
    check_swiglu(device, "float32", x, random_tensor(rng, (4, 6), "float32"), -1)
    g = random_tensor(rng, (4, 12), "float32")
    y, grad = run(itorch.gelu, x, g, device, approximate="none")
    gelu_tests.check(y, grad, x, g, "none", "float32", "infiniop.torch.gelu opencl")


# ----------------------------------------------------------------------------------------------
# Layouts, gradients not asked for, once_differentiable

@pytest.mark.parametrize("layout", ["transposed", "strided", "expanded_grad"])
def test_non_contiguous(layout):
    """A transposed or strided x (a view of a leaf: the gradient reaches the leaf through the
    view) and a strided or stride-0 incoming gradient, as the library's any-strides API takes
    them."""
    rng = rng_for("torch-layout", layout)
    base = random_tensor(rng, (16, 6 if layout != "strided" else 24), "float32")
    source = leaf(base)
    if layout == "transposed":
        x = source.t()  # (6, 16), strides (1, 6)
    elif layout == "strided":
        x = source[:, 1::2]  # (16, 12), stride 2 at an odd offset
    else:
        x = source
    assert not x.is_contiguous() or layout == "expanded_grad"
    y = itorch.swiglu(x, -1)
    if layout == "expanded_grad":
        g = random_tensor(rng, (1, y.shape[1]), "float32").expand(y.shape)  # stride 0
    else:
        g = random_tensor(rng, (y.shape[1] * 2, y.shape[0]), "float32")[::2].t()  # strided
    assert not g.is_contiguous()
    y.backward(g)
    x64 = x.detach().double()
    swiglu_tests.check_forward(y.detach(), x64, -1, "float32", f"swiglu {layout}")
    truth_grad = source.grad if layout != "transposed" else source.grad.t()
    if layout == "strided":
        truth_grad = source.grad[:, 1::2]
        assert (source.grad[:, 0::2] == 0).all()
    swiglu_tests.check_backward(truth_grad, g.contiguous().double(), x64, -1, "float32",
                               f"swiglu {layout}")


def test_no_grad_inputs_get_none():
    """Inputs that do not require grad get None and the library's backward is not run for them
    (ctx.needs_input_grad); outputs of inputs that need none have no grad_fn."""
    torch.manual_seed(1)
    x = torch.randn(4, 8)
    assert not itorch.swiglu(x).requires_grad
    assert not itorch.gelu(x).requires_grad
    T, H, E, K = 6, 4, 3, 2
    ids = torch.topk(torch.randn(T, E), K).indices
    expanded, idx, _, _ = itorch.moe_init_routing_v2(torch.randn(T, H), ids, expert_num=E)
    assert not expanded.requires_grad and not idx.requires_grad
    scales = torch.rand(T, K, requires_grad=True)
    ex = expanded.clone()
    x1 = torch.randn(T, H)
    bias = torch.randn(E, H, requires_grad=True)
    out = itorch.moe_finalize_routing_v2(ex, idx, x1, None, bias, scales, ids, drop_pad_mode=2)
    out.sum().backward()
    assert ex.grad is None and x1.grad is None
    assert scales.grad is not None and bias.grad is not None


def test_needs_input_grad_skips_the_grad_operator(monkeypatch):
    """Only bias (or only x1) requires grad: MoeFinalizeRoutingV2Grad is not run at all."""
    def refuse(*args, **kwargs):
        raise AssertionError("MoeFinalizeRoutingV2Grad ran for a gradient nobody asked for")

    monkeypatch.setattr(infiniop, "moe_finalize_routing_v2_grad", refuse)
    torch.manual_seed(2)
    T, H, E, K = 5, 3, 4, 2
    ids = torch.topk(torch.randn(T, E), K).indices
    idx = torch.randperm(T * K)
    ex, scales = torch.randn(T * K, H), torch.rand(T, K)
    bias = torch.randn(E, H, requires_grad=True)
    x1 = torch.randn(T, H, requires_grad=True)
    g = torch.randn(T, H)
    itorch.moe_finalize_routing_v2(ex, idx, x1, None, bias, scales, ids,
                                   drop_pad_mode=2).backward(g)
    assert torch.equal(x1.grad, g)
    truth = torch.zeros(E, H, dtype=torch.float64)
    truth.index_add_(0, ids.reshape(-1), (scales.double()[..., None] * g.double()[:, None])
                     .reshape(-1, H))
    # grad_bias: float32 sums of at most T*K = 10 products per element
    assert_close(bias.grad, truth, "float32", "grad bias")


def test_once_differentiable():
    torch.manual_seed(4)
    x = torch.randn(4, 8, requires_grad=True)
    for y in (itorch.swiglu(x), itorch.gelu(x), itorch.clipped_swiglu(x)):
        (grad,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        with pytest.raises(RuntimeError):
            grad.sum().backward()


# ----------------------------------------------------------------------------------------------
# gradcheck on F32 inputs (see the docstring for eps, atol, rtol)

GRADCHECK = dict(eps=1e-2, atol=1e-3, rtol=1e-3, nondet_tol=0.0)


def away_from(values, points, margin):
    """values moved at least `margin` from each of `points` (the clamps' kinks)."""
    for p in points:
        near = (values - p).abs() < margin
        values = torch.where(near, values + 2 * margin * torch.sign(values - p + 1e-9), values)
    return values


@pytest.mark.filterwarnings("ignore:Input #0 requires gradient and is not a double")
@pytest.mark.parametrize("name", ["swiglu", "gelu_none", "gelu_tanh", "gelu_mul",
                                  "clipped_swiglu"])
def test_gradcheck_activations(name):
    torch.manual_seed(7)
    x = (torch.rand(4, 8) * 6 - 3)
    function = {"swiglu": lambda t: itorch.swiglu(t, 0),
                "gelu_none": lambda t: itorch.gelu(t, approximate="none"),
                "gelu_tanh": lambda t: itorch.gelu(t, approximate="tanh"),
                "gelu_mul": lambda t: itorch.gelu_mul(t, approximate="tanh"),
                "clipped_swiglu": lambda t: itorch.clipped_swiglu(t, limit=2.0)}[name]
    if name == "clipped_swiglu":
        x = away_from(x, (-2.0, 2.0), 0.05)
    assert torch.autograd.gradcheck(function, (x.requires_grad_(),), **GRADCHECK)


@pytest.mark.filterwarnings("ignore:Input #")
def test_gradcheck_moe():
    torch.manual_seed(8)
    T, H, E, K = 5, 3, 4, 2
    ids = torch.topk(torch.randn(T, E), K).indices
    x = torch.randn(T, H, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda t: itorch.moe_init_routing_v2(t, ids, expert_num=E)[0], (x,), **GRADCHECK)
    ex = torch.randn(T * K, H, requires_grad=True)
    scales = torch.rand(T, K, requires_grad=True)
    bias = torch.randn(E, H, requires_grad=True)
    x1 = torch.randn(T, H, requires_grad=True)
    idx = torch.randperm(T * K)
    for mode in (0, 2):
        assert torch.autograd.gradcheck(
            lambda a, s, b, r: itorch.moe_finalize_routing_v2(a, idx, r, None, b, s, ids,
                                                              drop_pad_mode=mode),
            (ex, scales, bias, x1), **GRADCHECK)
    # drop/pad: capacity 2 drops some of the 10 slots (index -1) and leaves others empty
    capacity = 2
    assert torch.autograd.gradcheck(
        lambda t: itorch.moe_init_routing_v2(t, ids, expert_num=E, expert_capacity=capacity,
                                             drop_pad_mode=1)[0], (x,), **GRADCHECK)
    slots = itorch.moe_init_routing_v2(x, ids, expert_num=E, expert_capacity=capacity,
                                       drop_pad_mode=1)[1]
    assert (slots == -1).any()
    padded = torch.randn(E, capacity, H, requires_grad=True)
    for mode, index in ((3, slots), (1, slots.view(T, K).t().reshape(-1))):
        assert torch.autograd.gradcheck(
            lambda a, s, b: itorch.moe_finalize_routing_v2(a, index, None, None, b, s, ids,
                                                           drop_pad_mode=mode),
            (padded, scales, bias), **GRADCHECK)


# ----------------------------------------------------------------------------------------------
# A small MLP: Linear -> activation -> Linear, parameter gradients vs the float64 MLP

def mlp(params, x, activation):
    h = x @ params["W1"] + params["b1"]
    return activation(h) @ params["W2"] + params["b2"]


def mlp_gradients(params, x, target, activation):
    leaves = {n: p.clone().requires_grad_() for n, p in params.items()}
    loss = ((mlp(leaves, x, activation) - target) ** 2).sum()
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in leaves.items()}


def swiglu64(h):
    a, b = h.chunk(2, -1)
    return F.silu(a) * b


@pytest.mark.parametrize("kind", ["swiglu", "gelu"])
def test_mlp(kind):
    """Linear(16, 2*16) -> infiniop.torch.swiglu (or gelu) -> Linear(16 or 32, 8): loss.backward()
    gives the float64 MLP's parameter gradients within test_moe_layer's tolerance (x and W1 are
    dyadic, so the first matmul is exact in F32)."""
    rng = rng_for("torch-mlp", kind)
    inner = 16 if kind == "swiglu" else 32
    params = {"W1": dyadic(rng, (16, 32), 0.5, 2.0), "b1": dyadic(rng, (32,), 0.125, 1.0),
              "W2": spread(rng, (inner, 8)) / 4, "b2": spread(rng, (8,))}
    x, target = dyadic(rng, (8, 16), 0.25, 1.0), spread(rng, (8, 8))
    if kind == "swiglu":
        activation, activation64 = (lambda h: itorch.swiglu(h, -1)), swiglu64
    else:
        activation, activation64 = (lambda h: itorch.gelu(h)), (lambda h: F.gelu(h))
    loss, grads = mlp_gradients({n: p.float() for n, p in params.items()}, x.float(),
                                target.float(), activation)
    loss64, grads64 = mlp_gradients(params, x, target, activation64)
    assert_close(loss, loss64, "float32", f"mlp {kind} loss")
    for name in params:
        assert_close(grads[name], grads64[name], "float32", f"mlp {kind} grad {name}")


def test_mlp_as_modules():
    """The same through torch.nn.Linear modules (weights set to test_mlp's dyadic values, so the
    first matmul stays exact) and loss.mean(): the modules' gradients agree with the float64
    MLP's within the same tolerance."""
    rng = rng_for("torch-mlp-modules")
    first, second = torch.nn.Linear(16, 32), torch.nn.Linear(16, 8)
    values = {"w1": dyadic(rng, (32, 16), 0.5, 2.0), "b1": dyadic(rng, (32,), 0.125, 1.0),
              "w2": spread(rng, (8, 16)) / 4, "b2": spread(rng, (8,))}
    modules = {"w1": first.weight, "b1": first.bias, "w2": second.weight, "b2": second.bias}
    with torch.no_grad():
        for name, parameter in modules.items():
            parameter.copy_(values[name])
    x, target = dyadic(rng, (8, 16), 0.25, 1.0), spread(rng, (8, 8))
    loss = ((second(itorch.swiglu(first(x.float()))) - target.float()) ** 2).mean()
    loss.backward()
    reference = {n: v.clone().requires_grad_() for n, v in values.items()}
    h = x @ reference["w1"].t() + reference["b1"]
    loss64 = ((swiglu64(h) @ reference["w2"].t() + reference["b2"] - target) ** 2).mean()
    loss64.backward()
    for name, parameter in modules.items():
        assert_close(parameter.grad, reference[name].grad, "float32", f"nn.Linear grad {name}")


# ----------------------------------------------------------------------------------------------
# A MoE layer through infiniop.torch only (routing and activation), vs float64 autograd

T, H, E, K, I = 32, 16, 4, 2, 8
ALPHA, LIMIT, LINEAR_BIAS = 1.702, 3.0, 1.0  # limit 3: H = 16 gives |h| mostly below 7


def moe_params(rng):
    p = {"x": dyadic(rng, (T, H), 0.25, 1.0), "W_r": spread(rng, (H, E)),
         "W1": dyadic(rng, (E, H, 2 * I), 0.5, 2.0), "b1": dyadic(rng, (E, 2 * I), 0.125, 2.0),
         "W2": spread(rng, (E, I, H)) / 4, "b2": spread(rng, (E, H))}
    return p


def library_moe(p, ids, finalize_mode):
    """out = x + sum_k softmax(top logits)[k] * expert_{ids[k]}(x), the router's topk indices
    given (not differentiable); dispatch, activation and combine by infiniop.torch (the combine
    adds the residual x1 = x and the experts' output bias b2 through its bias), the expert
    matmuls in torch. Differentiable in every parameter."""
    x = p["x"]
    top_vals = (x @ p["W_r"]).gather(1, ids)
    scales = torch.softmax(top_vals, dim=-1)
    expanded, row_idx, counts, _ = itorch.moe_init_routing_v2(
        x, ids, expert_num=E, expert_tokens_count_or_cumsum_flag=2)
    ends = torch.cumsum(counts, 0).tolist()
    h = []
    for e, (start, end) in enumerate(zip([0] + ends[:-1], ends)):
        h.append(expanded[start:end] @ p["W1"][e] + p["b1"][e])
    act = itorch.clipped_swiglu(torch.cat(h), -1, alpha=ALPHA, limit=LIMIT, bias=LINEAR_BIAS,
                                interleaved=True, group_index=counts)
    expert_out = torch.cat([act[start:end] @ p["W2"][e] for e, (start, end)
                            in enumerate(zip([0] + ends[:-1], ends))])
    if finalize_mode == 0:  # the column layout of the same index
        row_idx = row_idx.view(T, K).t().reshape(-1)
    return itorch.moe_finalize_routing_v2(expert_out, row_idx, x, None, p["b2"], scales, ids,
                                          drop_pad_mode=finalize_mode)


def reference_moe(p, ids):
    x = p["x"]
    scales = torch.softmax((x @ p["W_r"]).gather(1, ids), dim=-1)
    h = torch.einsum("th,tkhi->tki", x, p["W1"][ids]) + p["b1"][ids]
    a = clamp_inclusive(h[..., 0::2], max=LIMIT)
    b = clamp_inclusive(h[..., 1::2], -LIMIT, LIMIT)
    act = a * torch.sigmoid(ALPHA * a) * (b + LINEAR_BIAS)
    expert_out = torch.einsum("tki,tkih->tkh", act, p["W2"][ids]) + p["b2"][ids]
    clipped = ((h[..., 0::2] > LIMIT).sum() + (h[..., 1::2].abs() > LIMIT).sum()).item()
    return x + (scales.unsqueeze(-1) * expert_out).sum(1), clipped / h.numel()


@pytest.mark.parametrize("finalize_mode", [2, 0])
def test_moe_layer(finalize_mode):
    rng = rng_for("torch-moe-layer", finalize_mode)
    p64 = moe_params(rng)
    ids = torch.topk(p64["x"].float() @ p64["W_r"].float(), K, dim=-1).indices
    grad_out = spread(rng, (T, H))
    leaves = {n: t.float().requires_grad_() for n, t in p64.items()}
    out = library_moe(leaves, ids, finalize_mode)
    out.backward(grad_out.float())
    leaves64 = {n: t.clone().requires_grad_() for n, t in p64.items()}
    out64, clipped_fraction = reference_moe(leaves64, ids)
    out64.backward(grad_out)
    assert 0.05 < clipped_fraction < 0.5, "the clamps are not exercised"
    assert_close(out, out64.detach(), "float32", f"moe mode {finalize_mode} out")
    for name in p64:
        assert_close(leaves[name].grad, leaves64[name].grad, "float32",
                     f"moe mode {finalize_mode} grad {name}")


def test_finalize_bfloat16_rows_float32_scales():
    """BF16 rows with F32 router weights (the library's one mixed-dtype case): each gradient in
    its input's dtype (grad scales F32), within test_moe_layer's BF16 tolerance of float64."""
    rng = rng_for("torch-finalize-bf16")
    R, Kk, E_, H_ = 16, 2, 4, 8
    ids = torch.from_numpy(rng.integers(0, E_, (R, Kk)))
    idx = torch.from_numpy(rng.permutation(R * Kk))
    values = {"ex": spread(rng, (R * Kk, H_)), "x1": spread(rng, (R, H_)),
              "bias": spread(rng, (E_, H_)), "scales": spread(rng, (R, Kk)).abs()}
    dtypes = {"ex": torch.bfloat16, "x1": torch.bfloat16, "bias": torch.bfloat16,
              "scales": torch.float32}
    got = {n: v.to(dtypes[n]).requires_grad_() for n, v in values.items()}
    grad_out = spread(rng, (R, H_))
    out = itorch.moe_finalize_routing_v2(got["ex"], idx, got["x1"], None, got["bias"],
                                         got["scales"], ids, drop_pad_mode=2)
    assert out.dtype == torch.bfloat16
    out.backward(grad_out.to(torch.bfloat16))
    ref = {n: v.to(dtypes[n]).double().requires_grad_() for n, v in values.items()}
    rows = ref["ex"][idx.view(R, Kk)] + ref["bias"][ids]
    out64 = ref["x1"] + (ref["scales"].unsqueeze(-1) * rows).sum(1)
    out64.backward(grad_out.to(torch.bfloat16).double())
    assert_close(out, out64.detach(), "bfloat16", "bf16 finalize out")
    for name in values:
        assert got[name].grad.dtype == dtypes[name]
        assert_close(got[name].grad, ref[name].grad, "bfloat16", f"bf16 finalize grad {name}")


# ----------------------------------------------------------------------------------------------
# torch.ops.infiniop, the torch_npu aliases, argument errors, the import

@pytest.mark.skipif(not itorch._ops.REGISTERED, reason=f"{itorch._ops.REASON}")
def test_torch_ops_agree_with_functions():
    """torch.ops.infiniop.<op> runs the same operators: bit-identical values and gradients."""
    torch.manual_seed(5)
    x = torch.randn(6, 8)
    cases = [(lambda t: torch.ops.infiniop.swiglu(t, 0), lambda t: itorch.swiglu(t, 0)),
             (lambda t: torch.ops.infiniop.gelu(t, approximate="tanh"),
              lambda t: itorch.gelu(t, approximate="tanh")),
             (lambda t: torch.ops.infiniop.gelu_mul(t), lambda t: itorch.gelu_mul(t)),
             (lambda t: torch.ops.infiniop.clipped_swiglu(t, -1, limit=1.0, interleaved=False),
              lambda t: itorch.clipped_swiglu(t, -1, limit=1.0, interleaved=False)),
             (lambda t: torch.ops.infiniop.clipped_swiglu(t, limit=1.0, clamp_mode=1),
              lambda t: itorch.clipped_swiglu(t, limit=1.0, clamp_mode=1))]
    for op, function in cases:
        results = []
        for f in (op, function):
            t = x.clone().requires_grad_()
            y = f(t)
            y.backward(torch.ones_like(y))
            results.append((y.detach(), t.grad))
        assert torch.equal(results[0][0], results[1][0])
        assert torch.equal(results[0][1], results[1][1])
    with torch.no_grad():
        assert not torch.ops.infiniop.swiglu(x.requires_grad_()).requires_grad
    ids = torch.topk(torch.randn(6, 3), 2).indices
    t = torch.randn(6, 8, requires_grad=True)
    ex, idx, counts, before = torch.ops.infiniop.moe_init_routing_v2(
        t, ids, expert_num=3, expert_tokens_count_or_cumsum_flag=1)
    assert before is None and counts.tolist()[-1] == 12
    out = torch.ops.infiniop.moe_finalize_routing_v2(ex, idx, drop_pad_mode=2,
                                                     scales=torch.ones(6, 2))
    out.sum().backward()
    assert torch.equal(t.grad, torch.full((6, 8), 2.0))


def test_npu_aliases():
    torch.manual_seed(9)
    x = torch.randn(4, 8)
    assert torch.equal(itorch.npu_swiglu(x, 0), itorch.swiglu(x, 0))
    assert torch.equal(itorch.npu_gelu(x, "tanh"), itorch.gelu(x, approximate="tanh"))
    assert torch.equal(itorch.npu_gelu_mul(x, approximate="tanh"),
                       itorch.gelu_mul(x, approximate="tanh"))
    counts = torch.tensor([3])
    assert torch.equal(
        itorch.npu_clipped_swiglu(x, group_index=counts, dim=-1, alpha=1.0, limit=1.5,
                                  bias=0.5, interleaved=False),
        itorch.clipped_swiglu(x, -1, alpha=1.0, limit=1.5, bias=0.5, interleaved=False,
                              group_index=counts))
    g = torch.randn(4, 8)
    grad = itorch.npu_gelu_backward(g, x, approximate="none")
    gelu_tests.check(None, grad, x, g, "none", "float32", "npu_gelu_backward")
    # torch_npu's positional order: rows, skip1, skip2, bias, scales, src_to_dst, expert ids
    R, Kk, E_, H_ = 4, 2, 3, 8
    rows, skip1, skip2 = torch.randn(R * Kk, H_), torch.randn(R, H_), torch.randn(R, H_)
    bias, scales = torch.randn(E_, H_), torch.rand(R, Kk)
    src_to_dst, expert = torch.randperm(R * Kk).int(), torch.randint(0, E_, (R, Kk)).int()
    got = itorch.npu_moe_finalize_routing(rows, skip1, skip2, bias, scales, src_to_dst, expert,
                                          drop_pad_mode=0)
    want = itorch.moe_finalize_routing_v2(rows, src_to_dst, skip1, skip2, bias, scales, expert,
                                          drop_pad_mode=0)
    assert torch.equal(got, want)
    only_skip2 = itorch.npu_moe_finalize_routing(rows, None, skip2, None, scales, src_to_dst,
                                                 None)
    assert torch.equal(only_skip2, itorch.moe_finalize_routing_v2(rows, src_to_dst, skip2,
                                                                  scales=scales))


def test_npu_moe_init_routing_v2():
    torch.manual_seed(10)
    R, Kk, E_ = 6, 2, 4
    x = torch.randn(R, 5, requires_grad=True)
    ids = torch.topk(torch.randn(R, E_), Kk).indices.int()
    scale = torch.rand(R)
    ex, scatter, cumsum, expanded_scale = itorch.npu_moe_init_routing_v2(
        x, ids, scale=scale, expert_num=E_, expert_tokens_num_flag=True, row_idx_type=1)
    want = itorch.moe_init_routing_v2(x, ids, expert_num=E_,
                                      expert_tokens_count_or_cumsum_flag=1)
    assert torch.equal(ex, want[0]) and torch.equal(scatter, want[1])
    assert scatter.dtype == torch.int32 and cumsum.dtype == torch.int64
    assert torch.equal(cumsum, want[2].long())
    source = torch.arange(R * Kk) // Kk
    assert torch.equal(expanded_scale[scatter.long()], scale[source])
    # the default row_idx_type 0: the gather index, expanded_x[i] = x[idx[i] // K]
    ex0, gather, none_count, none_scale = itorch.npu_moe_init_routing_v2(x, ids, expert_num=E_)
    assert none_count is None and none_scale is None
    assert torch.equal(ex0, x[gather.long() // Kk])
    assert torch.equal(gather[scatter.long()], torch.arange(R * Kk, dtype=torch.int32))
    counts = torch.bincount(ids.reshape(-1).long(), minlength=E_)
    _, _, count, _ = itorch.npu_moe_init_routing_v2(x, ids, expert_num=E_,
                                                    expert_tokens_num_flag=True,
                                                    expert_tokens_num_type=1)
    assert torch.equal(count, counts)
    _, _, key_value, _ = itorch.npu_moe_init_routing_v2(x, ids, expert_num=E_,
                                                        expert_tokens_num_flag=True,
                                                        expert_tokens_num_type=2)
    busy = torch.nonzero(counts).reshape(-1)
    assert key_value.shape == (E_, 2)
    assert torch.equal(key_value[:busy.numel()], torch.stack([busy, counts[busy]], 1))
    assert (key_value[busy.numel():] == 0).all()
    # drop/pad: the counts before the capacity cut
    _, idx1, before, _ = itorch.npu_moe_init_routing_v2(
        x, ids, expert_num=E_, expert_capacity=2, drop_pad_mode=1, expert_tokens_num_flag=True,
        expert_tokens_num_type=1, row_idx_type=1)
    assert torch.equal(before, counts) and (idx1 == -1).any()
    ex.sum().backward()  # differentiable in x: every row is copied K times
    assert torch.equal(x.grad, torch.full_like(x, float(Kk)))


@pytest.mark.parametrize("call, name", [
    (lambda: itorch.swiglu(np.zeros((2, 4), np.float32)), "x"),
    (lambda: itorch.gelu([1.0]), "input"),
    (lambda: itorch.moe_finalize_routing_v2(torch.zeros(2, 2), torch.zeros(2).long(),
                                            scales=np.ones((2, 1))), "scales"),
    (lambda: itorch.npu_moe_finalize_routing(torch.zeros(2, 2), None, None, None, None,
                                             [0, 1], None), "expanded_src_to_dst_row"),
])
def test_argument_errors_name_the_argument(call, name):
    with pytest.raises(TypeError, match=f"^{name} must be a torch.Tensor"):
        call()


@pytest.mark.parametrize("kwargs, name", [
    ({"offset": torch.zeros(1), "quant_mode": -1}, "offset"), ({"quant_mode": 2}, "quant_mode"),
    ({"active_expert_range": [1, 3]}, "active_expert_range"), ({"expert_num": -1}, "expert_num"),
    ({"drop_pad_mode": 1, "expert_capacity": 2}, "row_idx_type")])
def test_npu_moe_init_unsupported(kwargs, name):
    x, ids = torch.randn(4, 3), torch.zeros(4, 2, dtype=torch.int32)
    kwargs = {"expert_num": 4, **kwargs}
    with pytest.raises((NotImplementedError, ValueError), match=name):
        itorch.npu_moe_init_routing_v2(x, ids, **kwargs)


def test_library_errors_pass_through():
    """The library's own checks still answer (BAD_TENSOR_SHAPE for an odd split)."""
    with pytest.raises(infiniop.InfiniopError):
        itorch.swiglu(torch.zeros(2, 5, requires_grad=True))


def test_infiniop_alone_does_not_import_torch():
    code = ("import sys, infiniop; infiniop.swiglu; "
            "assert 'torch' not in sys.modules and 'infiniop.torch' not in sys.modules")
    python_dir = str(__import__("pathlib").Path(infiniop.__file__).resolve().parents[1])
    subprocess.run([sys.executable, "-c", code], check=True, cwd=python_dir)


@pytest.mark.parametrize("function", ["swiglu", "gelu", "swiglu_backward"])
def test_out_is_an_inplace_write_for_autograd(function):
    """A tensor autograd saved, then overwritten through out=, makes backward raise (as
    torch.mul(..., out=a) does) instead of giving a gradient from the new values: the write
    bumps the tensor's version counter. The bump leaves the written values as they are."""
    rng = rng_for("torch-out-version", function)
    x = random_tensor(rng, (4, 16), "float32")
    g = random_tensor(rng, (4, 8), "float32")
    call = {"swiglu": lambda out: infiniop.swiglu(x, out=out),
            "gelu": lambda out: infiniop.gelu(x, out=out),
            "swiglu_backward": lambda out: infiniop.swiglu_backward(g, x, out=out)}[function]
    want = call(None)
    a = torch.zeros_like(want)
    w = torch.ones_like(want, requires_grad=True)
    loss = (w * a).sum()  # saves a for w's gradient
    version = a._version
    assert call(a) is a
    assert a._version > version
    assert torch.equal(a, want)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_out_version_bump_keeps_every_bit(dtype):
    """The bump (a call on PyTorch 2, an in-place OR with 0 on the integer view on 1.x) leaves
    the bytes the library wrote as they are: signaling NaNs, -0 and subnormals included."""
    from infiniop._dispatch import written

    if dtype.is_floating_point:
        size = torch.finfo(dtype).bits // 8
        integer = {2: torch.int16, 4: torch.int32}[size]
        patterns = [0x7F800001, 0xFF800001, 0x7FC00123, 0x80000000, 0x00000001, 0x3F800000]
        if size == 2:
            patterns = [0x7F81, 0xFF81, 0x7FC3, 0x8000, 0x0001, 0x3F80]
        bits = torch.tensor([p - (1 << (8 * size)) if p >= 1 << (8 * size - 1) else p
                             for p in patterns], dtype=integer)
        t = bits.view(dtype)
    else:
        t = torch.tensor([0, 1, 1, 0]).to(dtype)
    before = t.clone()
    version = t._version
    written(t)
    assert t._version > version
    if dtype.is_floating_point:
        assert torch.equal(t.view(bits.dtype), before.view(bits.dtype))
    else:
        assert torch.equal(t, before)


REPLAY_LAYOUTS = {
    "contiguous": lambda t: t,
    "transposed": lambda t: t.t(),              # gelu's output keeps this layout
    "strided": lambda t: t[:, 1::2],            # an odd offset, stride 2
    "broadcast": lambda t: t[:1].expand(t.shape),  # stride 0: a contiguous output
}


@pytest.mark.parametrize("layout", REPLAY_LAYOUTS)
@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_forward_replay_equals_the_functional_call(layout, dtype_name):
    """The one-input Functions replay a signature's descriptor (_autograd._replayed): every
    call, the first (functional) and the replayed ones, equals the functional API's result bit
    for bit and in layout, with other inputs of that signature, and again after the handle's
    descriptor cache was cleared (the replay then falls back)."""
    rng = rng_for("torch-replay", layout, dtype_name)
    cases = [(itorch.swiglu, infiniop.swiglu, {}),
             (itorch.gelu_mul, infiniop.gelu_mul, {"approximate": "tanh"}),
             (itorch.gelu, infiniop.gelu, {"approximate": "none"}),
             (itorch.clipped_swiglu, infiniop.clipped_swiglu, {"limit": 3.0, "alpha": 0.5}),
             (itorch.clipped_swiglu, infiniop.clipped_swiglu, {"clamp_mode": 1})]
    for torch_fn, functional, kwargs in cases:
        for round in range(4):
            if round == 2:
                infiniop.default_handle("cpu").clear_descriptors()
            base = random_tensor(rng, (12, 24), dtype_name) * 4
            x = leaf(REPLAY_LAYOUTS[layout](base))
            y = torch_fn(x, **kwargs)
            want = functional(x.detach(), **kwargs)
            assert y.stride() == want.stride(), (torch_fn.__name__, y.stride(), want.stride())
            assert torch.equal(y.detach(), want), (torch_fn.__name__, round)


def test_forward_replay_keeps_argument_checks():
    """A signature replayed for dim=1 still refuses dim=True (typed), a bad dim raises, and
    alpha -0.0 is not replayed as 0.0 (signed: the library's descriptors tell them apart)."""
    from infiniop.torch import _autograd
    x = leaf(torch.randn(4, 8))
    itorch.swiglu(x, 1)
    itorch.swiglu(x, 1)
    with pytest.raises(TypeError):
        itorch.swiglu(x, True)
    with pytest.raises(infiniop.InfiniopError):
        itorch.swiglu(x, 5)
    _autograd._REPLAYS.clear()
    for alpha in (0.0, -0.0, 0.0, -0.0):
        y = itorch.clipped_swiglu(x, alpha=alpha)
        assert torch.equal(y.detach(), infiniop.clipped_swiglu(x.detach(), alpha=alpha))
    assert len(_autograd._REPLAYS) == 2


@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_moe_forward_replay_equals_the_functional_call(dtype_name):
    """The MoE Functions replay too (several inputs, several outputs, absent ones): each call
    of a signature, with new data (another routing), equals the functional API's outputs."""
    rng = rng_for("torch-replay-moe", dtype_name)
    E, K = 8, 2
    for round in range(3):
        x = random_tensor(rng, (6, 16), dtype_name) * 4
        logits = random_tensor(rng, (6, E), dtype_name) * 4
        finished = torch.tensor([False, round == 1, False, True, False, False])
        bias = random_tensor(rng, (E,), "float32")
        calls = [
            (lambda: itorch.moe_gating_top_k_softmax(leaf(logits), K, finished, 0, True),
             lambda: infiniop.moe_gating_top_k_softmax(logits, K, finished, 0, True)),
            (lambda: itorch.moe_gating_top_k_softmax(leaf(logits), K, index_dtype="int64"),
             lambda: infiniop.moe_gating_top_k_softmax(logits, K, index_dtype="int64")),
            (lambda: itorch.moe_gating_top_k(leaf(logits), K, bias, out_flag=True,
                                             routed_scaling_factor=2.5),
             lambda: infiniop.moe_gating_top_k(logits, K, bias, out_flag=True,
                                               routed_scaling_factor=2.5)),
        ]
        ids = infiniop.moe_gating_top_k_softmax(logits, K)[1]
        for mode in ({"expert_tokens_count_or_cumsum_flag": 2},
                     {"drop_pad_mode": 1, "expert_capacity": 2,
                      "expert_tokens_before_capacity_flag": True}):
            calls.append((lambda mode=mode: itorch.moe_init_routing_v2(leaf(x), ids, expert_num=E,
                                                                       **mode),
                          lambda mode=mode: infiniop.moe_init_routing_v2(x, ids, expert_num=E,
                                                                         **mode)))
        expanded, row_idx, _, _ = infiniop.moe_init_routing_v2(x, ids, expert_num=E)
        scales = random_tensor(rng, (6, K), "float32")
        calls.append((lambda: itorch.moe_finalize_routing_v2(leaf(expanded), row_idx, x1=x,
                                                             scales=leaf(scales),
                                                             drop_pad_mode=2),
                      lambda: infiniop.moe_finalize_routing_v2(expanded, row_idx, x1=x,
                                                               scales=scales,
                                                               drop_pad_mode=2)))
        for got, want in calls:
            got, want = got(), want()
            got = got if isinstance(got, tuple) else (got,)
            want = want if isinstance(want, tuple) else (want,)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert (g is None) == (w is None)
                if g is not None:
                    assert g.dtype == w.dtype and g.stride() == w.stride()
                    assert torch.equal(g.detach(), w), round
