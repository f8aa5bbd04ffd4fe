# SPDX-License-Identifier: Apache-2.0
"""The opencl device through the binding with device memory the test manages itself: every
operator descriptor class called with device pointers (not through the convenience functions'
staging), on the NULL stream, on a stream of its own, and with every tensor a view at an offset
inside one device allocation; pointers and streams the handle does not own (BAD_PARAM); and the
runtime (malloc, memcpy, free, streams) of an opencl handle.

Reference: the same descriptor on the NULL stream with one allocation per tensor, which must equal
bit for bit the staged call (helpers.run_op, what the convenience functions do) that the
operator modules check against their float64 oracles. Same device, same kernels, so every
comparison here is exact.

Skipped, with the library's reason, when the library has no usable OpenCL platform.
"""

import zlib

import numpy as np
import pytest
import torch

import infiniop
from infiniop import InfiniopError, Status

from helpers import (SENTINEL, TORCH_DTYPES, assert_infiniop_error, on, run_op,
                     shared_handle)

R, K, H, E = 4, 2, 5, 3  # MoE: rows, experts per row, hidden size, experts


@pytest.fixture(scope="module")
def handle():
    return shared_handle("opencl")  # skips the module's tests when opencl is unavailable


# ----------------------------------------------------------------------------------------------
# The operators: descriptor class, attributes, arrays (outputs first) and how many are outputs

def _rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _data(rng, shape, dtype_name):
    return torch.from_numpy(rng.standard_normal(shape) * 3).to(TORCH_DTYPES[dtype_name])


def _nan(shape, dtype_name):
    return torch.full(shape, float("nan"), dtype=TORCH_DTYPES[dtype_name])


def _permutation(rng, n):
    return torch.from_numpy(rng.permutation(n).astype(np.int32))


def _elementwise(name, rng, d):
    x, half, whole = _data(rng, (6, 10), d), (6, 5), (6, 10)
    counts = torch.tensor([2, 0, 3], dtype=torch.int64)  # rows 5.. are zero
    if name in ("gelu_backward", "gelu_backward_v2"):
        return [_nan(whole, d), x, _data(rng, whole, d)], 1
    if name == "gelu":
        return [_nan(whole, d), x], 1
    if name in ("swiglu", "gelu_mul", "clipped_swiglu"):
        arrays = [_nan(half, d), x]
    else:  # the backward ones: x_grad/input_grad, y_grad/out_grad, x/input
        arrays = [_nan(whole, d), _data(rng, half, d), x]
    return arrays + ([counts] if name.startswith("clipped") else []), 1


def _moe_forward(rng, d):
    return [_nan((R, H), d), _data(rng, (R * K, H), d), _permutation(rng, R * K),
            _data(rng, (R, H), d), _data(rng, (R, H), d), _data(rng, (E, H), d),
            _data(rng, (R, K), d), torch.from_numpy(rng.integers(0, E, (R, K)).astype(np.int32))], 1


def _moe_grad(rng, d):
    return [_nan((R * K, H), d), _nan((R, K), d), _data(rng, (R, H), d), _permutation(rng, R * K),
            _data(rng, (R * K, H), d), _data(rng, (R, K), d),
            torch.from_numpy(rng.integers(0, E, (R, K)).astype(np.int32)),
            _data(rng, (E, H), d)], 2


