# SPDX-License-Identifier: Apache-2.0
"""How the functions on arrays call the library: device arguments as PyTorch users write them,
the default handle per device, the descriptor cache (reuse, bound, threads, close), aten's
gelu_backward signature and positional dims."""

import _ctypes
import gc
import threading
import weakref

import numpy as np
import pytest
import torch

import infiniop
from infiniop import Device, InfiniopError, default_handle, parse_device

HAS_OPENCL = any(info.name == "opencl" and info.count > 0 for info in infiniop.devices())


@pytest.mark.parametrize("device, expected", [
    ("cpu", (Device.CPU, 0)),
    ("CPU", (Device.CPU, 0)),
    ("cpu:0", (Device.CPU, 0)),
    ("cpu_reference", (Device.CPU_REFERENCE, 0)),
    ("opencl:1", (Device.OPENCL, 1)),
    (torch.device("cpu"), (Device.CPU, 0)),
    (torch.device("cpu", 0), (Device.CPU, 0)),
    (Device.OPENCL, (Device.OPENCL, 0)),
    (2, (Device.CPU_REFERENCE, 0)),
])
def test_parse_device(device, expected):
    assert parse_device(device) == expected


@pytest.mark.parametrize("device, error", [
    ("cuda", ValueError), ("opencl:x", ValueError), ("opencl:-1", ValueError),
    (torch.device("cuda"), ValueError), (1.5, TypeError),
])
def test_parse_device_refuses_naming_the_argument(device, error):
    with pytest.raises(error, match="^device: "):
        parse_device(device)
    with pytest.raises(error, match="^device: "):
        infiniop.gelu(torch.zeros(3), device=device)


def test_default_handle_is_one_per_device():
    handle = default_handle("cpu")
    assert default_handle(torch.device("cpu")) is handle
    assert default_handle("cpu:0") is handle and handle.is_open
    assert default_handle("cpu_reference") is not handle


def test_handle_takes_an_indexed_name():
    with infiniop.Handle("cpu:0") as handle:
        assert (handle.device, handle.device_id) == (Device.CPU, 0)


def _cache_keys(handle, cls):
    return [key for key in handle._descriptors if key[0] is cls]


def test_descriptor_cache_reuses_and_keys_on_layout():
    with infiniop.Handle("cpu") as handle:
        x = torch.randn(4, 6)
        first = infiniop.swiglu(x, handle=handle)
        assert torch.equal(infiniop.swiglu(x, handle=handle), first)
        assert len(_cache_keys(handle, infiniop.SwiGlu)) == 1
        # Other data, same layout: the same descriptor; another layout or dim: another one.
        infiniop.swiglu(torch.randn(4, 6), handle=handle)
        assert len(_cache_keys(handle, infiniop.SwiGlu)) == 1
        infiniop.swiglu(x.t(), handle=handle)
        infiniop.swiglu(x, 0, handle=handle)
        assert len(_cache_keys(handle, infiniop.SwiGlu)) == 3
        handle.close()  # destroys the cached descriptors with the handle
        assert not handle._descriptors


