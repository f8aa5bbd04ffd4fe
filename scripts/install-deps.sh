#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian 12 packages infiniop builds and tests with, when run as root and any is
# missing. Without root it only reports what is missing.
set -euo pipefail
packages=(build-essential cmake pkg-config libhwy-dev libomp-dev libgtest-dev libbenchmark-dev
          ocl-icd-opencl-dev opencl-headers pocl-opencl-icd
          python3 python3-numpy python3-torch python3-pytest
          python3-pip python3-setuptools python3-wheel python3-venv  # pip install ./python
          valgrind  # bench/cost.sh
          libdnnl-dev)  # bench/onednn_error.cc (oneDNN's gelu_erf error; built where present)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "missing Debian packages (install them as root): ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "${missing[@]}"
