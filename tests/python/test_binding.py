# SPDX-License-Identifier: Apache-2.0
"""The binding itself: library loading, prototypes, enums, Handle, TensorDescriptor, the
GeluBackward descriptor class, argument checking, and staging through device memory."""

import contextlib
import os
import re
import shutil
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch

import infiniop
from infiniop import Device, DType, InfiniopError, Status, _library

import helpers
from helpers import DEVICES, on, open_handle, run_op

REPO_ROOT = Path(__file__).resolve().parents[2]
INCLUDE_DIR = REPO_ROOT / "include"


# ----------------------------------------------------------------------------------------------
# Enums and prototypes against the headers

def header_enum(prefix):
    text = (INCLUDE_DIR / "infinicore.h").read_text()
    return {name: int(value) for name, value in re.findall(rf"\b{prefix}_(\w+)\s*=\s*(\d+)", text)}


@pytest.mark.parametrize("enum,prefix", [(Status, "INFINI_STATUS"), (DType, "INFINI_DTYPE"),
                                         (Device, "INFINI_DEVICE")])
def test_enums_match_header(enum, prefix):
    from_header = header_enum(prefix)
    assert from_header, f"no {prefix}_* values found in infinicore.h"
    assert {m.name: m.value for m in enum} == from_header


def declared_functions(headers):
    declared = set()
    for header in headers:
        # `__INFINI_C <return type> name(`, the return type possibly a pointer.
        declared |= set(re.findall(r"__INFINI_C\s+[\w\s\*]*?\b(\w+)\s*\(", header.read_text()))
    return declared


def test_prototypes_match_headers():
    """Every core function has a prototype, every prototype is declared in a header, and an
    operator is bound whole or not at all. (Operators added to the C library later need not be
    bound yet.)"""
    bound = set(_library.EXPORTED_FUNCTIONS)
    core = declared_functions([INCLUDE_DIR / "infinicore.h", *INCLUDE_DIR.glob("infiniop/*.h")])
    assert core, "no __INFINI_C declarations found"
    assert core <= bound
    assert bound <= declared_functions(INCLUDE_DIR.rglob("*.h"))
    assert "infiniopGeluBackward" in bound
    for header in INCLUDE_DIR.glob("infiniop/ops/*.h"):
        functions = declared_functions([header])
        assert not (functions & bound) or functions <= bound, f"{header.name} is partly bound"


def test_status_strings():
    for status in Status:
        assert infiniop.status_string(status) == f"INFINI_STATUS_{status.name}"
    assert infiniop.status_string(99) == "INFINI_STATUS_UNKNOWN"


def test_cpu_isa_name():
    name = infiniop.cpu_isa_name()
    assert isinstance(name, str) and name


def test_devices_come_from_the_library():
    built = infiniop.devices()
    names = [info.name for info in built]
    assert "cpu_reference" in names and len(set(names)) == len(names)
    assert [int(info.device) for info in built] == sorted(int(info.device) for info in built)
    reference = infiniop.device_info("cpu_reference")
    assert reference == infiniop.DeviceInfo(Device.CPU_REFERENCE, "cpu_reference", 1, True)
    for info in built:
        assert infiniop.device_info(info.device) == info
        assert Device.parse(info.name) == info.device  # names parse as the library spells them
        with infiniop.Handle(info.name) if info.host_memory else contextlib.nullcontext() as h:
            assert h is None or h.host_memory == info.host_memory
    assert ("opencl" in names) == helpers.OPENCL_BUILT
    with pytest.raises(InfiniopError) as error:
        infiniop.device_info(7)
    assert error.value.status == Status.DEVICE_TYPE_NOT_SUPPORTED and "7" in error.value.message


def test_device_parse():
    assert Device.parse("cpu") is Device.CPU
    assert Device.parse("CPU_Reference") is Device.CPU_REFERENCE
    assert Device.parse("cpu-reference") is Device.CPU_REFERENCE
    assert Device.parse("opencl") is Device.OPENCL
    assert Device.parse(2) is Device.CPU_REFERENCE
    assert Device.parse(Device.CPU) is Device.CPU
    assert Device.parse(9) == 9  # passed on for the library to reject
    with pytest.raises(ValueError, match="unknown device"):
        Device.parse("cuda")
    with pytest.raises(TypeError):
        Device.parse(1.0)


# ----------------------------------------------------------------------------------------------
# Finding the library

def test_library_comes_from_environment_variable():
    lib = infiniop.get_library()
    if os.environ.get("INFINIOP_LIBRARY"):
        named = Path(os.environ["INFINIOP_LIBRARY"])  # the library, or a folder holding it
        assert Path(lib.infiniop_path) in (named, named / _library.LIBRARY_SONAME,
                                           named / _library.LIBRARY_NAME)
    assert Path(lib.infiniop_path).is_file()


