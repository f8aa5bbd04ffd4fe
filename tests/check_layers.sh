#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The include layers (docs/architecture.md): nothing under src/ includes a device's folder
# (operator code never names a device), and the cpu device takes its exact double formulas from
# src/exact/, never from the reference device's folder; src/core/ includes only itself and the
# public headers. Prints each offending line; exit 1 if any.
# Usage: check_layers.sh <repository root>
set -eu
root="$1"
status=0
devices=$(ls -d "$root"/devices/*/ | xargs -n1 basename | tr '\n' '|' | sed 's/|$//')
if grep -rnE "#include \"($devices)/" "$root/src"; then
  echo "src/ includes a device's folder (above)"; status=1
fi
# The core knows no family: adding one (kernels/list.h, kernels/families.h) leaves src/core/ as is.
if grep -rn '#include "' "$root/src/core" | grep -v '#include "\(core/\|infini\)'; then
  echo "src/core/ includes a header outside core/ and the public ones (above)"; status=1
fi
if grep -rn '#include "cpu_reference/' "$root/devices/cpu"; then
  echo "devices/cpu includes devices/cpu_reference/ (above): use src/exact/"; status=1
fi
exit $status
