// SPDX-License-Identifier: Apache-2.0
#include "core/error.h"

#include <cstdio>

#include "core/dtype.h"

namespace infiniop {
namespace {
thread_local std::string last_error;
}

infiniStatus_t fail(infiniStatus_t status, std::string message) {
  last_error = std::move(message);
  return status;
}

infiniStatus_t succeed() {
  last_error.clear();
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t checkAligned(const char *where, const char *name, const void *p,
                            size_t element_size) {
  if (element_size == 0 || reinterpret_cast<uintptr_t>(p) % element_size == 0)
    return INFINI_STATUS_SUCCESS;
  char address[2 + 2 * sizeof(uintptr_t) + 1];
  std::snprintf(address, sizeof address, "%#jx",
                static_cast<uintmax_t>(reinterpret_cast<uintptr_t>(p)));
  return fail(INFINI_STATUS_BAD_PARAM, std::string(where) + ": " + name + " pointer " + address +
                                           " is not aligned to its " +
                                           std::to_string(element_size) + "-byte elements");
}

}  // namespace infiniop

extern "C" const char *infiniopGetLastError(void) {
  return infiniop::last_error.c_str();
}

extern "C" const char *infiniStatusString(infiniStatus_t status) {
  switch (infiniop::enumValue(status)) {  // any int may arrive from C
#define INFINIOP_STATUS_NAME(name) \
  case name:                       \
    return #name;
    INFINIOP_STATUS_NAME(INFINI_STATUS_SUCCESS)
    INFINIOP_STATUS_NAME(INFINI_STATUS_INTERNAL_ERROR)
    INFINIOP_STATUS_NAME(INFINI_STATUS_NOT_IMPLEMENTED)
    INFINIOP_STATUS_NAME(INFINI_STATUS_BAD_PARAM)
    INFINIOP_STATUS_NAME(INFINI_STATUS_NULL_POINTER)
    INFINIOP_STATUS_NAME(INFINI_STATUS_DEVICE_TYPE_NOT_SUPPORTED)
    INFINIOP_STATUS_NAME(INFINI_STATUS_DEVICE_NOT_FOUND)
    INFINIOP_STATUS_NAME(INFINI_STATUS_DEVICE_NOT_INITIALIZED)
    INFINIOP_STATUS_NAME(INFINI_STATUS_DEVICE_ARCHITECTURE_NOT_SUPPORTED)
    INFINIOP_STATUS_NAME(INFINI_STATUS_BAD_TENSOR_DTYPE)
    INFINIOP_STATUS_NAME(INFINI_STATUS_BAD_TENSOR_SHAPE)
    INFINIOP_STATUS_NAME(INFINI_STATUS_BAD_TENSOR_STRIDES)
    INFINIOP_STATUS_NAME(INFINI_STATUS_INSUFFICIENT_WORKSPACE)
#undef INFINIOP_STATUS_NAME
  }
  return "INFINI_STATUS_UNKNOWN";
}
