#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cross-builds infiniop for 64-bit Arm Linux and runs its C++ programs under qemu-aarch64 at NEON
# and SVE (128-, 256- and 512-bit vectors): the aarch64 preset of CMakePresets.json
# (docs/devices.md, "Arm"; `ctest --preset aarch64-full` afterwards also runs the suite's shards
# that it samples out at 256 and 512 bits). Installs, as root, the Debian packages it needs when
# any is missing: the arm64 architecture for multiarch, the cross compiler, the arm64 Highway,
# GoogleTest and OpenMP runtime, and qemu's user-mode emulator.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ci-times.sh

install_arm_deps() {
  local packages=(g++-aarch64-linux-gnu libhwy-dev:arm64 libgtest-dev:arm64 libgomp1:arm64
                  qemu-user)
  local missing=() p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing Debian packages (install them as root, after dpkg --add-architecture arm64):" \
         "${missing[*]}" >&2
    return 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
}

step "aarch64: dependencies" install_arm_deps
step "aarch64: configure" cmake --preset aarch64
step "aarch64: build" cmake --build --preset aarch64
step "aarch64: ctest under qemu" ctest --preset aarch64
