#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The Python package installed the ways README.md gives, each used from a folder outside the
# checkout with no INFINIOP_LIBRARY; nothing is written outside one mktemp directory. pip works
# offline (--no-index): the build requirements (python/requirements-build.txt, scikit-build-core
# and its requirements) come from the wheelhouse scripts/install-deps.sh downloads them into.
#  a. `pip wheel ./python`, once: the wheel `pip install ./python` builds and installs, with the
#     library compiled into it (infiniop/libinfiniop.so.0), tagged py3-none-<platform>. Installed
#     into a fresh venv (--system-site-packages: Debian's torch and numpy), the package loads its
#     own library with no variable and no LD_LIBRARY_PATH, dispatching to the same Highway target
#     as the CMake build's library (the names INFINIOP_CPU_ISA accepts), compiled for the same
#     targets, or for that one alone where the build has every one (below); $INFINIOP_LIBRARY
#     still overrides it.
#  a'. The same wheel into a second fresh venv that sees the interpreter's own packages (the
#     project's .venv: PyTorch 2), where examples/python/train_moe_mlp.py, copied to the temporary
#     folder, also runs: a two-layer MoE MLP trained with loss.backward() through infiniop.torch,
#     checked against float64 torch.
#  b. `cmake --install` staged under DESTDIR (prefix /usr); only PYTHONPATH names the installed
#     package, which finds the installed library next to it (_install.json), with no
#     LD_LIBRARY_PATH. Skipped when configured with -DINFINIOP_INSTALL_PYTHON=OFF.
#  c. `pip install --config-settings=wheel.cmake=false ./python` (the package alone, no library)
#     into a third venv: the library found through the dynamic loader (LD_LIBRARY_PATH = the build
#     folder); then with nothing findable, LibraryNotFoundError names every way.
#  d. `cmake --install --prefix <that venv>`: its pip-installed package finds that library in its
#     own prefix (sys.prefix) with no variable at all.
# Each run checks where the package and the library came from, both versions against
# include/infiniop/version.h, and infiniop.swiglu against torch's silu(a) * b.
# Usage: check_python_package.sh <build dir> <python> <library folder> <INFINIOP_INSTALL_PYTHON>
#        [<wheelhouse>, default <repo>/.venv/wheelhouse]
set -eu
build_dir="$1"; python="$2"; lib_dir=$(realpath "$3"); install_python="$4"
repo=$(cd "$(dirname "$0")/../.." && pwd)
wheelhouse="${5:-$repo/.venv/wheelhouse}"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
unset INFINIOP_LIBRARY PYTHONPATH LD_LIBRARY_PATH DESTDIR PIP_INDEX_URL PIP_FIND_LINKS CMAKE_ARGS
# No pip configuration file (an index, find-links) takes part; the library compiles on 2 jobs
# unless told otherwise (ctest runs other tests beside this one).
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
export PYTHONDONTWRITEBYTECODE=1 CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
part() { sed -n "s/^#define INFINIOP_VERSION_$1 \([0-9]*\).*/\1/p" "$repo/include/infiniop/version.h"; }
version="$(part MAJOR).$(part MINOR).$(part PATCH)"
ls "$wheelhouse"/scikit_build_core-*.whl > /dev/null 2>&1 || {
  echo "no build requirements in $wheelhouse: bash scripts/install-deps.sh downloads them there" \
       "(python/requirements-build.txt)"; exit 1; }
offline="--no-index --find-links $wheelhouse --no-cache-dir"
mkdir "$work/elsewhere" "$work/wheels"
cp "$repo/examples/python/train_moe_mlp.py" "$work/elsewhere/"

cat > "$work/check.py" <<'PY'
import os, sys
package_dir, library_dir, version = sys.argv[1:4]
import torch
import infiniop
where = os.path.dirname(os.path.realpath(infiniop.__file__))
assert where == os.path.realpath(package_dir), f"infiniop imported from {where}"
loaded = os.path.realpath(infiniop.get_library().infiniop_path)
assert os.path.dirname(loaded) == library_dir, f"loaded {loaded}, want one in {library_dir}"
assert infiniop.__version__ == version, (infiniop.__version__, version)
assert "%d.%d.%d" % infiniop.library_version() == version, infiniop.library_version()
x = torch.randn(4, 34, generator=torch.Generator().manual_seed(0))
a, b = x.chunk(2, dim=-1)
torch.testing.assert_close(infiniop.swiglu(x), torch.nn.functional.silu(a) * b)
print(f"  infiniop {version} from {where}, {loaded}: swiglu ok")
PY
# The Highway target the cpu device dispatches to, and (INFINIOP_CPU_ISA naming none) the targets
# the library was compiled for, best first.
cat > "$work/isa.py" <<'PY'
import infiniop
try:
    infiniop.Handle("cpu").close()
    print(infiniop.cpu_isa_name())
