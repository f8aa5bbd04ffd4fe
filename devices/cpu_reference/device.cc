// SPDX-License-Identifier: Apache-2.0
// The cpu_reference device (core/device.h): plain scalar C++ on one thread, the oracle every
// other device is tested against.
#include "host/host_device.h"
#include "host/kernel_table.h"

namespace infiniop::cpu_reference {

INFINIOP_KERNELS(INFINIOP_HOST_KERNEL_DECLARE)

namespace {
const RunnerFactory kKernels[] = {INFINIOP_KERNELS(INFINIOP_HOST_KERNEL_ENTRY)};
}  // namespace

const Device &device() {
  static const host::HostDevice instance(INFINI_DEVICE_CPU_REFERENCE, "cpu_reference", kKernels);
  return instance;
}

}  // namespace infiniop::cpu_reference
