// SPDX-License-Identifier: Apache-2.0
// The one interface between the device-independent library and a device. A device is a folder
// under devices/ that defines one Device and one entry in devices/registry.cc; nothing under
// src/ names a device. The shape follows oneDNN's engine and ggml's backend tables: the core
// validates, plans and dispatches; a device owns memory, streams and the runners of the two
// frameworks, and says which operators it has.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "infinicore.h"
#include "infiniop/handle.h"

namespace infiniop {

enum class KernelId : int;  // ops/kernels.h
namespace elementwise {
struct Plan;
class Runner;
}  // namespace elementwise
namespace moe {
struct ForwardPlan;
struct GradPlan;
struct InitPlan;
struct RouterPlan;
class ForwardRunner;
class GradRunner;
class InitRunner;
class RouterRunner;
}  // namespace moe

// What a handle of a device owns (a context, queues, allocation tables): made by Device::open,
// destroyed with the handle, which also destroys everything allocated through it.
class DeviceState {
 public:
  virtual ~DeviceState() = default;
};

class Device {
 public:
  Device(infiniDevice_t type, const char *name, bool host_memory)
      : type(type), name(name), host_memory(host_memory) {}
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

  // Whether the device runs the operator: descriptors of others are DEVICE_TYPE_NOT_SUPPORTED.
  virtual bool supports(KernelId id) const = 0;
  // The runners of the two frameworks, made once at descriptor creation for an operator the
  // device supports (`op` starts every message).
  virtual infiniStatus_t elementwiseRunner(const char *op, infiniopHandle_t handle, KernelId id,
                                           const elementwise::Plan &plan,
                                           std::unique_ptr<elementwise::Runner> *runner) const = 0;
  virtual infiniStatus_t moeForwardRunner(const char *op, infiniopHandle_t handle,
                                          const moe::ForwardPlan &plan,
                                          std::unique_ptr<moe::ForwardRunner> *runner) const = 0;
  // These two also say how many bytes of workspace each call's runner needs. (MoeInitRoutingV2Grad
  // runs on moeForwardRunner.)
  virtual infiniStatus_t moeGradRunner(const char *op, infiniopHandle_t handle,
                                       const moe::GradPlan &plan, size_t *workspace_size,
                                       std::unique_ptr<moe::GradRunner> *runner) const = 0;
  virtual infiniStatus_t moeInitRunner(const char *op, infiniopHandle_t handle,
                                       const moe::InitPlan &plan, size_t *workspace_size,
                                       std::unique_ptr<moe::InitRunner> *runner) const = 0;
  // The four router operators (MoeGatingTopKSoftmax, MoeGatingTopK and their grads: plan.kind).
  virtual infiniStatus_t moeGatingRunner(const char *op, infiniopHandle_t handle,
                                         const moe::RouterPlan &plan, size_t *workspace_size,
                                         std::unique_ptr<moe::RouterRunner> *runner) const = 0;
};

// The registry (devices/registry.cc, the only file that knows which devices are built).
// The device of `type` in this build; NULL otherwise, with *why saying so (naming the CMake
// option that left it out).
const Device *findDevice(int type, std::string *why);
// Every device of this build, in infiniDevice_t order; `count` of them.
const Device *const *builtDevices(int *count);

}  // namespace infiniop
