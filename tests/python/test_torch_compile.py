# SPDX-License-Identifier: Apache-2.0
"""PyTorch 2: the activations under torch.compile, torch.library.opcheck and torch.export
(python/infiniop/torch/_compile.py). Skipped on a PyTorch without torch.library's
register_fake and register_autograd (1.x).

The oracle is eager mode: a compiled model whose activations are infiniop.torch's calls the same
library functions, so its forward and its gradients must have eager mode's bits. Inductor
computes the model's own BF16 arithmetic (here a scale between two activations) in F32 unless
told to round as eager does (torch._inductor.config.emulate_precision_casts), so the test sets
it: what is compared is then the library's part.
"""

import pytest
import torch

import infiniop
import infiniop.torch as itorch
from infiniop.torch import _ops

from helpers import random_tensor, rng_for

pytestmark = pytest.mark.skipif(not (_ops.REGISTERED and _ops.COMPILABLE),
                                reason="torch.compile support needs PyTorch 2.4 or later")

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def model(x, group_index):
    """Every activation of infiniop.torch, forward and (under autograd) backward."""
    a = itorch.swiglu(x)                                           # (R, 32)
    b = itorch.gelu(a, approximate="tanh")
    c = itorch.gelu_mul(torch.cat([b, itorch.gelu(a)], -1))        # erf
    d = itorch.clipped_swiglu(torch.cat([c, c * 3], -1), group_index=group_index)
    e = itorch.clipped_swiglu(torch.cat([d, d], -1), clamp_mode=1, interleaved=False, limit=2.0)
    return e


def inputs(dtype_name, rows, seed):
    rng = rng_for("torch-compile", dtype_name, rows, seed)
    x = random_tensor(rng, (rows, 64), dtype_name) * 4
    group_index = torch.tensor([rows // 2, rows - rows // 2 - 1])  # the last row left out
    return x, group_index


def eager_and_compiled(compiled, x, group_index):
    results = []
    for fn in (model, compiled):
        leaf = x.detach().clone().requires_grad_()
        y = fn(leaf, group_index)
        y.backward(torch.ones_like(y))
        results.append((y.detach(), leaf.grad))
    return results


@pytest.fixture(autouse=True)
def eager_rounding():
    import torch._inductor.config as inductor
    torch._dynamo.reset()
    with inductor.patch(emulate_precision_casts=True):
        yield
    torch._dynamo.reset()


@pytest.mark.parametrize("dtype_name", DTYPES)
def test_fullgraph_no_graph_breaks_and_eager_bits(dtype_name):
    x, group_index = inputs(dtype_name, 6, 0)
    explained = torch._dynamo.explain(model)(x, group_index)
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1
    compiled = torch.compile(model, fullgraph=True)
    (y, g), (y_c, g_c) = eager_and_compiled(compiled, x, group_index)
    assert torch.equal(y, y_c) and torch.equal(g, g_c)


@pytest.mark.parametrize("dtype_name", DTYPES)
def test_dynamic_shapes_second_batch(dtype_name):
    compiled = torch.compile(model, fullgraph=True, dynamic=True)
    for rows in (6, 11):  # the second batch size reuses the dynamic graph
        x, group_index = inputs(dtype_name, rows, 1)
        (y, g), (y_c, g_c) = eager_and_compiled(compiled, x, group_index)
        assert y.shape == y_c.shape and torch.equal(y, y_c) and torch.equal(g, g_c)


def op_samples(dtype):
    """(operator name, args, kwargs) for every operator _compile registers."""
    rng = rng_for("torch-opcheck", str(dtype))
    x = (random_tensor(rng, (5, 16), "float32") * 4).to(dtype)
    half = torch.randn(5, 8).to(dtype)
    group_index = torch.tensor([2, 2])
    return [
        ("swiglu", (x.clone().requires_grad_(), -1), {}),
        ("swiglu_backward", (half, x), {"dim": -1}),
        ("gelu", (x.clone().requires_grad_(),), {"approximate": "tanh"}),
        ("gelu_backward_v2", (x, x), {"approximate": "none"}),
        ("gelu_mul", (x.clone().requires_grad_(),), {"approximate": "none"}),
        ("gelu_mul_backward", (half, x), {"approximate": "tanh"}),
        ("clipped_swiglu", (x.clone().requires_grad_(), -1, group_index), {"limit": 3.0}),
        ("clipped_swiglu", (x.clone().requires_grad_(), -1), {"clamp_mode": 1}),
        ("clipped_swiglu_backward", (half, x, -1, group_index), {"interleaved": False}),
    ]


@pytest.mark.parametrize("dtype_name", ["float32", "float16", "bfloat16"])
def test_opcheck(dtype_name):
    """Schema, fake kernel, autograd registration and AOT dispatch (static and dynamic) of each
    operator, on sample inputs of the dtype."""
    for name, args, kwargs in op_samples(getattr(torch, dtype_name)):
        torch.library.opcheck(getattr(torch.ops.infiniop, name).default, args, kwargs)


def test_export_runs():
    class Mlp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up = torch.nn.Linear(16, 64)
            self.down = torch.nn.Linear(32, 16)

        def forward(self, x):
            return self.down(itorch.gelu(itorch.swiglu(self.up(x)), approximate="tanh"))

    module = Mlp().eval()
    x = torch.randn(3, 16)
    with torch.no_grad():
        program = torch.export.export(module, (x,))
        assert any("infiniop" in str(node.target) for node in program.graph.nodes)
        assert torch.equal(program.module()(x), module(x))
        x2 = torch.randn(3, 16)
        assert torch.equal(program.module()(x2), module(x2))


def test_second_derivative_refused_through_the_operators():
    x = torch.randn(4, 16, requires_grad=True)
    y = torch.ops.infiniop.swiglu(x)
    (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="infiniop.torch.swiglu: no second derivative"):
        g.sum().backward()


def test_handle_is_refused_while_compiling():
    handle = infiniop.default_handle("cpu")
    compiled = torch.compile(lambda x: itorch.swiglu(x, handle=handle), fullgraph=True)
    with pytest.raises(Exception, match="handle= cannot be traced by torch.compile"):
        compiled(torch.randn(2, 8))
