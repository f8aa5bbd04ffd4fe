# SPDX-License-Identifier: Apache-2.0
"""What a PyTorch user trips on (issue 28): second derivatives refused, never wrong; errors that
name the user's arguments; tracing (torch.jit.trace, torch.fx) and torch.autocast.

The oracle is PyTorch's own ops on the same F32 inputs: the gradient-penalty pattern is
compared against them where it runs, and must otherwise raise naming the function. Values under
tracing and autocast are compared bitwise with the eager call of the same function on the same
inputs (the same library call: no tolerance).
"""

import re

import numpy as np
import pytest
import torch
import torch.fx
import torch.nn.functional as F

import infiniop
import infiniop.torch as itorch
from infiniop.torch import _ops

# ----------------------------------------------------------------------------------------------
# 1. Second derivatives: refused with the function's name whenever a backward run with
#    create_graph=True read something that requires grad (a saved input or the incoming grad).

H = 32  # the hidden width of the penalty problems


def torch_swiglu(h):
    a, b = h.chunk(2, -1)
    return F.silu(a) * b


def torch_clipped(h, limit=7.0, alpha=1.702):
    a, b = h[..., ::2].clamp(max=limit), h[..., 1::2].clamp(-limit, limit)
    return a * torch.sigmoid(alpha * a) * (b + 1)


ACTIVATIONS = {  # name: (infiniop.torch function, the same maths in torch ops)
    "swiglu": (lambda h: itorch.swiglu(h, -1), torch_swiglu),
    "gelu": (lambda h: itorch.gelu(h), F.gelu),
    "gelu_tanh": (lambda h: itorch.gelu(h, approximate="tanh"),
                  lambda h: F.gelu(h, approximate="tanh")),
    "gelu_mul": (lambda h: itorch.gelu_mul(h), lambda h: F.gelu(h[..., :H]) * h[..., H:]),
    "clipped_swiglu": (lambda h: itorch.clipped_swiglu(h), torch_clipped),
}


