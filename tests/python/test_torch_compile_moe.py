# SPDX-License-Identifier: Apache-2.0
"""PyTorch 2: the MoE routing operators, the routers and infiniop.torch.moe under torch.compile,
torch.library.opcheck and torch.export (python/infiniop/torch/_compile_moe.py). Skipped on a
PyTorch without torch.library's register_fake and register_autograd (1.x).

The oracle is eager mode, as in test_torch_compile.py: a compiled MoE layer calls the same
library functions, so its output and every gradient (x, the router's weight, the experts'
weights) must have eager mode's bits, at two batch sizes, static and dynamic. The layers keep
torch's own BF16 arithmetic out of what is compared where Inductor would round it differently
(each gradient reaches x by one path; the residual is a copy).
"""

import pytest
import torch

import infiniop.torch as itorch
import infiniop.torch.moe as moe
from infiniop.torch import _ops

from helpers import random_tensor, rng_for

pytestmark = pytest.mark.skipif(not (_ops.REGISTERED and _ops.COMPILABLE),
                                reason="torch.compile support needs PyTorch 2.4 or later")

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
E, K, H, F, C = 4, 2, 16, 32, 6  # experts, top-k, hidden, expert width, capacity


def weights(dtype_name):
    rng = rng_for("torch-compile-moe", dtype_name)
    return {"w_r": random_tensor(rng, (H, E), dtype_name),
            "w1": random_tensor(rng, (E, H, 2 * F), dtype_name) * 0.25,
            "w2": random_tensor(rng, (E, F, H), dtype_name) * 0.25,
            "bias": random_tensor(rng, (E,), dtype_name)}


def batched_layer(x, w):
    """DeepSeek-V3's grouped router, a drop/pad dispatch (E, C, H) and the experts as batched
    matmuls: no size depends on the routing, so it compiles as it is."""
    y, ids, norm = itorch.moe_gating_top_k(x.detach() @ w["w_r"], K, w["bias"], out_flag=True,
                                           routed_scaling_factor=1.5)
    d = moe.dispatch(x, ids, E, drop_pad_mode=1, expert_capacity=C)
    h = itorch.swiglu(torch.bmm(d.expanded_x, w["w1"]))
    out = torch.bmm(itorch.gelu(h, approximate="tanh"), w["w2"])
    return moe.combine(out, d, y, x1=x.detach() * 1) + norm[:, :1]


def dropless_layer(x, w):
    """The softmax router, a dropless dispatch and each expert on its own rows (map_experts):
    the rows per expert are the routing's data (capture_scalar_outputs)."""
    scales, ids, _, soft = itorch.moe_gating_top_k_softmax(x.detach() @ w["w_r"], K, None, 0,
                                                           True)
    d = moe.dispatch(x, ids, E)
    h = d.map_experts(lambda e, rows: rows @ w["w1"][e])
    out = d.map_experts(lambda e, rows: rows @ w["w2"][e], itorch.gelu_mul(h))
    return moe.combine(out, d, scales, x1=x.detach() * 1) + soft[:, :1]


LAYERS = {"batched": batched_layer, "dropless": dropless_layer}


def results(fn, x, w):
    """fn's output and the gradients of x and every weight, for an all-ones upstream."""
    x = x.detach().clone().requires_grad_()
    leaves = {name: t.detach().clone().requires_grad_() for name, t in w.items()
              if name != "bias"}
    out = fn(x, {**w, **leaves})
    out.backward(torch.ones_like(out))
    return [out.detach(), x.grad] + [leaves[name].grad for name in sorted(leaves)]


@pytest.fixture(autouse=True)
def compile_settings():
    import torch._dynamo.config as dynamo
    import torch._inductor.config as inductor
    torch._dynamo.reset()
    with inductor.patch(emulate_precision_casts=True), \
            dynamo.patch(capture_scalar_outputs=True):
        yield
    torch._dynamo.reset()


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("dtype_name", DTYPES)
def test_moe_layer_fullgraph_eager_bits(layer, dtype_name):
    fn, w = LAYERS[layer], weights(dtype_name)
    rng = rng_for("torch-compile-moe-x", dtype_name, layer)
    x = random_tensor(rng, (10, H), dtype_name)
    explained = torch._dynamo.explain(fn)(x, w)
    assert explained.graph_break_count == 0, explained.break_reasons
    for dynamic in (False, True):
        torch._dynamo.reset()
        compiled = torch.compile(fn, fullgraph=True, dynamic=dynamic)
        for rows in (10, 13):  # a second batch size: a recompile, or the dynamic graph again
            x = random_tensor(rng, (rows, H), dtype_name)
            for eager, comp in zip(results(fn, x, w), results(compiled, x, w)):
                assert eager.shape == comp.shape and torch.equal(eager, comp)


