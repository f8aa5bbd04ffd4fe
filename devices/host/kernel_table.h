// SPDX-License-Identifier: Apache-2.0
// A host device's kernel table, from kernels/list.h: the device defines, in its own namespace, a
// function named after each kernel id with its family's HostKernel signature, then
//   INFINIOP_KERNELS(INFINIOP_HOST_KERNEL_DECLARE)
//   const RunnerFactory kKernels[] = {INFINIOP_KERNELS(INFINIOP_HOST_KERNEL_ENTRY)};
// so a new kernel or a new family changes neither this file nor the device's device.cc.
#pragma once

#include <memory>

#include "core/kernel.h"
#include "kernels/families.h"
#include "kernels/list.h"

namespace infiniop::host {

// The table entry of host kernel `kernel` of `Family`: the family's host runner around it.
template <class Family, typename Family::HostKernel *kernel>
infiniStatus_t runnerOf(const char *, infiniopHandle_t, const Plan &plan,
                        std::unique_ptr<Runner> *runner) {
  return Family::hostRunner(kernel, static_cast<const typename Family::Plan &>(plan), runner);
}

}  // namespace infiniop::host

#define INFINIOP_HOST_KERNEL_DECLARE(Family, name) ::infiniop::family::Family::HostKernel name;
#define INFINIOP_HOST_KERNEL_ENTRY(Family, name) \
  &::infiniop::host::runnerOf<::infiniop::family::Family, &name>,
