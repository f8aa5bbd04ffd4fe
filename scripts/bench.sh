#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds infiniop and runs infiniop-bench; arguments are passed through (none: every operator).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --debian
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j2 --target infiniop-bench
./build/bench/infiniop-bench "$@"
