#!/bin/sh
# Installs the build into a temporary prefix, then builds a C consumer twice: with
# find_package(infiniop) and with pkg-config. Both must run.
set -eu
build_dir="$1"; source_dir="$(cd "$(dirname "$0")" && pwd)"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" > /dev/null
libdir=$(dirname "$(find "$work/prefix" -name 'libinfiniop.so' | head -n 1)")
cmake -S "$source_dir" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$work/prefix" > /dev/null
cmake --build "$work/cmake" > /dev/null
LD_LIBRARY_PATH="$libdir" "$work/cmake/consumer"
PKG_CONFIG_PATH="$libdir/pkgconfig" cc "$source_dir/main.c" -o "$work/pc_consumer" \
  $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs infiniop)
LD_LIBRARY_PATH="$libdir" "$work/pc_consumer"
echo "install ok: find_package and pkg-config consumers run"