def penalty(activation, seed=0):
    """The gradient-penalty pattern of issue 28: x.grad after a backward through the gradient
    of the loss with respect to the weight (create_graph=True)."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(16, 2 * H, generator=g).requires_grad_()
    x = torch.randn(8, 16, generator=g).requires_grad_()
    loss = activation(x @ w).sum()
    (grad_w,) = torch.autograd.grad(loss, w, create_graph=True)
    grad_w.pow(2).sum().backward()
    return x.grad


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_gradient_penalty_is_refused_not_wrong(name):
    ours, theirs = ACTIVATIONS[name]
    function = "gelu" if name == "gelu_tanh" else name
    assert penalty(theirs).norm() > 0  # the pattern is well-defined: torch's ops give a gradient
    with pytest.raises(RuntimeError, match=rf"infiniop\.torch\.{function}: no second derivative"):
        penalty(ours)


def test_gradient_penalty_through_moe_is_refused():
    """expanded_x requires grad (it comes from a matmul) and is saved by the finalize."""
    g = torch.Generator().manual_seed(1)
    T, E, K = 6, 4, 2
    w = torch.randn(8, 8, generator=g).requires_grad_()
    x = torch.randn(T, 8, generator=g)
    ids = torch.topk(torch.randn(T, E, generator=g), K).indices
    scales = torch.rand(T, K, generator=g)
    expanded, row_idx, _, _ = itorch.moe_init_routing_v2(x, ids, expert_num=E)
    out = itorch.moe_finalize_routing_v2(expanded @ w, row_idx, scales=scales, expert_idx=ids,
                                         drop_pad_mode=2)
    (grad_w,) = torch.autograd.grad(out.pow(2).sum(), w, create_graph=True)
    with pytest.raises(RuntimeError, match=r"infiniop\.torch\.moe_finalize_routing_v2"):
        grad_w.pow(2).sum().backward()


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_create_graph_first_order_still_right(name):
    """create_graph=True alone (no second backward) gives the first-order gradient."""
    ours, theirs = ACTIVATIONS[name]
    x = torch.randn(4, 2 * H, generator=torch.Generator().manual_seed(2))
    grads = []
    for function in (ours, theirs):
        leaf = x.clone().requires_grad_()
        (grad,) = torch.autograd.grad(function(leaf).sum(), leaf, create_graph=True)
        grads.append(grad.detach())
    # F32 against torch's F32 ops: a few roundings of each, relative to max |grad| (<= 2).
    torch.testing.assert_close(grads[0], grads[1], rtol=0, atol=1e-5 * grads[1].abs().max())


def test_no_grad_backward_has_no_error_node():
    x = torch.randn(4, 8, requires_grad=True)
    (grad,) = torch.autograd.grad(itorch.swiglu(x).sum(), x)
    assert not grad.requires_grad


# ----------------------------------------------------------------------------------------------
# 2. Errors name the user's argument, before anything is written.

FLOAT_INPUT_CASES = [  # (call on an input of the given dtype, the user's name of that input)
    (lambda t: infiniop.swiglu(t), "x"),
    (lambda t: infiniop.swiglu_backward(torch.zeros(4, 4), t), "x"),
    (lambda t: infiniop.gelu(t), "input"),
    (lambda t: infiniop.gelu_backward(t, torch.zeros(4, 8)), "grad_output"),
    (lambda t: infiniop.gelu_backward_v2(t, torch.zeros(4, 8)), "grad_output"),
    (lambda t: infiniop.gelu_mul(t), "input"),
    (lambda t: infiniop.gelu_mul_backward(torch.zeros(4, 4), t), "input"),
    (lambda t: infiniop.clipped_swiglu(t), "x"),
    (lambda t: infiniop.clipped_swiglu_backward(torch.zeros(4, 4), t), "x"),
    (lambda t: infiniop.moe_init_routing_v2(t, torch.zeros(4, 2, dtype=torch.int64),
                                            expert_num=2), "x"),
    (lambda t: infiniop.moe_init_routing_v2_grad(t, torch.arange(4), top_k=1), "grad_expanded_x"),
    (lambda t: infiniop.moe_finalize_routing_v2(t, torch.arange(4)), "expanded_x"),
    (lambda t: itorch.swiglu(t), "x"),
    (lambda t: itorch.gelu(t), "input"),
    (lambda t: itorch.gelu_mul(t), "input"),
    (lambda t: itorch.clipped_swiglu(t), "x"),
]


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32])
@pytest.mark.parametrize("case", range(len(FLOAT_INPUT_CASES)))
def test_dtype_error_names_the_input(case, dtype):
    call, name = FLOAT_INPUT_CASES[case]
    with pytest.raises(infiniop.InfiniopError) as error:
        call(torch.zeros(4, 8).to(dtype))
    assert error.value.status == infiniop.Status.BAD_TENSOR_DTYPE
    assert re.search(rf"\b{name} has dtype (F64|I32)", error.value.message), error.value.message


OUT_SHAPE_CASES = [  # (call with a wrong-shape out=, the library's name of that output)
    (lambda out: infiniop.swiglu(torch.zeros(4, 8), out=out), "y"),
    (lambda out: infiniop.swiglu_backward(torch.zeros(4, 4), torch.zeros(4, 8), out=out),
     "x_grad"),
    (lambda out: infiniop.gelu(torch.zeros(4, 8), out=out), "output"),
    (lambda out: infiniop.gelu_backward(torch.zeros(4, 8), torch.zeros(4, 8), out=out),
     "grad_input"),
    (lambda out: infiniop.gelu_backward_v2(torch.zeros(4, 8), torch.zeros(4, 8), out=out),
     "grad_input"),
    (lambda out: infiniop.gelu_mul(torch.zeros(4, 8), out=out), None),
    (lambda out: infiniop.gelu_mul_backward(torch.zeros(4, 4), torch.zeros(4, 8), out=out),
     "input_grad"),
    (lambda out: infiniop.clipped_swiglu(torch.zeros(4, 8), out=out), "y"),
    (lambda out: infiniop.clipped_swiglu_backward(torch.zeros(4, 4), torch.zeros(4, 8), out=out),
     "x_grad"),
    # (The MoE operators take the rows R and width H from out where it is given, and name the
    # input that disagrees with them: expanded_x or expanded_row_idx, the user's names too.)
]


@pytest.mark.parametrize("case", range(len(OUT_SHAPE_CASES)))
def test_out_shape_error_names_out(case):
    call, c_name = OUT_SHAPE_CASES[case]
    out = torch.full((3, 5), 7.0)
    with pytest.raises(infiniop.InfiniopError) as error:
        call(out)
    assert error.value.status == infiniop.Status.BAD_TENSOR_SHAPE
    assert re.search(r"\bout\b", error.value.message), error.value.message
    if c_name is not None:
        assert not re.search(rf"\b{c_name}\b", error.value.message), error.value.message
    assert torch.equal(out, torch.full((3, 5), 7.0))  # nothing written


def test_moe_init_out_tuple_names_its_entry():
    x, ids = torch.zeros(4, 8), torch.zeros(4, 2, dtype=torch.int64)
    with pytest.raises(infiniop.InfiniopError, match=r"out\[0\]"):
        infiniop.moe_init_routing_v2(x, ids, expert_num=2, out=(torch.zeros(3, 8),))


def test_numpy_dtype_error_names_the_input():
    with pytest.raises(infiniop.InfiniopError, match=r"\bx has dtype F64"):
        infiniop.swiglu(np.zeros((4, 8)))


# ----------------------------------------------------------------------------------------------
# 3. Tracing.

class Block(torch.nn.Module):
    def forward(self, x):
        h = itorch.gelu(itorch.swiglu(x, -1), approximate="tanh")
        return itorch.clipped_swiglu(torch.cat([h, h], -1)) + itorch.gelu_mul(x)[..., :1]


def test_jit_trace_records_each_call():
    x = torch.randn(4, 8)
    traced = torch.jit.trace(Block(), (x,))
    for rows in (4, 6):  # another shape replays the library calls, not a recorded output
        other = torch.randn(rows, 8)
        assert torch.equal(traced(other), Block()(other))


def test_jit_trace_backward():
    x = torch.randn(4, 8)
    traced = torch.jit.trace(Block(), (x,))
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    traced(a).sum().backward()
    Block()(b).sum().backward()
    assert torch.equal(a.grad, b.grad)


def test_jit_trace_torch_ops():
    if not _ops.REGISTERED:
        pytest.skip(_ops.REASON)
    traced = torch.jit.trace(lambda t: torch.ops.infiniop.swiglu(t, 1), (torch.randn(4, 8),))
    other = torch.randn(5, 8)
    assert torch.equal(traced(other), infiniop.swiglu(other, 1))
    assert "infiniop::swiglu" in str(traced.graph)


def test_jit_script_torch_ops():
    """torch.jit.script compiles torch.ops.infiniop.* (not the Python functions), autograd
    included."""
    if not _ops.REGISTERED:
        pytest.skip(_ops.REASON)

    @torch.jit.script
    def block(x: torch.Tensor) -> torch.Tensor:
        return torch.ops.infiniop.gelu(torch.ops.infiniop.swiglu(x, -1), approximate="tanh")

    x = torch.randn(4, 8)
    assert torch.equal(block(x), infiniop.gelu(infiniop.swiglu(x), approximate="tanh"))
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    block(a).sum().backward()
    itorch.gelu(itorch.swiglu(b), approximate="tanh").sum().backward()
    assert torch.equal(a.grad, b.grad)


def test_jit_trace_of_the_functional_api_is_refused():
    """A trace would not record the ctypes call and would replay a stale output."""
    with pytest.raises(RuntimeError, match=r"infiniop\.torch\.<function>"):
        torch.jit.trace(lambda t: infiniop.swiglu(t, 1), (torch.randn(4, 8),))


def test_fx_symbolic_trace():
    graph = torch.fx.symbolic_trace(Block())
    assert "infiniop" in graph.code
    x = torch.randn(3, 8)
    assert torch.equal(graph(x), Block()(x))


def test_fx_of_moe_functions():
    class Layer(torch.nn.Module):
        def forward(self, x, ids, scales):
            expanded, row_idx, _, _ = itorch.moe_init_routing_v2(x, ids, expert_num=4)
            return itorch.moe_finalize_routing_v2(expanded * 2, row_idx, scales=scales,
                                                  expert_idx=ids, drop_pad_mode=2)

    graph = torch.fx.symbolic_trace(Layer())
    x, scales = torch.randn(5, 3), torch.rand(5, 2)
    ids = torch.topk(torch.randn(5, 4), 2).indices
    assert torch.equal(graph(x, ids, scales), Layer()(x, ids, scales))


def test_fx_of_the_functional_api_is_refused():
    class Plain(torch.nn.Module):
        def forward(self, x):
            return infiniop.swiglu(x)

    with pytest.raises(TypeError, match=r"x: a torch\.fx Proxy.*infiniop\.torch"):
        torch.fx.symbolic_trace(Plain())


# ----------------------------------------------------------------------------------------------
# 5. Autocast: the operators run in their inputs' dtype, as torch's own activations do; the
#    finalize promotes the floating inputs autocast left in different dtypes.

def registered():
    if not _ops.REGISTERED:
        pytest.skip(_ops.REASON)


def test_autocast_activation_keeps_the_input_dtype():
    registered()
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = x @ w  # lowered by autocast
        y = torch.ops.infiniop.swiglu(h)
        z = torch.ops.infiniop.gelu(x)  # float32 stays float32, as F.gelu(x) does
        assert F.gelu(x).dtype == torch.float32
    assert h.dtype == y.dtype == torch.bfloat16 and z.dtype == torch.float32
    assert torch.equal(y, infiniop.swiglu(h)) and torch.equal(z, infiniop.gelu(x))


def test_autocast_finalize_promotes_and_differentiates():
    registered()
    T, E, K, Hm = 6, 3, 2, 4
    g = torch.Generator().manual_seed(3)
    x = torch.randn(T, Hm, generator=g)
    ids = torch.topk(torch.randn(T, E, generator=g), K).indices
    scales = torch.rand(T, K, generator=g)
    w = torch.randn(Hm, Hm, generator=g).requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expanded, row_idx, _, _ = torch.ops.infiniop.moe_init_routing_v2(x, ids, expert_num=E)
        rows = expanded @ w
        out = torch.ops.infiniop.moe_finalize_routing_v2(rows, row_idx, x, None, None, scales,
                                                         ids, drop_pad_mode=2)
    assert rows.dtype == torch.bfloat16 and out.dtype == torch.float32
    want = infiniop.moe_finalize_routing_v2(rows.detach().float(), row_idx, x, None, None,
                                            scales, ids, drop_pad_mode=2)
    assert torch.equal(out.detach(), want)
    out.sum().backward()
    assert w.grad is not None and w.grad.dtype == torch.float32


def test_autocast_combine_promotes_the_residual():
    """docs/python.md's MoE-helper pattern under torch.autocast("cpu", bfloat16): the experts'
    matmuls come out BF16, the residual x1 = x stays F32, and moe.combine (the Python function,
    not the dispatcher's op) promotes as the op's AutocastCPU kernel does: out is F32, equal to
    the call on promoted inputs, and differentiable."""
    from infiniop.torch import moe

    T, H, E, K = 8, 8, 4, 2
    g = torch.Generator().manual_seed(5)
    x = torch.randn(T, H, generator=g)
    W_r = torch.randn(H, E, generator=g)
    W1 = torch.randn(E, H, 2 * H, generator=g).requires_grad_()
    W2 = torch.randn(E, H, H, generator=g)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        scales, ids = torch.topk(torch.softmax(x @ W_r, dim=-1), K)
        routed = moe.dispatch(x, ids, E)
        h = routed.map_experts(lambda e, rows: rows @ W1[e])
        y = routed.map_experts(lambda e, rows: rows @ W2[e], itorch.swiglu(h))
        out = moe.combine(y, routed, scales, x1=x)
    assert y.dtype == torch.bfloat16 and out.dtype == torch.float32
    want = moe.combine(y.detach().float(), routed, scales.float(), x1=x)
    assert torch.equal(out.detach(), want)
    out.sum().backward()
    assert W1.grad is not None and torch.isfinite(W1.grad).all()
