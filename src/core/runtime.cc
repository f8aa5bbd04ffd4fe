// SPDX-License-Identifier: Apache-2.0
// API.md's runtime functions: the checks every device shares, then the handle's device.
#include <string>

#include "core/error.h"
#include "core/handle.h"
#include "infiniop/runtime.h"

using infiniop::checkHandle;
using infiniop::fail;

namespace {

// The shared checks of a copy: a live handle, and no NULL side when bytes are copied.
infiniStatus_t checkCopy(const char *where, infiniopHandle_t handle, const void *dst,
                         const void *src, size_t size) {
  INFINIOP_CHECK(checkHandle(where, handle));
  if (size && (!dst || !src))
    return fail(INFINI_STATUS_NULL_POINTER, std::string(where) + ": NULL source or destination");
  return INFINI_STATUS_SUCCESS;
}

}  // namespace

extern "C" infiniStatus_t infiniopMalloc(infiniopHandle_t handle, void **ptr, size_t size) {
  return infiniop::guarded("infiniopMalloc", [&] {
    INFINIOP_CHECK(checkHandle("infiniopMalloc", handle));
    if (!ptr) return fail(INFINI_STATUS_NULL_POINTER, "infiniopMalloc: ptr is NULL");
    return handle->device->malloc(handle, ptr, size);
  });
}

extern "C" infiniStatus_t infiniopFree(infiniopHandle_t handle, void *ptr) {
  return infiniop::guarded("infiniopFree", [&] {
    INFINIOP_CHECK(checkHandle("infiniopFree", handle));
    if (!ptr) return infiniop::succeed();  // like free(NULL)
    return handle->device->free(handle, ptr);
  });
}

extern "C" infiniStatus_t infiniopMemcpyHostToDevice(infiniopHandle_t handle, void *dst,
                                                     const void *src, size_t size, void *stream) {
  return infiniop::guarded("infiniopMemcpyHostToDevice", [&] {
    INFINIOP_CHECK(checkCopy("infiniopMemcpyHostToDevice", handle, dst, src, size));
    return handle->device->memcpyHostToDevice(handle, dst, src, size, stream);
  });
}

extern "C" infiniStatus_t infiniopMemcpyDeviceToHost(infiniopHandle_t handle, void *dst,
                                                     const void *src, size_t size, void *stream) {
  return infiniop::guarded("infiniopMemcpyDeviceToHost", [&] {
    INFINIOP_CHECK(checkCopy("infiniopMemcpyDeviceToHost", handle, dst, src, size));
    return handle->device->memcpyDeviceToHost(handle, dst, src, size, stream);
  });
}

extern "C" infiniStatus_t infiniopStreamCreate(infiniopHandle_t handle, void **stream) {
  return infiniop::guarded("infiniopStreamCreate", [&] {
    INFINIOP_CHECK(checkHandle("infiniopStreamCreate", handle));
    if (!stream) return fail(INFINI_STATUS_NULL_POINTER, "infiniopStreamCreate: stream is NULL");
    return handle->device->streamCreate(handle, stream);
  });
}

extern "C" infiniStatus_t infiniopStreamDestroy(infiniopHandle_t handle, void *stream) {
  return infiniop::guarded("infiniopStreamDestroy", [&] {
    INFINIOP_CHECK(checkHandle("infiniopStreamDestroy", handle));
    if (!stream) return fail(INFINI_STATUS_NULL_POINTER, "infiniopStreamDestroy: stream is NULL");
    return handle->device->streamDestroy(handle, stream);
  });
}

extern "C" infiniStatus_t infiniopStreamSynchronize(infiniopHandle_t handle, void *stream) {
  return infiniop::guarded("infiniopStreamSynchronize", [&] {
    INFINIOP_CHECK(checkHandle("infiniopStreamSynchronize", handle));
    return handle->device->streamSynchronize(handle, stream);
  });
}