@pytest.mark.parametrize("layer", LAYERS)
def test_fullgraph_needs_no_captured_scalars(layer):
    """fullgraph=True traces the counts' .tolist() as unbacked sizes by itself; without
    fullgraph, Dynamo breaks the graph there unless capture_scalar_outputs is set (docs)."""
    import torch._dynamo.config as dynamo
    w = weights("float32")
    x = random_tensor(rng_for("torch-compile-moe-plain"), (7, H), "float32")
    with dynamo.patch(capture_scalar_outputs=False):
        compiled = torch.compile(LAYERS[layer], fullgraph=True)
        assert torch.equal(compiled(x, w), LAYERS[layer](x, w))


DISPATCH_MODES = {"dropless": {}, "active_num": {"active_num": 37},
                  "drop_pad": {"drop_pad_mode": 1, "expert_capacity": 9}}


@pytest.mark.parametrize("mode", DISPATCH_MODES)
def test_every_dispatch_mode_dynamic(mode):
    """map_experts and combine after each dispatch mode, compiled with dynamic=True at two
    batch sizes, tokens = hidden (a size the compiler may specialize: the counts' facts must
    not depend on it), and an expert-parallel part (combine(experts=)) of the same layer."""
    kwargs = DISPATCH_MODES[mode]
    w = weights("float32")
    w1 = w["w1"][..., :H] * 1  # (E, H, H)

    def layer(x):
        scales, ids, _ = itorch.moe_gating_top_k_softmax(x @ w["w_r"], K)
        d = moe.dispatch(x, ids, E, **kwargs)
        y = d.map_experts(lambda e, rows: rows @ w1[e])
        part = torch.cat([d.expert_rows(e, y) for e in range(1, 3)])
        if mode == "drop_pad":  # a part holds its experts' slots, (2, C, H)
            part = d.flat(y).reshape(E, d.expert_capacity, H)[1:3]
        return (moe.combine(y, d, scales, x1=x),
                moe.combine(part, d, scales, experts=range(1, 3)))

    compiled = torch.compile(layer, fullgraph=True, dynamic=True)
    rng = rng_for("torch-compile-moe-modes", mode)
    for rows in (H, H + 7):
        x = random_tensor(rng, (rows, H), "float32")
        for eager, comp in zip(layer(x), compiled(x)):
            assert torch.equal(eager, comp)


def op_samples(dtype):
    """(operator name, args, kwargs) for every MoE operator and router and their grads."""
    rng = rng_for("torch-opcheck-moe", str(dtype))
    x = (random_tensor(rng, (6, H), "float32") * 4).to(dtype)
    logits = (random_tensor(rng, (6, 8), "float32") * 4).to(dtype)
    ids = torch.tensor([[0, 3], [1, 2], [3, 0], [2, 1], [3, 1], [0, 2]], dtype=torch.int32)
    expanded, row_idx, _, _ = torch.ops.infiniop.moe_init_routing_v2(x, ids, expert_num=E)
    scales = torch.rand(6, K, generator=torch.Generator().manual_seed(1))
    bias = torch.randn(E, H).to(dtype)
    finished = torch.tensor([False, True, False, False, False, True])

    def grad(t):
        return t.clone().requires_grad_()

    return [
        ("moe_init_routing_v2", (grad(x), ids),
         {"expert_num": E, "expert_tokens_count_or_cumsum_flag": 2}),
        ("moe_init_routing_v2", (grad(x), ids.long()),
         {"expert_num": E, "drop_pad_mode": 1, "expert_capacity": 2,
          "expert_tokens_before_capacity_flag": True, "index_dtype": "int32"}),
        ("moe_init_routing_v2", (grad(x), ids), {"expert_num": E, "active_num": 7}),
        ("moe_finalize_routing_v2",
         (grad(expanded), row_idx, grad(x), None, grad(bias), grad(scales.to(dtype)), ids),
         {"drop_pad_mode": 2}),
        ("moe_finalize_routing_v2", (grad(expanded), row_idx, None, None, None, grad(scales),
                                     ids), {"drop_pad_mode": 2}),
        ("moe_gating_top_k_softmax", (grad(logits), K), {}),
        ("moe_gating_top_k_softmax", (grad(logits), K, finished, 0, True),
         {"index_dtype": "int64"}),
        ("moe_gating_top_k_softmax", (grad(logits), K, None, 1), {}),
        ("moe_gating_top_k", (grad(logits), K), {"out_flag": True}),
        ("moe_gating_top_k", (grad(logits), K, torch.randn(8), 2, 4, 1, 0, 1, False, 2.5), {}),
        ("moe_gating_top_k", (grad(logits), K), {"norm_type": 0, "out_flag": True}),
        ("moe_expert_capacity", (ids, E, 1, grad(scales.to(dtype))), {"drop_policy": 1}),
        ("moe_expert_capacity", (ids.long(), E, 2), {}),
        # The grad operators, on inputs that do not require grad (they have no derivative).
        ("moe_init_routing_v2_grad", (expanded, row_idx), {"top_k": K}),
        ("moe_finalize_routing_v2_grad", (x, row_idx, expanded, scales.to(dtype), ids, bias),
         {}),
        ("moe_gating_top_k_softmax_grad", (torch.randn(6, K).to(dtype), logits, ids[:, :K]),
         {"renorm": 1}),
        ("moe_gating_top_k_grad", (torch.randn(6, K).to(dtype), logits, ids),
         {"routed_scaling_factor": 2.0}),
    ]


