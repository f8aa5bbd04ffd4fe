// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_VERSION_H
#define INFINIOP_VERSION_H

#include "../infinicore.h"

/* The version of these headers. The one place it is written: CMakeLists.txt reads it from here
 * for project(infiniop VERSION ...), hence the library's file name and SONAME
 * (libinfiniop.so.MAJOR), infiniopConfigVersion.cmake and infiniop.pc; the Python package's
 * __version__ is checked against it by the tests. Keep each on one line, as written. */
#define INFINIOP_VERSION_MAJOR 0
#define INFINIOP_VERSION_MINOR 2
#define INFINIOP_VERSION_PATCH 0

/* The version of the library actually loaded, which may differ from the headers a program was
 * compiled with. NULL_POINTER (with the reason in infiniopGetLastError) if any argument is NULL;
 * then nothing is written. */
__INFINI_C infiniStatus_t infiniopGetVersion(int *major, int *minor, int *patch);

#endif /* INFINIOP_VERSION_H */
