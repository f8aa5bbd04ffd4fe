# SPDX-License-Identifier: Apache-2.0
"""Finding and loading libinfiniop.so, the C prototypes, and status checking.

Where the library is looked for, first found wins (library_candidates, load_library):
  1. $INFINIOP_LIBRARY, the path of the library or of a folder holding it (libinfiniop.so.0,
     else libinfiniop.so): when set, the only place looked.
  2. Next to the package: the library inside the package folder (libinfiniop.so.0 or
     libinfiniop.so; the wheel that `pip install ./python` builds puts it there), then the one
     `cmake --install` installed with the package, in the libdir that the install recorded
     relative to the package (<package>/_install.json). Each folder of the package's __path__
     is such a folder: an editable install (pip install -e ./python) imports the modules from
     the checkout and lists first the install tree, which holds the library pip built.
  3. From a source checkout (the package imported from <repo>/python): <repo>/build/, then
     <repo>/build-*/, most recently built first.
  4. The dynamic loader: dlopen("libinfiniop.so.0"), so LD_LIBRARY_PATH, the ldconfig cache and
     the system's library folders.
  5. The install prefixes (search_prefixes, prefix_candidates): $INFINIOP_PREFIX and
     $CMAKE_PREFIX_PATH (lists separated by ':'), sys.prefix and sys.base_prefix (a venv's or
     conda's prefix, and the interpreter's), /usr/local, /usr, /opt/infiniop; in each,
     lib/, lib64/ and lib/<multiarch triplet>/ (e.g. lib/x86_64-linux-gnu/). So a package
     `pip install`ed into a venv finds a library `cmake --install`ed into the same or a standard
     prefix without any variable, even one the loader does not know (no ldconfig run).
"""

import ctypes
import json
import os
import platform
import sys
import sysconfig
import threading
from pathlib import Path

from ._version import __version__
from .enums import Status

__all__ = [
    "InfiniopError",
    "LibraryNotFoundError",
    "library_candidates",
    "search_prefixes",
    "prefix_candidates",
    "load_library",
    "get_library",
    "library_version",
    "check",
    "status_string",
    "last_error",
]

LIBRARY_ENV = "INFINIOP_LIBRARY"
LIBRARY_NAME = "libinfiniop.so"
# What the dynamic loader is asked for: the SONAME of the ABI this package binds (major 0).
LIBRARY_SONAME = "libinfiniop.so.0"
# Written by `cmake --install` into the installed package (cmake/InfiniopPythonInstall.cmake):
# {"library_dir": <the library's folder relative to the package's>, "library": <file name>}.
INSTALL_RECORD = "_install.json"
# Install prefixes named by the user, searched after the dynamic loader (search_prefixes).
PREFIX_ENV = "INFINIOP_PREFIX"
CMAKE_PREFIX_ENV = "CMAKE_PREFIX_PATH"
# Where `cmake --install` puts the library when no prefix is given, where distributions put it,
# and a conventional prefix for a private install.
STANDARD_PREFIXES = ("/usr/local", "/usr", "/opt/infiniop")

PACKAGE_DIR = Path(__file__).resolve().parent
# python/infiniop/_library.py -> the repository root is three levels up; only meaningful when
# the package is imported from the source tree (in_source_tree()).
REPO_ROOT = PACKAGE_DIR.parents[1]


def in_source_tree(package_dir=PACKAGE_DIR):
    """Whether the package is <repo>/python/infiniop of a source checkout (not an installed copy)."""
    root = Path(package_dir).parents[1]
    return Path(package_dir).parent.name == "python" and (root / "include" / "infiniop.h").is_file()


class LibraryNotFoundError(OSError):
    """libinfiniop.so could not be found or could not be loaded."""


class InfiniopError(RuntimeError):
    """A libinfiniop call returned a status other than INFINI_STATUS_SUCCESS.

    status: the int status; status_name: infiniStatusString(status);
    message: infiniopGetLastError() read right after the failing call; function: the C function.
    """

    def __init__(self, status, message, function=None):
        self.status = int(status)
        self.status_name = status_string(self.status)
        self.message = message
        self.function = function
        where = f"{function} failed: " if function else ""
        super().__init__(f"{where}{self.status_name} ({self.status}): {message or '(no message)'}")


# --------------------------------------------------------------------------------------------
# Locating the library

