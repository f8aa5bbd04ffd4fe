#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds infiniop and runs the whole conformance suite (C++ GoogleTest and Python pytest): the
# release preset (CMakePresets.json: build/, every Highway target), then a table of step times.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ci-times.sh
step "dependencies" bash scripts/install-deps.sh
step "release: configure" cmake --preset release
step "release: build" cmake --build --preset release
step "release: ctest" ctest --preset release
