// SPDX-License-Identifier: Apache-2.0
// The one interface between the device-independent library and a device. A device is a folder
// under devices/ that defines one Device and one entry in devices/registry.cc; nothing under
// src/ names a device. The shape follows oneDNN's engine and ggml's backend tables: the core
// validates, plans and dispatches; a device owns memory and streams, and its kernel table (one
// runner factory per KernelId, core/kernel.h) says which operators it has and how it runs them.
// Adding an operator family changes nothing here.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/kernel.h"
#include "core/error.h"
#include "infinicore.h"
#include "infiniop/handle.h"

namespace infiniop {

// What a handle of a device owns (a context, queues, allocation tables): made by Device::open,
// destroyed with the handle, which also destroys everything allocated through it.
class DeviceState {
 public:
  virtual ~DeviceState() = default;
};

class Device {
 public:
  // `kernels`: one entry per KernelId (kernels/list.h), nullptr where the device has no kernel.
  Device(infiniDevice_t type, const char *name, bool host_memory, const RunnerFactory *kernels)
      : type(type), name(name), host_memory(host_memory), kernels_(kernels) {}
  virtual ~Device() = default;

  const infiniDevice_t type;
  const char *const name;  // "cpu", ...: messages, infiniopGetDeviceInfo
  // Device pointers are host pointers: the host reads data-dependent checks' data in place and
  // the Python binding needs no staging.
  const bool host_memory;

  // How many devices of this type a handle can open here (device ids [0, count)); 0 when none
  // (e.g. no driver). Never fails.
  virtual int count() const { return 1; }
  // The state of device `device_id` for a new handle; DEVICE_NOT_FOUND for an id out of range.
  // `where` starts every message.
  virtual infiniStatus_t open(const char *where, int device_id,
                              std::unique_ptr<DeviceState> *state) const = 0;

  // API.md's runtime functions. The core has checked the handle (of this device) and the
  // out-pointers; `ptr` of free is not NULL.
  virtual infiniStatus_t malloc(infiniopHandle_t handle, void **ptr, size_t size) const = 0;
  virtual infiniStatus_t free(infiniopHandle_t handle, void *ptr) const = 0;
  virtual infiniStatus_t memcpyHostToDevice(infiniopHandle_t handle, void *dst, const void *src,
                                            size_t size, void *stream) const = 0;
  virtual infiniStatus_t memcpyDeviceToHost(infiniopHandle_t handle, void *dst, const void *src,
                                            size_t size, void *stream) const = 0;
  virtual infiniStatus_t streamCreate(infiniopHandle_t handle, void **stream) const = 0;
  virtual infiniStatus_t streamDestroy(infiniopHandle_t handle, void *stream) const = 0;
  virtual infiniStatus_t streamSynchronize(infiniopHandle_t handle, void *stream) const = 0;
  // Copies `bytes` at device address `src` to `host` once the work queued before on `stream` is
  // done: how a calculate call reads the data its checks depend on (group counts, index values)
  // before it writes anything, as API.md allows.
  virtual infiniStatus_t readForCheck(const char *where, infiniopHandle_t handle, void *stream,
                                      const void *src, size_t bytes, void *host) const = 0;

  // Whether the device runs the kernel: descriptors of others are DEVICE_TYPE_NOT_SUPPORTED.
  bool supports(KernelId kernel) const { return kernels_[static_cast<int>(kernel)] != nullptr; }
  // The runner of a plan of a supported kernel, made once at descriptor creation, as the
  // family's runner interface (`FamilyRunner`, which the table's entry for plan.kernel makes).
  template <class FamilyRunner>
  infiniStatus_t runner(const char *op, infiniopHandle_t handle, const Plan &plan,
                        std::unique_ptr<FamilyRunner> *result) const {
    std::unique_ptr<Runner> made;
    INFINIOP_CHECK(kernels_[static_cast<int>(plan.kernel)](op, handle, plan, &made));
    auto *family = dynamic_cast<FamilyRunner *>(made.get());
    if (!family)
      return fail(
          INFINI_STATUS_INTERNAL_ERROR,
          std::string(op) + ": " + name + "'s kernel table gave a runner of another family");
    made.release();
    result->reset(family);
    return INFINI_STATUS_SUCCESS;
  }

 private:
  const RunnerFactory *const kernels_;
};

// The registry (devices/registry.cc, the only file that knows which devices are built).
// The device of `type` in this build; NULL otherwise, with *why saying so (naming the CMake
// option that left it out).
const Device *findDevice(int type, std::string *why);
// Every device of this build, in infiniDevice_t order; `count` of them.
const Device *const *builtDevices(int *count);

}  // namespace infiniop
