#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds infiniop and runs the whole conformance suite (C++ GoogleTest and Python pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j2
ctest --test-dir build -j2 --output-on-failure
