// SPDX-License-Identifier: Apache-2.0
// The OpenCL device's runtime: device choice, the context and queues of a handle, and the
// allocation table that gives OpenCL 1.2 buffers (no SVM) addresses that support arithmetic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

#include "core/device.h"
#include "infiniop/handle.h"
#include "opencl/cl.h"

namespace infiniop::opencl {

// One infiniopMalloc: `size` bytes at a fake base address. `mem` is NULL for size 0, which
// OpenCL cannot allocate but the API allows (as on the CPU devices).
struct Allocation {
  cl_mem mem;
  size_t size;
};

// What an OpenCL handle owns. Released in reverse order of creation, after every queue is done.
struct State final : DeviceState {
  ~State() override;

  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;  // the default, in-order queue: the NULL stream
  cl_ulong max_alloc = 0;            // CL_DEVICE_MAX_MEM_ALLOC_SIZE

  std::mutex mutex;                             // guards the two tables below
  std::map<uintptr_t, Allocation> allocations;  // by fake base address
  std::unordered_set<cl_command_queue> streams;

  std::mutex program_mutex;                    // held while a program builds
  std::map<std::string, cl_program> programs;  // by sources and options (opencl/program.cc)
};

// Picks device `device_id` (or $INFINIOP_OPENCL_DEVICE) among all platforms' devices and
// creates its context and default queue.
infiniStatus_t createState(int device_id, std::unique_ptr<DeviceState> *state);
// How many devices all platforms have; 0 without a driver.
int deviceCount();

// A device address resolved to its buffer: `bytes` from `offset` lie inside `mem`.
struct Resolved {
  cl_mem mem;
  size_t offset;
};
// Resolves `bytes` bytes at `ptr`, which may point anywhere inside an allocation of `handle`.
// BAD_PARAM for an unknown pointer or a range that runs past its allocation's end.
infiniStatus_t resolve(const char *where, infiniopHandle_t handle, const void *ptr, size_t bytes,
                       Resolved *resolved);
// The queue of `stream` (NULL: the default queue); BAD_PARAM for a stream not made on `handle`.
infiniStatus_t queueOf(const char *where, infiniopHandle_t handle, void *stream,
                       cl_command_queue *queue);

// The runtime functions of API.md for an OpenCL handle (already checked to be non-NULL).
infiniStatus_t allocate(infiniopHandle_t handle, void **ptr, size_t size);
infiniStatus_t deallocate(infiniopHandle_t handle, void *ptr);
infiniStatus_t memcpyHostToDevice(infiniopHandle_t handle, void *dst, const void *src, size_t size,
                                  void *stream);
infiniStatus_t memcpyDeviceToHost(infiniopHandle_t handle, void *dst, const void *src, size_t size,
                                  void *stream);
infiniStatus_t streamCreate(infiniopHandle_t handle, void **stream);
infiniStatus_t streamDestroy(infiniopHandle_t handle, void *stream);
infiniStatus_t streamSynchronize(infiniopHandle_t handle, void *stream);

}  // namespace infiniop::opencl