@pytest.mark.parametrize("dtype_name", ["float32", "float16", "bfloat16"])
def test_opcheck(dtype_name):
    """Schema, fake kernel, autograd registration and AOT dispatch (static and dynamic)."""
    for name, args, kwargs in op_samples(getattr(torch, dtype_name)):
        utils = {}
        if name == "moe_expert_capacity":
            # opcheck's AOT checks sum the outputs into the first one's dtype, and this one's
            # first output is kept_idx (integer): the float weights_out cannot be added to it.
            # Its AOT dispatch, forward and backward, is test_moe_capacity's torch.compile test.
            utils = {"test_utils": ("test_schema", "test_autograd_registration",
                                    "test_faketensor")}
        torch.library.opcheck(getattr(torch.ops.infiniop, name).default, args, kwargs, **utils)


def test_second_derivative_refused_through_the_grad_operators():
    logits = torch.randn(5, 8, requires_grad=True)
    y, _, _ = torch.ops.infiniop.moe_gating_top_k(logits, 2)
    (g,) = torch.autograd.grad(y.sum(), logits, create_graph=True)
    with pytest.raises(RuntimeError,
                       match="infiniop.torch.moe_gating_top_k: no second derivative"):
        g.sum().backward()


def test_export_moe_inference_runs():
    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = weights("float32")

        def forward(self, x):
            return batched_layer(x, self.w)

    module = Layer().eval()
    rng = rng_for("torch-export-moe")
    x = random_tensor(rng, (9, H), "float32")
    with torch.no_grad():
        program = torch.export.export(module, (x,))
        targets = {str(node.target) for node in program.graph.nodes}
        assert {"infiniop.moe_gating_top_k.default", "infiniop.moe_init_routing_v2.default",
                "infiniop.moe_finalize_routing_v2.default"} <= targets, targets
        for batch in (x, random_tensor(rng, (9, H), "float32")):  # another routing
            assert torch.equal(program.module()(batch), module(batch))


def npu_model(x, logits, g):
    """Every torch_npu alias (npu_moe_init_routing_v2 with its key_value counts and scale)."""
    a = itorch.npu_swiglu(x)
    b = itorch.npu_gelu(a, approximate="tanh")
    c = itorch.npu_gelu_backward(g, b)
    d = itorch.npu_gelu_mul(torch.cat([c, c], -1))
    e = itorch.npu_clipped_swiglu(torch.cat([d, d], -1), limit=3.0)
    y, ids, _ = itorch.npu_moe_gating_top_k_softmax(logits, k=K)
    y2 = itorch.npu_moe_gating_top_k_softmax_v2(logits, K, None, 1, False)[0]
    y3 = itorch.npu_moe_gating_top_k(logits, K, routed_scaling_factor=2.0)[0]
    expanded, row_idx, numbers, scale = itorch.npu_moe_init_routing_v2(
        e, ids, expert_num=8, expert_tokens_num_flag=True, expert_tokens_num_type=2,
        row_idx_type=1, scale=torch.ones(e.shape[0]))
    out = itorch.npu_moe_finalize_routing(expanded, e, None, None, y + y2 + y3, row_idx, ids,
                                          drop_pad_mode=2)
    return out, numbers, scale


def test_npu_aliases_fullgraph_eager_bits():
    rng = rng_for("torch-compile-npu")
    args = (random_tensor(rng, (6, 64), "float32"), random_tensor(rng, (6, 8), "float32"),
            random_tensor(rng, (6, 32), "float32"))
    explained = torch._dynamo.explain(npu_model)(*args)
    assert explained.graph_break_count == 0, explained.break_reasons
    compiled = torch.compile(npu_model, fullgraph=True)
    for eager, comp in zip(npu_model(*args), compiled(*args)):
        assert torch.equal(eager, comp)


def test_autocast_layer_fullgraph_eager_bits():
    """Under torch.autocast("cpu", bfloat16) the combine promotes a BF16 expert output and a
    F32 residual as in eager mode (the AutocastCPU kernel; torch_compile traces the same)."""
    w = weights("float32")

    def layer(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y, ids, _ = itorch.moe_gating_top_k_softmax(x @ w["w_r"], K)
            d = moe.dispatch(x, ids, E, drop_pad_mode=1, expert_capacity=C)
            h = itorch.swiglu(torch.bmm(d.expanded_x, w["w1"]))
            return moe.combine(torch.bmm(h, w["w2"]), d, y, x1=x)

    x = random_tensor(rng_for("torch-compile-autocast"), (10, H), "float32")
    want = layer(x)
    assert want.dtype == torch.float32
    got = torch.compile(layer, fullgraph=True)(x)
    assert got.dtype == want.dtype and torch.equal(got, want)