OPERATORS = {
    "gelu_backward": (infiniop.GeluBackward, {}),
    "swiglu": (infiniop.SwiGlu, {"dim": -1}),
    "swiglu_backward": (infiniop.SwiGluBackward, {"dim": 1}),
    "gelu_mul": (infiniop.GeluMul, {"approximate": "none"}),
    "gelu_mul_tanh": (infiniop.GeluMul, {"approximate": "tanh"}),
    "gelu_mul_backward": (infiniop.GeluMulBackward, {"approximate": "none"}),
    "gelu_mul_backward_tanh": (infiniop.GeluMulBackward, {"approximate": "tanh"}),
    "gelu": (infiniop.Gelu, {"approximate": "none"}),
    "gelu_tanh": (infiniop.Gelu, {"approximate": "tanh"}),
    "gelu_backward_v2": (infiniop.GeluBackwardV2, {"approximate": "none"}),
    "gelu_backward_v2_tanh": (infiniop.GeluBackwardV2, {"approximate": "tanh"}),
    "clipped_swiglu": (infiniop.ClippedSwiglu, {"limit": 2.0, "interleaved": True}),
    "clipped_swiglu_backward": (infiniop.ClippedSwigluBackward,
                                {"limit": 2.0, "interleaved": False}),
    "moe_finalize_routing_v2": (infiniop.MoeFinalizeRoutingV2, {"drop_pad_mode": 0}),
    "moe_finalize_routing_v2_grad": (infiniop.MoeFinalizeRoutingV2Grad, {"drop_pad_mode": 0}),
}
CASES = [(name, d) for name in OPERATORS for d in TORCH_DTYPES]


def case_arrays(name, dtype_name):
    rng = _rng(name, dtype_name)
    if name == "moe_finalize_routing_v2":
        return _moe_forward(rng, dtype_name)
    if name == "moe_finalize_routing_v2_grad":
        return _moe_grad(rng, dtype_name)
    return _elementwise(name.replace("_tanh", ""), rng, dtype_name)


def make_op(handle, name, arrays):
    cls, attributes = OPERATORS[name]
    return cls.for_arrays(handle, *arrays, **attributes)


# ----------------------------------------------------------------------------------------------
# Device memory the test manages

def nbytes(t):
    return t.numel() * t.element_size()


def upload(handle, ptr, t, stream=None):
    handle.memcpy_host_to_device(ptr, t.data_ptr(), nbytes(t), stream)


def download(handle, ptr, t, stream=None):
    handle.memcpy_device_to_host(t.data_ptr(), ptr, nbytes(t), stream)


class Separate:
    """One allocation per array, holding a copy of it."""

    def __init__(self, handle, arrays):
        self.handle, self.pointers = handle, []
        try:
            for t in arrays:
                self.pointers.append(handle.malloc(nbytes(t)))
                upload(handle, self.pointers[-1], t)
        except BaseException:
            self.close()
            raise

    def read(self, arrays, count, stream=None):
        outputs = [torch.empty_like(t) for t in arrays[:count]]
        for ptr, out in zip(self.pointers, outputs):
            download(self.handle, ptr, out, stream)
        return outputs

    def close(self):
        for ptr in self.pointers:
            self.handle.free(ptr)
        self.pointers = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def reference(handle, name, arrays, count):
    """The NULL-stream result with one allocation per array, checked against the staged call."""
    with make_op(handle, name, arrays) as op, Separate(handle, arrays) as memory:
        op(*memory.pointers)
        result = memory.read(arrays, count)
        staged = [t.clone() for t in arrays]
        run_op(handle, op, staged, count)
    for got, want in zip(result, staged[:count]):
        assert same_bits(got, want), "device pointers and staging disagree"
    return result


def same_bits(a, b):
    return a.shape == b.shape and torch.equal(a.contiguous().view(torch.uint8),
                                              b.contiguous().view(torch.uint8))


# ----------------------------------------------------------------------------------------------
# Streams

@pytest.mark.parametrize("name,dtype_name", CASES)
def test_stream_matches_null_stream(handle, name, dtype_name):
    arrays, count = case_arrays(name, dtype_name)
    expected = reference(handle, name, arrays, count)
    stream = handle.stream_create()
    try:
        with make_op(handle, name, arrays) as op, Separate(handle, arrays) as memory:
            # Synchronize the stream, then read on the NULL stream.
            op(*memory.pointers, stream=stream)
            handle.stream_synchronize(stream)
            for got, want in zip(memory.read(arrays, count), expected):
                assert same_bits(got, want), f"{name} on a stream"
            # Again, several calls queued, read back on the same (in-order) stream.
            for ptr, t in zip(memory.pointers, arrays[:count]):
                upload(handle, ptr, t)
            for _ in range(3):
                op(*memory.pointers, stream=stream)
            for got, want in zip(memory.read(arrays, count, stream), expected):
                assert same_bits(got, want), f"{name} on a stream, read on the stream"
            handle.stream_synchronize(stream)
            handle.stream_synchronize()
    finally:
        handle.stream_destroy(stream)


