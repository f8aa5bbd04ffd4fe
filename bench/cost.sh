#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Instructions per output element of each operator's calculate call, counted by valgrind's
# callgrind: exact and repeatable whatever the machine's load (no hardware counters needed), at
# the AVX2 cap (valgrind runs no AVX-512) on one thread. One row per operator: F32 strict, F32
# relaxed, F16, BF16 and the 16-bit counts over F32 strict's; docs/performance.md keeps the table.
#
#   bash bench/cost.sh [--build DIR | --cost PATH] [--shape AxB] [--range R] [--isa ISA] [OP...]
#
# Defaults: build/ (the release preset's; the script builds infiniop-cost there; --cost: that
# infiniop-cost, not built), each operator
# at 16x4096 (65536 elements; the MoE operators and routers at their own small shapes below), inputs
# uniform over [-4, 4), INFINIOP_CPU_ISA=AVX2. Each count is one call after a warm-up call.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build cost="" shape="" range=4 isa=AVX2
ops=()
while (($#)); do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --cost) cost=$2; shift 2 ;;
    --shape) shape=$2; shift 2 ;;
    --range) range=$2; shift 2 ;;
    --isa) isa=$2; shift 2 ;;
    -h|--help) sed -n '3,13p' "$0"; exit 0 ;;
    *) ops+=("$1"); shift ;;
  esac
done
command -v valgrind >/dev/null || { echo "cost.sh: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
if [[ -z $cost ]]; then
  if [[ ! -f $build/CMakeCache.txt ]]; then cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null; fi
  cmake --build "$build" -j2 --target infiniop-cost >/dev/null
  cost=$build/bench/infiniop-cost
fi
((${#ops[@]})) || mapfile -t ops < <("$cost" --list)

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Instructions per output element of one case, or "-" where the operator refuses it.
per_element() {  # op dtype fpmath
  local op=$1 dtype=$2 fpmath=$3 case_shape=$shape
  if [[ -z $case_shape ]]; then
    case $op in
      moe_gating*) case_shape=256x8x256 ;;  # tokens x top-k x experts
      moe_*) case_shape=64x4x256 ;;        # tokens x top-k x hidden
      *) case_shape=16x4096 ;;
    esac
  fi
  local elements
  if ! elements=$(INFINIOP_CPU_ISA=$isa OMP_NUM_THREADS=1 valgrind --tool=callgrind \
      --callgrind-out-file="$out/cg" --collect-atstart=no \
      --toggle-collect=infiniop_cost_measured_call \
      "$cost" "$op" "$dtype" --fpmath "$fpmath" --shape "$case_shape" --range "$range" \
      2>"$out/log"); then
    echo "-"
    return
  fi
  local instructions
  instructions=$(awk '/^(summary|totals):/ {print $2; exit}' "$out/cg")
  awk -v i="$instructions" -v n="$elements" 'BEGIN {printf "%.2f", i / n}'
}

echo "# instructions per output element, callgrind, INFINIOP_CPU_ISA=$isa, 1 thread," \
  "inputs over [-$range, $range)"
echo "| op | F32 | F32 relaxed | F16 | BF16 | F16 / F32 | BF16 / F32 |"
echo "|---|---|---|---|---|---|---|"
for op in "${ops[@]}"; do
  f32=$(per_element "$op" f32 strict)
  relaxed=$(per_element "$op" f32 relaxed)
  f16=$(per_element "$op" f16 strict)
  bf16=$(per_element "$op" bf16 strict)
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b}'; }
  echo "| $op | $f32 | $relaxed | $f16 | $bf16 | $(ratio "$f16" "$f32") | $(ratio "$bf16" "$f32") |"
done
