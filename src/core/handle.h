// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <mutex>
#include <unordered_set>

#include "core/object.h"
#include "infiniop/handle.h"

namespace infiniop::opencl {
struct State;
}

// A handle names a device. On the CPU devices it also remembers what infiniopMalloc handed out
// and which streams exist, so that a wrong pointer is an error rather than heap corruption.
// An OpenCL handle owns an opencl::State instead: context, queues and the allocation table.
struct InfiniopHandle {
  InfiniopHandle(infiniDevice_t d, int id, infiniop::opencl::State *state)
      : device(d), device_id(id), opencl(state) {}
  ~InfiniopHandle() { header.magic = 0; }

  infiniop::ObjectHeader header{infiniop::ObjectHeader::kLive,
                                infiniop::ObjectHeader::handleKind()};
  infiniDevice_t device;
  int device_id;

  std::mutex mutex;
  std::unordered_set<void *> allocations;
  std::unordered_set<void *> streams;

  infiniop::opencl::State *opencl;  // non-NULL exactly when device is INFINI_DEVICE_OPENCL
};

namespace infiniop {
const char *deviceName(infiniDevice_t device);

// NULL_POINTER for a NULL handle, BAD_PARAM for anything that is not a live handle, each with a
// message starting with `where`.
infiniStatus_t checkHandle(const char *where, infiniopHandle_t handle);

// Copies `bytes` at device address `src` to `host` once the work queued before on `stream` is
// done: how a calculate call reads the data its checks depend on (group counts, index values)
// before it writes anything, as API.md allows. On the CPU devices a plain copy.
infiniStatus_t readForCheck(const char *where, infiniopHandle_t handle, void *stream,
                            const void *src, size_t bytes, void *host);
}  // namespace infiniop
