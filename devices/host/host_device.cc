// SPDX-License-Identifier: Apache-2.0
#include "host/host_device.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>

#include "core/error.h"
#include "core/handle.h"

namespace infiniop::host {
namespace {

constexpr size_t kAlignment = 64;  // a cache line: every SIMD width up to AVX-512

struct State final : DeviceState {
  ~State() override {
    for (void *p : allocations) std::free(p);
    for (void *s : streams) delete static_cast<char *>(s);
  }
  std::mutex mutex;  // guards the two tables
  std::unordered_set<void *> allocations;
  std::unordered_set<void *> streams;  // CPU work is synchronous: a stream is a validated token
};

infiniStatus_t checkStream(const char *where, infiniopHandle_t handle, void *stream) {
  if (!stream) return INFINI_STATUS_SUCCESS;
  State &s = stateOf<State>(handle);
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.streams.count(stream))
    return fail(
        INFINI_STATUS_BAD_PARAM,
        std::string(where) + ": stream was not created by infiniopStreamCreate on this handle");
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t copy(const char *where, infiniopHandle_t handle, void *dst, const void *src,
                    size_t size, void *stream) {
  INFINIOP_CHECK(checkStream(where, handle, stream));
  if (size) std::memmove(dst, src, size);
  return succeed();
}

}  // namespace

infiniStatus_t HostDevice::open(const char *where, int device_id,
                                std::unique_ptr<DeviceState> *state) const {
  if (device_id != 0)
    return fail(
        INFINI_STATUS_DEVICE_NOT_FOUND,
        std::string(where) + ": " + name + " has only device 0, not " + std::to_string(device_id));
  *state = std::make_unique<State>();
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t HostDevice::malloc(infiniopHandle_t handle, void **ptr, size_t size) const {
  const size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded < size) return fail(INFINI_STATUS_BAD_PARAM, "infiniopMalloc: size overflows");
  void *p = std::aligned_alloc(kAlignment, rounded ? rounded : kAlignment);
  if (!p)
    return fail(INFINI_STATUS_INTERNAL_ERROR,
                "infiniopMalloc: out of host memory for " + std::to_string(size) + " bytes");
  State &s = stateOf<State>(handle);
  try {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.allocations.insert(p);
  } catch (...) {
    std::free(p);
    throw;
  }
  *ptr = p;
  return succeed();
}

infiniStatus_t HostDevice::free(infiniopHandle_t handle, void *ptr) const {
  State &s = stateOf<State>(handle);
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.allocations.erase(ptr))
    return fail(INFINI_STATUS_BAD_PARAM,
                "infiniopFree: pointer was not returned by infiniopMalloc on this handle");
  std::free(ptr);
  return succeed();
}

infiniStatus_t HostDevice::memcpyHostToDevice(infiniopHandle_t handle, void *dst, const void *src,
                                              size_t size, void *stream) const {
  return copy("infiniopMemcpyHostToDevice", handle, dst, src, size, stream);
}

infiniStatus_t HostDevice::memcpyDeviceToHost(infiniopHandle_t handle, void *dst, const void *src,
                                              size_t size, void *stream) const {
  return copy("infiniopMemcpyDeviceToHost", handle, dst, src, size, stream);
}

infiniStatus_t HostDevice::streamCreate(infiniopHandle_t handle, void **stream) const {
  State &s = stateOf<State>(handle);
  auto token = std::make_unique<char>();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.streams.insert(token.get());
  *stream = token.release();
  return succeed();
}

infiniStatus_t HostDevice::streamDestroy(infiniopHandle_t handle, void *stream) const {
  State &s = stateOf<State>(handle);
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.streams.erase(stream))
    return fail(
        INFINI_STATUS_BAD_PARAM,
        "infiniopStreamDestroy: stream was not created by infiniopStreamCreate on this handle");
  delete static_cast<char *>(stream);
  return succeed();
}

infiniStatus_t HostDevice::streamSynchronize(infiniopHandle_t handle, void *stream) const {
  INFINIOP_CHECK(checkStream("infiniopStreamSynchronize", handle, stream));
  return succeed();
}

infiniStatus_t HostDevice::readForCheck(const char *, infiniopHandle_t, void *, const void *src,
                                        size_t bytes, void *host) const {
  if (bytes) std::memcpy(host, src, bytes);
  return INFINI_STATUS_SUCCESS;
}

}  // namespace infiniop::host
