#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# INFINIOP_CPU_ISA: every valid name caps the cpu device there (or at the processor's best, when
# that is lower), names are case-insensitive, empty means no cap, and an unknown name makes cpu
# handle creation fail with a message listing the valid names. $1: tests/isa/probe.c's program.
set -eu
probe="$1"
err=$(mktemp); trap 'rm -f "$err"' EXIT
best=$(env -u INFINIOP_CPU_ISA "$probe")
[ "$(INFINIOP_CPU_ISA= "$probe")" = "$best" ] || { echo "empty INFINIOP_CPU_ISA is not 'no cap'"; exit 1; }
if INFINIOP_CPU_ISA=NO_SUCH_ISA "$probe" > /dev/null 2> "$err"; then
  echo "an unknown name was accepted"; exit 1
fi
grep -q "INFINI_STATUS_BAD_PARAM" "$err" && grep -q "valid names" "$err" ||
  { echo "unexpected refusal: $(cat "$err")"; exit 1; }
# "... valid names (best first): AVX3, AVX2, SSE4, SSSE3, SCALAR, or unset ..."
names=$(sed -e 's/.*(best first): //' -e 's/, or unset.*//' -e 's/,//g' "$err")
echo "best: $best; valid names: $names"
reached_best=no
for name in $names; do
  [ "$name" = "$best" ] && reached_best=yes
  expected=$name; [ $reached_best = no ] && expected=$best  # a cap above the processor's best
  lower=$(echo "$name" | tr 'A-Z' 'a-z')
  for spelling in "$name" "$lower"; do
    got=$(INFINIOP_CPU_ISA="$spelling" "$probe")
    echo "INFINIOP_CPU_ISA=$spelling -> $got"
    [ "$got" = "$expected" ] || { echo "expected $expected"; exit 1; }
  done
done
[ $reached_best = yes ] || { echo "the best target $best is not among the valid names"; exit 1; }
echo "isa cap ok"