# ----------------------------------------------------------------------------------------------
# Views at offsets inside one allocation

FILL = 0xA5  # the bytes between the views


@pytest.mark.parametrize("name,dtype_name", CASES)
def test_views_inside_one_allocation(handle, name, dtype_name):
    """All tensors in one allocation at offsets that are multiples of 8 bytes but not of 64,
    separated by gaps, outputs last: results as with separate allocations, inputs and gaps
    unchanged."""
    arrays, count = case_arrays(name, dtype_name)
    expected = reference(handle, name, arrays, count)
    order = list(range(len(arrays)))[::-1]  # inputs first in memory, outputs at the end
    offsets, position = [0] * len(arrays), 8
    for i in order:
        offsets[i] = position
        position += (nbytes(arrays[i]) + 24 + 7) // 8 * 8
    total = position + 40
    host = torch.full((total,), FILL, dtype=torch.uint8)
    for i, t in enumerate(arrays):
        host[offsets[i]:offsets[i] + nbytes(t)] = t.contiguous().view(torch.uint8).reshape(-1)
    before = host.clone()
    base = handle.malloc(total)
    try:
        handle.memcpy_host_to_device(base, host.data_ptr(), total)
        with make_op(handle, name, arrays) as op:
            op(*(base + offset for offset in offsets))
        handle.memcpy_device_to_host(host.data_ptr(), base, total)
    finally:
        handle.free(base)
    for i, want in enumerate(expected):
        got = host[offsets[i]:offsets[i] + nbytes(want)].view(want.dtype).reshape(want.shape)
        assert same_bits(got, want), f"{name}: output {i} at offset {offsets[i]}"
        host[offsets[i]:offsets[i] + nbytes(want)] = before[offsets[i]:offsets[i] + nbytes(want)]
    assert torch.equal(host, before), "changed an input or a gap between the views"


# ----------------------------------------------------------------------------------------------
# Pointers and streams the handle does not own

@pytest.mark.parametrize("name", list(OPERATORS))
def test_foreign_pointers(handle, name):
    """BAD_PARAM, and nothing written, for: a host pointer, a pointer from another opencl
    handle, a freed pointer, a view running past the end of its allocation, a pointer not
    aligned to its elements, and a stream of another handle."""
    arrays, count = case_arrays(name, "float32")
    host_out = torch.full(arrays[0].shape, SENTINEL)
    with make_op(handle, name, arrays) as op, Separate(handle, arrays) as memory, \
            infiniop.Handle("opencl") as other:
        sentinel = torch.full(arrays[0].shape, SENTINEL)
        upload(handle, memory.pointers[0], sentinel)

        def expect_bad_param(pointers, stream=None):
            with pytest.raises(InfiniopError) as info:
                op(*pointers, stream=stream)
            assert_infiniop_error(info.value, Status.BAD_PARAM)
            out = torch.empty_like(sentinel)
            download(handle, memory.pointers[0], out)
            assert torch.equal(out, sentinel), "a failing call wrote its output"
            return info.value

        good = list(memory.pointers)
        # A host pointer as the output, then as the first input.
        expect_bad_param([host_out.data_ptr()] + good[1:])
        assert torch.equal(host_out, torch.full(arrays[0].shape, SENTINEL))
        expect_bad_param(good[:count] + [arrays[count].data_ptr()] + good[count + 1:])
        # Memory of another opencl handle.
        foreign = other.malloc(nbytes(arrays[count]))
        try:
            error = expect_bad_param(good[:count] + [foreign] + good[count + 1:])
            assert "this handle" in error.message
        finally:
            other.free(foreign)
        # Freed memory.
        freed = handle.malloc(nbytes(arrays[count]))
        handle.free(freed)
        expect_bad_param(good[:count] + [freed] + good[count + 1:])
        # One element too far into its allocation: the view runs past the end.
        itemsize = arrays[count].element_size()
        expect_bad_param(good[:count] + [good[count] + itemsize] + good[count + 1:])
        # Not aligned to the elements (1 byte in; itemsize > 1 for every tensor here).
        shifted = handle.malloc(nbytes(arrays[count]) + itemsize)
        try:
            expect_bad_param(good[:count] + [shifted + 1] + good[count + 1:])
        finally:
            handle.free(shifted)
        # A stream of another handle.
        stream = other.stream_create()
        try:
            expect_bad_param(good, stream=stream)
        finally:
            other.stream_destroy(stream)


