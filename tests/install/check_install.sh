#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs the build into temporary directories and builds a C consumer (main.c) against each
# install; every consumer must run. Nothing is written outside one mktemp directory.
#  1. Relocatable: `cmake --install --prefix <dir>`; find_package(infiniop) and pkg-config.
#  2. A packager's staging: `DESTDIR=<dir> cmake --install --prefix /usr` (the build's own libdir).
#  3. Distribution layouts, prefix /usr with a multiarch libdir (lib/x86_64-linux-gnu) or lib64,
#     under DESTDIR. The build was configured for one libdir and `cmake --install` can change only
#     the prefix; configuring and compiling a second tree would take minutes. So this stages the
#     installed library and headers at that layout's paths and writes infiniop.pc for it with the
#     code the build itself uses (cmake/InfiniopPkgConfig.cmake, through write_pc.cmake); what
#     depends on the layout is only that file, and it must match the installed one line for line
#     apart from the directory variables.
# For 2 and 3, pkg-config's prefix, libdir and includedir must resolve inside DESTDIR to /usr,
# /usr/<libdir> and /usr/include, and the consumer is built from `pkg-config --cflags --libs`
# both with PKG_CONFIG_PATH alone and with PKG_CONFIG_SYSROOT_DIR=<DESTDIR> as a packager's
# cross build would.
set -eu
build_dir="$1"; source_dir="$(cd "$(dirname "$0")" && pwd)"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
unset PKG_CONFIG_SYSROOT_DIR DESTDIR

# 1. Relocatable prefix.
cmake --install "$build_dir" --prefix "$work/prefix" > /dev/null
libdir=$(dirname "$(find "$work/prefix" -name 'libinfiniop.so' | head -n 1)")
cmake -S "$source_dir" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$work/prefix" > /dev/null
cmake --build "$work/cmake" > /dev/null
LD_LIBRARY_PATH="$libdir" "$work/cmake/consumer"
PKG_CONFIG_PATH="$libdir/pkgconfig" cc "$source_dir/main.c" -o "$work/pc_consumer" \
  $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs infiniop)
LD_LIBRARY_PATH="$libdir" "$work/pc_consumer"
includedir=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --variable=includedir infiniop)
[ -f "$includedir/infiniop.h" ] || { echo "includedir $includedir has no infiniop.h"; exit 1; }

# check_staged <DESTDIR> <libdir under DESTDIR, e.g. /usr/lib>: infiniop.pc in <libdir>/pkgconfig
# resolves to the /usr layout inside DESTDIR, and a pkg-config consumer builds and runs.
check_staged() {
  dest=$(realpath "$1"); want_libdir=$2; pcdir="$dest$want_libdir/pkgconfig"
  for sysroot in "" "$dest"; do
    for var_want in prefix=/usr "libdir=$want_libdir" includedir=/usr/include; do
      var=${var_want%%=*}; want=${var_want#*=}
      got=$(PKG_CONFIG_PATH="$pcdir" PKG_CONFIG_SYSROOT_DIR="$sysroot" \
            pkg-config --variable="$var" infiniop)
      resolved=$(realpath -m "$got")
      if [ "${resolved#"$dest"}" != "$want" ]; then
        echo "$pcdir/infiniop.pc (sysroot '${sysroot}'): $var=$got resolves to $resolved," \
             "want $dest$want"; cat "$pcdir/infiniop.pc"; exit 1
      fi
    done
    flags=$(PKG_CONFIG_PATH="$pcdir" PKG_CONFIG_SYSROOT_DIR="$sysroot" \
            pkg-config --cflags --libs infiniop)
    cc "$source_dir/main.c" -o "$work/staged_consumer" $flags
    LD_LIBRARY_PATH="$dest$want_libdir" "$work/staged_consumer" > /dev/null
  done
}

# 2. DESTDIR staging of the real install rules, prefix /usr.
rel_libdir=${libdir#"$work/prefix"}
DESTDIR="$work/staged" cmake --install "$build_dir" --prefix /usr > /dev/null
check_staged "$work/staged" "/usr$rel_libdir"

# 3. Distribution layouts: the same library and headers, infiniop.pc from the build's own code.
version=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --modversion infiniop)
description=$(sed -n 's/^Description: //p' "$libdir/pkgconfig/infiniop.pc")
for layout_libdir in lib/x86_64-linux-gnu lib64; do
  dest="$work/distro-$(echo "$layout_libdir" | tr / _)"
  mkdir -p "$dest/usr/$layout_libdir/pkgconfig" "$dest/usr/include"
  cp -P "$libdir"/libinfiniop.so* "$dest/usr/$layout_libdir/"
  cp -R "$includedir/." "$dest/usr/include/"
  cmake -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR="$layout_libdir" \
        -DCMAKE_INSTALL_INCLUDEDIR=include -DPROJECT_VERSION="$version" \
        -DPROJECT_DESCRIPTION="$description" \
        -DOUTPUT="$dest/usr/$layout_libdir/pkgconfig/infiniop.pc" -P "$source_dir/write_pc.cmake"
  grep -v '^prefix=\|^libdir=\|^includedir=' "$libdir/pkgconfig/infiniop.pc" > "$work/installed.body"
  grep -v '^prefix=\|^libdir=\|^includedir=' "$dest/usr/$layout_libdir/pkgconfig/infiniop.pc" > "$work/layout.body"
  cmp -s "$work/installed.body" "$work/layout.body" || {
    echo "write_pc.cmake and the build's infiniop.pc differ:"
    diff "$work/installed.body" "$work/layout.body" || true; exit 1; }
  check_staged "$dest" "/usr/$layout_libdir"
done
echo "install ok: find_package and pkg-config consumers run (relocatable prefix; DESTDIR with" \
     "prefix /usr and libdir ${rel_libdir#/}, lib/x86_64-linux-gnu, lib64)"
