// SPDX-License-Identifier: Apache-2.0
// What the CPU devices (cpu, cpu_reference) share: device memory is host memory, every call is
// synchronous, and a device is its kernel table (host/kernel_table.h). A handle remembers what
// infiniopMalloc handed out and which streams exist, so that a wrong pointer is an error rather
// than heap corruption.
#pragma once

#include "core/device.h"

namespace infiniop::host {

class HostDevice : public Device {
 public:
  // `kernels`: the device's kernel table (host/kernel_table.h).
  HostDevice(infiniDevice_t type, const char *name, const RunnerFactory *kernels)
      : Device(type, name, /*host_memory=*/true, kernels) {}

  // Device 0 only: there is one host.
  infiniStatus_t open(const char *where, int device_id,
                      std::unique_ptr<DeviceState> *state) const override;

  infiniStatus_t malloc(infiniopHandle_t handle, void **ptr, size_t size) const override;
  infiniStatus_t free(infiniopHandle_t handle, void *ptr) const override;
  infiniStatus_t memcpyHostToDevice(infiniopHandle_t handle, void *dst, const void *src,
                                    size_t size, void *stream) const override;
  infiniStatus_t memcpyDeviceToHost(infiniopHandle_t handle, void *dst, const void *src,
                                    size_t size, void *stream) const override;
  infiniStatus_t streamCreate(infiniopHandle_t handle, void **stream) const override;
  infiniStatus_t streamDestroy(infiniopHandle_t handle, void *stream) const override;
  infiniStatus_t streamSynchronize(infiniopHandle_t handle, void *stream) const override;
  infiniStatus_t readForCheck(const char *where, infiniopHandle_t handle, void *stream,
                              const void *src, size_t bytes, void *host) const override;
};

}  // namespace infiniop::host