# ----------------------------------------------------------------------------------------------
# Runtime of an opencl handle

def test_memory_and_streams(handle):
    assert not handle.host_memory and "opencl" in repr(handle).lower()
    data = np.arange(64, dtype=np.float32)
    ptr = handle.malloc(data.nbytes)
    try:
        assert ptr and ptr % 8 == 0
        stream = handle.stream_create()
        handle.memcpy_host_to_device(ptr, data.ctypes.data, data.nbytes, stream)
        # Copies at offsets inside the allocation, on the stream and on the NULL stream.
        back = np.zeros(16, np.float32)
        handle.memcpy_device_to_host(back.ctypes.data, ptr + 4 * 10, back.nbytes, stream)
        np.testing.assert_array_equal(back, data[10:26])
        handle.memcpy_host_to_device(ptr + 4 * 60, np.full(4, -1, np.float32).ctypes.data, 16)
        whole = np.zeros_like(data)
        handle.memcpy_device_to_host(whole.ctypes.data, ptr, data.nbytes)
        np.testing.assert_array_equal(whole, np.concatenate([data[:60], [-1.0] * 4]))
        handle.stream_synchronize(stream)
        handle.stream_destroy(stream)
        for call, status in (
                (lambda: handle.memcpy_device_to_host(back.ctypes.data, ptr + 4 * 60, 64),
                 Status.BAD_PARAM),  # runs past the end
                (lambda: handle.memcpy_device_to_host(back.ctypes.data, back.ctypes.data, 64),
                 Status.BAD_PARAM),  # a host pointer as the device one
                (lambda: handle.free(ptr + 4), Status.BAD_PARAM),  # not the start
                (lambda: handle.stream_destroy(stream), Status.BAD_PARAM),  # destroyed
                (lambda: handle.stream_synchronize(stream), Status.BAD_PARAM)):
            with pytest.raises(InfiniopError) as info:
                call()
            assert_infiniop_error(info.value, status)
    finally:
        handle.free(ptr)
    with pytest.raises(InfiniopError) as info:
        handle.free(ptr)  # already freed
    assert info.value.status == Status.BAD_PARAM and info.value.function == "infiniopFree"
    zero = handle.malloc(0)  # a unique address, freed like any other
    assert zero and zero != ptr
    handle.free(zero)


def test_handle_closed_with_memory_and_streams_left(handle):
    """Destroying a handle releases what is left (API.md); other handles are unaffected."""
    with infiniop.Handle("opencl") as first, infiniop.Handle("opencl") as second:
        kept = second.malloc(16)
        first.malloc(1 << 20)
        first.stream_create()
        first.close()
        second.memcpy_host_to_device(kept, np.ones(4, np.float32).ctypes.data, 16)
        second.free(kept)


def test_convenience_function_with_its_own_handle(handle):
    """device='opencl' without a handle: the function makes (and builds programs on) a handle
    of its own; the result is that of the shared handle."""
    g, x = torch.randn(7, 9), torch.randn(7, 9)
    own = infiniop.gelu_backward(g, x, device="opencl", approximate="tanh")
    assert torch.equal(own, infiniop.gelu_backward(g, x, **on("opencl"), approximate="tanh"))
    assert torch.equal(infiniop.swiglu(x[:, :8], device="opencl"),
                       infiniop.swiglu(x[:, :8], **on("opencl")))
