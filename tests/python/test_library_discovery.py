# SPDX-License-Identifier: Apache-2.0
"""Finding the library with no configuration: $INFINIOP_LIBRARY naming a folder, and the install
prefixes searched after the dynamic loader (a venv's prefix, $INFINIOP_PREFIX,
$CMAKE_PREFIX_PATH, /usr/local, ...). What needs a fresh loader runs in a child process with a
clean environment: this process has already loaded the library, and the loader reads
LD_LIBRARY_PATH only at start."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import infiniop
from infiniop import _library

REPO_ROOT = Path(__file__).resolve().parents[2]
SONAME, NAME = _library.LIBRARY_SONAME, _library.LIBRARY_NAME
# The ways load_library's error names for the install prefixes.
PREFIX_WAYS = ("an install prefix", "$INFINIOP_PREFIX", "$CMAKE_PREFIX_PATH", "sys.prefix",
               "/usr/local", "/opt/infiniop")


def built_library():
    """The real file of the library this test process loaded."""
    return Path(infiniop.get_library().infiniop_path).resolve()


def touch(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


# ----------------------------------------------------------------------------------------------
# $INFINIOP_LIBRARY naming a folder

def test_library_variable_may_name_a_folder(tmp_path):
    folder = tmp_path / "lib"
    so = touch(folder / NAME)
    assert _library.library_candidates({"INFINIOP_LIBRARY": str(folder)}) == ([so], True)
    so_0 = touch(folder / SONAME)  # this binding's ABI comes first
    assert _library.library_candidates({"INFINIOP_LIBRARY": str(folder)}) == ([so_0], True)


def test_library_folder_without_the_library_names_both_files(tmp_path):
    candidates, explicit = _library.library_candidates({"INFINIOP_LIBRARY": str(tmp_path)})
    assert explicit and candidates == [tmp_path / SONAME, tmp_path / NAME]
    with pytest.raises(infiniop.LibraryNotFoundError) as info:
        infiniop.load_library(tmp_path)  # a folder given to load_library reads the same
    message = str(info.value)
    assert f"{tmp_path / SONAME}: no such file" in message
    assert f"{tmp_path / NAME}: no such file" in message
    assert "or of a folder holding it" in message


def test_every_folder_of_the_package_path_is_next_to_the_package(tmp_path, monkeypatch):
    """An editable install (pip install -e ./python) imports the modules from the checkout and
    puts the library pip built in the install tree, the first folder of the package's __path__:
    that library comes first."""
    so = touch(tmp_path / "site-packages" / "infiniop" / SONAME)
    monkeypatch.setattr(infiniop, "__path__", [str(so.parent)] + list(infiniop.__path__))
    candidates, explicit = _library.library_candidates({})
    assert not explicit and candidates[0] == so.resolve()


def test_load_library_from_a_folder():
    folder = built_library().parent
    if _library._library_in(folder) is None:
        pytest.skip(f"the library loaded has neither {SONAME} nor {NAME} beside it")
    lib = infiniop.load_library(folder)
    assert Path(lib.infiniop_path) == _library._library_in(folder)


# ----------------------------------------------------------------------------------------------
# The install prefixes

def test_search_prefixes_order(tmp_path):
    a, b, c = (str(tmp_path / name) for name in "abc")
    environ = {"INFINIOP_PREFIX": os.pathsep.join([a, b]),
               "CMAKE_PREFIX_PATH": os.pathsep.join([c, "", a])}  # empty entries are skipped
    prefixes = _library.search_prefixes(environ)
    assert prefixes[:3] == [Path(a), Path(b), Path(c)]
    rest = [Path(p) for p in (sys.prefix, sys.base_prefix) + _library.STANDARD_PREFIXES]
    assert prefixes[3:] == list(dict.fromkeys(rest))  # each once, in order
    assert _library.search_prefixes({})[0] == Path(sys.prefix)


def test_prefix_candidates(tmp_path):
    triplet = _library._multiarch()
    lib64_only = touch(tmp_path / "p1" / "lib64" / NAME)
    multiarch = touch(tmp_path / "p2" / "lib" / triplet / SONAME)
    touch(tmp_path / "p3" / "lib" / NAME)
    both = touch(tmp_path / "p3" / "lib" / SONAME)  # the SONAME first, once per folder
    (tmp_path / "p4" / "lib").mkdir(parents=True)  # an empty prefix
    touch(tmp_path / "p5" / "lib" / SONAME)
    (tmp_path / "p5" / "lib64").symlink_to("lib")  # the same file twice: listed once
    prefixes = [tmp_path / p for p in ("p1", "p2", "p3", "p4", "p5", "missing")]
    assert _library.prefix_candidates({}, prefixes) == \
        [lib64_only, multiarch, both, tmp_path / "p5" / "lib" / SONAME]
    # From the environment, when no prefixes are given.
    environ = {"INFINIOP_PREFIX": str(tmp_path / "p2")}
    assert _library.prefix_candidates(environ)[0] == multiarch


def test_error_names_the_install_prefixes(tmp_path):
    with pytest.raises(infiniop.LibraryNotFoundError) as info:
        infiniop.load_library(tmp_path / NAME)
    for way in PREFIX_WAYS:
        assert way in str(info.value)


# ----------------------------------------------------------------------------------------------
# A copy of the package, as `pip install` leaves it (no _install.json), in a clean child process

SCRIPT = """import infiniop
try:
    print(infiniop.get_library().infiniop_path, infiniop.library_version())
