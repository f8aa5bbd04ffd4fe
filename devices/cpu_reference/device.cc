// SPDX-License-Identifier: Apache-2.0
// The cpu_reference device (core/device.h): plain scalar C++ on one thread, the oracle every
// other device is tested against.
#include "host/host_device.h"

namespace infiniop::cpu_reference {

INFINIOP_ELEMENTWISE_OPS(INFINIOP_DECLARE_KERNEL)
void moeFinalizeRouting(const moe::ForwardPlan &plan, const moe::ForwardData &data);
void moeFinalizeRoutingGrad(const moe::GradPlan &plan, const moe::GradData &data);
void moeInitRouting(const moe::InitPlan &plan, const moe::InitData &data,
                    const moe::InitRouting &routing);
void moeGating(const moe::RouterPlan &plan, const moe::RouterData &data);

namespace {
#define INFINIOP_REFERENCE_ENTRY(name) &name,
const host::Kernels kKernels = {{INFINIOP_ELEMENTWISE_OPS(INFINIOP_REFERENCE_ENTRY)},
                                moeFinalizeRouting,
                                moeFinalizeRoutingGrad,
                                moeInitRouting,
                                /*moe_grad_inverts=*/false,
                                moeGating};
#undef INFINIOP_REFERENCE_ENTRY
}  // namespace

const Device &device() {
  static const host::HostDevice instance(INFINI_DEVICE_CPU_REFERENCE, "cpu_reference", kKernels);
  return instance;
}

}  // namespace infiniop::cpu_reference
