# SPDX-License-Identifier: Apache-2.0
"""MoeFinalizeRoutingV2 and MoeFinalizeRoutingV2Grad through the Python binding, on every device
(helpers.DEVICES: cpu, cpu_reference, opencl).

Oracle: a plain PyTorch float64 forward on the inputs already rounded to the test dtype:
    pos[r, k] = expanded_row_idx[k*R + r] (drop_pad_mode 0, 1) or [r*K + k] (2, 3, the grad)
    rows = expanded_x viewed as (N, H) with one extra zero row that every index outside
           [0, N) (-1, or a skipped inactive index of the grad's mode 0) points to
    out = x1 + x2 + sum_k w[r, k] * (rows[pos[r, k]] + bias[expert_idx[r, k]])
with w = scales (1 without scales, K = 1). The grad's oracle is torch autograd of that forward
(row layout) with respect to expanded_x (zeros when absent) and scales: it sums duplicate
indices and gives zero rows where no index reaches.

Error model (all in float64, U = 2^-24; "terms" are the same formulas evaluated on |inputs|,
so that sum|terms| is the magnitude of everything the F32 chain adds up):
    forward          F32 bound = (2K + 3) U * (|x1| + |x2| + sum_k |w| (|rows| + |bias|))
    grad_expanded_x  F32 bound = c U * sum over the c contributions of |grad_y w|  (c >= 1;
                     c = 1 is a single product, exact for F16/BF16 inputs); rows reached by
                     no index must be EXACTLY 0
    grad_scales      F32 bound = (H + 2) U * sum_j (|rows| + |bias|) |grad_y|; H = 0 gives
                     exactly 0
  F32 outputs:       the bound + one F32 subnormal ulp
  F16/BF16 outputs:  the bound + 1 ulp of the output type at |truth|   (helpers.assert_matches)
Inputs are signed, 2^-8 .. 2^3 in magnitude with some exact zeros (seeded per case), small
enough that no F16 result overflows. Index tensors are INT32, and INT64 (each independently) in
the mixture tests; F32 scales with F16/BF16 activations are drawn unrounded (24-bit mantissas),
grad_scales then F32 and checked with the F32 model, the other outputs with the activations'.
Outputs are poisoned with NaN before every call; failing calls must leave SENTINEL-filled
outputs untouched.
"""

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import infiniop
from infiniop import InfiniopError, Status

from helpers import (DEVICES, SENTINEL, TORCH_DTYPES, assert_infiniop_error, assert_matches,
                     assert_untouched_outside, make_output, on, open_handle, rng_for, run_op)
from helpers import JunkPointers, device_handle, expect_error, same_bits

U = 2.0 ** -24
HIDDEN_SIZES = [1, 3, 17, 67]
I32 = torch.int32


# ----------------------------------------------------------------------------------------------
# Inputs

def values(rng, shape):
    """Signed values of magnitude 2^-8 .. 2^3, about 5% exactly 0."""
    n = math.prod(shape)
    v = rng.choice([-1.0, 1.0], n) * 2.0 ** rng.uniform(-8.0, 3.0, n)
    v[rng.random(n) < 0.05] = 0.0
    return v.reshape(shape)


def ftensor(rng, shape, dtype_name):
    return torch.from_numpy(values(rng, shape)).to(TORCH_DTYPES[dtype_name])


def itensor(values_):
    return torch.as_tensor(np.asarray(values_, dtype=np.int64)).to(I32)