def test_library_candidates(tmp_path):
    env_path = tmp_path / "elsewhere" / "libinfiniop.so"
    assert _library.library_candidates({"INFINIOP_LIBRARY": str(env_path)}, tmp_path) == \
        ([env_path], True)

    package = tmp_path / "python" / "infiniop"  # a package folder with nothing next to it
    package.mkdir(parents=True)
    assert _library.library_candidates({}, tmp_path, package) == ([], False)
    for folder, mtime in (("build-old", 1000), ("build", 500), ("build-new", 2000)):
        (tmp_path / folder).mkdir()
        library = tmp_path / folder / "libinfiniop.so"
        library.write_bytes(b"")
        os.utime(library, (mtime, mtime))
    candidates, explicit = _library.library_candidates({"INFINIOP_LIBRARY": ""}, tmp_path, package)
    assert not explicit
    assert [p.parent.name for p in candidates] == ["build", "build-new", "build-old"]
    # The checkout's build folders are looked in only when the package is <checkout>/python/
    # infiniop, not for an installed copy.
    assert _library.library_candidates({}, None, package) == ([], False)
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "infiniop.h").write_text("")
    assert _library.library_candidates({}, None, package)[0] == candidates

    # Next to the package comes before the build folders: the library inside the package
    # folder, then the one `cmake --install` recorded in _install.json.
    lib_dir = tmp_path / "prefix" / "lib"
    lib_dir.mkdir(parents=True)
    (lib_dir / "libinfiniop.so.0").write_bytes(b"")
    (package / "_install.json").write_text(
        '{"library_dir": "../../prefix/lib", "library": "libinfiniop.so.0"}')
    inside = package / "libinfiniop.so.0"
    inside.write_bytes(b"")
    assert _library.library_candidates({}, None, package)[0] == \
        [inside, lib_dir / "libinfiniop.so.0"] + candidates
    (package / "_install.json").write_text("not json")  # an unreadable record is passed over
    assert _library.library_candidates({}, None, package)[0] == [inside] + candidates


def test_versions_agree():
    """The package, the library loaded and the headers have one version."""
    text = (INCLUDE_DIR / "infiniop" / "version.h").read_text()
    header = tuple(int(re.search(rf"#define INFINIOP_VERSION_{part} (\d+)", text).group(1))
                   for part in ("MAJOR", "MINOR", "PATCH"))
    assert infiniop.library_version() == header
    assert infiniop.__version__ == "%d.%d.%d" % header
    pyproject = (REPO_ROOT / "python" / "pyproject.toml").read_text()
    # The wheel's version: scikit-build-core's regex provider reads infiniop/_version.py.
    assert 'field = "version"\ninput = "infiniop/_version.py"' in pyproject
    lib = infiniop.get_library()
    assert lib.infiniopGetVersion(None, None, None) == Status.NULL_POINTER
    assert "infiniopGetVersion: major is NULL" in infiniop.last_error()


