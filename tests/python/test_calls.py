# SPDX-License-Identifier: Apache-2.0
"""How the functions on arrays call the library: device arguments as PyTorch users write them,
the default handle per device, the descriptor cache (reuse, bound, threads, close), aten's
gelu_backward signature and positional dims."""

import threading

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
    x = np.linspace(-4, 4, 24, dtype=np.float32).reshape(3, 8)
    assert np.array_equal(infiniop.gelu(x), infiniop.gelu(torch.from_numpy(x)).numpy())


@pytest.mark.skipif(not HAS_OPENCL, reason="no OpenCL device")
def test_opencl_reuses_its_handle_and_programs():
    x = torch.randn(5, 8)
    first = infiniop.gelu(x, device="opencl:0")
    handle = default_handle("opencl")
    cached = dict(handle._descriptors)
    assert torch.equal(infiniop.gelu(x, device="opencl"), first)
    assert dict(handle._descriptors) == cached  # the second call made nothing new
