// SPDX-License-Identifier: Apache-2.0
// infiniopGetVersion: the version this library was built as (include/infiniop/version.h).
#include "infiniop/version.h"

#include "core/error.h"

extern "C" infiniStatus_t infiniopGetVersion(int *major, int *minor, int *patch) {
  const char *missing = !major ? "major" : !minor ? "minor" : !patch ? "patch" : nullptr;
  if (missing)
    return infiniop::fail(INFINI_STATUS_NULL_POINTER,
                          std::string("infiniopGetVersion: ") + missing + " is NULL");
  *major = INFINIOP_VERSION_MAJOR;
  *minor = INFINIOP_VERSION_MINOR;
  *patch = INFINIOP_VERSION_PATCH;
  return infiniop::succeed();
}