def test_library_found_by_the_dynamic_loader(tmp_path):
    """With nothing else to find, the loader's search path (LD_LIBRARY_PATH) gives the library;
    with nothing at all, the error names every way. In a child process: the loader reads
    LD_LIBRARY_PATH at start."""
    package = tmp_path / "site" / "infiniop"
    shutil.copytree(REPO_ROOT / "python" / "infiniop", package,
                    ignore=shutil.ignore_patterns("__pycache__", "_install.json"))
    library_dir = Path(infiniop.get_library().infiniop_path).resolve().parent
    script = ("import infiniop\n"
              "try:\n"
              "    print(infiniop.get_library().infiniop_path, infiniop.library_version())\n"
              "except infiniop.LibraryNotFoundError as error:\n"
              "    print(error)\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("INFINIOP_LIBRARY", "LD_LIBRARY_PATH", "PYTHONPATH")}
    env["PYTHONPATH"] = str(package.parent)

    def run(**extra):
        return subprocess.run([sys.executable, "-c", script], env={**env, **extra}, cwd=tmp_path,
                              capture_output=True, text=True, check=True).stdout

    if not (library_dir / _library.LIBRARY_SONAME).exists():
        pytest.skip(f"no {_library.LIBRARY_SONAME} beside {infiniop.get_library().infiniop_path}")
    path, version = run(LD_LIBRARY_PATH=str(library_dir)).split(maxsplit=1)
    assert Path(path).parent == library_dir and version.strip() == str(infiniop.library_version())
    missing = run()
    if "cannot load" in missing:  # else a library installed system-wide was found
        for way in ("$INFINIOP_LIBRARY", "next to the package", "the dynamic loader"):
            assert way in missing


def test_missing_library_is_a_clear_error(tmp_path):
    missing = tmp_path / "libinfiniop.so"
    with pytest.raises(infiniop.LibraryNotFoundError) as info:
        infiniop.load_library(missing)
    assert str(missing) in str(info.value) and "INFINIOP_LIBRARY" in str(info.value)

    not_a_library = tmp_path / "broken.so"
    not_a_library.write_text("not an ELF file")
    with pytest.raises(infiniop.LibraryNotFoundError, match="broken.so"):
        infiniop.load_library(not_a_library)


# ----------------------------------------------------------------------------------------------
# Handle and runtime

@pytest.mark.parametrize("device", ["cpu", "cpu_reference", Device.CPU, 2])
def test_handle_lifetime(device):
    with infiniop.Handle(device) as handle:
        assert handle.is_open and handle.host_memory
        assert isinstance(handle.value, int)
        assert "Handle(" in repr(handle)
    assert not handle.is_open
    handle.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        handle.value


def test_handle_errors():
    with pytest.raises(InfiniopError) as info:
        infiniop.Handle("cpu", device_id=1)
    assert info.value.status == Status.DEVICE_NOT_FOUND and info.value.message
    # opencl: not built (DEVICE_TYPE_NOT_SUPPORTED), built without a platform (DEVICE_NOT_FOUND),
    # or a working handle; whichever it is, the device lists of the tests were made from it.
    try:
        infiniop.Handle("opencl").close()
    except InfiniopError as error:
        assert error.status in (Status.DEVICE_TYPE_NOT_SUPPORTED, Status.DEVICE_NOT_FOUND)
        assert error.status_name in str(error) and error.message
        assert not helpers.OPENCL_AVAILABLE
        assert helpers.OPENCL_BUILT == (error.status == Status.DEVICE_NOT_FOUND)
    else:
        assert helpers.OPENCL_AVAILABLE
    # Values of infiniDevice_t that no build supports.
    for device in (-1, 99, 1000):
        with pytest.raises(InfiniopError) as info:
            infiniop.Handle(device)
        assert info.value.status == Status.DEVICE_TYPE_NOT_SUPPORTED


def test_memory_and_streams():
    with infiniop.Handle("cpu") as handle:
        data = np.arange(10, dtype=np.float32)
        back = np.zeros_like(data)
        ptr = handle.malloc(data.nbytes)
        stream = handle.stream_create()
        handle.memcpy_host_to_device(ptr, data.ctypes.data, data.nbytes, stream)
        handle.memcpy_device_to_host(back.ctypes.data, ptr, data.nbytes)
        handle.stream_synchronize(stream)
        handle.stream_synchronize()
        handle.stream_destroy(stream)
        handle.free(ptr)
        np.testing.assert_array_equal(back, data)
        with pytest.raises(InfiniopError) as info:
            handle.free(ptr)  # already freed
        assert info.value.status == Status.BAD_PARAM and info.value.function == "infiniopFree"


def test_last_error_is_thread_local_and_cleared_by_success():
    with pytest.raises(InfiniopError):
        infiniop.TensorDescriptor((1,) * 17)  # more than INFINIOP_MAX_NDIM dimensions
    assert infiniop.last_error()
    seen_elsewhere = []
    worker = threading.Thread(target=lambda: seen_elsewhere.append(infiniop.last_error()))
    worker.start()
    worker.join()
    assert seen_elsewhere == [""]
    infiniop.TensorDescriptor((2, 3)).close()
    assert infiniop.last_error() == ""


# ----------------------------------------------------------------------------------------------
# TensorDescriptor

def test_tensor_descriptor():
    with infiniop.TensorDescriptor((2, 3), (1, -2), DType.F16) as desc:
        assert desc.ndim == 2 and desc.shape == (2, 3) and desc.strides == (1, -2)
        assert desc.dtype is DType.F16 and "F16" in repr(desc)
    with infiniop.TensorDescriptor(()) as scalar:
        assert scalar.ndim == 0 and scalar.strides is None
    with pytest.raises(InfiniopError) as info:
        infiniop.TensorDescriptor((1,) * 17)
    assert info.value.status == Status.BAD_TENSOR_SHAPE
    with pytest.raises(ValueError):
        infiniop.TensorDescriptor((2, 3), (1,))


def test_array_views():
    a = np.zeros((4, 6), np.float16)[::-1, 1::2]
    view = infiniop.array_view(a)
    assert view.kind == "numpy" and view.dtype is DType.F16
    assert view.shape == (4, 3) and view.strides == (-6, 2)
    assert view.ptr == a.ctypes.data
    assert view.element_span() == (-18, 4)

    t = torch.zeros(1, 5, dtype=torch.bfloat16).expand(3, 5).t()
    view = infiniop.array_view(t)
    assert view.kind == "torch" and view.dtype is DType.BF16
    assert view.strides == (1, 0) and view.ptr == t.data_ptr()

    with pytest.raises(TypeError):
        infiniop.array_view([1.0, 2.0])
    with pytest.raises(TypeError):
        infiniop.array_view(np.zeros(3, np.complex64))
    with pytest.raises(TypeError):
        infiniop.array_view(np.zeros(3, ">f4"))


# ----------------------------------------------------------------------------------------------
# The GeluBackward descriptor class

@pytest.mark.parametrize("device", DEVICES)
def test_descriptor_reused_after_tensor_descriptors_are_gone(device):
    """Arrays go through run_op: as they are on the CPU devices, staged through device memory
    on the others (whose pointers are not host pointers)."""
    shape = (8, 9)
    with open_handle(device) as handle:
        descs = [infiniop.TensorDescriptor(shape, None, DType.F32) for _ in range(3)]
        op = infiniop.GeluBackward(handle, *descs)
        for desc in descs:  # the operator descriptor copied what it needs
            desc.close()
        assert op.workspace_size == 0
        for seed in range(3):
            generator = torch.Generator().manual_seed(seed)
            x = torch.randn(shape, generator=generator)
            g = torch.randn(shape, generator=generator)
            out = torch.full(shape, float("nan"))
            run_op(handle, op, [out, x, g], 1)  # arrays
            expected = infiniop.gelu_backward(g, x, **on(device), approximate="tanh")
            assert torch.equal(out, expected)
            out.fill_(float("nan"))
            # raw pointers (device pointers to copies of the arrays on opencl)
            run_op(handle, lambda *p: op(*(a if isinstance(a, int) else a.data_ptr() for a in p),
                                         None, 0, None), [out, x, g], 1)
            assert torch.equal(out, expected)
        with pytest.raises(ValueError, match="does not match the descriptor"):
            op(torch.empty(shape).t(), x, g)
        with pytest.raises(InfiniopError) as info:
            run_op(handle, op, [None, x, g], 1)
        assert info.value.status == Status.NULL_POINTER
        op.close()
        op.close()


@pytest.mark.parametrize("device", helpers.FAST_DEVICES)  # cpu, and opencl (staged)
def test_descriptor_shared_between_threads(device):
    shape = (64, 100)
    with open_handle(device) as handle:
        like = torch.empty(shape)
        with infiniop.GeluBackward.for_arrays(handle, like, like, like) as op:
            def work(seed):
                generator = torch.Generator().manual_seed(seed)
                x, g = torch.randn(shape, generator=generator), torch.randn(shape, generator=generator)
                out = torch.empty(shape)
                for _ in range(20):
                    run_op(handle, op, [out, x, g], 1)
                return torch.equal(out, infiniop.gelu_backward(g, x, **on(device), approximate="tanh"))

            with ThreadPoolExecutor(4) as pool:
                assert all(pool.map(work, range(8)))


# ----------------------------------------------------------------------------------------------
# gelu_backward() argument handling

def test_output_allocation():
    x = torch.randn(5, 7, dtype=torch.float16)
    g = torch.randn(7, 5, dtype=torch.float16).t()
    result = infiniop.gelu_backward(g, x, approximate="tanh")
    assert result.dtype == torch.float16 and result.shape == (5, 7)
    assert result.stride() == g.stride()  # allocated like grad_output
    assert torch.equal(result, infiniop.gelu_backward(g, x, out=torch.empty(5, 7, dtype=torch.float16), approximate="tanh"))

    a = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    result = infiniop.gelu_backward(np.ones_like(a), a, approximate="tanh")
    assert isinstance(result, np.ndarray) and result.dtype == np.float32 and result.shape == (3, 4)


def test_argument_errors():
    x, a = torch.randn(3), np.ones(3, np.float32)
    with pytest.raises(TypeError, match="one kind"):
        infiniop.gelu_backward(x, a, approximate="tanh")
    with pytest.raises(TypeError):
        infiniop.gelu_backward(x, x, out=a, approximate="tanh")
    with pytest.raises(ValueError, match="read-only"):
        infiniop.gelu_backward(a, a, out=np.broadcast_to(np.ones(1, np.float32), (3,)), approximate="tanh")
    with pytest.raises(TypeError):
        infiniop.gelu_backward([1.0], [1.0], approximate="tanh")


@pytest.mark.parametrize("device", DEVICES)
def test_zero_size_and_high_rank(device):
    empty = torch.empty(0, 5)
    assert infiniop.gelu_backward(empty, empty, **on(device), approximate="tanh").shape == (0, 5)
    shape = (2, 1, 2, 1, 2, 1, 2, 1, 2)  # nine dimensions
    x, g = torch.randn(shape), torch.randn(shape)
    flat = infiniop.gelu_backward(g.ravel(), x.ravel(), **on(device), approximate="tanh")
    np.testing.assert_array_equal(infiniop.gelu_backward(g, x, **on(device), approximate="tanh").numpy().ravel(),
                                  flat.numpy())


def test_explicit_handle_overrides_device():
    x, g = torch.randn(100), torch.randn(100)
    with infiniop.Handle("cpu_reference") as handle:
        via_handle = infiniop.gelu_backward(g, x, device="opencl", handle=handle, approximate="tanh")
        assert handle.is_open  # a handle given by the caller stays open
    assert torch.equal(via_handle, infiniop.gelu_backward(g, x, device="cpu_reference", approximate="tanh"))


# ----------------------------------------------------------------------------------------------
# Staging through device memory (what non-host devices use), exercised on the cpu device

@pytest.mark.parametrize("case", ["plain", "negative_strides", "inplace_input",
                                  "inplace_grad_output", "broadcast", "strided_out", "empty"])
def test_staging_matches_direct(case):
    rng = np.random.default_rng(7)

    def data(shape):
        return (rng.standard_normal(shape) * 4).astype(np.float32)

    def make():
        if case == "plain":
            return data((6, 7)), data((6, 7)), np.full((6, 7), np.nan, np.float32), None
        if case == "negative_strides":
            return data((6, 7))[::-1], data((6, 14))[:, ::-2], np.full((6, 7), np.nan, np.float32)[::-1, ::-1], None
        if case == "inplace_input":
            x = data((6, 7))[::-1]
            return data((6, 7)), x, x, None
        if case == "inplace_grad_output":
            g = data((6, 7))
            return g, data((6, 7)), g, None
        if case == "broadcast":
            return data((6, 7)), np.broadcast_to(data((1, 7)), (6, 7)), np.full((6, 7), np.nan, np.float32), None
        if case == "strided_out":
            storage = np.full((6, 15), 42.0, np.float32)
            return data((6, 7)), data((6, 7)), storage[:, 1::2], storage
        if case == "empty":
            return data((0, 7)), data((0, 7)), np.full((0, 7), np.nan, np.float32), None
        raise ValueError(case)

    g1, x1, out1, storage1 = make()
    rng = np.random.default_rng(7)
    g2, x2, out2, storage2 = make()
    direct = infiniop.gelu_backward(g1, x1, out=out1, _stage=False, approximate="tanh")
    staged = infiniop.gelu_backward(g2, x2, out=out2, _stage=True, approximate="tanh")
    np.testing.assert_array_equal(staged, direct)
    if storage2 is not None:
        np.testing.assert_array_equal(storage2[:, ::2], 42.0)


def test_staging_keeps_partial_overlap_an_error():
    base = np.arange(16, dtype=np.float32)
    before = base.copy()
    with pytest.raises(InfiniopError) as info:
        infiniop.gelu_backward(np.ones(8, np.float32), base[:8], out=base[12:4:-1], _stage=True, approximate="tanh")
    assert info.value.status == Status.BAD_TENSOR_STRIDES
    np.testing.assert_array_equal(base, before)


OPERATOR_MODULES = ("swiglu", "gelu_mul", "gelu", "gelu_backward", "clipped_swiglu",
                    "moe_init_routing", "moe_finalize_routing", "moe_gating")


def test_operator_modules_share_through_the_base_module():
    """What the operator modules share lives in infiniop/_operator.py: none imports a private
    name of another (issue 44), and enums.py, the lowest module, imports nothing of the package
    (no import cycle through it)."""
    import ast

    package = Path(infiniop.__file__).parent
    for name in OPERATOR_MODULES:
        tree = ast.parse((package / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1 \
                    and node.module in OPERATOR_MODULES:
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private, f"{name}.py imports {private} from {node.module}.py"
    enums = ast.parse((package / "enums.py").read_text())
    relative = [node for node in ast.walk(enums)
                if isinstance(node, ast.ImportFrom) and node.level >= 1]
    assert not relative, "enums.py imports the package"
