# SPDX-License-Identifier: Apache-2.0
# Step timing for .ci/run and scripts/test.sh (sourced, bash): `step NAME COMMAND...` runs the
# command, prints its wall-clock duration and records it. The first script that sources this
# (the outermost) owns the record: when it exits, successfully or not, it prints every recorded
# step, nested scripts' included, with the total, and keeps its exit status. Scripts it runs
# that source this too add their steps to the same record (INFINIOP_CI_TIMES, a file).

_ci_times_now() {  # microseconds; EPOCHREALTIME's decimal point follows the locale
  local now="${EPOCHREALTIME:-}"
  if [ -n "${now}" ]; then
    echo "${now//[.,]/}"
  else
    echo "$(($(date +%s) * 1000000))"
  fi
}

_ci_times_format() {  # microseconds -> "123.4 s (2:03)"
  local us="$1"
  printf '%d.%d s (%d:%02d)' $((us / 1000000)) $((us % 1000000 / 100000)) \
    $((us / 60000000)) $((us / 1000000 % 60))
}

step() {
  local name="$1"
  shift
  echo "=== ${name} ==="
  local start rc=0
  start=$(_ci_times_now)
  "$@" || rc=$?
  local us=$(($(_ci_times_now) - start))
  printf '%s\t%s\t%s\n' "${name}" "${us}" "${rc}" >> "${INFINIOP_CI_TIMES}"
  if [ "${rc}" -eq 0 ]; then
    echo "=== ${name}: $(_ci_times_format "${us}") ==="
  else
    echo "=== ${name}: FAILED (exit ${rc}) after $(_ci_times_format "${us}") ==="
  fi
  return "${rc}"
}

_ci_times_table() {
  local rc=$?
  local total=$(($(_ci_times_now) - _ci_times_start))
  echo
  echo "=== step times (wall clock) ==="
  local name us status
  while IFS=$'\t' read -r name us status; do
    if [ "${status}" -eq 0 ]; then status=""; else status="  FAILED (exit ${status})"; fi
    printf '  %-32s %18s%s\n' "${name}" "$(_ci_times_format "${us}")" "${status}"
  done < "${INFINIOP_CI_TIMES}"
  printf '  %-32s %18s\n' "total" "$(_ci_times_format "${total}")"
  [ "${rc}" -eq 0 ] || echo "=== failed (exit ${rc}) ==="
  rm -f "${INFINIOP_CI_TIMES}"
  exit "${rc}"
}

if [ -z "${INFINIOP_CI_TIMES:-}" ]; then
  INFINIOP_CI_TIMES=$(mktemp "${TMPDIR:-/tmp}/infiniop-ci-times.XXXXXX")
  export INFINIOP_CI_TIMES
  _ci_times_start=$(_ci_times_now)
  trap _ci_times_table EXIT
fi