def slot_indices(rng, n, slots, dropped=0, duplicates=False):
    """n index values in [0, slots): distinct (slots >= n), or with duplicates drawn from
    [0, slots // 2); then `dropped` of them (at random places) set to -1."""
    if duplicates:
        # from half the slots: several values per row, and rows that nobody reaches
        idx = rng.integers(0, max(slots // 2, 1), n) if slots else np.zeros(n, np.int64)
    else:
        idx = rng.permutation(slots)[:n]
    idx = np.array(idx, dtype=np.int64)
    if dropped:
        idx[rng.choice(n, dropped, replace=False)] = -1
    return itensor(idx)


def relayout(t, layout):
    """A copy of t (same values) with the given memory layout: 'contiguous', 'transposed'
    (every dimension's order reversed in memory) or 'strided' (every other element of a wider
    last dimension, at an odd offset; the gaps hold SENTINEL or 7)."""
    if layout == "contiguous":
        return t.clone()
    if layout == "transposed":
        dims = tuple(reversed(range(t.dim())))
        storage = torch.empty(tuple(reversed(t.shape)), dtype=t.dtype)
        view = storage.permute(*dims)
    elif layout == "strided":
        shape = tuple(t.shape)
        if not shape:
            return t.clone()
        fill = SENTINEL if t.is_floating_point() else 7
        storage = torch.full(shape[:-1] + (2 * shape[-1] + 1,), fill, dtype=t.dtype)
        view = storage[..., 1::2]
    else:
        raise ValueError(layout)
    view.copy_(t)
    return view


# ----------------------------------------------------------------------------------------------
# The oracle

def gather_rows(table, pos):
    """table (N, H) float64, pos (...) int: table[pos], a zero row where pos is outside [0, N)."""
    n, hidden = table.shape
    padded = torch.cat([table, table.new_zeros(1, hidden)])
    pos = pos.long()
    safe = torch.where((pos >= 0) & (pos < n), pos, torch.full_like(pos, n))
    return padded[safe]


def reference_forward(expanded_x, row_idx, x1, x2, bias, scales, expert_idx, row_layout):
    """Float64 forward of float64 tensors (expanded_x (..., H); any of the optional ones None)."""
    hidden = expanded_x.shape[-1]
    k = scales.shape[1] if scales is not None else 1
    r = scales.shape[0] if scales is not None else row_idx.numel()
    idx = row_idx.long().reshape(-1)
    pos = idx.reshape(r, k) if row_layout else idx.reshape(k, r).t()
    n = math.prod(expanded_x.shape[:-1])
    gathered = gather_rows(expanded_x.reshape(n, hidden), pos)  # (R, K, H)
    if bias is not None:
        gathered = gathered + bias[expert_idx.long()]
    w = scales if scales is not None else torch.ones(r, k, dtype=torch.float64)
    out = (w.unsqueeze(-1) * gathered).sum(1)
    if x1 is not None:
        out = out + x1
    if x2 is not None:
        out = out + x2
    return out


def d64(t, absolute=False):
    if t is None:
        return None
    t = t.double()
    return t.abs() if absolute else t


def forward_truth(inputs, mode):
    """(truth, sum of |terms|) of the forward for the dict of inputs."""
    results = []
    for absolute in (False, True):
        results.append(reference_forward(
            d64(inputs["expanded_x"], absolute), inputs["expanded_row_idx"],
            d64(inputs.get("x1"), absolute), d64(inputs.get("x2"), absolute),
            d64(inputs.get("bias"), absolute), d64(inputs.get("scales"), absolute),
            inputs.get("expert_idx"), row_layout=mode in (2, 3)))
    return results


def grad_truth(inputs, gx_shape):
    """(grad_expanded_x, |terms| of it, grad_scales or None, |terms| of it or None) by autograd
    of reference_forward (row layout)."""
    results = []
    for absolute in (False, True):
        ex = inputs.get("expanded_x")
        ex = (torch.zeros(gx_shape, dtype=torch.float64) if ex is None
              else d64(ex, absolute).clone())
        ex.requires_grad_()
        scales = d64(inputs.get("scales"), absolute)
        if scales is not None:
            scales = scales.clone().requires_grad_()
        out = reference_forward(ex, inputs["expanded_row_idx"], None, None,
                                d64(inputs.get("bias"), absolute), scales,
                                inputs.get("expert_idx"), row_layout=True)
        out.backward(d64(inputs["grad_y"], absolute))
        gx = ex.grad if ex.grad is not None else torch.zeros(gx_shape, dtype=torch.float64)
        gs = None
        if scales is not None:
            gs = scales.grad if scales.grad is not None else torch.zeros_like(scales)
        results += [gx, gs]
    return results[0], results[2], results[1], results[3]


def contributions(row_idx, rows):
    """How many index values land on each of `rows` rows (values outside [0, rows) skipped)."""
    idx = row_idx.long().reshape(-1)
    valid = idx[(idx >= 0) & (idx < rows)]
    if not rows:
        return torch.zeros(0, dtype=torch.long)
    return torch.bincount(valid, minlength=rows)[:rows]


# ----------------------------------------------------------------------------------------------
# Running and checking

def run_forward(inputs, mode, device, dtype_name, out_layout="contiguous"):
    """Run the forward into a NaN-poisoned out of out_layout; returns out (checked: nothing
    written outside it)."""
    r, hidden = expected_forward_shape(inputs)
    out, storage, mask = make_output((r, hidden), dtype_name, out_layout)
    result = infiniop.moe_finalize_routing_v2(
        inputs["expanded_x"], inputs["expanded_row_idx"], inputs.get("x1"), inputs.get("x2"),
        inputs.get("bias"), inputs.get("scales"), inputs.get("expert_idx"),
        drop_pad_mode=mode, **on(device), out=out)
    assert result is out
    assert_untouched_outside(storage, mask)
    return out


def expected_forward_shape(inputs):
    scales = inputs.get("scales")
    r = scales.shape[0] if scales is not None else inputs["expanded_row_idx"].numel()
    return r, inputs["expanded_x"].shape[-1]


def check_forward(out, inputs, mode, dtype_name, what):
    truth, terms = forward_truth(inputs, mode)
    k = inputs["scales"].shape[1] if inputs.get("scales") is not None else 1
    assert_matches(out, truth.numpy(), (2 * k + 3) * U * terms.numpy(), dtype_name, what)


def run_grad(inputs, attrs, device, dtype_name, gx_shape, out_layout="contiguous",
             with_grad_scales=True, gs_dtype_name=None):
    """Run the grad into NaN-poisoned outputs of out_layout; returns (grad_expanded_x,
    grad_scales or None). grad_scales is of gs_dtype_name (the scales' dtype; default
    dtype_name)."""
    gx, gx_storage, gx_mask = make_output(gx_shape, dtype_name, out_layout)
    gs = None
    if inputs.get("scales") is not None and with_grad_scales:
        gs, gs_storage, gs_mask = make_output(tuple(inputs["scales"].shape),
                                              gs_dtype_name or dtype_name, out_layout)
    got_gx, got_gs = infiniop.moe_finalize_routing_v2_grad(
        inputs["grad_y"], inputs["expanded_row_idx"], inputs.get("expanded_x"),
        inputs.get("scales"), inputs.get("expert_idx"), inputs.get("bias"), **on(device),
        grad_expanded_x=gx, grad_scales=gs, **attrs)
    assert got_gx is gx and got_gs is gs
    assert_untouched_outside(gx_storage, gx_mask)
    if gs is not None:
        assert_untouched_outside(gs_storage, gs_mask)
    return gx, gs


def check_grad(gx, gs, inputs, gx_shape, dtype_name, what, gs_dtype_name=None):
    """grad_expanded_x within the model of dtype_name, grad_scales within that of gs_dtype_name
    (the scales' dtype; default dtype_name)."""
    truth_gx, terms_gx, truth_gs, terms_gs = grad_truth(inputs, gx_shape)
    rows = math.prod(gx_shape[:-1])
    hidden = gx_shape[-1]
    counts = contributions(inputs["expanded_row_idx"], rows).double()
    c = counts.clamp(min=1).reshape(tuple(gx_shape[:-1]) + (1,)).expand(gx_shape)
    zero = (counts == 0).reshape(tuple(gx_shape[:-1]) + (1,)).expand(gx_shape)
    assert_matches(gx, truth_gx.numpy(), (c * U * terms_gx).numpy(), dtype_name,
                   f"{what}: grad_expanded_x", exact_zero=zero.numpy())
    if gs is not None:
        zero_gs = np.full(tuple(gs.shape), hidden == 0)
        assert_matches(gs, truth_gs.numpy(), ((hidden + 2) * U * terms_gs).numpy(),
                       gs_dtype_name or dtype_name, f"{what}: grad_scales", exact_zero=zero_gs)


# ----------------------------------------------------------------------------------------------
# Forward: every mode, every allowed combination of optional inputs, H, dtype, device

FORWARD_MODES = [0, 1, 2, 3]
X_OPTIONS = ["none", "x1", "x1+x2"]
BIAS_OPTIONS = ["none", "bias", "expert_idx"]  # bias always comes with expert_idx
FORWARD_COMBOS = [(x, b, s) for x in X_OPTIONS for b in BIAS_OPTIONS for s in (True, False)]


def forward_inputs(rng, mode, hidden, dtype_name, x_opt="x1+x2", bias_opt="bias", scales=True,
                   r=None, k=3, experts=4, capacity=5, dropped=2, duplicates=False):
    """A valid forward case. Modes 0/2: expanded_x (R*K, H), values in [0, R*K); modes 1/3:
    expanded_x (E, C, H), values in [-1, E*C) with `dropped` -1 entries and unfilled slots."""
    k = k if scales else 1
    r = (5 if scales else 7) if r is None else r
    n = r * k
    inputs = {}
    if mode in (0, 2):
        inputs["expanded_x"] = ftensor(rng, (n, hidden), dtype_name)
        inputs["expanded_row_idx"] = slot_indices(rng, n, n, duplicates=duplicates)
        bias_rows = 4
    else:
        inputs["expanded_x"] = ftensor(rng, (experts, capacity, hidden), dtype_name)
        inputs["expanded_row_idx"] = slot_indices(rng, n, experts * capacity,
                                                  min(dropped, n), duplicates)
        bias_rows = experts
    if x_opt in ("x1", "x1+x2"):
        inputs["x1"] = ftensor(rng, (r, hidden), dtype_name)
    if x_opt == "x1+x2":
        inputs["x2"] = ftensor(rng, (r, hidden), dtype_name)
    if bias_opt in ("bias", "expert_idx"):
        inputs["expert_idx"] = itensor(rng.integers(0, bias_rows, (r, k)))
    if bias_opt == "bias":
        inputs["bias"] = ftensor(rng, (bias_rows, hidden), dtype_name)
    if scales:
        inputs["scales"] = ftensor(rng, (r, k), dtype_name)
    return inputs


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("mode", FORWARD_MODES)
@pytest.mark.parametrize("hidden", HIDDEN_SIZES)
def test_forward(device, dtype_name, mode, hidden):
    for x_opt, bias_opt, scales in FORWARD_COMBOS:
        rng = rng_for("forward", dtype_name, mode, hidden, x_opt, bias_opt, scales)
        inputs = forward_inputs(rng, mode, hidden, dtype_name, x_opt, bias_opt, scales)
        out = run_forward(inputs, mode, device, dtype_name)
        check_forward(out, inputs, mode, dtype_name,
                      f"{device} mode {mode} H={hidden} {x_opt} {bias_opt} scales={scales}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", FORWARD_MODES)
def test_forward_literal_formula(device, mode):
    """Small integers, exact in F32: the result equals, bit for bit, the formula of
    SEMANTICS.md written out as loops (checks the oracle's reading of the layouts too)."""
    r, k, hidden, experts, capacity = 3, 2, 4, 2, 4
    gen = torch.Generator().manual_seed(mode)
    if mode in (0, 2):
        ex = torch.randint(-8, 8, (r * k, hidden), generator=gen).float()
        idx = torch.randperm(r * k, generator=gen).to(I32)
    else:
        ex = torch.randint(-8, 8, (experts, capacity, hidden), generator=gen).float()
        idx = torch.randperm(experts * capacity, generator=gen)[:r * k].to(I32)
        idx[1] = -1
    x1 = torch.randint(-8, 8, (r, hidden), generator=gen).float()
    x2 = torch.randint(-8, 8, (r, hidden), generator=gen).float()
    bias = torch.randint(-8, 8, (experts, hidden), generator=gen).float()
    scales = torch.randint(-4, 4, (r, k), generator=gen).float() / 2
    eidx = torch.randint(0, experts, (r, k), generator=gen).to(I32)
    out = infiniop.moe_finalize_routing_v2(ex, idx, x1, x2, bias, scales, eidx,
                                           drop_pad_mode=mode, **on(device))
    rows = ex.reshape(-1, hidden)
    expected = torch.zeros(r, hidden)
    for t in range(r):
        expected[t] = x1[t] + x2[t]
        for j in range(k):
            d = int(idx[j * r + t] if mode in (0, 1) else idx[t * k + j])
            row = rows[d] if d >= 0 else torch.zeros(hidden)
            expected[t] += scales[t, j] * (row + bias[int(eidx[t, j])])
    assert torch.equal(out, expected)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", FORWARD_MODES)
def test_forward_layouts_differ(device, mode):
    """Column layout (modes 0, 1) and row layout (2, 3) read expanded_row_idx differently: the
    same inputs give the oracle's answer for each, and the two answers differ."""
    rng = rng_for("forward-layout", mode)
    inputs = forward_inputs(rng, mode, 5, "float32", "none", "none", True, r=4, k=3)
    other = {0: 2, 1: 3, 2: 0, 3: 1}[mode]
    out = run_forward(inputs, mode, device, "float32")
    out_other = run_forward(inputs, other, device, "float32")
    check_forward(out, inputs, mode, "float32", f"{device} mode {mode}")
    check_forward(out_other, inputs, other, "float32", f"{device} mode {other}")
    assert not torch.equal(out, out_other)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("mode", FORWARD_MODES)
def test_forward_duplicates_and_drops(device, dtype_name, mode):
    """Repeated index values (each reads the same row); in modes 1/3 many dropped tokens (-1)
    whose bias is still added and scaled, and one token with every slot dropped."""
    rng = rng_for("forward-dup", dtype_name, mode)
    inputs = forward_inputs(rng, mode, 17, dtype_name, "x1", "bias", True, r=6, k=2,
                            experts=2, capacity=3, dropped=5, duplicates=True)
    if mode in (1, 3):
        row_layout = mode == 3
        idx = inputs["expanded_row_idx"].clone()
        for kk in range(2):  # token 0's every slot dropped
            idx[kk if row_layout else kk * 6] = -1
        inputs["expanded_row_idx"] = idx
    out = run_forward(inputs, mode, device, dtype_name)
    check_forward(out, inputs, mode, dtype_name, f"{device} mode {mode} duplicates")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("mode", FORWARD_MODES)
@pytest.mark.parametrize("k,hidden", [(8, 2100), (9, 67), (19, 1030)])
def test_forward_many_rows(device, dtype_name, mode, k, hidden):
    """K at and beyond the cpu's 8-row groups (the sum then crosses groups through its F32
    accumulator), and H over several of its 1024-element tiles, with a short last one."""
    rng = rng_for("forward-many", dtype_name, mode, k, hidden)
    inputs = forward_inputs(rng, mode, hidden, dtype_name, "x1+x2", "bias", True, r=3, k=k,
                            experts=4, capacity=k + 2, dropped=3)
    out = run_forward(inputs, mode, device, dtype_name)
    check_forward(out, inputs, mode, dtype_name, f"{device} mode {mode} K={k} H={hidden}")


FORWARD_LAYOUTS = [("transposed", "contiguous"), ("strided", "strided"),
                   ("contiguous", "transposed"), ("strided", "transposed"),
                   ("transposed", "strided")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
@pytest.mark.parametrize("mode", FORWARD_MODES)
@pytest.mark.parametrize("in_layout,out_layout", FORWARD_LAYOUTS)
def test_forward_strides(device, dtype_name, mode, in_layout, out_layout):
    """Every input (index tensors included) and the output in non-contiguous layouts."""
    rng = rng_for("forward-strides", dtype_name, mode, in_layout, out_layout)
    inputs = forward_inputs(rng, mode, 17, dtype_name)
    laid = {name: relayout(t, in_layout) for name, t in inputs.items()}
    out = run_forward(laid, mode, device, dtype_name, out_layout)
    check_forward(out, inputs, mode, dtype_name, f"{device} {in_layout} -> {out_layout}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", FORWARD_MODES)
def test_forward_broadcast_inputs(device, mode):
    """Stride 0 on inputs: x1, x2 one row for all tokens, scales one column for all k, bias one
    row for all experts, expert_idx one value, expanded_x one row per expert (modes 1/3) or
    for all rows (0/2), expanded_row_idx one value for all (every token reads the same row)."""
    rng = rng_for("forward-broadcast", mode)
    r, k, hidden = 5, 3, 9
    inputs = forward_inputs(rng, mode, hidden, "float32", r=r, k=k)
    if mode in (0, 2):
        inputs["expanded_x"] = ftensor(rng, (1, hidden), "float32").expand(r * k, hidden)
    else:
        inputs["expanded_x"] = ftensor(rng, (4, 1, hidden), "float32").expand(4, 5, hidden)
    inputs["expanded_row_idx"] = itensor([3]).expand(r * k)
    inputs["x1"] = ftensor(rng, (1, hidden), "float32").expand(r, hidden)
    inputs["x2"] = ftensor(rng, (r, 1), "float32").expand(r, hidden)
    inputs["scales"] = ftensor(rng, (r, 1), "float32").expand(r, k)
    inputs["bias"] = ftensor(rng, (1, hidden), "float32").expand(4, hidden)
    inputs["expert_idx"] = itensor([[2]]).expand(r, k)
    out = run_forward(inputs, mode, device, "float32")
    check_forward(out, inputs, mode, "float32", f"{device} broadcast mode {mode}")


@pytest.mark.parametrize("device", DEVICES)
def test_forward_numpy_negative_strides(device):
    """NumPy arrays, every one reversed (negative strides): read correctly or rejected with
    BAD_TENSOR_STRIDES, never misread."""
    rng = rng_for("forward-numpy")
    for mode in FORWARD_MODES:
        inputs = forward_inputs(rng, mode, 6, "float32", r=4, k=2)
        arrays = {}
        for name, t in inputs.items():
            a = t.numpy().copy()
            arrays[name] = np.flip(np.ascontiguousarray(np.flip(a)))  # same values, strides < 0
            assert (arrays[name] == a).all() and arrays[name].strides[0] < 0
        out = np.flip(np.full((4, 6), np.nan, np.float32))
        try:
            result = infiniop.moe_finalize_routing_v2(
                arrays["expanded_x"], arrays["expanded_row_idx"], arrays["x1"], arrays["x2"],
                arrays["bias"], arrays["scales"], arrays["expert_idx"], drop_pad_mode=mode,
                **on(device), out=out)
        except InfiniopError as error:
            assert error.status == Status.BAD_TENSOR_STRIDES, str(error)
            continue
        assert result is out
        check_forward(torch.from_numpy(out.copy()), inputs, mode, "float32",
                      f"{device} numpy reversed mode {mode}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", FORWARD_MODES)
def test_forward_zero_size(device, mode):
    rng = rng_for("forward-zero", mode)
    # R = 0: out (0, H); H = 0: out (R, 0).
    for r, hidden in ((0, 5), (4, 0)):
        inputs = forward_inputs(rng, mode, hidden, "float32", r=r, k=2,
                                dropped=0 if r == 0 else 1)
        out = run_forward(inputs, mode, device, "float32")
        assert out.shape == (r, hidden)
    # K = 0 with scales: out = x1 + x2.
    inputs = forward_inputs(rng, mode, 5, "float32", r=3, k=1)
    inputs["scales"] = torch.empty(3, 0)
    inputs["expert_idx"] = torch.empty(3, 0, dtype=I32)
    inputs["expanded_row_idx"] = torch.empty(0, dtype=I32)
    if mode in (0, 2):
        inputs["expanded_x"] = torch.empty(0, 5)
    out = run_forward(inputs, mode, device, "float32")
    check_forward(out, inputs, mode, "float32", f"{device} K = 0")


@pytest.mark.parametrize("device", DEVICES)
def test_forward_allocates_out(device):
    rng = rng_for("forward-alloc")
    for dtype_name in TORCH_DTYPES:
        for scales in (True, False):
            for x_opt in ("none", "x1"):
                inputs = forward_inputs(rng, 1, 7, dtype_name, x_opt, "bias", scales)
                out = infiniop.moe_finalize_routing_v2(
                    inputs["expanded_x"], inputs["expanded_row_idx"], inputs.get("x1"),
                    bias=inputs["bias"], scales=inputs.get("scales"),
                    expert_idx=inputs["expert_idx"], drop_pad_mode=1, **on(device))
                assert out.dtype == TORCH_DTYPES[dtype_name] and out.is_contiguous()
                assert out.shape == expected_forward_shape(inputs)
                check_forward(out, inputs, 1, dtype_name, "allocated out")
    a = forward_inputs(rng, 0, 4, "float32", "x1", "none", True)
    arrays = {name: t.numpy() for name, t in a.items()}
    out = infiniop.moe_finalize_routing_v2(arrays["expanded_x"], arrays["expanded_row_idx"],
                                           arrays["x1"], scales=arrays["scales"], **on(device))
    assert isinstance(out, np.ndarray) and out.shape == (5, 4) and out.dtype == np.float32
    check_forward(torch.from_numpy(out), a, 0, "float32", "numpy")


# ----------------------------------------------------------------------------------------------
# Grad: both modes, active_num, drop/pad, optional inputs, H, dtype, device

# (name, scales, expanded_x, bias option)
GRAD_COMBOS = [
    ("scales", True, True, "none"),
    ("scales+bias", True, True, "bias"),
    ("scales+expert_idx", True, True, "expert_idx"),
    ("plain", False, False, "none"),
    ("expanded_x unread", False, True, "none"),
    ("bias unread", False, False, "bias"),
    ("all unread", False, True, "bias"),
]
# Mode 0: active_num relative to R*K; mode 1: (expert_num, expert_capacity, dropped tokens).
GRAD_CONFIGS = [("mode0", a) for a in ("zero", "one", "half", "all-1", "all", "more")] + \
               [("mode1", (4, 5, 3)), ("mode1", (2, 9, 0)), ("mode1", (5, 1, 2))]


def active_value(name, n):
    return {"zero": 0, "one": 1, "half": n // 2, "all-1": n - 1, "all": n, "more": n + 4}[name]


def grad_inputs(rng, config, hidden, dtype_name, scales=True, with_x=True, bias_opt="none",
                r=None, k=3, duplicates=False):
    """(inputs, attrs, grad_expanded_x shape) of a valid grad case."""
    mode, setting = config
    k = k if scales else 1
    r = (5 if scales else 7) if r is None else r
    n = r * k
    inputs = {"grad_y": ftensor(rng, (r, hidden), dtype_name)}
    if mode == "mode0":
        active = active_value(setting, n) if isinstance(setting, str) else setting
        rows = active if 0 < active < n else n
        attrs = {"drop_pad_mode": 0, "active_num": active}
        gx_shape = (rows, hidden)
        inputs["expanded_row_idx"] = slot_indices(rng, n, n, duplicates=duplicates)
        bias_rows = 4
    else:
        experts, capacity, dropped = setting
        attrs = {"drop_pad_mode": 1, "expert_num": experts, "expert_capacity": capacity}
        gx_shape = (experts, capacity, hidden)
        slots = experts * capacity
        if slots < n and not duplicates:  # more tokens than slots: the rest dropped
            idx = np.full(n, -1, np.int64)
            idx[rng.choice(n, slots, replace=False)] = rng.permutation(slots)
            inputs["expanded_row_idx"] = itensor(idx)
        else:
            inputs["expanded_row_idx"] = slot_indices(rng, n, slots, min(dropped, n), duplicates)
        bias_rows = experts
    if with_x:
        inputs["expanded_x"] = ftensor(rng, gx_shape, dtype_name)
    if scales:
        inputs["scales"] = ftensor(rng, (r, k), dtype_name)
    if bias_opt in ("bias", "expert_idx"):
        inputs["expert_idx"] = itensor(rng.integers(0, bias_rows, (r, k)))
    if bias_opt == "bias":
        inputs["bias"] = ftensor(rng, (bias_rows, hidden), dtype_name)
    return inputs, attrs, gx_shape


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("config", GRAD_CONFIGS, ids=lambda c: f"{c[0]}-{c[1]}")
@pytest.mark.parametrize("hidden", HIDDEN_SIZES)
def test_grad(device, dtype_name, config, hidden):
    for name, scales, with_x, bias_opt in GRAD_COMBOS:
        rng = rng_for("grad", dtype_name, config, hidden, name)
        inputs, attrs, gx_shape = grad_inputs(rng, config, hidden, dtype_name, scales, with_x,
                                              bias_opt)
        gx, gs = run_grad(inputs, attrs, device, dtype_name, gx_shape)
        check_grad(gx, gs, inputs, gx_shape, dtype_name,
                   f"{device} {config} H={hidden} {name}")


@pytest.mark.parametrize("device", DEVICES)
def test_grad_active_num_skips(device):
    """Mode 0 with 0 < active_num < R*K: only indices below active_num land; the others are
    skipped (their grad_scales still sees the bias term)."""
    r, k, hidden = 4, 2, 3
    idx = itensor([7, 0, 6, 1, 5, 2, 4, 3])  # i = r*K + k
    grad_y = torch.arange(1.0, 1.0 + r * hidden).reshape(r, hidden)
    scales = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
    ex = torch.arange(3 * hidden, dtype=torch.float32).reshape(3, hidden) + 10
    bias = torch.tensor([[0.5, 0.25, -1.0]])
    eidx = torch.zeros(r, k, dtype=I32)
    gx, gs = infiniop.moe_finalize_routing_v2_grad(
        grad_y, idx, ex, scales, eidx, bias, drop_pad_mode=0, active_num=3, **on(device))
    expected = torch.zeros(3, hidden)
    for i, d in enumerate(idx.tolist()):
        if d < 3:
            expected[d] += grad_y[i // k] * scales.reshape(-1)[i]
    assert torch.equal(gx, expected)
    expected_gs = torch.zeros(r * k)
    for i, d in enumerate(idx.tolist()):
        row = (ex[d] if d < 3 else torch.zeros(hidden)) + bias[0]
        expected_gs[i] = (row.double() * grad_y[i // k].double()).sum()
    assert torch.equal(gs.reshape(-1), expected_gs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("mode", ["mode0", "mode1"])
def test_grad_duplicates(device, dtype_name, mode):
    """Duplicate index values sum their contributions, the same bits on every call."""
    for hidden in (3, 67):
        for scales in (True, False):
            rng = rng_for("grad-dup", dtype_name, mode, hidden, scales)
            config = ("mode0", "all") if mode == "mode0" else ("mode1", (2, 3, 3))
            inputs, attrs, gx_shape = grad_inputs(rng, config, hidden, dtype_name, scales,
                                                  scales, "bias", r=8, k=4, duplicates=True)
            counts = contributions(inputs["expanded_row_idx"], math.prod(gx_shape[:-1]))
            assert counts.max() >= 2  # really duplicated
            gx, gs = run_grad(inputs, attrs, device, dtype_name, gx_shape)
            check_grad(gx, gs, inputs, gx_shape, dtype_name,
                       f"{device} {mode} duplicates H={hidden}")
            gx2, gs2 = run_grad(inputs, attrs, device, dtype_name, gx_shape, "transposed")
            assert torch.equal(gx, gx2)
            if gs is not None:
                assert torch.equal(gs, gs2)


THREAD_SCRIPT = textwrap.dedent("""
    import hashlib, sys
    import numpy as np
    import infiniop
    rng = np.random.default_rng(5)
    r, k, h = 256, 4, 67
    n = r * k
    def f(*shape, dtype=np.float32):
        return (rng.standard_normal(shape) * 4).astype(dtype)
    digest = hashlib.sha256()
    for dtype in (np.float32, np.float16):
        g, s = f(r, h, dtype=dtype), f(r, k, dtype=dtype)
        eidx = rng.integers(0, 3, (r, k)).astype(np.int32)
        bias = f(3, h, dtype=dtype)
        idx = rng.integers(0, 40, n).astype(np.int32)  # ~25 contributions per row
        ex = f(n, h, dtype=dtype)
        for device in ("cpu", "cpu_reference"):
            gx, gs = infiniop.moe_finalize_routing_v2_grad(
                g, idx, ex, s, eidx, bias, drop_pad_mode=0, device=device)
            digest.update(gx.tobytes() + gs.tobytes())
            idx1 = idx.copy(); idx1[::7] = -1  # 900 slots, 40 reached: duplicates, zeros
            gx, gs = infiniop.moe_finalize_routing_v2_grad(
                g, idx1, ex[:900].reshape(3, 300, h), s, eidx, bias, drop_pad_mode=1,
                expert_num=3, expert_capacity=300, device=device)
            digest.update(gx.tobytes() + gs.tobytes())
            out = infiniop.moe_finalize_routing_v2(
                ex, rng.permutation(n).astype(np.int32), g, g, bias, s, eidx, drop_pad_mode=0,
                device=device)
            digest.update(out.tobytes())
    print(digest.hexdigest())
""")


def test_bit_identical_for_any_thread_count():
    """The cpu device (OpenMP above 2^15 elements) gives the same bits with 1 and 2 threads,
    duplicate indices included; run in subprocesses with OMP_NUM_THREADS set."""
    python_dir = Path(infiniop.__file__).resolve().parents[1]
    digests = []
    for threads in ("1", "2"):
        env = dict(os.environ, OMP_NUM_THREADS=threads,
                   PYTHONPATH=os.pathsep.join(filter(None, [str(python_dir),
                                                            os.environ.get("PYTHONPATH")])),
                   INFINIOP_LIBRARY=infiniop.get_library().infiniop_path)
        result = subprocess.run([sys.executable, "-c", THREAD_SCRIPT], env=env,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        digests.append(result.stdout.strip())
    assert digests[0] == digests[1]


GRAD_LAYOUTS = [("transposed", "contiguous"), ("strided", "strided"),
                ("contiguous", "transposed"), ("transposed", "strided")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", ["float32", "float16"])
@pytest.mark.parametrize("config", [("mode0", "half"), ("mode1", (4, 5, 3))],
                         ids=["mode0", "mode1"])
@pytest.mark.parametrize("in_layout,out_layout", GRAD_LAYOUTS)
def test_grad_strides(device, dtype_name, config, in_layout, out_layout):
    rng = rng_for("grad-strides", dtype_name, config, in_layout, out_layout)
    inputs, attrs, gx_shape = grad_inputs(rng, config, 17, dtype_name, True, True, "bias",
                                          duplicates=True)
    laid = {name: relayout(t, in_layout) for name, t in inputs.items()}
    gx, gs = run_grad(laid, attrs, device, dtype_name, gx_shape, out_layout)
    check_grad(gx, gs, inputs, gx_shape, dtype_name, f"{device} {in_layout} -> {out_layout}")


@pytest.mark.parametrize("device", DEVICES)
def test_grad_broadcast_inputs(device):
    """Stride 0 on every input of the grad (expanded_row_idx one value: all tokens on one
    row)."""
    rng = rng_for("grad-broadcast")
    r, k, hidden = 5, 3, 9
    for config in (("mode0", "all"), ("mode1", (4, 5, 0))):
        inputs, attrs, gx_shape = grad_inputs(rng, config, hidden, "float32", True, True, "bias",
                                              r=r, k=k)
        inputs["grad_y"] = ftensor(rng, (1, hidden), "float32").expand(r, hidden)
        inputs["expanded_row_idx"] = itensor([2]).expand(r * k)
        inputs["scales"] = ftensor(rng, (1, k), "float32").expand(r, k)
        inputs["expanded_x"] = ftensor(rng, (1,) * (len(gx_shape) - 1) + (hidden,),
                                       "float32").expand(gx_shape)
        inputs["bias"] = ftensor(rng, (4, 1), "float32").expand(4, hidden)
        inputs["expert_idx"] = itensor([[1]]).expand(r, k)
        gx, gs = run_grad(inputs, attrs, device, "float32", gx_shape)
        check_grad(gx, gs, inputs, gx_shape, "float32", f"{device} broadcast {config}")


@pytest.mark.parametrize("device", DEVICES)
def test_grad_zero_size(device):
    rng = rng_for("grad-zero")
    # R = 0, mode 1: grad_expanded_x is still zero-filled.
    for scales in (True, False):
        inputs, attrs, gx_shape = grad_inputs(rng, ("mode1", (2, 3, 0)), 4, "float32", scales,
                                              scales, "bias", r=0, k=2)
        gx, gs = run_grad(inputs, attrs, device, "float32", gx_shape)
        assert (gx == 0).all() and gx.shape == (2, 3, 4)
        assert gs is None or gs.shape == (0, 2)
    # R = 0, mode 0: grad_expanded_x (0, H).
    inputs, attrs, gx_shape = grad_inputs(rng, ("mode0", "zero"), 4, "float32", r=0, k=2)
    gx, gs = run_grad(inputs, attrs, device, "float32", gx_shape)
    assert gx.shape == (0, 4) and gs.shape == (0, 2)
    # H = 0: grad_scales = 0, grad_expanded_x (.., 0).
    for config in (("mode0", "all"), ("mode0", "half"), ("mode1", (3, 4, 2))):
        inputs, attrs, gx_shape = grad_inputs(rng, config, 0, "float32", True, True, "bias")
        gx, gs = run_grad(inputs, attrs, device, "float32", gx_shape)
        assert gx.numel() == 0 and (gs == 0).all() and gs.shape == (5, 3)
    # K = 0 with scales: nothing lands, grad_expanded_x zero.
    inputs = {"grad_y": ftensor(rng, (3, 4), "float32"),
              "expanded_row_idx": torch.empty(0, dtype=I32),
              "expanded_x": ftensor(rng, (2, 2, 4), "float32"), "scales": torch.empty(3, 0)}
    gx, gs = run_grad(inputs, {"drop_pad_mode": 1, "expert_num": 2, "expert_capacity": 2},
                      device, "float32", (2, 2, 4))
    assert (gx == 0).all() and gs.shape == (3, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_grad_scales_untouched_without_scales(device):
    """Without scales a given grad_scales (any shape, the vendor's (R, 1) placeholder or
    another) is left untouched; the functional API returns it as given."""
    rng = rng_for("grad-placeholder")
    for config in (("mode0", "all"), ("mode1", (4, 5, 2))):
        inputs, attrs, gx_shape = grad_inputs(rng, config, 5, "float32", False, True, "bias")
        for shape in ((7, 1), (3, 2, 2), (0,)):
            placeholder = torch.full(shape, SENTINEL)
            gx = torch.full(gx_shape, float("nan"))
            got_gx, got_gs = infiniop.moe_finalize_routing_v2_grad(
                inputs["grad_y"], inputs["expanded_row_idx"], inputs["expanded_x"], None,
                inputs["expert_idx"], inputs["bias"], **on(device), grad_expanded_x=gx,
                grad_scales=placeholder, **attrs)
            assert got_gs is placeholder and (placeholder == SENTINEL).all()
            check_grad(gx, None, inputs, gx_shape, "float32", f"{device} placeholder {shape}")


@pytest.mark.parametrize("device", DEVICES)
def test_grad_allocates_outputs(device):
    rng = rng_for("grad-alloc")
    for dtype_name in TORCH_DTYPES:
        for config in (("mode0", "half"), ("mode0", "more"), ("mode1", (4, 5, 3))):
            for scales in (True, False):
                inputs, attrs, gx_shape = grad_inputs(rng, config, 6, dtype_name, scales, scales,
                                                      "bias")
                gx, gs = infiniop.moe_finalize_routing_v2_grad(
                    inputs["grad_y"], inputs["expanded_row_idx"], inputs.get("expanded_x"),
                    inputs.get("scales"), inputs["expert_idx"], inputs["bias"], **attrs,
                    **on(device))
                assert gx.shape == gx_shape and gx.dtype == TORCH_DTYPES[dtype_name]
                assert (gs is None) == (not scales)
                if scales:
                    assert gs.shape == (5, 3) and gs.dtype == TORCH_DTYPES[dtype_name]
                check_grad(gx, gs, inputs, gx_shape, dtype_name, f"allocated {config}")
    inputs, attrs, gx_shape = grad_inputs(rng, ("mode1", (4, 5, 3)), 6, "float32")
    arrays = {name: t.numpy() for name, t in inputs.items()}
    gx, gs = infiniop.moe_finalize_routing_v2_grad(
        arrays["grad_y"], arrays["expanded_row_idx"], arrays["expanded_x"], arrays["scales"],
        **attrs, **on(device))
    assert isinstance(gx, np.ndarray) and isinstance(gs, np.ndarray)
    check_grad(torch.from_numpy(gx), torch.from_numpy(gs), inputs, gx_shape, "float32", "numpy")


# ----------------------------------------------------------------------------------------------
# Descriptor objects, workspace, NULL grad_scales

def descs_for(arrays):
    return [None if a is None else infiniop.TensorDescriptor.from_array(a) for a in arrays]


@pytest.mark.parametrize("device", DEVICES)
def test_grad_descriptor_workspace(device):
    rng = rng_for("grad-workspace", device)
    inputs, attrs, gx_shape = grad_inputs(rng, ("mode1", (4, 5, 3)), 8, "float32", True, True,
                                          "bias", duplicates=True)
    expected_gx, expected_gs = infiniop.moe_finalize_routing_v2_grad(
        inputs["grad_y"], inputs["expanded_row_idx"], inputs["expanded_x"], inputs["scales"],
        inputs["expert_idx"], inputs["bias"], **on(device), **attrs)
    order = [inputs[n] for n in ("grad_y", "expanded_row_idx", "expanded_x", "scales",
                                 "expert_idx", "bias")]
    with open_handle(device) as handle:
        gx = torch.full(gx_shape, SENTINEL)
        gs = torch.full((5, 3), SENTINEL)
        with infiniop.MoeFinalizeRoutingV2Grad.for_arrays(handle, gx, gs, *order,
                                                          **attrs) as op:
            assert (op.drop_pad_mode, op.expert_num, op.expert_capacity) == (1, 4, 5)
            needed = op.workspace_size
            # Less than asked: INSUFFICIENT_WORKSPACE, nothing written.
            for size in sorted({0, needed - 1} - {needed}):
                if size < 0:
                    continue
                workspace = handle.malloc(size) if size else 0  # 0: NULL (None allocates)
                try:
                    with pytest.raises(InfiniopError) as info:
                        run_op(handle, op, [gx, gs, *order], 2, workspace=workspace,
                               workspace_size=size)
                finally:
                    if workspace:
                        handle.free(workspace)
                assert_infiniop_error(info.value, Status.INSUFFICIENT_WORKSPACE)
                assert (gx == SENTINEL).all() and (gs == SENTINEL).all()
            # Exactly what it asks, and more, given as pointers.
            for size in (needed, needed + 64):
                workspace = handle.malloc(size) if size else None
                gx.fill_(float("nan"))
                gs.fill_(float("nan"))
                try:
                    if handle.host_memory:
                        op(gx.data_ptr(), gs.data_ptr(), *(t.data_ptr() for t in order),
                           workspace=workspace, workspace_size=size)
                    else:  # device pointers (run_op passes ints) to host copies
                        run_op(handle, op, [gx, gs, *order], 2, workspace=workspace,
                               workspace_size=size)
                finally:
                    if workspace:
                        handle.free(workspace)
                assert torch.equal(gx, expected_gx) and torch.equal(gs, expected_gs)
        # grad_scales NULL with scales: not computed, grad_expanded_x as before.
        with infiniop.MoeFinalizeRoutingV2Grad(handle, *descs_for([gx, None] + order),
                                               **attrs) as op:
            gx.fill_(float("nan"))
            run_op(handle, op, [gx, None, *order], 2)
            assert torch.equal(gx, expected_gx)
            with pytest.raises(ValueError, match="without grad_scales"):
                op(gx, gs, *order)


@pytest.mark.parametrize("device", DEVICES)
def test_forward_descriptor(device):
    rng = rng_for("forward-descriptor", device)
    inputs = forward_inputs(rng, 3, 8, "float32")
    order = [inputs.get(n) for n in ("expanded_x", "expanded_row_idx", "x1", "x2", "bias",
                                     "scales", "expert_idx")]
    expected = infiniop.moe_finalize_routing_v2(*order, drop_pad_mode=3, **on(device))
    with open_handle(device) as handle:
        out = torch.full(expected.shape, float("nan"))
        descs = descs_for([out] + order)
        op = infiniop.MoeFinalizeRoutingV2(handle, *descs, drop_pad_mode=3)
        for d in descs:
            d.close()
        assert op.drop_pad_mode == 3 and op.workspace_size == 0
        run_op(handle, op, [out, *order], 1, workspace=None, workspace_size=0)
        assert torch.equal(out, expected)
        with pytest.raises(InfiniopError) as info:
            run_op(handle, op, [None, *order], 1)
        assert info.value.status == Status.NULL_POINTER
        op.close()
        op.close()
        # Trailing absent tensors may be left out.
        out = torch.full((15, 8), float("nan"))  # without scales, K = 1: R = R*K
        plain = infiniop.MoeFinalizeRoutingV2.for_arrays(handle, out, order[0], order[1],
                                                         drop_pad_mode=3)
        run_op(handle, plain, [out, order[0], order[1]], 1)
        assert torch.equal(out, infiniop.moe_finalize_routing_v2(
            order[0], order[1], drop_pad_mode=3, **on(device)))
        plain.close()
        with pytest.raises(TypeError):
            infiniop.MoeFinalizeRoutingV2.for_arrays(handle, out, order[0])


def test_binding_argument_errors():
    rng = rng_for("binding-errors")
    inputs = forward_inputs(rng, 0, 4, "float32", "none", "none", True)
    ex, idx, s = inputs["expanded_x"], inputs["expanded_row_idx"], inputs["scales"]
    for bad in (1.0, True, "0"):
        with pytest.raises(TypeError):
            infiniop.moe_finalize_routing_v2(ex, idx, scales=s, drop_pad_mode=bad)
    with pytest.raises(OverflowError):
        infiniop.moe_finalize_routing_v2(ex, idx, scales=s, drop_pad_mode=2 ** 63)
    with pytest.raises(OverflowError):
        infiniop.moe_finalize_routing_v2_grad(torch.ones(5, 4), idx, ex, s, active_num=-2 ** 64)
    with pytest.raises(TypeError, match="one kind"):
        infiniop.moe_finalize_routing_v2(ex, idx.numpy(), scales=s)
    with pytest.raises(TypeError, match="one kind"):
        infiniop.moe_finalize_routing_v2_grad(torch.ones(5, 4).numpy(), idx, ex, s)


# ----------------------------------------------------------------------------------------------
# Absent tensors' pointers are ignored (API.md: a nullable descriptor given as NULL means its
# pointer is ignored): every allowed combination of absent optional tensors, called with NULL
# and with junk (helpers.JunkPointers: NaN bytes in host and device memory, device zeros) in the
# absent slots, gives the oracle's values, bit-identical to the NULL call's, and leaves the junk
# unwritten (the grad's absent grad_scales is an output slot)

FORWARD_NAMES = ("expanded_x", "expanded_row_idx", "x1", "x2", "bias", "scales", "expert_idx")
GRAD_NAMES = ("grad_y", "expanded_row_idx", "expanded_x", "scales", "expert_idx", "bias")


@pytest.mark.parametrize("device", DEVICES)
def test_forward_ignores_absent_pointers(device):
    rng = rng_for("forward-absent-pointers", device)
    with device_handle(device) as handle, JunkPointers(handle) as junk:
        for mode in FORWARD_MODES:
            for x_opt, bias_opt, scales in FORWARD_COMBOS:
                inputs = forward_inputs(rng, mode, 37, "float32", x_opt, bias_opt, scales,
                                        duplicates=True)
                order = [inputs.get(n) for n in FORWARD_NAMES]
                shape = expected_forward_shape(inputs)
                what = f"{device} mode {mode} x={x_opt} bias={bias_opt} scales={scales}"
                with infiniop.MoeFinalizeRoutingV2.for_arrays(
                        handle, torch.empty(shape), *order, drop_pad_mode=mode) as op:
                    results = []
                    for pointer, name in zip(junk.pointers, junk.names):
                        out = torch.full(shape, float("nan"))
                        run_op(handle, op, [out, *order], 1, absent=pointer)
                        check_forward(out, inputs, mode, "float32", f"{what}, absent: {name}")
                        results.append(out)
                for out, name in zip(results[1:], junk.names[1:]):
                    assert same_bits(out, results[0]), f"{what}: {name} differs from NULL"
        junk.assert_untouched()


@pytest.mark.parametrize("device", DEVICES)
def test_grad_ignores_absent_pointers(device):
    rng = rng_for("grad-absent-pointers", device)
    with device_handle(device) as handle, JunkPointers(handle) as junk:
        for config in (("mode0", "all"), ("mode0", "half"), ("mode1", (4, 5, 3))):
            for name, scales, with_x, bias_opt in GRAD_COMBOS:
                for with_gs in (True, False) if scales else (False,):
                    inputs, attrs, gx_shape = grad_inputs(rng, config, 37, "float32", scales,
                                                          with_x, bias_opt, duplicates=True)
                    order = [inputs.get(n) for n in GRAD_NAMES]
                    gs_shape = tuple(inputs["scales"].shape) if with_gs else None
                    what = f"{device} {config} {name} grad_scales={with_gs}"
                    like_gs = torch.empty(gs_shape) if with_gs else None
                    with infiniop.MoeFinalizeRoutingV2Grad.for_arrays(
                            handle, torch.empty(gx_shape), like_gs, *order, **attrs) as op:
                        results = []
                        for pointer, junk_name in zip(junk.pointers, junk.names):
                            gx = torch.full(gx_shape, float("nan"))
                            gs = torch.full(gs_shape, float("nan")) if with_gs else None
                            run_op(handle, op, [gx, gs, *order], 2, absent=pointer)
                            check_grad(gx, gs, inputs, gx_shape, "float32",
                                       f"{what}, absent: {junk_name}")
                            results.append((gx, gs))
                    for (gx, gs), junk_name in zip(results[1:], junk.names[1:]):
                        assert same_bits(gx, results[0][0]), f"{what}: {junk_name} differs"
                        if with_gs:
                            assert same_bits(gs, results[0][1]), f"{what}: {junk_name} differs"
        junk.assert_untouched()


# ----------------------------------------------------------------------------------------------
# Errors: status, message, outputs untouched

def forward_base(mode, dtype=torch.float32):
    """A valid forward call's arguments: R = 4, K = 2, H = 5; modes 1/3: E = 3, C = 3."""
    rng = rng_for("forward-base", mode)
    inputs = forward_inputs(rng, mode, 5, "float32", r=4, k=2, experts=3, capacity=3, dropped=1)
    kwargs = {name: t.to(dtype) if t.is_floating_point() else t for name, t in inputs.items()}
    kwargs["drop_pad_mode"] = mode
    kwargs["out"] = torch.full((4, 5), SENTINEL, dtype=dtype)
    return kwargs


def call_forward(device, kwargs):
    kwargs = dict(kwargs)
    ex, idx = kwargs.pop("expanded_x"), kwargs.pop("expanded_row_idx")
    return infiniop.moe_finalize_routing_v2(ex, idx, **on(device), **kwargs)


def expect_forward_error(device, status, kwargs, extra_outputs=()):
    return expect_error(status, call_forward, device, kwargs,
                        outputs=(kwargs["out"],) + tuple(extra_outputs))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", FORWARD_MODES)
def test_forward_valid_base(device, mode):
    kwargs = forward_base(mode)
    out = call_forward(device, kwargs)
    check_forward(out, kwargs, mode, "float32", f"{device} base")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", FORWARD_MODES)
def test_forward_bad_dtypes(device, mode):
    for name in ("out", "expanded_x", "x1", "x2", "bias", "scales"):
        for dtype in (torch.float16, torch.bfloat16, torch.float64):
            kwargs = forward_base(mode)
            kwargs[name] = kwargs[name].to(dtype)
            expect_forward_error(device, Status.BAD_TENSOR_DTYPE, kwargs)
    kwargs = forward_base(mode, torch.float64)  # all F64: unsupported
    expect_forward_error(device, Status.BAD_TENSOR_DTYPE, kwargs)
    for name in ("expanded_row_idx", "expert_idx"):  # INT32 and INT64 only
        for dtype in (torch.int16, torch.uint8, torch.float32, torch.float64):
            kwargs = forward_base(mode)
            kwargs[name] = kwargs[name].to(dtype)
            expect_forward_error(device, Status.BAD_TENSOR_DTYPE, kwargs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", FORWARD_MODES)
def test_forward_bad_params(device, mode):
    kwargs = forward_base(mode)
    kwargs["x1"] = None  # x2 without x1
    expect_forward_error(device, Status.BAD_PARAM, kwargs)
    kwargs = forward_base(mode)
    kwargs["expert_idx"] = None  # bias without expert_idx
    expect_forward_error(device, Status.BAD_PARAM, kwargs)
    for bad_mode in (-1, 4, 2 ** 40):
        kwargs = forward_base(mode)
        kwargs["drop_pad_mode"] = bad_mode
        expect_forward_error(device, Status.BAD_PARAM, kwargs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", FORWARD_MODES)
def test_forward_bad_shapes(device, mode):
    drop_pad = mode in (1, 3)
    cases = {
        "out": [torch.full(s, SENTINEL) for s in ((4, 4), (5, 5), (8, 5), (4, 5, 1), (20,))],
        "x1": [torch.ones(s) for s in ((4, 4), (3, 5), (4, 5, 1), (5,))],
        "x2": [torch.ones(s) for s in ((4, 6), (5, 5))],
        "scales": [torch.ones(s) for s in ((4, 3), (8, 1), (2, 4), (8,))],
        "expert_idx": [torch.zeros(s, dtype=I32) for s in ((4, 1), (2, 4), (8,), (4, 2, 1))],
        "bias": [torch.ones(s) for s in ((3, 4), (3, 6), (15,))]
        + ([torch.ones(2, 5), torch.ones(4, 5)] if drop_pad else []),  # E rows in modes 1/3
        "expanded_row_idx": [torch.zeros(s, dtype=I32) for s in ((7,), (9,), (4, 2))],
        "expanded_x": ([torch.ones(s) for s in ((3, 3), (3, 3, 4), (9, 5), (3, 3, 5, 1))]
                       if drop_pad else
                       [torch.ones(s) for s in ((8, 4), (7, 5), (9, 5), (2, 4, 5), (8, 5, 1))]),
    }
    for name, tensors in cases.items():
        for tensor in tensors:
            kwargs = forward_base(mode)
            kwargs[name] = tensor
            error = expect_forward_error(device, Status.BAD_TENSOR_SHAPE, kwargs,
                                         (tensor,) if name == "out" else ())
            assert error.message


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", FORWARD_MODES)
def test_forward_bad_index_values(device, mode):
    """Out-of-range expanded_row_idx (modes 0/2: outside [0, R*K) = [0, 8), -1 included;
    modes 1/3: outside [-1, E*C) = [-1, 9)) and expert_idx (outside [0, bias rows)):
    BAD_PARAM, nothing written. The bad value is put last, so a kernel that wrote rows
    before checking would be caught."""
    bad_rows = [-2, 9, 2 ** 31 - 1, -2 ** 31] if mode in (1, 3) else [-1, 8, 100, -2 ** 31]
    for position in (0, 7):
        for value in bad_rows:
            kwargs = forward_base(mode)
            idx = kwargs["expanded_row_idx"].clone()
            idx[position] = value
            kwargs["expanded_row_idx"] = idx
            expect_forward_error(device, Status.BAD_PARAM, kwargs)
        bias_rows = kwargs["bias"].shape[0]
        for value in (bias_rows, -1, 2 ** 31 - 1):
            kwargs = forward_base(mode)
            eidx = kwargs["expert_idx"].clone()
            eidx.view(-1)[position] = value
            kwargs["expert_idx"] = eidx
            expect_forward_error(device, Status.BAD_PARAM, kwargs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", FORWARD_MODES)
def test_forward_overlapping_outputs(device, mode):
    kwargs = forward_base(mode)
    kwargs["out"] = kwargs["x1"]  # an exact alias of an input is still an overlap here
    expect_forward_error(device, Status.BAD_TENSOR_STRIDES, kwargs)
    kwargs = forward_base(mode)
    kwargs["out"] = kwargs["x2"].t().contiguous().t()  # a copy: fine
    call_forward(device, kwargs)
    storage = torch.full((4, 6), SENTINEL)
    kwargs = forward_base(mode)
    kwargs["x1"] = storage[:, :5].clone()
    kwargs["out"] = storage[:, 1:]  # overlaps x2 below
    kwargs["x2"] = storage[:, :5]
    expect_forward_error(device, Status.BAD_TENSOR_STRIDES, kwargs, (storage,))
    kwargs = forward_base(mode)
    ex = kwargs["expanded_x"]
    kwargs["out"] = ex.reshape(-1)[:20].reshape(4, 5)  # inside expanded_x
    expect_forward_error(device, Status.BAD_TENSOR_STRIDES, kwargs, (ex,))
    kwargs = forward_base(mode)
    kwargs["out"] = torch.full((1, 5), SENTINEL).expand(4, 5)  # stride 0 on an output
    expect_forward_error(device, Status.BAD_TENSOR_STRIDES, kwargs)
    # Outputs overlapping the index tensors (viewed as floats).
    kwargs = forward_base(mode)
    raw = torch.zeros(40, dtype=I32)
    raw[:8] = kwargs["expanded_row_idx"]
    kwargs["expanded_row_idx"] = raw[:8]
    kwargs["out"] = raw.view(torch.float32)[:20].reshape(4, 5)
    expect_forward_error(device, Status.BAD_TENSOR_STRIDES, kwargs)


def grad_base(mode, dtype=torch.float32, scales=True, bias=True):
    """A valid grad call's arguments: R = 4, K = 2, H = 5; mode 0: grad_expanded_x (8, 5),
    mode 1: expert_num = 3, expert_capacity = 3."""
    rng = rng_for("grad-base", mode, scales, bias)
    config = ("mode0", "all") if mode == 0 else ("mode1", (3, 3, 1))
    inputs, attrs, gx_shape = grad_inputs(rng, config, 5, "float32", scales, scales,
                                          "bias" if bias else "none", r=4 if scales else 8, k=2)
    kwargs = {name: t.to(dtype) if t.is_floating_point() else t for name, t in inputs.items()}
    kwargs.update(attrs)
    kwargs["grad_expanded_x"] = torch.full(gx_shape, SENTINEL, dtype=dtype)
    kwargs["grad_scales"] = torch.full((4, 2), SENTINEL, dtype=dtype) if scales else None
    return kwargs


def call_grad(device, kwargs):
    kwargs = dict(kwargs)
    g, idx = kwargs.pop("grad_y"), kwargs.pop("expanded_row_idx")
    return infiniop.moe_finalize_routing_v2_grad(g, idx, **on(device), **kwargs)


def expect_grad_error(device, status, kwargs, extra_outputs=()):
    outputs = [kwargs["grad_expanded_x"]]
    if kwargs.get("grad_scales") is not None:
        outputs.append(kwargs["grad_scales"])
    return expect_error(status, call_grad, device, kwargs,
                        outputs=tuple(outputs) + tuple(extra_outputs))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", [0, 1])
def test_grad_valid_base(device, mode):
    kwargs = grad_base(mode)
    gx, gs = call_grad(device, kwargs)
    check_grad(gx, gs, kwargs, tuple(gx.shape), "float32", f"{device} base")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", [0, 1])
def test_grad_bad_dtypes(device, mode):
    for name in ("grad_expanded_x", "grad_scales", "grad_y", "expanded_x", "scales", "bias"):
        for dtype in (torch.float16, torch.bfloat16, torch.float64):
            kwargs = grad_base(mode)
            kwargs[name] = kwargs[name].to(dtype)
            expect_grad_error(device, Status.BAD_TENSOR_DTYPE, kwargs)
    expect_grad_error(device, Status.BAD_TENSOR_DTYPE, grad_base(mode, torch.float64))
    for name in ("expanded_row_idx", "expert_idx"):  # INT32 and INT64 only
        for dtype in (torch.int16, torch.uint8, torch.float32, torch.float64):
            kwargs = grad_base(mode)
            kwargs[name] = kwargs[name].to(dtype)
            expect_grad_error(device, Status.BAD_TENSOR_DTYPE, kwargs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", [0, 1])
def test_grad_bad_params(device, mode):
    for bad_mode in (-1, 2, 3):
        kwargs = grad_base(mode)
        kwargs["drop_pad_mode"] = bad_mode
        expect_grad_error(device, Status.BAD_PARAM, kwargs)
    kwargs = grad_base(mode)
    kwargs["expanded_x"] = None  # scales without expanded_x
    expect_grad_error(device, Status.BAD_PARAM, kwargs)
    kwargs = grad_base(mode)
    kwargs["expert_idx"] = None  # bias without expert_idx
    expect_grad_error(device, Status.BAD_PARAM, kwargs)
    kwargs = grad_base(mode, scales=False)
    kwargs["expert_idx"] = None
    expect_grad_error(device, Status.BAD_PARAM, kwargs)
    if mode == 0:
        for active in (-1, -2 ** 63):
            kwargs = grad_base(0)
            kwargs["active_num"] = active
            expect_grad_error(device, Status.BAD_PARAM, kwargs)
        # expert_num and expert_capacity are ignored in mode 0.
        kwargs = grad_base(0)
        kwargs.update(expert_num=-5, expert_capacity=0)
        call_grad(device, kwargs)
    else:
        for experts, capacity in ((0, 3), (3, 0), (-3, -3), (-1, 3), (3, -1)):
            kwargs = grad_base(1)
            kwargs.update(expert_num=experts, expert_capacity=capacity)
            kwargs["grad_expanded_x"] = torch.full((max(experts, 0), max(capacity, 0), 5),
                                                   SENTINEL)
            kwargs["expanded_x"] = torch.ones(max(experts, 0), max(capacity, 0), 5)
            expect_grad_error(device, Status.BAD_PARAM, kwargs)
        # active_num is ignored in mode 1, even a negative one.
        kwargs = grad_base(1)
        kwargs["active_num"] = -7
        call_grad(device, kwargs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", [0, 1])
def test_grad_bad_shapes(device, mode):
    gx_bad = ([(7, 5), (9, 5), (8, 4), (8, 5, 1), (2, 4, 5)] if mode == 0
              else [(3, 3, 4), (2, 3, 5), (3, 4, 5), (9, 5), (3, 3, 5, 1)])
    for shape in gx_bad:
        kwargs = grad_base(mode)
        kwargs["grad_expanded_x"] = torch.full(shape, SENTINEL)
        expect_grad_error(device, Status.BAD_TENSOR_SHAPE, kwargs)
    cases = {
        "grad_scales": [torch.full(s, SENTINEL) for s in ((4, 1), (8,), (2, 4), (4, 2, 1))],
        "grad_y": [torch.ones(s) for s in ((4, 4), (3, 5), (8, 5), (4, 5, 1))],
        "expanded_x": [torch.ones(s) for s in ((gx_bad[0]), (8, 5) if mode else (4, 2, 5))],
        "scales": [torch.ones(s) for s in ((4, 1), (2, 4), (8,), (4, 2, 1))],
        "expert_idx": [torch.zeros(s, dtype=I32) for s in ((4, 1), (8,), (2, 4))],
        "bias": [torch.ones(s) for s in ((3, 4), (3, 6), (15,))]
        + ([torch.ones(2, 5), torch.ones(4, 5)] if mode == 1 else []),  # expert_num rows
        "expanded_row_idx": [torch.zeros(s, dtype=I32) for s in ((7,), (9,), (4, 2))],
    }
    for name, tensors in cases.items():
        for tensor in tensors:
            kwargs = grad_base(mode)
            kwargs[name] = tensor
            expect_grad_error(device, Status.BAD_TENSOR_SHAPE, kwargs,
                              (tensor,) if name == "grad_scales" else ())
    # Without scales K must be 1: grad_y has R*K rows.
    kwargs = grad_base(mode, scales=False, bias=False)
    kwargs["grad_y"] = kwargs["grad_y"][:4]
    expect_grad_error(device, Status.BAD_TENSOR_SHAPE, kwargs)


@pytest.mark.parametrize("device", DEVICES)
def test_grad_base_without_scales_is_valid(device):
    for mode in (0, 1):
        kwargs = grad_base(mode, scales=False)
        assert kwargs["grad_y"].shape == (8, 5)
        gx, gs = call_grad(device, kwargs)
        assert gs is None
        check_grad(gx, None, kwargs, tuple(gx.shape), "float32", "no scales")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", [0, 1])
def test_grad_bad_index_values(device, mode):
    """Mode 0: values outside [0, R*K) = [0, 8) (-1 included, also when active_num limits
    the rows); mode 1: outside [-1, E*C) = [-1, 9); expert_idx outside [0, bias rows) with
    bias. BAD_PARAM, nothing written."""
    bad_rows = [-1, 8, 1000, -2 ** 31, 2 ** 31 - 1] if mode == 0 else [-2, 9, -2 ** 31, 100]
    for position in (0, 7):
        for value in bad_rows:
            for active in ((0, 3) if mode == 0 else (0,)):
                kwargs = grad_base(mode)
                idx = kwargs["expanded_row_idx"].clone()
                idx[position] = value
                kwargs["expanded_row_idx"] = idx
                if active:
                    kwargs["active_num"] = active
                    kwargs["grad_expanded_x"] = torch.full((active, 5), SENTINEL)
                    kwargs["expanded_x"] = torch.ones(active, 5)
                expect_grad_error(device, Status.BAD_PARAM, kwargs)
        for value in (3 if mode == 1 else 4, -1, 2 ** 31 - 1):
            for scales in (True, False):
                kwargs = grad_base(mode, scales=scales)
                eidx = kwargs["expert_idx"].clone()
                eidx.view(-1)[position] = value
                kwargs["expert_idx"] = eidx
                expect_grad_error(device, Status.BAD_PARAM, kwargs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", [0, 1])
def test_grad_expert_idx_unread_without_bias(device, mode):
    kwargs = grad_base(mode, bias=False)
    eidx = torch.tensor([[-1, 99], [2 ** 31 - 1, -2 ** 31], [5, 0], [1, -7]], dtype=I32)
    kwargs["expert_idx"] = eidx
    gx, gs = call_grad(device, kwargs)
    reference = grad_base(mode, bias=False)
    reference.pop("expert_idx", None)
    gx2, gs2 = call_grad(device, reference)
    assert torch.equal(gx, gx2) and torch.equal(gs, gs2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", [0, 1])
def test_grad_overlapping_outputs(device, mode):
    kwargs = grad_base(mode)
    kwargs["grad_scales"] = kwargs["scales"]  # exact alias of an input
    expect_grad_error(device, Status.BAD_TENSOR_STRIDES, kwargs)
    kwargs = grad_base(mode)
    kwargs["grad_expanded_x"] = kwargs["expanded_x"]
    expect_grad_error(device, Status.BAD_TENSOR_STRIDES, kwargs)
    kwargs = grad_base(mode)
    gx = kwargs["grad_expanded_x"]
    kwargs["grad_scales"] = gx.reshape(-1)[:8].reshape(4, 2)  # the two outputs overlap
    expect_grad_error(device, Status.BAD_TENSOR_STRIDES, kwargs)
    kwargs = grad_base(mode)
    kwargs["grad_y"] = kwargs["grad_expanded_x"].reshape(-1)[:20].reshape(4, 5)
    expect_grad_error(device, Status.BAD_TENSOR_STRIDES, kwargs)
    kwargs = grad_base(mode)
    bias_storage = torch.full((40,), SENTINEL)
    kwargs["bias"] = bias_storage[:kwargs["bias"].numel()].reshape(kwargs["bias"].shape)
    kwargs["grad_scales"] = bias_storage[10:18].reshape(4, 2)
    expect_grad_error(device, Status.BAD_TENSOR_STRIDES, kwargs, (bias_storage,))
    kwargs = grad_base(mode)  # stride 0 on an output
    kwargs["grad_scales"] = torch.full((1, 2), SENTINEL).expand(4, 2)
    expect_grad_error(device, Status.BAD_TENSOR_STRIDES, kwargs)
    kwargs = grad_base(mode)
    shape = kwargs["grad_expanded_x"].shape
    kwargs["grad_expanded_x"] = torch.full(shape[:-1] + (1,), SENTINEL).expand(shape)
    expect_grad_error(device, Status.BAD_TENSOR_STRIDES, kwargs)
    kwargs = grad_base(mode)  # an output over the index tensor
    raw = torch.zeros(64, dtype=I32)
    raw[:8] = kwargs["expanded_row_idx"]
    kwargs["expanded_row_idx"] = raw[:8]
    kwargs["grad_scales"] = raw.view(torch.float32)[4:12].reshape(4, 2)
    expect_grad_error(device, Status.BAD_TENSOR_STRIDES, kwargs)


# ----------------------------------------------------------------------------------------------
# Staging through device memory (what non-host devices use), exercised on the cpu device

@pytest.mark.parametrize("case", ["forward", "grad", "grad-no-scales", "grad-placeholder"])
def test_staging_matches_direct(case):
    """Staged and direct calls give the same bits; both outputs of the grad come back (the
    binding puts outputs first for the copy-back, whatever their place in the C call)."""
    results = []
    for stage in (False, True):
        rng = rng_for("staging", case)
        if case == "forward":
            inputs = forward_inputs(rng, 1, 9, "float32")
            arrays = {n: np.flip(t.numpy().copy()) for n, t in inputs.items()}  # negative strides
            out = infiniop.moe_finalize_routing_v2(
                arrays["expanded_x"], arrays["expanded_row_idx"], arrays["x1"], arrays["x2"],
                arrays["bias"], arrays["scales"], arrays["expert_idx"], drop_pad_mode=1,
                _stage=stage)
            results.append((out,))
            continue
        inputs, attrs, gx_shape = grad_inputs(rng, ("mode1", (4, 5, 3)), 9, "float32",
                                              case == "grad", True, "bias",
                                              duplicates=True)
        arrays = {n: t.numpy() for n, t in inputs.items()}
        gx = np.full(gx_shape, np.nan, np.float32)
        if case == "grad":
            gs = np.full((5, 3), np.nan, np.float32)[::-1]
        else:
            gs = np.full((7, 1), SENTINEL, np.float32) if case == "grad-placeholder" else None
        with infiniop.Handle("cpu") as handle:
            got = infiniop.moe_finalize_routing_v2_grad(
                arrays["grad_y"], arrays["expanded_row_idx"], arrays.get("expanded_x"),
                arrays.get("scales"), arrays["expert_idx"], arrays["bias"], handle=handle,
                grad_expanded_x=gx, grad_scales=gs, _stage=stage, **attrs)
        assert got[0] is gx and got[1] is gs
        if case == "grad-placeholder":
            assert (gs == SENTINEL).all()
        if case == "grad-no-scales":
            assert gs is None
        results.append(got)
        check_grad(torch.from_numpy(gx.copy()),
                   None if case != "grad" else torch.from_numpy(gs.copy()), inputs, gx_shape,
                   "float32", f"staged={stage} {case}")
    for direct, staged in zip(*results):
        if direct is not None:
            np.testing.assert_array_equal(direct, staged)


# ----------------------------------------------------------------------------------------------
# INT64 index tensors and F32 scales with F16/BF16 activations (SEMANTICS.md: expanded_row_idx
# and expert_idx each INT32 or INT64, range-checked on the 64-bit value; F32 scales used
# unrounded, grad_scales of the scales' dtype), against the same float64 oracle and error model

INDEX_DTYPES = {"i32": torch.int32, "i64": torch.int64}
# (expanded_row_idx, expert_idx)
INDEX_COMBOS = [("i32", "i64"), ("i64", "i32"), ("i64", "i64")]


def mixed(rng, inputs, index_combo, f32_scales):
    """inputs with the index tensors of index_combo's dtypes and, with f32_scales, scales
    redrawn as unrounded F32 values (24-bit mantissas: not representable in F16/BF16)."""
    inputs = dict(inputs)
    row_dtype, eidx_dtype = (INDEX_DTYPES[name] for name in index_combo)
    inputs["expanded_row_idx"] = inputs["expanded_row_idx"].to(row_dtype)
    if inputs.get("expert_idx") is not None:
        inputs["expert_idx"] = inputs["expert_idx"].to(eidx_dtype)
    if f32_scales and inputs.get("scales") is not None:
        scales = torch.from_numpy(values(rng, tuple(inputs["scales"].shape))).float()
        scales = scales + scales * 2.0 ** -12 * torch.sign(scales)  # off the F16/BF16 grid
        inputs["scales"] = scales
    return inputs


def scales_options(dtype_name):
    return (False, True) if dtype_name != "float32" else (False,)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("mode", FORWARD_MODES)
@pytest.mark.parametrize("index_combo", INDEX_COMBOS, ids="-".join)
def test_forward_int64_and_f32_scales(device, dtype_name, mode, index_combo):
    for hidden in (3, 67):
        for x_opt, bias_opt, scales in FORWARD_COMBOS:
            for f32_scales in scales_options(dtype_name) if scales else (False,):
                rng = rng_for("forward-mixed", dtype_name, mode, index_combo, hidden, x_opt,
                              bias_opt, f32_scales)
                inputs = forward_inputs(rng, mode, hidden, dtype_name, x_opt, bias_opt, scales,
                                        duplicates=True)
                inputs = mixed(rng, inputs, index_combo, f32_scales)
                out = run_forward(inputs, mode, device, dtype_name)
                check_forward(out, inputs, mode, dtype_name,
                              f"{device} mode {mode} {index_combo} H={hidden} {x_opt} "
                              f"{bias_opt} scales={scales} f32_scales={f32_scales}")
                if inputs.get("scales") is not None:  # allocated out: the activations' dtype
                    alloc = infiniop.moe_finalize_routing_v2(
                        inputs["expanded_x"], inputs["expanded_row_idx"], inputs.get("x1"),
                        inputs.get("x2"), inputs.get("bias"), inputs["scales"],
                        inputs.get("expert_idx"), drop_pad_mode=mode, **on(device))
                    assert same_bits(alloc, out)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", list(TORCH_DTYPES))
@pytest.mark.parametrize("config", [("mode0", "all"), ("mode0", "half"), ("mode1", (4, 5, 3)),
                                    ("mode1", (5, 1, 2))], ids=lambda c: f"{c[0]}-{c[1]}")
@pytest.mark.parametrize("index_combo", INDEX_COMBOS, ids="-".join)
def test_grad_int64_and_f32_scales(device, dtype_name, config, index_combo):
    for hidden in (3, 67):
        for name, scales, with_x, bias_opt in GRAD_COMBOS:
            for f32_scales in scales_options(dtype_name) if scales else (False,):
                rng = rng_for("grad-mixed", dtype_name, config, index_combo, hidden, name,
                              f32_scales)
                inputs, attrs, gx_shape = grad_inputs(rng, config, hidden, dtype_name, scales,
                                                      with_x, bias_opt, duplicates=True)
                inputs = mixed(rng, inputs, index_combo, f32_scales)
                gs_dtype_name = "float32" if f32_scales else dtype_name
                what = (f"{device} {config} {index_combo} H={hidden} {name} "
                        f"f32_scales={f32_scales}")
                gx, gs = run_grad(inputs, attrs, device, dtype_name, gx_shape,
                                  gs_dtype_name=gs_dtype_name)
                check_grad(gx, gs, inputs, gx_shape, dtype_name, what, gs_dtype_name)
                # Allocated outputs: grad_expanded_x of grad_y's dtype, grad_scales of the
                # scales' (F32 with F32 scales), the same bits.
                gx2, gs2 = infiniop.moe_finalize_routing_v2_grad(
                    inputs["grad_y"], inputs["expanded_row_idx"], inputs.get("expanded_x"),
                    inputs.get("scales"), inputs.get("expert_idx"), inputs.get("bias"),
                    **attrs, **on(device))
                assert gx2.dtype == TORCH_DTYPES[dtype_name] and same_bits(gx2, gx)
                if scales:
                    assert gs2.dtype == TORCH_DTYPES[gs_dtype_name] and same_bits(gs2, gs)
                else:
                    assert gs2 is None


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
def test_f32_scales_are_used_unrounded(device, dtype_name):
    """s = 1 + 2^-12 is not an F16/BF16 value (it rounds to 1). Forward: 256 s - 256 = 2^-4,
    exact in F32 and in the output type (it would be 0 with s rounded). Grad: two contributions
    to one row, 256 s and 256 (-1), summed in F32: 2^-4 (0 with s rounded)."""
    dtype = TORCH_DTYPES[dtype_name]
    s = 1.0 + 2.0 ** -12
    hidden = 5
    for index_dtype in INDEX_DTYPES.values():
        # Forward, mode 2: R = 3, K = 2, every token reads rows 2r and 2r + 1 (both 256).
        ex = torch.full((6, hidden), 256.0, dtype=dtype)
        idx = torch.arange(6, dtype=index_dtype)
        scales = torch.tensor([[s, -1.0]] * 3, dtype=torch.float32)
        out = infiniop.moe_finalize_routing_v2(ex, idx, scales=scales, drop_pad_mode=2,
                                               **on(device))
        assert out.dtype == dtype
        assert (out == 2.0 ** -4).all(), out
        # Grad, mode 0: R = 2, K = 1, both tokens on row 0.
        grad_y = torch.full((2, hidden), 256.0, dtype=dtype)
        gidx = torch.zeros(2, dtype=index_dtype)
        gscales = torch.tensor([[s], [-1.0]], dtype=torch.float32)
        gx, gs = infiniop.moe_finalize_routing_v2_grad(
            grad_y, gidx, torch.ones(2, hidden, dtype=dtype), gscales, drop_pad_mode=0,
            **on(device))
        assert gx.dtype == dtype and gs.dtype == torch.float32
        assert (gx[0] == 2.0 ** -4).all() and (gx[1] == 0).all(), gx
        assert (gs == 256.0 * hidden).all(), gs


BIG_INT64 = [2 ** 32, 2 ** 32 + 1, -2 ** 32, 2 ** 63 - 1, -2 ** 63]  # 2^32: 0 if truncated


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", FORWARD_MODES)
def test_forward_bad_int64_index_values(device, mode):
    """INT64 values that a 32-bit truncation would make valid (2^32 -> 0, 2^32 + 1 -> 1) or
    -1 (2^64 - 1): BAD_PARAM, nothing written."""
    for position in (0, 7):
        for value in BIG_INT64:
            kwargs = forward_base(mode)
            idx = kwargs["expanded_row_idx"].to(torch.int64)
            idx[position] = value
            kwargs["expanded_row_idx"] = idx
            expect_forward_error(device, Status.BAD_PARAM, kwargs)
            kwargs = forward_base(mode)
            eidx = kwargs["expert_idx"].to(torch.int64)
            eidx.view(-1)[position] = value
            kwargs["expert_idx"] = eidx
            expect_forward_error(device, Status.BAD_PARAM, kwargs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", [0, 1])
def test_grad_bad_int64_index_values(device, mode):
    for position in (0, 7):
        for value in BIG_INT64:
            kwargs = grad_base(mode)
            idx = kwargs["expanded_row_idx"].to(torch.int64)
            idx[position] = value
            kwargs["expanded_row_idx"] = idx
            expect_grad_error(device, Status.BAD_PARAM, kwargs)
            kwargs = grad_base(mode)
            eidx = kwargs["expert_idx"].to(torch.int64)
            eidx.view(-1)[position] = value
            kwargs["expert_idx"] = eidx
            expect_grad_error(device, Status.BAD_PARAM, kwargs)


def mixed_base(base, mode, dtype):
    """base(mode, dtype) (forward_base or grad_base) with F32 scales (a valid mixture)."""
    kwargs = base(mode, dtype)
    kwargs["scales"] = kwargs["scales"].float()
    if kwargs.get("grad_scales") is not None:
        kwargs["grad_scales"] = torch.full(tuple(kwargs["grad_scales"].shape), SENTINEL)
    return kwargs


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", FORWARD_MODES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_forward_bad_dtype_mixtures(device, mode, dtype):
    """F32 scales with F16/BF16 activations is the one mixture: valid as such; any other
    floating tensor off the activations' dtype, or scales neither F32 nor theirs, is
    BAD_TENSOR_DTYPE."""
    call_forward(device, mixed_base(forward_base, mode, dtype))
    other = torch.float16 if dtype == torch.bfloat16 else torch.bfloat16
    for name in ("out", "expanded_x", "x1", "x2", "bias", "scales"):
        for bad in (other, torch.float64) + ((torch.float32,) if name != "scales" else ()):
            kwargs = mixed_base(forward_base, mode, dtype)
            kwargs[name] = kwargs[name].to(bad)
            expect_forward_error(device, Status.BAD_TENSOR_DTYPE, kwargs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_grad_bad_dtype_mixtures(device, mode, dtype):
    """grad_scales has the dtype of scales: F32 with F32 scales, the activations' otherwise."""
    call_grad(device, mixed_base(grad_base, mode, dtype))
    other = torch.float16 if dtype == torch.bfloat16 else torch.bfloat16
    for name in ("grad_expanded_x", "grad_y", "expanded_x", "bias", "scales", "grad_scales"):
        bads = (other, torch.float64)
        if name not in ("scales", "grad_scales"):
            bads += (torch.float32,)
        if name == "grad_scales":
            bads += (dtype,)  # F32 scales want F32 grad_scales
        for bad in bads:
            kwargs = mixed_base(grad_base, mode, dtype)
            kwargs[name] = kwargs[name].to(bad)
            expect_grad_error(device, Status.BAD_TENSOR_DTYPE, kwargs)
    kwargs = grad_base(mode, dtype)  # scales of the activations' dtype, grad_scales F32
    kwargs["grad_scales"] = kwargs["grad_scales"].float()
    expect_grad_error(device, Status.BAD_TENSOR_DTYPE, kwargs)