except infiniop.LibraryNotFoundError as error:
    print(error)
"""


@pytest.fixture
def installed_package(tmp_path):
    """(run, library): `run(python=..., **environment)` runs SCRIPT with only the installed
    copy of the package on PYTHONPATH and no library variables; library is the file to link
    into a prefix."""
    site = tmp_path / "site"
    shutil.copytree(REPO_ROOT / "python" / "infiniop", site / "infiniop",
                    ignore=shutil.ignore_patterns("__pycache__", "_install.json"))
    variables = ("INFINIOP_LIBRARY", "INFINIOP_PREFIX", "CMAKE_PREFIX_PATH", "LD_LIBRARY_PATH",
                 "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
    clean = {k: v for k, v in os.environ.items() if k not in variables}
    clean["PYTHONPATH"] = str(site)

    def run(python=sys.executable, **extra):
        return subprocess.run([str(python), "-c", SCRIPT], env={**clean, **extra}, cwd=tmp_path,
                              capture_output=True, text=True, check=True).stdout

    library = built_library()
    if "cannot load" not in run():
        pytest.skip(f"the package finds a library installed on this machine: {run().strip()}")
    return run, library


def install_into(prefix, folder, library):
    """What `cmake --install --prefix <prefix>` leaves: <prefix>/<folder>/libinfiniop.so.0."""
    (prefix / folder).mkdir(parents=True, exist_ok=True)
    (prefix / folder / SONAME).symlink_to(library)
    return prefix / folder / SONAME


@pytest.mark.parametrize("variable,folder", [("INFINIOP_PREFIX", "lib"),
                                             ("CMAKE_PREFIX_PATH", "lib64"),
                                             ("INFINIOP_PREFIX", "lib/multiarch")])
def test_library_found_in_a_named_prefix(installed_package, tmp_path, variable, folder):
    run, library = installed_package
    folder = folder.replace("multiarch", _library._multiarch())
    installed = install_into(tmp_path / "prefix", folder, library)
    path, version = run(**{variable: os.pathsep.join(["/nonexistent", str(tmp_path / "prefix")])}
                        ).split(maxsplit=1)
    assert Path(path) == installed
    assert version.strip() == str(infiniop.library_version())


def test_venv_package_finds_the_library_in_its_prefix(installed_package, tmp_path):
    """The issue's case: `cmake --install build --prefix <venv>` and the package in the venv
    work together with no variable at all (sys.prefix is the venv's)."""
    run, library = installed_package
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages",
                    str(venv)], check=True)
    installed = install_into(venv, "lib", library)
    path, _ = run(python=venv / "bin" / "python").split(maxsplit=1)
    assert Path(path) == installed


def test_nothing_in_the_prefixes_names_what_was_tried(installed_package, tmp_path):
    run, _ = installed_package
    empty = tmp_path / "empty"
    empty.mkdir()
    message = run(INFINIOP_PREFIX=str(empty))
    assert "cannot load" in message
    tried = message.split("The library is found")[0]
    assert f"install prefixes {empty}, " in tried and "the dynamic loader:" in tried
    for way in PREFIX_WAYS + ("$INFINIOP_LIBRARY", "next to the package", "the dynamic loader"):
        assert way in message
