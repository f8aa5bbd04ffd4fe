// SPDX-License-Identifier: Apache-2.0
// The cpu device (core/device.h): Highway SIMD with runtime dispatch, OpenMP threads.
#include "cpu/isa.h"
#include "host/host_device.h"
#include "host/kernel_table.h"

namespace infiniop::cpu {

INFINIOP_KERNELS(INFINIOP_HOST_KERNEL_DECLARE)

namespace {
const RunnerFactory kKernels[] = {INFINIOP_KERNELS(INFINIOP_HOST_KERNEL_ENTRY)};

class CpuDevice final : public host::HostDevice {
 public:
  CpuDevice() : HostDevice(INFINI_DEVICE_CPU, "cpu", kKernels) {}
  // No handle while INFINIOP_CPU_ISA names no target: nothing runs at a target not asked for.
  infiniStatus_t open(const char *where, int device_id,
                      std::unique_ptr<DeviceState> *state) const override {
    INFINIOP_CHECK(HostDevice::open(where, device_id, state));
    return checkIsaCap(where);
  }
};
}  // namespace

const Device &device() {
  static const CpuDevice instance;
  return instance;
}

}  // namespace infiniop::cpu
