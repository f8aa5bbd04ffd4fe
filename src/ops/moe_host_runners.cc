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

template <class FamilyRunner, class Family, class Data>
class HostRunner final : public FamilyRunner {
 public:
  HostRunner(typename Family::HostKernel *kernel, const typename Family::Plan &plan,
             size_t workspace_size = 0)
      : kernel_(kernel), plan_(plan), workspace_size_(workspace_size) {}
  size_t workspaceSize() const override { return workspace_size_; }
  infiniStatus_t run(const Data &data, const void *, void *) const override {
    kernel_(plan_, data);
    return INFINI_STATUS_SUCCESS;
  }

 private:
  typename Family::HostKernel *kernel_;
  typename Family::Plan plan_;
  size_t workspace_size_;
};

// MoeInitRoutingV2: the index outputs from the host's sort, then the device's rows.
class InitRunner final : public moe::InitRunner {
 public:
  InitRunner(MoeInit::HostKernel *kernel, const moe::InitPlan &plan)
      : kernel_(kernel), plan_(plan) {}
  infiniStatus_t run(const moe::InitData &data, const moe::InitRouting &routing,
                     void *) const override {
    moe::writeInitIndices(plan_, data, routing);
    kernel_(plan_, data, routing);
    return INFINI_STATUS_SUCCESS;
  }

 private:
  MoeInit::HostKernel *kernel_;
  moe::InitPlan plan_;
};

class RouterRunner final : public moe::RouterRunner {
 public:
  RouterRunner(MoeRouter::HostKernel *kernel, const moe::RouterPlan &plan)
      : kernel_(kernel), plan_(plan) {}
  infiniStatus_t run(const moe::RouterData &data, void *) const override {
    kernel_(plan_, data);
    return INFINI_STATUS_SUCCESS;
  }

 private:
  MoeRouter::HostKernel *kernel_;
  moe::RouterPlan plan_;
};

}  // namespace

infiniStatus_t MoeForward::hostRunner(HostKernel *kernel, const Plan &plan,
                                      std::unique_ptr<Runner> *runner) {
  *runner = std::make_unique<HostRunner<moe::ForwardRunner, MoeForward, moe::ForwardData>>(kernel,
                                                                                           plan);
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t MoeGrad::hostRunner(HostKernel *kernel, const Plan &plan,
                                   std::unique_ptr<Runner> *runner) {
  const size_t inverse_bytes =
      gather::inverseWorkspaceBytes(plan.grad_expanded_x.rows, plan.tokens * plan.topk);
  *runner = std::make_unique<HostRunner<moe::GradRunner, MoeGrad, moe::GradData>>(kernel, plan,
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
  *runner = std::make_unique<RouterRunner>(kernel, plan);
  return INFINI_STATUS_SUCCESS;
}

}  // namespace infiniop::family
