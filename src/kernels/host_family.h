// SPDX-License-Identifier: Apache-2.0
// What every family gives host devices (cpu, cpu_reference): a host kernel type, a synchronous
// function of host memory that a device defines under each kernel id's name, and hostRunner, the
// family's runner around one (host/kernel_table.h makes the table entries from them).
#pragma once

#include <memory>

#include "core/kernel.h"

// Declares family struct `Name` with plan type `PlanType` and host kernels
// void(const PlanType &plan, <the call's arguments...>).
#define INFINIOP_HOST_FAMILY(Name, PlanType, ...)                                  \
  struct Name {                                                                    \
    using Plan = PlanType;                                                         \
    using HostKernel = void(const Plan &plan, __VA_ARGS__);                        \
    static infiniStatus_t hostRunner(HostKernel *kernel, const Plan &plan,         \
                                     std::unique_ptr<::infiniop::Runner> *runner); \
  }

namespace infiniop::family {

// The base of a family's host runner: the kernel and a copy of the plan, which run() passes it.
template <class FamilyRunner, class Family>
class HostRunnerBase : public FamilyRunner {
 public:
  HostRunnerBase(typename Family::HostKernel *kernel, const typename Family::Plan &plan)
      : kernel_(kernel), plan_(plan) {}

 protected:
  typename Family::HostKernel *const kernel_;
  const typename Family::Plan plan_;
};

// The host runner of a family whose run(data, stream) only calls the kernel on the plan.
template <class FamilyRunner, class Family, class Data>
class HostCallRunner final : public HostRunnerBase<FamilyRunner, Family> {
 public:
  using HostRunnerBase<FamilyRunner, Family>::HostRunnerBase;
  infiniStatus_t run(const Data &data, void *) const override {
    this->kernel_(this->plan_, data);
    return INFINI_STATUS_SUCCESS;
  }
};

}  // namespace infiniop::family