def test_descriptor_cache_is_bounded():
    with infiniop.Handle("cpu") as handle:
        handle.DESCRIPTOR_CACHE_SIZE = 4
        for width in range(1, 12):
            x = torch.randn(3, 2 * width)
            a, b = x.double().chunk(2, -1)
            expected = torch.nn.functional.silu(a) * b
            torch.testing.assert_close(infiniop.swiglu(x, handle=handle).double(), expected,
                                       rtol=1e-5, atol=1e-6)
            assert len(handle._descriptors) <= 4
        # The least recently used went first: the last four widths are cached.
        widths = sorted(key[1][1][0][1] // 2 for key in handle._descriptors)
        assert widths == [8, 9, 10, 11]


def test_threads_share_the_default_handle_and_its_descriptors():
    """8 threads call the same operators (one descriptor each, from the shared cache) on their
    own tensors: every result equals the single-threaded one."""
    generator = torch.Generator().manual_seed(1)
    inputs = [torch.randn(16, 34, generator=generator) for _ in range(8)]
    expected = [(infiniop.swiglu(x), infiniop.gelu(x), infiniop.gelu_backward(x, x))
                for x in inputs]
    results, errors = [None] * 8, []

    def work(i):
        try:
            for _ in range(50):
                x = inputs[i]
                got = (infiniop.swiglu(x), infiniop.gelu(x), infiniop.gelu_backward(x, x))
            results[i] = got
        except Exception as error:  # reported below, with the thread's index
            errors.append((i, error))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for got, want in zip(results, expected):
        assert all(torch.equal(a, b) for a, b in zip(got, want))


def test_errors_still_raise_through_a_cached_descriptor():
    x = torch.randn(2, 8)
    infiniop.swiglu(x)  # cache the descriptor
    with pytest.raises(InfiniopError) as info:
        infiniop.swiglu(x, out=x[:, :4])  # out overlaps x partly
    assert info.value.status_name == "INFINI_STATUS_BAD_TENSOR_STRIDES"


def test_gelu_backward_is_atens():
    """gelu_backward(grad_output, input, *, approximate='none'): erf by default, as aten's."""
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(64, generator=generator) * 4
    g = torch.randn(64, generator=generator)
    erf = infiniop.gelu_backward(g, x)
    assert torch.equal(erf, infiniop.gelu_backward_v2(g, x, approximate="none"))
    assert torch.equal(infiniop.gelu_backward(g, x, approximate="tanh"),
                       infiniop.gelu_backward_v2(g, x, approximate="tanh"))
    for approximate in ("none", "tanh"):
        expected = torch.ops.aten.gelu_backward(g.double(), x.double(), approximate=approximate)
        torch.testing.assert_close(infiniop.gelu_backward(g, x, approximate=approximate).double(),
                                   expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="approximate"):
        infiniop.gelu_backward(g, x, approximate="sigmoid")


def test_positional_dim():
    x = torch.randn(4, 6)
    assert torch.equal(infiniop.swiglu(x, 0), infiniop.swiglu(x, dim=0))
    dy = torch.randn(2, 6)
    assert torch.equal(infiniop.swiglu_backward(dy, x, 0), infiniop.swiglu_backward(dy, x, dim=0))
    assert torch.equal(infiniop.clipped_swiglu(x, 0), infiniop.clipped_swiglu(x, dim=0))
    assert torch.equal(infiniop.clipped_swiglu_backward(dy, x, 0),
                       infiniop.clipped_swiglu_backward(dy, x, dim=0))


def test_numpy_arrays_share_the_cache():
    """A NumPy array and a torch tensor of one layout use one cached descriptor."""
    x = np.linspace(-4, 4, 24, dtype=np.float32).reshape(3, 8)
    with infiniop.Handle("cpu") as handle:
        from_numpy = infiniop.gelu(x, handle=handle)
        assert np.array_equal(from_numpy, infiniop.gelu(torch.from_numpy(x), handle=handle).numpy())
        assert len(_cache_keys(handle, infiniop.Gelu)) == 1


@pytest.mark.skipif(not HAS_OPENCL, reason="no OpenCL device")
def test_opencl_reuses_its_handle_and_programs():
    x = torch.randn(5, 8)
    first = infiniop.gelu(x, device="opencl:0")
    handle = default_handle("opencl")
    cached = dict(handle._descriptors)
    assert torch.equal(infiniop.gelu(x, device="opencl"), first)
    assert dict(handle._descriptors) == cached  # the second call made nothing new


# ----------------------------------------------------------------------------------------------
# Review findings, each held by a test

def test_workspaces_stay_bounded_as_threads_come_and_go():
    """A descriptor asking for a workspace (an interleaved split of a strided x), run by 40
    short-lived threads: the handle keeps at most SPARE_WORKSPACES buffers, results exact."""
    x = torch.randn(5, 6, 7, 8)[:, :4, 1:4, ::3]
    expected = infiniop.clipped_swiglu(x, 1, device="cpu_reference")
    with infiniop.Handle("cpu") as handle:
        op = infiniop.ClippedSwiglu.for_arrays(handle, torch.empty(5, 2, 3, 3), x, dim=1)
        assert op.workspace_size > 0  # else this test tests nothing
        op.close()
        results = []
        for _ in range(5):
            threads = [threading.Thread(
                target=lambda: results.append(infiniop.clipped_swiglu(x, 1, handle=handle)))
                for _ in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert len(handle._spare_workspaces) <= handle.SPARE_WORKSPACES
        assert len(results) == 40
        for result in results:
            torch.testing.assert_close(result, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not HAS_OPENCL, reason="no OpenCL device")
def test_opencl_calls_on_two_streams_each_get_their_workspace():
    """Two MoeInitRoutingV2 descriptors (whose opencl workspace holds the routing tables the
    kernels read later) queued alternately on two streams of one handle: each call's workspace
    is its own, so every result equals the cpu device's."""
    experts, hidden = 8, 256
    with infiniop.Handle("opencl") as handle:
        streams = [handle.stream_create(), handle.stream_create()]
        problems = []
        for tokens, seed in ((256, 1), (16, 2)):
            generator = torch.Generator().manual_seed(seed)
            ids = torch.topk(torch.randn(tokens, experts, generator=generator), 2).indices.int()
            x = torch.randn(tokens, hidden, generator=generator)
            expected = infiniop.moe_init_routing_v2(x, ids, expert_num=experts)[:2]
            outputs = [torch.empty(tokens * 2, hidden), torch.empty(tokens * 2, dtype=torch.int32)]
            op = infiniop.MoeInitRoutingV2.for_arrays(handle, *outputs, None, None, x, ids,
                                                      expert_num=experts)
            assert op.workspace_size > 0
            device = []
            for array in outputs + [x, ids]:
                size = array.numel() * array.element_size()
                pointer = handle.malloc(size)
                handle.memcpy_host_to_device(pointer, array.data_ptr(), size)
                device.append((pointer, size, array))
            problems.append((op, device, expected))
        for _ in range(20):
            for (op, device, _), stream in zip(problems, streams):
                pointers = [pointer for pointer, _, _ in device]
                op(pointers[0], pointers[1], None, None, pointers[2], pointers[3], stream=stream)
        for stream in streams:
            handle.stream_synchronize(stream)
        for op, device, expected in problems:
            for (pointer, size, array), want in zip(device[:2], expected):
                handle.memcpy_device_to_host(array.data_ptr(), pointer, size)
                assert torch.equal(array, want.to(array.dtype))
            op.close()
        for stream in streams:
            handle.stream_destroy(stream)


def test_a_dropped_handle_goes_at_once():
    """The descriptors a handle caches refer to it weakly: dropping the handle frees it (and its
    OpenCL context, programs, memory) without waiting for the cyclic garbage collector."""
    gc.disable()
    try:
        handle = infiniop.Handle("cpu")
        infiniop.swiglu(torch.randn(2, 8), handle=handle)
        assert handle._descriptors
        reference = weakref.ref(handle)
        del handle
        assert reference() is None
    finally:
        gc.enable()


def test_attributes_that_compare_equal_are_not_one_key():
    """-0.0 == 0.0, but a bias of -0.0 keeps a zero's sign: the cache keys floats by bits."""
    x = torch.tensor([[1.0, -0.0]])
    with infiniop.Handle("cpu") as handle:
        plus = infiniop.clipped_swiglu(x, bias=0.0, handle=handle)
        minus = infiniop.clipped_swiglu(x, bias=-0.0, handle=handle)
    with infiniop.Handle("cpu") as fresh:
        assert torch.equal(torch.signbit(minus),
                           torch.signbit(infiniop.clipped_swiglu(x, bias=-0.0, handle=fresh)))
    assert torch.signbit(minus).item() and not torch.signbit(plus).item()


@pytest.mark.parametrize("seen", [0, 1])
def test_parse_device_is_typed(seen):
    """True, False and 1.0 hash like 1 and 0: parsing an int first must not make them pass."""
    parse_device(seen)
    default_handle(seen)
    for device in (True, False, 1.0, 0.0):
        with pytest.raises(TypeError, match="^device: "):
            parse_device(device)
        with pytest.raises(TypeError, match="^device: "):
            default_handle(device)


def test_a_closed_default_handle_is_opened_again():
    x = torch.randn(2, 8)
    before = infiniop.swiglu(x, device="cpu_reference")
    default_handle("cpu_reference").close()
    assert torch.equal(infiniop.swiglu(x, device="cpu_reference"), before)
    assert default_handle("cpu_reference").is_open


def test_messages_name_the_argument():
    x = torch.randn(2, 8)
    with pytest.raises(TypeError, match="^dim must be an int, not float"):
        infiniop.swiglu(x, 1.5)
    with pytest.raises(TypeError, match="^dim must be an int, not bool"):
        infiniop.swiglu(x, True)


def test_a_library_lacking_functions_is_refused_with_the_reason():
    """An older libinfiniop.so.0 (same SONAME, fewer functions) or any other library: a
    LibraryNotFoundError saying what it lacks, never a raw AttributeError later."""
    other = _ctypes.__file__  # a shared object that loads but has none of the functions
    with pytest.raises(infiniop.LibraryNotFoundError, match="lacks infiniStatusString"):
        infiniop.load_library(other)
