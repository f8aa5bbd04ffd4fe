// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <memory>

#include "core/device.h"
#include "core/object.h"
#include "infiniop/handle.h"

// A handle is a device and the state the device keeps for it (core/device.h): allocations,
// streams, contexts. Destroying it releases them all.
struct InfiniopHandle {
  InfiniopHandle(const infiniop::Device *d, int id, std::unique_ptr<infiniop::DeviceState> s)
      : device(d), device_id(id), state(std::move(s)) {}
  ~InfiniopHandle() { header.magic = 0; }

  infiniop::ObjectHeader header{infiniop::ObjectHeader::kLive,
                                infiniop::ObjectHeader::handleKind()};
  const infiniop::Device *const device;
  const int device_id;
  const std::unique_ptr<infiniop::DeviceState> state;
  // infiniopFpmathMode_t for the descriptors created from now on; atomic: a thread may set it
  // while another creates descriptors.
  std::atomic<int> fpmath_mode{INFINIOP_FPMATH_STRICT};
};

namespace infiniop {

// NULL_POINTER for a NULL handle, BAD_PARAM for anything that is not a live handle, each with a
// message starting with `where`.
infiniStatus_t checkHandle(const char *where, infiniopHandle_t handle);

// The state a device made for `handle`, as the device's own type.
template <class State>
State &stateOf(infiniopHandle_t handle) {
  return static_cast<State &>(*handle->state);
}

// Device::readForCheck of the handle's device.
inline infiniStatus_t readForCheck(const char *where, infiniopHandle_t handle, void *stream,
                                   const void *src, size_t bytes, void *host) {
  return handle->device->readForCheck(where, handle, stream, src, bytes, host);
}

}  // namespace infiniop
