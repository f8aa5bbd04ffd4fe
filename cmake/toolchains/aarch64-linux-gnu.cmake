# SPDX-License-Identifier: Apache-2.0
# Cross build for 64-bit Arm Linux with Debian's cross compiler and the arm64 packages installed
# through multiarch (docs/devices.md, "Arm"): aarch64-linux-gnu-g++, libhwy-dev:arm64,
# libgtest-dev:arm64, libgomp1:arm64. The programs built run under qemu-aarch64.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Multiarch: the arm64 libraries and their CMake packages are under /usr/lib/aarch64-linux-gnu,
# the headers shared with the host's under /usr/include.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
# ctest runs the test programs through the emulator. The arm64 dynamic loader and libraries are
# multiarch's (libc6:arm64, which libhwy1:arm64 pulls in, at /lib/ld-linux-aarch64.so.1): with
# `-L /usr/aarch64-linux-gnu`, the cross packages' copy, qemu-aarch64 7.2 hung in the first
# std::thread join.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
