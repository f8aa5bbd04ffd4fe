// SPDX-License-Identifier: Apache-2.0
// The opencl device (core/device.h): any OpenCL 1.2 driver, found at run time. Its kernels are
// the OpenCL C sources of kernels/, embedded at build time (opencl/sources.h).
#include "core/device.h"

#include "gather/inverse.h"
#include "opencl/elementwise.h"
#include "opencl/moe_finalize_routing.h"
#include "opencl/moe_gating.h"
#include "opencl/moe_init_routing.h"
#include "opencl/program.h"
#include "opencl/runtime.h"
#include "opencl/sources.h"
#include "ops/kernels.h"

namespace infiniop::opencl {
namespace {

// The functor source of each elementwise kernel, by KernelId: kernels/<name>.cl.
#define INFINIOP_OPENCL_FUNCTOR(name) sources::name,
constexpr const char *kFunctors[] = {INFINIOP_ELEMENTWISE_OPS(INFINIOP_OPENCL_FUNCTOR)};
#undef INFINIOP_OPENCL_FUNCTOR

class OpenclDevice final : public Device {
 public:
  OpenclDevice() : Device(INFINI_DEVICE_OPENCL, "opencl", /*host_memory=*/false) {}

  int count() const override { return deviceCount(); }
  infiniStatus_t open(const char *, int device_id,
                      std::unique_ptr<DeviceState> *state) const override {
    return createState(device_id, state);
  }

  infiniStatus_t malloc(infiniopHandle_t handle, void **ptr, size_t size) const override {
    return allocate(handle, ptr, size);
  }
  infiniStatus_t free(infiniopHandle_t handle, void *ptr) const override {
    return deallocate(handle, ptr);
  }
  infiniStatus_t memcpyHostToDevice(infiniopHandle_t handle, void *dst, const void *src,
                                    size_t size, void *stream) const override {
    return opencl::memcpyHostToDevice(handle, dst, src, size, stream);
  }
  infiniStatus_t memcpyDeviceToHost(infiniopHandle_t handle, void *dst, const void *src,
                                    size_t size, void *stream) const override {
    return opencl::memcpyDeviceToHost(handle, dst, src, size, stream);
  }
  infiniStatus_t streamCreate(infiniopHandle_t handle, void **stream) const override {
    return opencl::streamCreate(handle, stream);
  }
  infiniStatus_t streamDestroy(infiniopHandle_t handle, void *stream) const override {
    return opencl::streamDestroy(handle, stream);
  }
  infiniStatus_t streamSynchronize(infiniopHandle_t handle, void *stream) const override {
    return opencl::streamSynchronize(handle, stream);
  }
  infiniStatus_t readForCheck(const char *where, infiniopHandle_t handle, void *stream,
                              const void *src, size_t bytes, void *host) const override {
    cl_command_queue queue = nullptr;
    INFINIOP_CHECK(queueOf(where, handle, stream, &queue));
    return opencl::readForCheck(where, handle, queue, src, bytes, host);
  }

  bool supports(KernelId) const override { return true; }  // every operator
  infiniStatus_t elementwiseRunner(const char *op, infiniopHandle_t handle, KernelId id,
                                   const elementwise::Plan &plan,
                                   std::unique_ptr<elementwise::Runner> *runner) const override {
    return makeElementwiseRunner(op, handle, kFunctors[static_cast<int>(id)], plan, runner);
  }
  infiniStatus_t moeForwardRunner(const char *op, infiniopHandle_t handle,
                                  const moe::ForwardPlan &plan,
                                  std::unique_ptr<moe::ForwardRunner> *runner) const override {
    return makeMoeForwardRunner(op, handle, plan, runner);
  }
  infiniStatus_t moeGradRunner(const char *, infiniopHandle_t handle, const moe::GradPlan &plan,
                               size_t *workspace_size,
                               std::unique_ptr<moe::GradRunner> *runner) const override {
    // The host inverts expanded_row_idx and uploads the inversion to the workspace.
    *workspace_size =
        gather::inverseWorkspaceBytes(plan.grad_expanded_x.rows, plan.tokens * plan.topk);
    return makeMoeGradRunner(handle, plan, runner);
  }
  infiniStatus_t moeInitRunner(const char *, infiniopHandle_t handle, const moe::InitPlan &plan,
                               size_t *workspace_size,
                               std::unique_ptr<moe::InitRunner> *runner) const override {
    *workspace_size = moeInitWorkspaceBytes(plan);
    return makeMoeInitRunner(handle, plan, runner);
  }
  infiniStatus_t moeGatingRunner(const char *op, infiniopHandle_t handle,
                                 const moe::RouterPlan &plan, size_t *workspace_size,
                                 std::unique_ptr<moe::RouterRunner> *runner) const override {
    // The forwards keep each row's p (and group scores) in the workspace.
    *workspace_size = moeGatingWorkspaceBytes(plan);
    return makeMoeGatingRunner(op, handle, plan, runner);
  }
};

}  // namespace

const Device &device() {
  static const OpenclDevice instance;
  return instance;
}

}  // namespace infiniop::opencl
