# SPDX-License-Identifier: Apache-2.0
# cmake -DCMAKE_INSTALL_PREFIX=... -DCMAKE_INSTALL_LIBDIR=... -DCMAKE_INSTALL_INCLUDEDIR=...
#       -DPROJECT_VERSION=... -DPROJECT_DESCRIPTION=... -DOUTPUT=<file> -P write_pc.cmake
# Writes infiniop.pc for that layout with the code the top-level CMakeLists.txt uses
# (cmake/InfiniopPkgConfig.cmake), so check_install.sh can check layouts the build was not
# configured for.
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/InfiniopPkgConfig.cmake)
infiniop_configure_pkgconfig(${CMAKE_CURRENT_LIST_DIR}/../../infiniop.pc.in ${OUTPUT})
