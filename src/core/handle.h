#pragma once

#include <mutex>
#include <unordered_set>

#include "infiniop/handle.h"

namespace infiniop::opencl {
struct State;
}

// A handle names a device. On the CPU devices it also remembers what infiniopMalloc handed out
// and which streams exist, so that a wrong pointer is an error rather than heap corruption.
// An OpenCL handle owns an opencl::State instead: context, queues and the allocation table.
struct InfiniopHandle {
  infiniDevice_t device;
  int device_id;

  std::mutex mutex;
  std::unordered_set<void *> allocations;
  std::unordered_set<void *> streams;

  infiniop::opencl::State *opencl;  // non-NULL exactly when device is INFINI_DEVICE_OPENCL
};

namespace infiniop {
const char *deviceName(infiniDevice_t device);
}
