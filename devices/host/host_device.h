// SPDX-License-Identifier: Apache-2.0
// What the CPU devices (cpu, cpu_reference) share: device memory is host memory, every call is
// synchronous, and a device is its kernel table. A handle remembers what infiniopMalloc handed
// out and which streams exist, so that a wrong pointer is an error rather than heap corruption.
#pragma once

#include "core/device.h"
#include "elementwise/plan.h"
#include "ops/kernels.h"
#include "ops/moe_finalize_routing.h"
#include "ops/moe_gating.h"
#include "ops/moe_init_routing.h"

namespace infiniop::host {

// A host device's kernels; nullptr where it has none.
struct Kernels {
  elementwise::Kernel elementwise[kElementwiseKernelCount];  // by KernelId
  moe::ForwardKernel moe_forward;
  moe::GradKernel moe_grad;
  moe::InitKernel moe_init;
  // The grad kernel inverts expanded_row_idx in the call's workspace
  // (gather::inverseWorkspaceBytes); otherwise it needs none.
  bool moe_grad_inverts;
  moe::RouterKernel router;  // the four router operators
};

class HostDevice : public Device {
 public:
  HostDevice(infiniDevice_t type, const char *name, const Kernels &kernels)
      : Device(type, name, /*host_memory=*/true), kernels_(kernels) {}

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

  bool supports(KernelId id) const override;
  infiniStatus_t elementwiseRunner(const char *op, infiniopHandle_t handle, KernelId id,
                                   const elementwise::Plan &plan,
                                   std::unique_ptr<elementwise::Runner> *runner) const override;
  infiniStatus_t moeForwardRunner(const char *op, infiniopHandle_t handle,
                                  const moe::ForwardPlan &plan,
                                  std::unique_ptr<moe::ForwardRunner> *runner) const override;
  infiniStatus_t moeGradRunner(const char *op, infiniopHandle_t handle, const moe::GradPlan &plan,
                               size_t *workspace_size,
                               std::unique_ptr<moe::GradRunner> *runner) const override;
  infiniStatus_t moeInitRunner(const char *op, infiniopHandle_t handle, const moe::InitPlan &plan,
                               size_t *workspace_size,
                               std::unique_ptr<moe::InitRunner> *runner) const override;
  infiniStatus_t moeGatingRunner(const char *op, infiniopHandle_t handle,
                                 const moe::RouterPlan &plan, size_t *workspace_size,
                                 std::unique_ptr<moe::RouterRunner> *runner) const override;

 private:
  const Kernels &kernels_;
};

}  // namespace infiniop::host
