// SPDX-License-Identifier: Apache-2.0
// The cpu device (core/device.h): Highway SIMD with runtime dispatch, OpenMP threads.
#include "cpu/isa.h"
#include "host/host_device.h"

namespace infiniop::cpu {

INFINIOP_ELEMENTWISE_OPS(INFINIOP_DECLARE_KERNEL)
void moeFinalizeRouting(const moe::ForwardPlan &plan, const moe::ForwardData &data);
void moeFinalizeRoutingGrad(const moe::GradPlan &plan, const moe::GradData &data);
void moeInitRouting(const moe::InitPlan &plan, const moe::InitData &data,
                    const moe::InitRouting &routing);
void moeGating(const moe::RouterPlan &plan, const moe::RouterData &data);

namespace {
#define INFINIOP_CPU_ENTRY(name) &name,
const host::Kernels kKernels = {{INFINIOP_ELEMENTWISE_OPS(INFINIOP_CPU_ENTRY)},
                                moeFinalizeRouting,
                                moeFinalizeRoutingGrad,
                                moeInitRouting,
                                /*moe_grad_inverts=*/true,
                                moeGating};
#undef INFINIOP_CPU_ENTRY

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