except infiniop.InfiniopError as error:
    print(error.message.split("(best first): ")[-1].split(", or unset")[0])
PY
isa() { (cd "$work/elsewhere" && "$@" "$work/isa.py"); }
cmake_library="env INFINIOP_LIBRARY=$lib_dir PYTHONPATH=$repo/python $python"
cmake_best=$(isa $cmake_library); cmake_targets=$(isa env INFINIOP_CPU_ISA=none $cmake_library)

# a. One wheel, as pip install ./python builds it; installed into a venv. It is configured as the
# build under test where that differs from pyproject.toml (a dev build's native Highway target, a
# build without OpenCL), so the two libraries compare. Where the build compiles every target
# (all, the release build: pyproject.toml's own) the wheel is compiled for one, the one the
# build's library dispatches to here: pip's compile of every target again took 3-4 minutes of
# the release suite on 2 cores and proves nothing the release build does not (the same CMake
# project, the same targets); INFINIOP_WHEEL_TARGETS=all builds pyproject.toml's every target.
cached() { sed -n "s/^$1:[A-Z]*=//p" "$build_dir/CMakeCache.txt"; }
settings="--config-settings=cmake.define.INFINIOP_WITH_OPENCL=$(cached INFINIOP_WITH_OPENCL)"
cpu_targets=$(cached INFINIOP_CPU_TARGETS) wheel_targets=$cmake_targets
if [ "$cpu_targets" != all ]; then
  settings="$settings --config-settings=cmake.define.INFINIOP_CPU_TARGETS=$cpu_targets"
elif [ "${INFINIOP_WHEEL_TARGETS:-}" != all ]; then
  settings="$settings --config-settings=cmake.define.INFINIOP_CPU_TARGETS=$cmake_best"
  wheel_targets=$cmake_best
fi
(cd "$repo" && "$python" -m pip wheel -q $offline $settings --no-deps -w "$work/wheels" ./python)
wheel=$(ls "$work/wheels"/infiniop-*.whl)
case "$wheel" in
  */infiniop-"$version"-py3-none-*.whl) ;;
  *) echo "pip wheel built $wheel, want infiniop-$version-py3-none-<platform>.whl"; exit 1 ;;
