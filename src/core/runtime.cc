// SPDX-License-Identifier: Apache-2.0
// Runtime functions for the CPU devices: device memory is host memory, every call is synchronous.
// An OpenCL handle's calls go to devices/opencl/runtime.cc once the shared checks have passed.
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/handle.h"
#include "infiniop/runtime.h"
#if INFINIOP_WITH_OPENCL
#include "opencl/program.h"
#include "opencl/runtime.h"
#endif

using infiniop::fail;
using infiniop::succeed;

// Returns the OpenCL device's answer for an OpenCL handle; CPU handles go on past it.
#if INFINIOP_WITH_OPENCL
#define INFINIOP_ON_OPENCL(where, handle, call) \
  if ((handle)->opencl) return infiniop::guarded(where, [&] { return infiniop::opencl::call; })
#else
#define INFINIOP_ON_OPENCL(where, handle, call) (void)0
#endif

namespace {

constexpr size_t kAlignment = 64;  // a cache line: every SIMD width up to AVX-512

using infiniop::checkHandle;

infiniStatus_t checkStream(const char *where, infiniopHandle_t handle, void *stream) {
  if (!stream) return INFINI_STATUS_SUCCESS;
  std::lock_guard<std::mutex> lock(handle->mutex);
  if (!handle->streams.count(stream))
    return fail(
        INFINI_STATUS_BAD_PARAM,
        std::string(where) + ": stream was not created by infiniopStreamCreate on this handle");
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t copy(const char *where, infiniopHandle_t handle, void *dst, const void *src,
                    size_t size, void *stream) {
  INFINIOP_CHECK(checkHandle(where, handle));
  if (size && (!dst || !src))
    return fail(INFINI_STATUS_NULL_POINTER, std::string(where) + ": NULL source or destination");
  INFINIOP_CHECK(checkStream(where, handle, stream));
  if (size) std::memmove(dst, src, size);
  return succeed();
}

}  // namespace

infiniStatus_t infiniop::readForCheck(const char *where, infiniopHandle_t handle, void *stream,
                                      const void *src, size_t bytes, void *host) {
#if INFINIOP_WITH_OPENCL
  if (handle->opencl) {
    cl_command_queue queue = nullptr;
    INFINIOP_CHECK(opencl::queueOf(where, handle, stream, &queue));
    return opencl::readForCheck(where, handle, queue, src, bytes, host);
  }
#endif
  (void)where;
  (void)handle;
  (void)stream;
  if (bytes) std::memcpy(host, src, bytes);
  return INFINI_STATUS_SUCCESS;
}

extern "C" infiniStatus_t infiniopMalloc(infiniopHandle_t handle, void **ptr, size_t size) {
  return infiniop::guarded("infiniopMalloc", [&] {
    INFINIOP_CHECK(checkHandle("infiniopMalloc", handle));
    if (!ptr) return fail(INFINI_STATUS_NULL_POINTER, "infiniopMalloc: ptr is NULL");
    INFINIOP_ON_OPENCL("infiniopMalloc", handle, allocate(handle, ptr, size));
    const size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
    if (rounded < size) return fail(INFINI_STATUS_BAD_PARAM, "infiniopMalloc: size overflows");
    void *p = std::aligned_alloc(kAlignment, rounded ? rounded : kAlignment);
    if (!p)
      return fail(INFINI_STATUS_INTERNAL_ERROR,
                  "infiniopMalloc: out of host memory for " + std::to_string(size) + " bytes");
    std::lock_guard<std::mutex> lock(handle->mutex);
    handle->allocations.insert(p);
    *ptr = p;
    return succeed();
  });
}

extern "C" infiniStatus_t infiniopFree(infiniopHandle_t handle, void *ptr) {
  INFINIOP_CHECK(checkHandle("infiniopFree", handle));
  if (!ptr) return succeed();  // like free(NULL)
  INFINIOP_ON_OPENCL("infiniopFree", handle, deallocate(handle, ptr));
  std::lock_guard<std::mutex> lock(handle->mutex);
  if (!handle->allocations.erase(ptr))
    return fail(INFINI_STATUS_BAD_PARAM,
                "infiniopFree: pointer was not returned by infiniopMalloc on this handle");
  std::free(ptr);
  return succeed();
}

extern "C" infiniStatus_t infiniopMemcpyHostToDevice(infiniopHandle_t handle, void *dst,
                                                     const void *src, size_t size, void *stream) {
  INFINIOP_CHECK(checkHandle("infiniopMemcpyHostToDevice", handle));
  INFINIOP_ON_OPENCL("infiniopMemcpyHostToDevice", handle,
                     memcpyHostToDevice(handle, dst, src, size, stream));
  return copy("infiniopMemcpyHostToDevice", handle, dst, src, size, stream);
}

extern "C" infiniStatus_t infiniopMemcpyDeviceToHost(infiniopHandle_t handle, void *dst,
                                                     const void *src, size_t size, void *stream) {
  INFINIOP_CHECK(checkHandle("infiniopMemcpyDeviceToHost", handle));
  INFINIOP_ON_OPENCL("infiniopMemcpyDeviceToHost", handle,
                     memcpyDeviceToHost(handle, dst, src, size, stream));
  return copy("infiniopMemcpyDeviceToHost", handle, dst, src, size, stream);
}

extern "C" infiniStatus_t infiniopStreamCreate(infiniopHandle_t handle, void **stream) {
  return infiniop::guarded("infiniopStreamCreate", [&] {
    INFINIOP_CHECK(checkHandle("infiniopStreamCreate", handle));
    if (!stream) return fail(INFINI_STATUS_NULL_POINTER, "infiniopStreamCreate: stream is NULL");
    INFINIOP_ON_OPENCL("infiniopStreamCreate", handle, streamCreate(handle, stream));
    void *token = new char;  // CPU work is synchronous: a stream is only a validated token
    std::lock_guard<std::mutex> lock(handle->mutex);
    handle->streams.insert(token);
    *stream = token;
    return succeed();
  });
}

extern "C" infiniStatus_t infiniopStreamDestroy(infiniopHandle_t handle, void *stream) {
  INFINIOP_CHECK(checkHandle("infiniopStreamDestroy", handle));
  if (!stream) return fail(INFINI_STATUS_NULL_POINTER, "infiniopStreamDestroy: stream is NULL");
  INFINIOP_ON_OPENCL("infiniopStreamDestroy", handle, streamDestroy(handle, stream));
  std::lock_guard<std::mutex> lock(handle->mutex);
  if (!handle->streams.erase(stream))
    return fail(
        INFINI_STATUS_BAD_PARAM,
        "infiniopStreamDestroy: stream was not created by infiniopStreamCreate on this handle");
  delete static_cast<char *>(stream);
  return succeed();
}

extern "C" infiniStatus_t infiniopStreamSynchronize(infiniopHandle_t handle, void *stream) {
  INFINIOP_CHECK(checkHandle("infiniopStreamSynchronize", handle));
  INFINIOP_ON_OPENCL("infiniopStreamSynchronize", handle, streamSynchronize(handle, stream));
  INFINIOP_CHECK(checkStream("infiniopStreamSynchronize", handle, stream));
  return succeed();
}

#if !INFINIOP_WITH_CPU
extern "C" const char *infiniopCpuIsaName(void) {
  return "none (built without the cpu device)";
}
#endif
