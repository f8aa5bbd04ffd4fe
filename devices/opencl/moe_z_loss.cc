// SPDX-License-Identifier: Apache-2.0
// MoeZLoss and MoeZLossGrad on OpenCL (kernels/moe_z_loss.cl, after moe_gating.cl whose row
// functions it shares). The forward queues two kernels (the blocks' sums into the workspace,
// then their fixed-order total), the grad one (a work-item per row). x's and grad_x's views are
// uploaded once at descriptor creation; a call passes each tensor's buffer and element index.
#include <mutex>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/handle.h"
#include "ops/moe_z_loss.h"
#include "opencl/elementwise.h"
#include "opencl/gather.h"
#include "opencl/kernel_table.h"
#include "opencl/program.h"
#include "opencl/router_view.h"
#include "opencl/runtime.h"
#include "opencl/sources.h"

namespace infiniop::opencl {
namespace {

using moe::RouterView;
using moe::ZLossKind;
using moe::ZLossPlan;

class ZLoss final : public moe::ZLossRunner {
 public:
  ZLoss(const char *op, infiniopHandle_t handle, const ZLossPlan &plan)
      : op_(op), handle_(handle), plan_(plan) {}
  ~ZLoss() override {
    if (geometry_) clReleaseMemObject(geometry_);
  }
  // The forward's blocks' sums, from the first float boundary of the workspace.
  size_t workspaceSize() const override {
    const size_t blocks = plan_.kind == ZLossKind::forward ? moe::zLossBlocks(plan_.rows) : 0;
    return blocks == 0 ? 0 : blocks * sizeof(float) + sizeof(float) - 1;
  }

  infiniStatus_t init() {
    const ZLossPlan &p = plan_;
    std::string options = std::string("-cl-std=CL1.2 ") + storageOption(p.dtype);
    if (correctlyRoundedDivide(handle_))
      options += " -cl-fp32-correctly-rounded-divide-sqrt -DDIVIDE_OPERATOR";
    cl_program program = nullptr;
    INFINIOP_CHECK(getProgram(op_, handle_,
                              {sources::common, sources::moe_gating, sources::moe_z_loss}, options,
                              &program));
    if (p.kind == ZLossKind::forward) {
      INFINIOP_CHECK(createKernel(op_, program, "moe_z_loss_blocks", kernel_.out()));
      INFINIOP_CHECK(createKernel(op_, program, "moe_z_loss_finish", finish_.out()));
    } else {
      INFINIOP_CHECK(createKernel(op_, program, "moe_z_loss_grad", kernel_.out()));
    }
    INFINIOP_CHECK(workGroupSize(op_, handle_, kernel_.get(), &group_));
    return uploadViewGeometry(op_, handle_, {&p.x, &p.grad_x}, &geometry_);
  }

  infiniStatus_t run(const moe::ZLossData &data, void *stream) const override {
    const ZLossPlan &p = plan_;
    cl_command_queue queue = nullptr;
    INFINIOP_CHECK(queueOf(op_, handle_, stream, &queue));
    // Every device range first: nothing is queued before all of them resolve. An empty x gets
    // the output's buffer (never read).
    const cl_ulong T = p.rows, E = p.experts;
    if (p.kind == ZLossKind::forward) {
      cl_mem loss = nullptr, x = nullptr, sums = nullptr;
      cl_ulong loss_index = 0, x_index = 0, sums_index = 0;
      INFINIOP_CHECK(
          resolveSpan(op_, handle_, data.loss, p.loss.span, sizeof(float), &loss, &loss_index));
      x = sums = loss;
      const cl_ulong blocks = moe::zLossBlocks(p.rows);
      if (blocks > 0) {
        INFINIOP_CHECK(
            resolveSpan(op_, handle_, data.x, p.x.span, dtypeSize(p.dtype), &x, &x_index));
        const auto address = reinterpret_cast<uintptr_t>(data.workspace);
        const void *aligned = reinterpret_cast<const void *>((address + 3) & ~uintptr_t{3});
        INFINIOP_CHECK(resolveSpan(op_, handle_, aligned, {0, static_cast<ptrdiff_t>(blocks) - 1},
                                   sizeof(float), &sums, &sums_index));
      }
      const cl_ulong block_rows = moe::kZLossBlockRows;
      // A cl_kernel's arguments are shared state: set them and enqueue as one step.
      std::lock_guard<std::mutex> lock(mutex_);
      if (blocks > 0) {
        INFINIOP_CHECK(setArgs(op_, kernel_.get(), 0, geometry_, x, x_index, sums, sums_index, T, E,
                               block_rows));
        INFINIOP_CHECK(launch(op_, queue, kernel_.get(), blocks, group_));
      }
      INFINIOP_CHECK(
          setArgs(op_, finish_.get(), 0, loss, loss_index, sums, sums_index, blocks, p.scale));
      return launch(op_, queue, finish_.get(), 1, 1);
    }
    cl_mem grad_x = nullptr, grad_loss = nullptr, x = nullptr;
    cl_ulong grad_x_index = 0, grad_loss_index = 0, x_index = 0;
    INFINIOP_CHECK(resolveSpan(op_, handle_, data.grad_x, p.grad_x.span, dtypeSize(p.dtype),
                               &grad_x, &grad_x_index));
    INFINIOP_CHECK(resolveSpan(op_, handle_, data.grad_loss, p.grad_loss.span, sizeof(float),
                               &grad_loss, &grad_loss_index));
    INFINIOP_CHECK(resolveSpan(op_, handle_, data.x, p.x.span, dtypeSize(p.dtype), &x, &x_index));
    std::lock_guard<std::mutex> lock(mutex_);
    INFINIOP_CHECK(setArgs(op_, kernel_.get(), 0, geometry_, grad_x, grad_x_index, grad_loss,
                           grad_loss_index, x, x_index, E, p.scale));
    return launch(op_, queue, kernel_.get(), p.rows, group_);
  }

 private:
  const char *op_;
  infiniopHandle_t handle_;
  ZLossPlan plan_;
  KernelRef kernel_, finish_;
  size_t group_ = 1;
  cl_mem geometry_ = nullptr;
  mutable std::mutex mutex_;
};

}  // namespace

infiniStatus_t makeMoeZLossRunner(const char *op, infiniopHandle_t handle, const Plan &plan,
                                  std::unique_ptr<Runner> *runner) {
  return initialized(std::make_unique<ZLoss>(op, handle, static_cast<const ZLossPlan &>(plan)),
                     runner);
}

}  // namespace infiniop::opencl
