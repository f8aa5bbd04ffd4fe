#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The Python package installed the two ways README.md gives, each used from a folder outside the
# checkout with no INFINIOP_LIBRARY; nothing is written outside one mktemp directory.
#  a. `pip install ./python` into a fresh venv (--system-site-packages, for torch and numpy),
#     offline (--no-index: the build needs nothing downloaded); the library found only through
#     the dynamic loader (LD_LIBRARY_PATH = the build folder). There it also runs
#     examples/python/train_moe_mlp.py, copied to the temporary folder: a two-layer MoE MLP
#     trained with loss.backward() through infiniop.torch, checked against float64 torch.
#  b. `cmake --install` staged under DESTDIR (prefix /usr); only PYTHONPATH names the installed
#     package, which finds the installed library next to it (_install.json), with no
#     LD_LIBRARY_PATH. Skipped when configured with -DINFINIOP_INSTALL_PYTHON=OFF.
#  c. The venv's package with nothing findable: LibraryNotFoundError names every way.
#  d. `cmake --install --prefix <the venv>`: the venv's pip-installed package finds that library
#     in its own prefix (sys.prefix) with no variable at all.
# Each run checks where the package and the library came from, both versions against
# include/infiniop/version.h, and infiniop.swiglu against torch's silu(a) * b.
# Usage: check_python_package.sh <build dir> <python> <library folder> <INFINIOP_INSTALL_PYTHON>
set -eu
build_dir="$1"; python="$2"; lib_dir=$(realpath "$3"); install_python="$4"
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
unset INFINIOP_LIBRARY PYTHONPATH LD_LIBRARY_PATH DESTDIR PIP_INDEX_URL PIP_FIND_LINKS
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PYTHONDONTWRITEBYTECODE=1
part() { sed -n "s/^#define INFINIOP_VERSION_$1 \([0-9]*\).*/\1/p" "$repo/include/infiniop/version.h"; }
version="$(part MAJOR).$(part MINOR).$(part PATCH)"
mkdir "$work/elsewhere"

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

# a. pip install ./python in a venv; the library through the dynamic loader.
"$python" -m venv --system-site-packages --without-pip "$work/venv"
venv_python="$work/venv/bin/python"
(cd "$repo" && "$venv_python" -m pip install -q --no-index --no-cache-dir ./python)
site=$("$venv_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
installed=$("$venv_python" -c 'import importlib.metadata as m; print(m.version("infiniop"))')
[ "$installed" = "$version" ] || { echo "pip installed infiniop $installed, want $version"; exit 1; }
echo "a. pip install ./python, library from LD_LIBRARY_PATH:"
(cd "$work/elsewhere" &&
 LD_LIBRARY_PATH="$lib_dir" "$venv_python" "$work/check.py" "$site/infiniop" "$lib_dir" "$version")
echo "a. examples/python/train_moe_mlp.py, copied outside the checkout, with the venv's python:"
cp "$repo/examples/python/train_moe_mlp.py" "$work/elsewhere/"
(cd "$work/elsewhere" && LD_LIBRARY_PATH="$lib_dir" "$venv_python" train_moe_mlp.py) ||
  { echo "train_moe_mlp.py failed with the pip-installed package"; exit 1; }

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

# c. Nothing findable: the error names every way.
echo "c. nothing findable:"
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
echo "python package ok: pip install ./python and cmake --install, each from outside the checkout"
