// SPDX-License-Identifier: Apache-2.0
// How a host device runs the MoE families' kernels: synchronously, on host memory (the index
// data is read in place, so the host copy that run() is given is not needed).
#include <memory>

#include "gather/inverse.h"
#include "ops/moe_finalize_routing.h"
#include "ops/moe_gating.h"
#include "ops/moe_init_routing.h"

namespace infiniop::family {
namespace {

// MoeFinalizeRoutingV2's forward and grad (the grad's workspace: the Inverse, for the kernels
// that use it).
template <class FamilyRunner, class Family, class Data>
class GatherRunner final : public HostRunnerBase<FamilyRunner, Family> {
 public:
  GatherRunner(typename Family::HostKernel *kernel, const typename Family::Plan &plan,
               size_t workspace_size)
      : HostRunnerBase<FamilyRunner, Family>(kernel, plan), workspace_size_(workspace_size) {}
  size_t workspaceSize() const override { return workspace_size_; }
  infiniStatus_t run(const Data &data, const void *, void *) const override {
    this->kernel_(this->plan_, data);
    return INFINI_STATUS_SUCCESS;
  }

 private:
  size_t workspace_size_;
};

// MoeInitRoutingV2: the device's rows, then the index outputs from the host's sort (in that
// order: a kernel whose scratch cannot be allocated fails before it writes, and then nothing of
// the call is written).
class InitRunner final : public HostRunnerBase<moe::InitRunner, MoeInit> {
 public:
  using HostRunnerBase::HostRunnerBase;
  infiniStatus_t run(const moe::InitData &data, const moe::InitRouting &routing,
                     void *) const override {
    kernel_(plan_, data, routing);
    moe::writeInitIndices(plan_, data, routing);
    return INFINI_STATUS_SUCCESS;
  }
};

}  // namespace

infiniStatus_t MoeForward::hostRunner(HostKernel *kernel, const Plan &plan,
                                      std::unique_ptr<Runner> *runner) {
  *runner = std::make_unique<GatherRunner<moe::ForwardRunner, MoeForward, moe::ForwardData>>(
      kernel, plan, 0);
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t MoeGrad::hostRunner(HostKernel *kernel, const Plan &plan,
                                   std::unique_ptr<Runner> *runner) {
  const size_t inverse_bytes =
      gather::inverseWorkspaceBytes(plan.grad_expanded_x.rows, plan.tokens * plan.topk);
  *runner = std::make_unique<GatherRunner<moe::GradRunner, MoeGrad, moe::GradData>>(kernel, plan,
                                                                                    inverse_bytes);
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t MoeInit::hostRunner(HostKernel *kernel, const Plan &plan,
                                   std::unique_ptr<Runner> *runner) {
  *runner = std::make_unique<InitRunner>(kernel, plan);
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t MoeRouter::hostRunner(HostKernel *kernel, const Plan &plan,
                                     std::unique_ptr<Runner> *runner) {
  *runner =
      std::make_unique<HostCallRunner<moe::RouterRunner, MoeRouter, moe::RouterData>>(kernel, plan);
  return INFINI_STATUS_SUCCESS;
}

}  // namespace infiniop::family
