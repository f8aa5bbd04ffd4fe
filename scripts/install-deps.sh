#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian 12 packages infiniop builds and tests with, when run as root and any is
# missing (without root it only reports what is missing), then PyTorch 2 from PyPI into the
# project's virtual environment .venv/ (below), unless given --debian.
set -euo pipefail
packages=(build-essential cmake pkg-config libhwy-dev libomp-dev libgtest-dev libbenchmark-dev
          ocl-icd-opencl-dev opencl-headers pocl-opencl-icd
          python3 python3-numpy python3-torch python3-pytest
          python3-pip python3-venv ninja-build  # pip install ./python (builds the library)
          valgrind  # bench/cost.sh
          libdnnl-dev)  # bench/onednn_error.cc (oneDNN's gelu_erf error; built where present)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -ne 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing Debian packages (install them as root): ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
fi

[ "${1:-}" = "--debian" ] && exit 0  # scripts/bench.sh: the library's packages only

# PyTorch 2 (PyPI) in the project's virtual environment .venv/, every package pinned by
# python/requirements-torch2.txt; the Python suite, the examples and the install tests run with
# it (tests/CMakeLists.txt), Debian's PyTorch 1.13 (python3-torch) in a smaller entry. PyPI's
# Linux torch wheel needs NVIDIA's runtime packages to import: 3.3 GB to download, about 2
# minutes on this project's machines (a CPU-only wheel is only on download.pytorch.org, which
# they do not reach). Rebuilt only when the requirements change.
cd "$(dirname "$0")/.."
requirements=python/requirements-torch2.txt
if ! cmp -s "$requirements" .venv/requirements-torch2.txt; then
  rm -rf .venv
  /usr/bin/python3 -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check -r "$requirements"
  cp "$requirements" .venv/requirements-torch2.txt
fi

# The wheelhouse of `pip install ./python`'s build requirements (python/requirements-build.txt:
# scikit-build-core and its requirements, pinned), from which the install test builds the package
# offline (tests/install/check_python_package.sh). Remade only when the requirements change.
build_requirements=python/requirements-build.txt
if ! cmp -s "$build_requirements" .venv/wheelhouse/requirements-build.txt; then
  rm -rf .venv/wheelhouse
  .venv/bin/python -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    -d .venv/wheelhouse -r "$build_requirements"
  cp "$build_requirements" .venv/wheelhouse/requirements-build.txt
fi