esac
case "$wheel" in *-any.whl) echo "$wheel is a pure wheel: no library in it"; exit 1 ;; esac
"$python" - "$wheel" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
assert "infiniop/libinfiniop.so.0" in names, names
assert "infiniop/__init__.py" in names and "infiniop/torch/__init__.py" in names, names
stray = [n for n in names if not n.startswith(("infiniop/", "infiniop-"))]
assert not stray, f"outside the package: {stray}"
PY
"$python" -m venv --system-site-packages --without-pip "$work/venv1"
venv1="$work/venv1/bin/python"
"$venv1" -m pip install -q $offline "$wheel"
site1=$("$venv1" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
installed=$("$venv1" -c 'import importlib.metadata as m; print(m.version("infiniop"))')
[ "$installed" = "$version" ] || { echo "pip installed infiniop $installed, want $version"; exit 1; }
echo "a. $(basename "$wheel"), pip-installed: the library inside the package, no variable:"
(cd "$work/elsewhere" &&
 "$venv1" "$work/check.py" "$site1/infiniop" "$(realpath "$site1/infiniop")" "$version")
best=$(isa "$venv1"); targets=$(isa env INFINIOP_CPU_ISA=none "$venv1")
echo "  Highway: $best of $targets; the CMake build's library: $cmake_best of $cmake_targets"
[ "$best" = "$cmake_best" ] && [ "$targets" = "$wheel_targets" ] ||
  { echo "the wheel's library does not dispatch as the CMake build's does (of $wheel_targets)"
    exit 1; }
echo "a. the same venv with INFINIOP_LIBRARY=<the build folder>: that library instead:"
(cd "$work/elsewhere" && INFINIOP_LIBRARY="$lib_dir" \
 "$venv1" "$work/check.py" "$site1/infiniop" "$lib_dir" "$version")

# a'. The same wheel into another venv, which sees the interpreter's own packages.
"$python" -m venv --without-pip "$work/venv2"
venv2="$work/venv2/bin/python"
site2=$("$venv2" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
"$python" -c 'import site; print("\n".join(site.getsitepackages()))' > "$site2/interpreter.pth"
"$venv2" -m pip install -q $offline "$wheel"
torch_version=$("$venv2" -c 'import torch; print(torch.__version__)')
echo "a'. the wheel in a second venv, with torch $torch_version:"
(cd "$work/elsewhere" &&
 "$venv2" "$work/check.py" "$site2/infiniop" "$(realpath "$site2/infiniop")" "$version")
echo "a'. examples/python/train_moe_mlp.py, copied outside the checkout, with that venv's python:"
(cd "$work/elsewhere" && "$venv2" train_moe_mlp.py) ||
  { echo "train_moe_mlp.py failed with the wheel's package"; exit 1; }

# b. cmake --install under DESTDIR; only PYTHONPATH.
if [ "$install_python" = ON ] || [ "$install_python" = 1 ] || [ "$install_python" = TRUE ]; then
  DESTDIR="$work/staged" cmake --install "$build_dir" --prefix /usr > /dev/null
  record=$(find "$work/staged" -path '*/infiniop/_install.json' | head -n 1)
  [ -n "$record" ] || { echo "cmake --install installed no infiniop/_install.json"; exit 1; }
  package_dir=$(dirname "$record")
  staged_lib=$(dirname "$(find "$work/staged" -name 'libinfiniop.so.*' | head -n 1)")
  echo "b. cmake --install (DESTDIR, prefix /usr), PYTHONPATH only:"
  (cd "$work/elsewhere" && PYTHONPATH=$(dirname "$package_dir") \
   "$python" "$work/check.py" "$package_dir" "$(realpath "$staged_lib")" "$version")
else
  echo "b. skipped: configured with INFINIOP_INSTALL_PYTHON=$install_python"
fi

# c. The package alone (no CMake run) in a third venv: the library through the dynamic loader,
# then nothing findable: the error names every way.
"$python" -m venv --system-site-packages --without-pip "$work/venv"
venv_python="$work/venv/bin/python"
(cd "$repo" && "$venv_python" -m pip install -q $offline --config-settings=wheel.cmake=false \
   ./python)
site=$("$venv_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
[ -f "$site/infiniop/__init__.py" ] && ! ls "$site/infiniop" | grep -q '^libinfiniop' ||
  { echo "wheel.cmake=false: want the package without a library in $site/infiniop"; exit 1; }
echo "c. pip install --config-settings=wheel.cmake=false ./python, library from LD_LIBRARY_PATH:"
(cd "$work/elsewhere" &&
 LD_LIBRARY_PATH="$lib_dir" "$venv_python" "$work/check.py" "$site/infiniop" "$lib_dir" "$version")
echo "c. the same package, nothing findable:"
system_library=0  # exit status 3: the machine has a library installed (then no d)
(cd "$work/elsewhere" && "$venv_python" - <<'PY') || system_library=$?
import infiniop
try:
    lib = infiniop.get_library()
except infiniop.LibraryNotFoundError as error:
    message = str(error)
    for way in ("$INFINIOP_LIBRARY", "next to the package", "the dynamic loader",
                "libinfiniop.so.0", "an install prefix", "$INFINIOP_PREFIX", "sys.prefix"):
        assert way in message, f"{way!r} not in:\n{message}"
    print("  " + message.replace("\n", "\n  "))
else:  # a library installed system-wide (ldconfig, /usr/local/lib) is a legitimate find
    print(f"  skipped: the package finds {lib.infiniop_path} installed on this machine")
    raise SystemExit(3)
PY
[ "$system_library" = 0 ] || [ "$system_library" = 3 ] || exit "$system_library"

# d. The library installed into the venv's prefix, the package pip installed there: no variable.
if [ "$system_library" = 0 ]; then
  cmake --install "$build_dir" --prefix "$work/venv" > /dev/null
  venv_lib=$(dirname "$(find "$work/venv" -name 'libinfiniop.so.*' | head -n 1)")
  echo "d. cmake --install --prefix <venv>, the pip-installed package, no variable:"
  (cd "$work/elsewhere" &&
   "$venv_python" "$work/check.py" "$site/infiniop" "$(realpath "$venv_lib")" "$version")
else
  echo "d. skipped: the machine's own library would be found first"
fi
git -C "$repo" status --porcelain --ignored -- python | grep -v '__pycache__/$' | \
  grep -E '(build|dist|\.egg-info)/?$' && { echo "the pip build wrote into python/"; exit 1; }
echo "python package ok: the wheel with its library, the package alone and cmake --install," \
     "each from outside the checkout"
