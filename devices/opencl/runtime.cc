// SPDX-License-Identifier: Apache-2.0
// Device memory, copies and streams of an OpenCL handle.
//
// OpenCL 1.2 buffers have no addresses, yet API.md's device pointers must support arithmetic
// (views at offsets). infiniopMalloc therefore hands out a fake base address from a range that
// no host pointer occupies, and a table maps [base, base + size) back to (cl_mem, offset). The
// addresses are never dereferenced; the operators turn them into buffer and offset with resolve().
#include <atomic>
#include <iterator>
#include <string>

#include "core/error.h"
#include "core/handle.h"
#include "opencl/error.h"
#include "opencl/runtime.h"

namespace infiniop::opencl {
namespace {

constexpr uintptr_t kPage = 4096;
// The upper half of the address space (0x9000... on 64 bits) holds no user-space host pointer,
// so a host pointer passed as a device pointer never resolves by accident.
constexpr uintptr_t kFirstBase = (UINTPTR_MAX / 2 + 1) + (UINTPTR_MAX / 16 + 1);
// Process-wide, so that a pointer from another handle is unknown here rather than aliased.
std::atomic<uintptr_t> g_next_base{kFirstBase};

// Reserves a page-aligned range for `size` bytes followed by a gap of at least one page, so the
// end of one allocation is never the base of the next.
bool reserve(size_t size, uintptr_t *base) {
  const uintptr_t pages = size / kPage + 2;  // the data rounded up, plus the gap
  if (pages > (UINTPTR_MAX - kFirstBase) / kPage) return false;
  uintptr_t current = g_next_base.load();
  do {
    if (current > UINTPTR_MAX - pages * kPage) return false;
  } while (!g_next_base.compare_exchange_weak(current, current + pages * kPage));
  *base = current;
  return true;
}

}  // namespace

infiniStatus_t resolve(const char *where, infiniopHandle_t handle, const void *ptr, size_t bytes,
                       Resolved *resolved) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  State &s = stateOf<State>(handle);
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.allocations.upper_bound(address);  // the first base above `address`
  if (it == s.allocations.begin() || address - std::prev(it)->first > std::prev(it)->second.size)
    return fail(INFINI_STATUS_BAD_PARAM,
                std::string(where) +
                    ": pointer is not inside memory from infiniopMalloc on "
                    "this handle");
  --it;
  const size_t offset = address - it->first;
  if (bytes > it->second.size - offset)
    return fail(INFINI_STATUS_BAD_PARAM, std::string(where) + ": " + std::to_string(bytes) +
                                             " bytes at offset " + std::to_string(offset) +
                                             " run past the end of an allocation of " +
                                             std::to_string(it->second.size) + " bytes");
  *resolved = {it->second.mem, offset};
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t queueOf(const char *where, infiniopHandle_t handle, void *stream,
                       cl_command_queue *queue) {
  State &s = stateOf<State>(handle);
  if (!stream) {
    *queue = s.queue;
    return INFINI_STATUS_SUCCESS;
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  const auto it = s.streams.find(static_cast<cl_command_queue>(stream));
  if (it == s.streams.end())
    return fail(
        INFINI_STATUS_BAD_PARAM,
        std::string(where) + ": stream was not created by infiniopStreamCreate on this handle");
  *queue = *it;
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t allocate(infiniopHandle_t handle, void **ptr, size_t size) {
  constexpr const char *kWhere = "infiniopMalloc";
  State &s = stateOf<State>(handle);
  if (size > s.max_alloc)
    return fail(INFINI_STATUS_BAD_PARAM, std::string(kWhere) + ": " + std::to_string(size) +
                                             " bytes exceed the device's largest allocation (" +
                                             std::to_string(s.max_alloc) + " bytes)");
  uintptr_t base = 0;
  if (!reserve(size, &base))
    return fail(INFINI_STATUS_BAD_PARAM, std::string(kWhere) + ": device address space exhausted");
  // Size 0 gets a unique address and no buffer: OpenCL cannot allocate 0 bytes.
  cl_mem mem = nullptr;
  if (size) {
    cl_int code = CL_SUCCESS;
    mem = clCreateBuffer(s.context, CL_MEM_READ_WRITE, size, nullptr, &code);
    INFINIOP_CL_CHECK(kWhere, "clCreateBuffer", code);
  }
  try {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.allocations.emplace(base, Allocation{mem, size});
  } catch (...) {
    if (mem) clReleaseMemObject(mem);
    throw;
  }
  *ptr = reinterpret_cast<void *>(base);
  return succeed();
}

infiniStatus_t deallocate(infiniopHandle_t handle, void *ptr) {
  State &s = stateOf<State>(handle);
  std::lock_guard<std::mutex> lock(s.mutex);
  const auto it = s.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == s.allocations.end())
    return fail(INFINI_STATUS_BAD_PARAM,
                "infiniopFree: pointer is not the start of memory "
                "returned by infiniopMalloc on this handle");
  // OpenCL keeps the buffer alive until the commands already enqueued on it have finished.
  if (it->second.mem) clReleaseMemObject(it->second.mem);
  s.allocations.erase(it);
  return succeed();
}

// Both copies block until done: the host buffer may be reused or freed as soon as they return,
// as with cudaMemcpy. Operators (later) are the asynchronous part.
infiniStatus_t memcpyHostToDevice(infiniopHandle_t handle, void *dst, const void *src, size_t size,
                                  void *stream) {
  constexpr const char *kWhere = "infiniopMemcpyHostToDevice";
  cl_command_queue queue = nullptr;
  INFINIOP_CHECK(queueOf(kWhere, handle, stream, &queue));
  if (!size) return succeed();
  Resolved to{};
  INFINIOP_CHECK(resolve(kWhere, handle, dst, size, &to));
  INFINIOP_CL_CHECK(
      kWhere, "clEnqueueWriteBuffer",
      clEnqueueWriteBuffer(queue, to.mem, CL_TRUE, to.offset, size, src, 0, nullptr, nullptr));
  return succeed();
}

infiniStatus_t memcpyDeviceToHost(infiniopHandle_t handle, void *dst, const void *src, size_t size,
                                  void *stream) {
  constexpr const char *kWhere = "infiniopMemcpyDeviceToHost";
  cl_command_queue queue = nullptr;
  INFINIOP_CHECK(queueOf(kWhere, handle, stream, &queue));
  if (!size) return succeed();
  Resolved from{};
  INFINIOP_CHECK(resolve(kWhere, handle, src, size, &from));
  INFINIOP_CL_CHECK(
      kWhere, "clEnqueueReadBuffer",
      clEnqueueReadBuffer(queue, from.mem, CL_TRUE, from.offset, size, dst, 0, nullptr, nullptr));
  return succeed();
}

infiniStatus_t streamCreate(infiniopHandle_t handle, void **stream) {
  State &s = stateOf<State>(handle);
  cl_int code = CL_SUCCESS;
  cl_command_queue queue = clCreateCommandQueue(s.context, s.device, 0, &code);
  INFINIOP_CL_CHECK("infiniopStreamCreate", "clCreateCommandQueue", code);
  try {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.streams.insert(queue);
  } catch (...) {
    clReleaseCommandQueue(queue);
    throw;
  }
  *stream = queue;
  return succeed();
}

infiniStatus_t streamDestroy(infiniopHandle_t handle, void *stream) {
  State &s = stateOf<State>(handle);
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.streams.erase(static_cast<cl_command_queue>(stream)))
    return fail(
        INFINI_STATUS_BAD_PARAM,
        "infiniopStreamDestroy: stream was not created by infiniopStreamCreate on this handle");
  // The queue flushes and lives on until its enqueued work has finished.
  clReleaseCommandQueue(static_cast<cl_command_queue>(stream));
  return succeed();
}

infiniStatus_t streamSynchronize(infiniopHandle_t handle, void *stream) {
  constexpr const char *kWhere = "infiniopStreamSynchronize";
  cl_command_queue queue = nullptr;
  INFINIOP_CHECK(queueOf(kWhere, handle, stream, &queue));
  INFINIOP_CL_CHECK(kWhere, "clFinish", clFinish(queue));
  return succeed();
}

}  // namespace infiniop::opencl