def _installed_library(package_dir):
    """The library `cmake --install` recorded next to the package, or None."""
    try:
        record = json.loads((package_dir / INSTALL_RECORD).read_text())
        return Path(os.path.normpath(package_dir / record["library_dir"] / record["library"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _library_in(folder):
    """The library in `folder`, libinfiniop.so.0 (this binding's ABI) before libinfiniop.so, or
    None."""
    for name in (LIBRARY_SONAME, LIBRARY_NAME):
        if os.path.isfile(folder / name):  # False, not an error, for an unreadable folder too
            return folder / name
    return None


def _explicit_candidates(path):
    """What a path the user gave ($INFINIOP_LIBRARY, load_library's argument) stands for: the
    file itself, or for a folder the library in it; both names when it holds neither, so the
    error says which files were tried."""
    path = Path(path)
    if not path.is_dir():
        return [path]
    found = _library_in(path)
    return [found] if found is not None else [path / LIBRARY_SONAME, path / LIBRARY_NAME]


def _package_dirs():
    """The package's folders, in the order of its __path__, then this module's folder (the same,
    but for an editable install, whose __path__ begins with the install tree)."""
    package = sys.modules.get(__package__)
    folders = [Path(folder).resolve() for folder in getattr(package, "__path__", ())]
    return list(dict.fromkeys(folders + [PACKAGE_DIR]))


def library_candidates(environ=None, repo_root=None, package_dir=None):
    """The library files to try, best first, and whether they came from $INFINIOP_LIBRARY.

    INFINIOP_LIBRARY, when set, is the only candidate (an explicit choice must not be overridden
    by another library lying around); when it is a folder, the library in it. Otherwise the
    files that exist of: the library inside `package_dir` (default: each of this package's
    folders, _package_dirs()), the one recorded in its _install.json, then <repo_root>/build/
    and <repo_root>/build-*/, most recently built first (repo_root defaults to the checkout this
    package is imported from, and to none for an installed package). The dynamic loader
    (LIBRARY_SONAME) is not a file here, nor are the install prefixes: load_library tries the
    loader after these, then prefix_candidates().
    """
    environ = os.environ if environ is None else environ
    explicit = environ.get(LIBRARY_ENV, "").strip()
    if explicit:
        return _explicit_candidates(explicit), True
    package_dirs = _package_dirs() if package_dir is None else [Path(package_dir)]
    package_dir = PACKAGE_DIR if package_dir is None else Path(package_dir)
    if repo_root is None and in_source_tree(package_dir):
        repo_root = package_dir.parents[1]
    nearby = [path for folder in package_dirs for path in
              (folder / LIBRARY_SONAME, folder / LIBRARY_NAME, _installed_library(folder))]
    found = [p for p in nearby if p is not None and p.is_file()]
    if repo_root is not None:
        root = Path(repo_root)
        default = root / "build" / LIBRARY_NAME
        if default.is_file():
            found.append(default)
        others = [p for p in root.glob("build-*/" + LIBRARY_NAME) if p.is_file()]
        others.sort(key=lambda p: p.stat().st_mtime, reverse=True)
        found += others
    return list(dict.fromkeys(found)), False


def _multiarch():
    """The Debian-style multiarch triplet (lib/<triplet>/), e.g. x86_64-linux-gnu."""
    return sysconfig.get_config_var("MULTIARCH") or f"{platform.machine()}-linux-gnu"


def search_prefixes(environ=None):
    """The install prefixes searched after the dynamic loader, in order, each once:
    $INFINIOP_PREFIX, $CMAKE_PREFIX_PATH (os.pathsep-separated lists, as CMake reads the
    variable), sys.prefix, sys.base_prefix, then STANDARD_PREFIXES."""
    environ = os.environ if environ is None else environ
    named = [entry.strip() for variable in (PREFIX_ENV, CMAKE_PREFIX_ENV)
             for entry in environ.get(variable, "").split(os.pathsep)]
    prefixes = [entry for entry in named if entry] + [sys.prefix, sys.base_prefix]
    return list(dict.fromkeys(Path(p) for p in prefixes + list(STANDARD_PREFIXES)))


def prefix_candidates(environ=None, prefixes=None):
    """The library files in the install prefixes (default: search_prefixes(environ)), in order:
    in each prefix the library (_library_in) of lib/, lib64/, then lib/<multiarch triplet>/.
    A file reached twice (lib64 a link to lib, sys.prefix the same as /usr) is listed once."""
    prefixes = search_prefixes(environ) if prefixes is None else [Path(p) for p in prefixes]
    found = {}
    for prefix in prefixes:
        for folder in ("lib", "lib64", "lib/" + _multiarch()):
            library = _library_in(prefix / folder)
            if library is not None:
                found.setdefault(os.path.realpath(library), library)
    return list(found.values())


def _open(path):
    """dlopen one candidate; None and the reason if it does not load."""
    try:
        return ctypes.CDLL(str(path)), None
    except OSError as error:  # e.g. a sanitizer build that needs its runtime preloaded
        return None, str(error)


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _loaded_file(lib):
    """The file the dynamic loader opened for `lib` (dladdr on one of its functions), or None."""
    for libc in (None, "libdl.so.2"):  # glibc >= 2.34 has dladdr in libc itself
        try:
            dladdr = ctypes.CDLL(libc).dladdr
            break
        except (OSError, AttributeError):
            continue
    else:
        return None
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    dladdr.restype = ctypes.c_int
    info = _DlInfo()
    address = ctypes.cast(lib.infiniStatusString, ctypes.c_void_p)
    if not dladdr(address, ctypes.byref(info)) or not info.dli_fname:
        return None
    return os.path.realpath(os.fsdecode(info.dli_fname))


def _prefix_list(prefixes):
    return ", ".join(str(p) for p in prefixes)


def _ways(package_dir, repo_root, prefixes):
    """The ways of finding the library, in the order they are tried, for LibraryNotFoundError's
    message."""
    ways = [f"${LIBRARY_ENV}: the path of {LIBRARY_NAME}, or of a folder holding it "
            f"(when set, the only place looked)",
            f"next to the package: {package_dir}/{LIBRARY_SONAME} (`pip install ./python` "
            f"builds it into the package), or the library `cmake --install` installed with the "
            f"package ({INSTALL_RECORD})"]
    if repo_root is not None:
        ways.append(f"this source checkout: {repo_root}/build/ and build-*/ (build it: "
                    f"cmake -S {repo_root} -B {repo_root}/build && cmake --build "
                    f"{repo_root}/build)")
    ways += [f"the dynamic loader: {LIBRARY_SONAME} through LD_LIBRARY_PATH or ldconfig",
             f"an install prefix (`cmake --install --prefix <prefix>`): lib/, lib64/ or "
             f"lib/{_multiarch()}/ of ${PREFIX_ENV}, ${CMAKE_PREFIX_ENV}, sys.prefix, "
             f"sys.base_prefix, {', '.join(STANDARD_PREFIXES)} (here: {_prefix_list(prefixes)})"]
    return [f"{number}. {way}" for number, way in enumerate(ways, 1)]


def load_library(path=None):
    """Load libinfiniop.so (from `path`, the library or a folder holding it, or as the module's
    docstring says) and declare its API.

    Returns the ctypes.CDLL; its infiniop_path is the file loaded. Raises LibraryNotFoundError
    naming every place tried, why each failed, and the ways the library is found.
    """
    if path is not None:
        candidates, explicit, origin = _explicit_candidates(path), True, " (the path given)"
    else:
        candidates, explicit = library_candidates()
        origin = f" (${LIBRARY_ENV} is set)" if explicit else ""
    reasons = []

    def try_files(files):
        for candidate in files:
            if not candidate.is_file():
                reasons.append(f"{candidate}: no such file")
                continue
            lib, reason = _open(candidate)
            if lib is not None:
                lib, reason = _declare(lib, str(candidate))
                if lib is not None:
                    return lib
            reasons.append(f"{candidate}: {reason}")
        return None

    lib = try_files(candidates)
    if lib is not None:
        return lib
    repo_root = REPO_ROOT if in_source_tree() else None
    prefixes = search_prefixes()
    if not explicit:
        if not candidates:
            reasons.append(f"nothing next to the package ({PACKAGE_DIR})" +
                           (f" or in {repo_root}/build*/" if repo_root is not None else ""))
        lib, reason = _open(LIBRARY_SONAME)
        if lib is not None:
            lib, reason = _declare(lib, _loaded_file(lib) or LIBRARY_SONAME)
            if lib is not None:
                return lib
        reasons.append(f"the dynamic loader: {reason}")
        # Last: a library installed where the loader does not look (a venv's or conda's prefix,
        # /opt/infiniop, /usr/local before ldconfig ran), so no variable is needed.
        in_prefixes = prefix_candidates(prefixes=prefixes)
        lib = try_files(in_prefixes)
        if lib is not None:
            return lib
        if not in_prefixes:
            reasons.append(f"no {LIBRARY_SONAME} or {LIBRARY_NAME} in lib/, lib64/ or "
                           f"lib/{_multiarch()}/ of the install prefixes {_prefix_list(prefixes)}")
    raise LibraryNotFoundError(
        f"cannot load {LIBRARY_NAME}{origin}; tried:\n  " + "\n  ".join(reasons) +
        "\nThe library is found, first found wins, through:\n  " +
        "\n  ".join(_ways(PACKAGE_DIR, repo_root, prefixes)))


_lock = threading.Lock()
_library = None


def get_library():
    """The process-wide library, loaded on first use (so `import infiniop` never fails)."""
    global _library
    if _library is None:
        with _lock:
            if _library is None:
                _library = load_library()
    return _library


def library_version():
    """(major, minor, patch) of the loaded library (infiniopGetVersion), which may differ from
    this package's __version__ if an older or newer library was found."""
    parts = [ctypes.c_int() for _ in range(3)]
    check(get_library().infiniopGetVersion(*(ctypes.byref(p) for p in parts)),
          "infiniopGetVersion")
    return tuple(p.value for p in parts)


# --------------------------------------------------------------------------------------------
# Prototypes: every exported function of include/infiniop.h.
# ctest layout.python_prototypes (tests/check_prototypes.py) reads _PROTOTYPES and checks each
# against its declaration in the headers.

_status = ctypes.c_int  # C enums are int-sized
_enum = ctypes.c_int
_ptr = ctypes.c_void_p
_pptr = ctypes.POINTER(ctypes.c_void_p)
_size = ctypes.c_size_t
_psize = ctypes.POINTER(ctypes.c_size_t)
_pdiff = ctypes.POINTER(ctypes.c_ssize_t)  # ptrdiff_t
_int32 = ctypes.c_int32
# int64_t dim, float alpha, float limit, float bias, bool interleaved
_CLIPPED_SWIGLU_ATTRIBUTES = [ctypes.c_int64, ctypes.c_float, ctypes.c_float, ctypes.c_float,
                              ctypes.c_bool]

class DeviceInfoStruct(ctypes.Structure):
    """infiniopDeviceInfo_t (handle.h)."""

    _fields_ = [("name", ctypes.c_char_p), ("count", ctypes.c_int), ("host_memory", ctypes.c_int)]


_PROTOTYPES = {
    # infinicore.h
    "infiniStatusString": (ctypes.c_char_p, [_enum]),
    "infiniopGetLastError": (ctypes.c_char_p, []),
    # handle.h
    "infiniopCreateHandle": (_status, [_pptr, _enum, ctypes.c_int]),
    "infiniopDestroyHandle": (_status, [_ptr]),
    "infiniopGetDeviceTypes": (_status, [ctypes.POINTER(_enum), ctypes.c_int,
                                         ctypes.POINTER(ctypes.c_int)]),
    "infiniopGetDeviceInfo": (_status, [_enum, ctypes.POINTER(DeviceInfoStruct)]),
    "infiniopSetHandleFpmathMode": (_status, [_ptr, _enum]),
    "infiniopGetHandleFpmathMode": (_status, [_ptr, ctypes.POINTER(_enum)]),
    # tensor_descriptor.h
    "infiniopCreateTensorDescriptor": (_status, [_pptr, _size, _psize, _pdiff, _enum]),
    "infiniopDestroyTensorDescriptor": (_status, [_ptr]),
    # runtime.h
    "infiniopMalloc": (_status, [_ptr, _pptr, _size]),
    "infiniopFree": (_status, [_ptr, _ptr]),
    "infiniopMemcpyHostToDevice": (_status, [_ptr, _ptr, _ptr, _size, _ptr]),
    "infiniopMemcpyDeviceToHost": (_status, [_ptr, _ptr, _ptr, _size, _ptr]),
    "infiniopStreamCreate": (_status, [_ptr, _pptr]),
    "infiniopStreamDestroy": (_status, [_ptr, _ptr]),
    "infiniopStreamSynchronize": (_status, [_ptr, _ptr]),
    "infiniopCpuIsaName": (ctypes.c_char_p, []),
    # version.h
    "infiniopGetVersion": (_status, [ctypes.POINTER(ctypes.c_int)] * 3),
    # ops/gelu_backward.h
    "infiniopCreateGeluBackwardDescriptor": (_status, [_ptr, _pptr, _ptr, _ptr, _ptr]),
    "infiniopGetGeluBackwardWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopGeluBackward": (_status, [_ptr, _ptr, _size, _ptr, _ptr, _ptr, _ptr]),
    "infiniopDestroyGeluBackwardDescriptor": (_status, [_ptr]),
    # ops/swiglu.h
    "infiniopCreateSwiGluDescriptor": (_status, [_ptr, _pptr, _ptr, _ptr, _int32]),
    "infiniopGetSwiGluWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopSwiGlu": (_status, [_ptr, _ptr, _size, _ptr, _ptr, _ptr]),
    "infiniopDestroySwiGluDescriptor": (_status, [_ptr]),
    # ops/swiglu_backward.h
    "infiniopCreateSwiGluBackwardDescriptor": (_status, [_ptr, _pptr, _ptr, _ptr, _ptr, _int32]),
    "infiniopGetSwiGluBackwardWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopSwiGluBackward": (_status, [_ptr, _ptr, _size, _ptr, _ptr, _ptr, _ptr]),
    "infiniopDestroySwiGluBackwardDescriptor": (_status, [_ptr]),
    # ops/gelu_mul.h, ops/gelu_mul_backward.h (the approximation is a C enum)
    "infiniopCreateGeluMulDescriptor": (_status, [_ptr, _pptr, _ptr, _ptr, _enum]),
    "infiniopGetGeluMulWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopGeluMul": (_status, [_ptr, _ptr, _size, _ptr, _ptr, _ptr]),
    "infiniopDestroyGeluMulDescriptor": (_status, [_ptr]),
    "infiniopCreateGeluMulBackwardDescriptor": (_status, [_ptr, _pptr, _ptr, _ptr, _ptr, _enum]),
    "infiniopGetGeluMulBackwardWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopGeluMulBackward": (_status, [_ptr, _ptr, _size, _ptr, _ptr, _ptr, _ptr]),
    "infiniopDestroyGeluMulBackwardDescriptor": (_status, [_ptr]),
    # ops/gelu.h, ops/gelu_backward_v2.h
    "infiniopCreateGeluDescriptor": (_status, [_ptr, _pptr, _ptr, _ptr, _enum]),
    "infiniopGetGeluWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopGelu": (_status, [_ptr, _ptr, _size, _ptr, _ptr, _ptr]),
    "infiniopDestroyGeluDescriptor": (_status, [_ptr]),
    "infiniopCreateGeluBackwardV2Descriptor": (_status, [_ptr, _pptr, _ptr, _ptr, _ptr, _enum]),
    "infiniopGetGeluBackwardV2WorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopGeluBackwardV2": (_status, [_ptr, _ptr, _size, _ptr, _ptr, _ptr, _ptr]),
    "infiniopDestroyGeluBackwardV2Descriptor": (_status, [_ptr]),
    # ops/clipped_swiglu.h, ops/clipped_swiglu_backward.h
    "infiniopCreateClippedSwigluDescriptor": (
        _status, [_ptr, _pptr, _ptr, _ptr, _ptr] + _CLIPPED_SWIGLU_ATTRIBUTES),
    "infiniopCreateClippedSwigluV2Descriptor": (
        _status, [_ptr, _pptr, _ptr, _ptr, _ptr] + _CLIPPED_SWIGLU_ATTRIBUTES + [ctypes.c_int64]),
    "infiniopGetClippedSwigluWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopClippedSwiglu": (_status, [_ptr, _ptr, _size, _ptr, _ptr, _ptr, _ptr]),
    "infiniopDestroyClippedSwigluDescriptor": (_status, [_ptr]),
    "infiniopCreateClippedSwigluBackwardDescriptor": (
        _status, [_ptr, _pptr, _ptr, _ptr, _ptr, _ptr] + _CLIPPED_SWIGLU_ATTRIBUTES),
    "infiniopCreateClippedSwigluBackwardV2Descriptor": (
        _status, [_ptr, _pptr, _ptr, _ptr, _ptr, _ptr] + _CLIPPED_SWIGLU_ATTRIBUTES
        + [ctypes.c_int64]),
    "infiniopGetClippedSwigluBackwardWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopClippedSwigluBackward": (_status, [_ptr, _ptr, _size, _ptr, _ptr, _ptr, _ptr, _ptr]),
    "infiniopDestroyClippedSwigluBackwardDescriptor": (_status, [_ptr]),
    # ops/swiglu_quant.h, ops/gelu_mul_quant.h (ops/quant.h's enums): y, scale, x,
    # smooth_scales, group_index, then [infiniopGeluApproximate_t approximate,] int32_t
    # activate_left, infiniopQuantMode_t quant_mode, int64_t group_size,
    # infiniopQuantScaleFormat_t scale_format
    "infiniopCreateSwiGluQuantDescriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 5 + [_int32, _enum, ctypes.c_int64, _enum]),
    "infiniopGetSwiGluQuantWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopSwiGluQuant": (_status, [_ptr, _ptr, _size] + [_ptr] * 5 + [_ptr]),
    "infiniopDestroySwiGluQuantDescriptor": (_status, [_ptr]),
    "infiniopCreateGeluMulQuantDescriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 5 + [_enum, _int32, _enum, ctypes.c_int64, _enum]),
    "infiniopGetGeluMulQuantWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopGeluMulQuant": (_status, [_ptr, _ptr, _size] + [_ptr] * 5 + [_ptr]),
    "infiniopDestroyGeluMulQuantDescriptor": (_status, [_ptr]),
    # ops/clipped_swiglu_quant.h: y, scale, x, smooth_scales, group_index, then float alpha,
    # float limit, float bias, bool interleaved, and SwiGluQuant's after activate_left
    "infiniopCreateClippedSwigluQuantDescriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 5
        + [ctypes.c_float] * 3 + [ctypes.c_bool, _enum, ctypes.c_int64, _enum]),
    "infiniopGetClippedSwigluQuantWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopClippedSwigluQuant": (_status, [_ptr, _ptr, _size] + [_ptr] * 5 + [_ptr]),
    "infiniopDestroyClippedSwigluQuantDescriptor": (_status, [_ptr]),
    # ops/dequant_swiglu_quant.h: y, scale, x, weight_scale, activation_scale, bias,
    # smooth_scales, group_index, then SwiGluQuant's attributes
    "infiniopCreateDequantSwigluQuantDescriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 8 + [_int32, _enum, ctypes.c_int64, _enum]),
    "infiniopGetDequantSwigluQuantWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopDequantSwigluQuant": (_status, [_ptr, _ptr, _size] + [_ptr] * 8 + [_ptr]),
    "infiniopDestroyDequantSwigluQuantDescriptor": (_status, [_ptr]),
    # ops/moe_finalize_routing_v2.h: out, expanded_x, expanded_row_idx, x1, x2, bias, scales,
    # expert_idx, then int64_t drop_pad_mode
    "infiniopCreateMoeFinalizeRoutingV2Descriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 8 + [ctypes.c_int64]),
    "infiniopGetMoeFinalizeRoutingV2WorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopMoeFinalizeRoutingV2": (_status, [_ptr, _ptr, _size] + [_ptr] * 8 + [_ptr]),
    "infiniopDestroyMoeFinalizeRoutingV2Descriptor": (_status, [_ptr]),
    # ops/moe_finalize_routing_v2_grad.h: grad_expanded_x, grad_scales, grad_y, expanded_row_idx,
    # expanded_x, scales, expert_idx, bias, then int64_t drop_pad_mode, active_num, expert_num,
    # expert_capacity
    "infiniopCreateMoeFinalizeRoutingV2GradDescriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 8 + [ctypes.c_int64] * 4),
    "infiniopGetMoeFinalizeRoutingV2GradWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopMoeFinalizeRoutingV2Grad": (_status, [_ptr, _ptr, _size] + [_ptr] * 8 + [_ptr]),
    "infiniopDestroyMoeFinalizeRoutingV2GradDescriptor": (_status, [_ptr]),
    # ops/moe_init_routing_v2.h: expanded_x, expanded_row_idx, expert_tokens_count_or_cumsum,
    # expert_tokens_before_capacity, x, expert_idx, then int64_t active_num, expert_capacity,
    # expert_num, drop_pad_mode, expert_tokens_count_or_cumsum_flag, bool
    # expert_tokens_before_capacity_flag
    "infiniopCreateMoeInitRoutingV2Descriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 6 + [ctypes.c_int64] * 5 + [ctypes.c_bool]),
    "infiniopGetMoeInitRoutingV2WorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopMoeInitRoutingV2": (_status, [_ptr, _ptr, _size] + [_ptr] * 6 + [_ptr]),
    "infiniopDestroyMoeInitRoutingV2Descriptor": (_status, [_ptr]),
    # ops/moe_init_routing_quant_v2.h: expanded_x, expanded_row_idx,
    # expert_tokens_count_or_cumsum, expert_tokens_before_capacity, dynamic_quant_scale, x,
    # expert_idx, scale, offset, then MoeInitRoutingV2's attributes and infiniopQuantMode_t
    # quant_mode
    "infiniopCreateMoeInitRoutingQuantV2Descriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 9 + [ctypes.c_int64] * 5 + [ctypes.c_bool, _enum]),
    "infiniopGetMoeInitRoutingQuantV2WorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopMoeInitRoutingQuantV2": (_status, [_ptr, _ptr, _size] + [_ptr] * 9 + [_ptr]),
    "infiniopDestroyMoeInitRoutingQuantV2Descriptor": (_status, [_ptr]),
    # ops/moe_init_routing_v2_grad.h: grad_x, grad_expanded_x, expanded_row_idx, then int64_t
    # top_k, drop_pad_mode, active_num
    "infiniopCreateMoeInitRoutingV2GradDescriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 3 + [ctypes.c_int64] * 3),
    "infiniopGetMoeInitRoutingV2GradWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopMoeInitRoutingV2Grad": (_status, [_ptr, _ptr, _size] + [_ptr] * 3 + [_ptr]),
    "infiniopDestroyMoeInitRoutingV2GradDescriptor": (_status, [_ptr]),
    # ops/moe_gating_top_k_softmax.h: y, expert_idx, row_idx, softmax_out, x, finished, then
    # int64_t k, renorm
    "infiniopCreateMoeGatingTopKSoftmaxDescriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 6 + [ctypes.c_int64] * 2),
    "infiniopGetMoeGatingTopKSoftmaxWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopMoeGatingTopKSoftmax": (_status, [_ptr, _ptr, _size] + [_ptr] * 6 + [_ptr]),
    "infiniopDestroyMoeGatingTopKSoftmaxDescriptor": (_status, [_ptr]),
    # ops/moe_gating_top_k_softmax_grad.h: grad_x, grad_y, x, expert_idx, finished, then
    # int64_t renorm
    "infiniopCreateMoeGatingTopKSoftmaxGradDescriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 5 + [ctypes.c_int64]),
    "infiniopGetMoeGatingTopKSoftmaxGradWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopMoeGatingTopKSoftmaxGrad": (_status, [_ptr, _ptr, _size] + [_ptr] * 5 + [_ptr]),
    "infiniopDestroyMoeGatingTopKSoftmaxGradDescriptor": (_status, [_ptr]),
    # ops/moe_gating_top_k.h: y, expert_idx, norm_out, x, bias, then int64_t k, k_group,
    # group_count, group_select_mode, renorm, norm_type, double routed_scaling_factor, eps
    "infiniopCreateMoeGatingTopKDescriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 5 + [ctypes.c_int64] * 6 + [ctypes.c_double] * 2),
    "infiniopGetMoeGatingTopKWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopMoeGatingTopK": (_status, [_ptr, _ptr, _size] + [_ptr] * 5 + [_ptr]),
    "infiniopDestroyMoeGatingTopKDescriptor": (_status, [_ptr]),
    # ops/moe_gating_top_k_grad.h: grad_x, grad_y, x, expert_idx, then int64_t norm_type,
    # renorm, double routed_scaling_factor, eps
    "infiniopCreateMoeGatingTopKGradDescriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 4 + [ctypes.c_int64] * 2 + [ctypes.c_double] * 2),
    "infiniopGetMoeGatingTopKGradWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopMoeGatingTopKGrad": (_status, [_ptr, _ptr, _size] + [_ptr] * 4 + [_ptr]),
    "infiniopDestroyMoeGatingTopKGradDescriptor": (_status, [_ptr]),
    # ops/moe_gating_weights.h: y, x, expert_idx, then int64_t norm_type, renorm, double
    # routed_scaling_factor, eps
    "infiniopCreateMoeGatingWeightsDescriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 3 + [ctypes.c_int64] * 2 + [ctypes.c_double] * 2),
    "infiniopGetMoeGatingWeightsWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopMoeGatingWeights": (_status, [_ptr, _ptr, _size] + [_ptr] * 3 + [_ptr]),
    "infiniopDestroyMoeGatingWeightsDescriptor": (_status, [_ptr]),
    # ops/moe_expert_counts.h: counts, expert_idx, then int64_t num_experts
    "infiniopCreateMoeExpertCountsDescriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 2 + [ctypes.c_int64]),
    "infiniopGetMoeExpertCountsWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopMoeExpertCounts": (_status, [_ptr, _ptr, _size] + [_ptr] * 2 + [_ptr]),
    "infiniopDestroyMoeExpertCountsDescriptor": (_status, [_ptr]),
    # ops/moe_bias_update.h: bias, counts, then double update_rate
    "infiniopCreateMoeBiasUpdateDescriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 2 + [ctypes.c_double]),
    "infiniopGetMoeBiasUpdateWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopMoeBiasUpdate": (_status, [_ptr, _ptr, _size] + [_ptr] * 2 + [_ptr]),
    "infiniopDestroyMoeBiasUpdateDescriptor": (_status, [_ptr]),
    # ops/moe_expert_capacity.h: kept_idx, weights_out, expert_idx, weights, then int64_t
    # num_experts, capacity, drop_policy
    "infiniopCreateMoeExpertCapacityDescriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 4 + [ctypes.c_int64] * 3),
    "infiniopGetMoeExpertCapacityWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopMoeExpertCapacity": (_status, [_ptr, _ptr, _size] + [_ptr] * 4 + [_ptr]),
    "infiniopDestroyMoeExpertCapacityDescriptor": (_status, [_ptr]),
    # ops/moe_aux_loss.h: loss, x, tokens_per_expert, then int64_t score_function, topk,
    # total_tokens, double coeff
    "infiniopCreateMoeAuxLossDescriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 3 + [ctypes.c_int64] * 3 + [ctypes.c_double]),
    "infiniopGetMoeAuxLossWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopMoeAuxLoss": (_status, [_ptr, _ptr, _size] + [_ptr] * 3 + [_ptr]),
    "infiniopDestroyMoeAuxLossDescriptor": (_status, [_ptr]),
    # ops/moe_aux_loss.h: grad_x, grad_loss, x, tokens_per_expert, then as MoeAuxLoss
    "infiniopCreateMoeAuxLossGradDescriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 4 + [ctypes.c_int64] * 3 + [ctypes.c_double]),
    "infiniopGetMoeAuxLossGradWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopMoeAuxLossGrad": (_status, [_ptr, _ptr, _size] + [_ptr] * 4 + [_ptr]),
    "infiniopDestroyMoeAuxLossGradDescriptor": (_status, [_ptr]),
    # ops/moe_z_loss.h: loss, x, then double coeff; grad_x, grad_loss, x, then double coeff
    "infiniopCreateMoeZLossDescriptor": (_status, [_ptr, _pptr] + [_ptr] * 2 + [ctypes.c_double]),
    "infiniopGetMoeZLossWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopMoeZLoss": (_status, [_ptr, _ptr, _size] + [_ptr] * 2 + [_ptr]),
    "infiniopDestroyMoeZLossDescriptor": (_status, [_ptr]),
    "infiniopCreateMoeZLossGradDescriptor": (
        _status, [_ptr, _pptr] + [_ptr] * 3 + [ctypes.c_double]),
    "infiniopGetMoeZLossGradWorkspaceSize": (_status, [_ptr, _psize]),
    "infiniopMoeZLossGrad": (_status, [_ptr, _ptr, _size] + [_ptr] * 3 + [_ptr]),
    "infiniopDestroyMoeZLossGradDescriptor": (_status, [_ptr]),
}

EXPORTED_FUNCTIONS = tuple(_PROTOTYPES)


def _declare(lib, path):
    """Declares the prototypes on `lib` and records the file it was loaded from: (lib, None),
    or (None, why) when it lacks a function of this binding (e.g. an older libinfiniop.so.0:
    the SONAME stays while functions are added)."""
    missing = [name for name in _PROTOTYPES if not hasattr(lib, name)]
    if missing:
        return None, (f"not this binding's library ({__version__}): it lacks {missing[0]}" +
                      (f" and {len(missing) - 1} more" if len(missing) > 1 else "") +
                      " (an older libinfiniop?)")
    for name, (restype, argtypes) in _PROTOTYPES.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    lib.infiniop_path = path
    return lib, None


# --------------------------------------------------------------------------------------------
# Status helpers

def _decode(raw):
    return raw.decode("utf-8", errors="replace") if raw else ""


def status_string(status):
    """infiniStatusString(status), e.g. 'INFINI_STATUS_BAD_PARAM'."""
    return _decode(get_library().infiniStatusString(int(status)))


def last_error():
    """infiniopGetLastError(): why the last call on this thread failed ('' after a success)."""
    return _decode(get_library().infiniopGetLastError())


def check(status, function=None):
    """Raise InfiniopError unless status is SUCCESS.

    Must be called right after the C call: the last-error text is thread-local and only valid
    until the next libinfiniop call on this thread.
    """
    if status != Status.SUCCESS:
        raise InfiniopError(status, last_error(), function)


def call(name, *args):
    """Call a status-returning C function by name and check its status."""
    check(getattr(get_library(), name)(*args), name)
