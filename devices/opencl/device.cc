// SPDX-License-Identifier: Apache-2.0
// The opencl device (core/device.h): any OpenCL 1.2 driver, found at run time. Its kernels are
// the OpenCL C sources of kernels/, embedded at build time (opencl/sources.h).
#include "core/device.h"

#include "opencl/kernel_table.h"
#include "opencl/gather.h"
#include "opencl/runtime.h"

namespace infiniop::opencl {
namespace {

const RunnerFactory kKernels[] = {INFINIOP_KERNELS(INFINIOP_OPENCL_FACTORY_ENTRY)};

class OpenclDevice final : public Device {
 public:
  OpenclDevice() : Device(INFINI_DEVICE_OPENCL, "opencl", /*host_memory=*/false, kKernels) {}

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
};

}  // namespace

const Device &device() {
  static const OpenclDevice instance;
  return instance;
}

}  // namespace infiniop::opencl
