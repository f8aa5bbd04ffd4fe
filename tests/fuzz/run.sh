#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds (if needed) the libFuzzer target and runs it over tests/fuzz/corpus for a bounded time.
#   tests/fuzz/run.sh [SECONDS] [extra libFuzzer flags...]      (default 60 seconds)
#   tests/fuzz/run.sh --build                                    (only configure and build)
# Environment: BUILD_DIR (default build-fuzz), JOBS (default 2), INFINIOP_FUZZ_OPENCL=1 to also
# create every descriptor on opencl. New inputs go to $BUILD_DIR/fuzz-corpus (the seed corpus in
# the repository is only read); crashes to $BUILD_DIR/fuzz-artifacts/. See tests/fuzz/README.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-60}"
shift || true
build="${BUILD_DIR:-build-fuzz}"
# The fuzz preset (CMakePresets.json): clang, -O1 and line tables only (libFuzzer's usual build,
# several times faster to compile than -O2 -g), and one Highway target, AVX2 (the cpu device's
# usual path; the baseline, so the objects need every feature of Highway's AVX2 target): with
# ASan, UBSan and coverage each target of each kernel file costs minutes. A processor without
# them gets its own best target instead.
if [ ! -f "${build}/CMakeCache.txt" ]; then
  targets=()
  for feature in avx2 bmi1 bmi2 fma f16c aes pclmulqdq; do
    grep -qw "${feature}" /proc/cpuinfo || targets=(-DINFINIOP_CPU_TARGETS=native)
  done
  cmake --preset fuzz -B "${build}" "${targets[@]}"
fi
cmake --build "${build}" -j"${JOBS:-2}" --target infiniop-fuzz-operators
[ "${seconds}" = --build ] && exit 0
# opencl runs every call through device copies, 20-50 times slower: it keeps a corpus of its own,
# so that it does not first replay everything the cpu runs found (libFuzzer's time limit starts
# after that replay).
corpus="${build}/fuzz-corpus"
if [ "${INFINIOP_FUZZ_OPENCL:-0}" = 1 ]; then
  corpus="${build}/fuzz-corpus-opencl"
  # PoCL keeps one 16-byte object of its own past exit once kernels have run: the driver's, not
  # this library's (whose allocations stay checked).
  export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=tests/fuzz/pocl.supp}"
fi
mkdir -p "${corpus}" "${build}/fuzz-artifacts"
# detect_leaks: every create is destroyed; a leak is a finding. OMP_NUM_THREADS=2 keeps the cpu
# device parallel without oversubscribing small machines.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
exec "${build}/tests/fuzz/infiniop-fuzz-operators" -max_total_time="${seconds}" \
  -artifact_prefix="${build}/fuzz-artifacts/" -print_final_stats=1 "$@" \
  "${corpus}" tests/fuzz/corpus
