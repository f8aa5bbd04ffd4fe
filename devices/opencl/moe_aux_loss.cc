// SPDX-License-Identifier: Apache-2.0
// MoeAuxLoss and MoeAuxLossGrad on OpenCL (kernels/moe_aux_loss.cl, after moe_gating.cl, whose
// row primitives it uses). The views' leading dims and strides (x, tokens_per_expert, grad_x) are
// uploaded once at descriptor creation; a call passes each tensor's buffer and element index. The
// forward keeps its block sums in the workspace.
#include <mutex>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/handle.h"
#include "ops/moe_aux_loss.h"
#include "opencl/elementwise.h"
#include "opencl/gather.h"
#include "opencl/kernel_table.h"
#include "opencl/router_view.h"
#include "opencl/program.h"
#include "opencl/runtime.h"
#include "opencl/sources.h"

namespace infiniop::opencl {
namespace {

using moe::AuxLossPlan;
using moe::RouterView;

size_t blocksOf(const AuxLossPlan &p) {
  return (p.rows + moe::kAuxLossBlock - 1) / moe::kAuxLossBlock;
}

class AuxLoss final : public moe::AuxLossRunner {
 public:
  AuxLoss(const char *op, infiniopHandle_t handle, const AuxLossPlan &plan)
      : op_(op), handle_(handle), plan_(plan) {}
  ~AuxLoss() override {
    if (geometry_) clReleaseMemObject(geometry_);
  }
  // The forward's block sums, from the first float boundary of the workspace.
  size_t workspaceSize() const override {
    if (plan_.grad || plan_.rows == 0) return 0;
    return blocksOf(plan_) * sizeof(float) + sizeof(float) - 1;
  }

  infiniStatus_t init() {
    const AuxLossPlan &p = plan_;
    std::string options = std::string("-cl-std=CL1.2 ") + storageOption(p.dtype);
    if (p.counts.dtype == INFINI_DTYPE_I64) options += " -DCOUNT_T=long";
    options += correctlyRoundedDivideOptions(handle_);
    cl_program program = nullptr;
    INFINIOP_CHECK(getProgram(op_, handle_,
                              {sources::common, sources::moe_gating, sources::moe_aux_loss},
                              options, &program));
    if (p.grad) {
      INFINIOP_CHECK(createKernel(op_, program, "moe_aux_loss_grad", kernel_.out()));
    } else {
      INFINIOP_CHECK(createKernel(op_, program, "moe_aux_loss_blocks", kernel_.out()));
      INFINIOP_CHECK(createKernel(op_, program, "moe_aux_loss_total", total_.out()));
    }
    INFINIOP_CHECK(workGroupSize(op_, handle_, kernel_.get(), &group_));
    return uploadViewGeometry(op_, handle_, {&p.x, &p.counts, &p.grad_x}, &geometry_);
  }

  infiniStatus_t run(const moe::AuxLossData &data, void *stream) const override {
    const AuxLossPlan &p = plan_;
    cl_command_queue queue = nullptr;
    INFINIOP_CHECK(queueOf(op_, handle_, stream, &queue));
    // Every device range first: nothing is queued before all of them resolve.
    ViewArg x, counts, out, grad_loss, sums;
    const RouterView &out_view = p.grad ? p.grad_x : p.loss;
    INFINIOP_CHECK(
        resolveRouterView(op_, handle_, out_view, p.grad ? data.grad_x : data.loss, nullptr, &out));
    INFINIOP_CHECK(resolveRouterView(op_, handle_, p.x, data.x, out.mem, &x));
    INFINIOP_CHECK(resolveRouterView(op_, handle_, p.counts, data.counts, out.mem, &counts));
    INFINIOP_CHECK(
        resolveRouterView(op_, handle_, p.grad_loss, data.grad_loss, out.mem, &grad_loss));
    const cl_ulong T = p.rows, E = p.experts, B = p.sequences;
    const auto score = static_cast<cl_uint>(p.score);
    std::lock_guard<std::mutex> lock(mutex_);
    if (p.grad) {
      if (p.rows == 0) return INFINI_STATUS_SUCCESS;
      INFINIOP_CHECK(setArgs(op_, kernel_.get(), 0, geometry_, out.mem, out.index, grad_loss.mem,
                             grad_loss.index, x.mem, x.index, counts.mem, counts.index, E, B, score,
                             p.scale));
      return launch(op_, queue, kernel_.get(), p.rows, group_);
    }
    const cl_ulong blocks = blocksOf(p);
    sums.mem = out.mem;
    if (blocks > 0) {
      const auto address = reinterpret_cast<uintptr_t>(data.workspace);
      const void *aligned = reinterpret_cast<const void *>((address + 3) & ~uintptr_t{3});
      INFINIOP_CHECK(resolveSpan(op_, handle_, aligned, {0, static_cast<ptrdiff_t>(blocks) - 1},
                                 sizeof(float), &sums.mem, &sums.index));
      INFINIOP_CHECK(setArgs(op_, kernel_.get(), 0, geometry_, x.mem, x.index, counts.mem,
                             counts.index, sums.mem, sums.index, T, E, B, score));
      INFINIOP_CHECK(launch(op_, queue, kernel_.get(), blocks, group_));
    }
    INFINIOP_CHECK(
        setArgs(op_, total_.get(), 0, sums.mem, sums.index, blocks, out.mem, out.index, p.scale));
    return launch(op_, queue, total_.get(), 1, 1);
  }

 private:
  const char *op_;
  infiniopHandle_t handle_;
  AuxLossPlan plan_;
  KernelRef kernel_, total_;
  size_t group_ = 1;
  cl_mem geometry_ = nullptr;
  mutable std::mutex mutex_;
};

}  // namespace

infiniStatus_t makeMoeAuxLossRunner(const char *op, infiniopHandle_t handle, const Plan &plan,
                                    std::unique_ptr<Runner> *runner) {
  return initialized(std::make_unique<AuxLoss>(op, handle, static_cast<const AuxLossPlan &>(plan)),
                     runner);
}

}  // namespace infiniop::opencl
