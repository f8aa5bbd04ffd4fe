#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Fails if libinfiniop exports any symbol outside the C API (every API name starts with "infini").
set -eu
lib="$1"
nm="${2:-nm}"  # the build's nm (CMAKE_NM): a cross build's reads its own architecture
symbols=$("$nm" -D --defined-only "$lib" | awk '{print $3}')
[ -n "$symbols" ] || { echo "no exported symbols in $lib"; exit 1; }
extra=$(printf '%s\n' "$symbols" | grep -v '^infini' || true)
if [ -n "$extra" ]; then
  echo "exported symbols outside the C API:"; printf '%s\n' "$extra"; exit 1
fi
for name in infiniopGeluBackward infiniopGelu infiniopGeluBackwardV2; do
  printf '%s\n' "$symbols" | grep -qx "$name" || { echo "$name is not exported"; exit 1; }
done
echo "exports ok: $(printf '%s\n' "$symbols" | wc -l) C API symbols"
