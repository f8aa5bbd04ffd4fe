#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs a command with the cpu device capped at target $2 (INFINIOP_CPU_ISA), or exits 77 (ctest's
# skip) when the processor's best target is already that one or lower: the uncapped run covers it.
# $1: tests/isa/probe.c's program; the rest: the command.
set -eu
probe="$1"; isa="$2"; shift 2
best=$(env -u INFINIOP_CPU_ISA "$probe")
capped=$(INFINIOP_CPU_ISA="$isa" "$probe")
if [ "$capped" = "$best" ]; then
  echo "skipped: this processor's best target is $best, already at or below $isa"
  exit 77
fi
echo "cpu device capped at $capped (best here: $best)"
INFINIOP_CPU_ISA="$isa" exec "$@"
