// SPDX-License-Identifier: Apache-2.0
// The router operators on OpenCL (kernels/moe_gating.cl): one kernel per operator, one work-item
// per row. The views' leading dims and strides (up to kRouterMaxLeading of each) are uploaded
// once at descriptor creation into a buffer of the runner; a call passes each view's buffer and
// element index. The forwards keep p (and the group scores) per row in the workspace.
#include "ops/moe_gating.h"

#include <mutex>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/handle.h"
#include "opencl/elementwise.h"
#include "opencl/kernel_table.h"
#include "opencl/router_view.h"
#include "opencl/gather.h"
#include "opencl/program.h"
#include "opencl/runtime.h"
#include "opencl/sources.h"

namespace infiniop::opencl {

bool correctlyRoundedDivide(infiniopHandle_t handle) {
  cl_device_fp_config config = 0;
  return clGetDeviceInfo(stateOf<State>(handle).device, CL_DEVICE_SINGLE_FP_CONFIG, sizeof config,
                         &config, nullptr) == CL_SUCCESS &&
         (config & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
}

namespace {

using moe::RouterKind;
using moe::RouterPlan;
using moe::RouterView;

// The views in the order of the .cl file's VIEW_* (GEOMETRY longs each).
enum View : int { kY, kExpertIdx, kRowIdx, kProbs, kX, kFinished, kBias, kGradX, kGradY, kViews };

const char *kernelName(RouterKind kind) {
  switch (kind) {
    case RouterKind::top_k_softmax:
      return "moe_gating_top_k_softmax";
    case RouterKind::top_k_softmax_grad:
      return "moe_gating_top_k_softmax_grad";
    case RouterKind::top_k:
      return "moe_gating_top_k";
    case RouterKind::weights:
      return "moe_gating_weights";
    case RouterKind::top_k_grad:
      break;
  }
  return "moe_gating_top_k_grad";
}

// Floats of workspace per row: p (forwards selecting on p), then MoeGatingTopK's group scores.
size_t scratchPerRow(const RouterPlan &p) {
  switch (p.kind) {
    case RouterKind::top_k_softmax:
      return p.renorm ? 0 : p.experts;
    case RouterKind::top_k:
      return p.experts + p.group_count;
    case RouterKind::weights:
      return p.experts;
    default:
      return 0;
  }
}

class Router final : public moe::RouterRunner {
 public:
  Router(const char *op, infiniopHandle_t handle, const RouterPlan &plan)
      : op_(op), handle_(handle), plan_(plan) {}
  ~Router() override {
    if (geometry_) clReleaseMemObject(geometry_);
  }
  // The forwards keep each row's p (and group scores) in the workspace.
  size_t workspaceSize() const override {
    const size_t floats = scratchPerRow(plan_) * plan_.rows;
    return floats == 0 ? 0 : floats * sizeof(float) + sizeof(float) - 1;
  }

  infiniStatus_t init() {
    const RouterPlan &p = plan_;
    std::string options = std::string("-cl-std=CL1.2 ") + storageOption(p.dtype);
    if (p.expert_idx.dtype == INFINI_DTYPE_I64) options += " -DEXPERT_INDEX_T=long";
    if (p.row_idx.present && p.row_idx.dtype == INFINI_DTYPE_I64) options += " -DROW_INDEX_T=long";
    if (p.bias.present && p.bias.dtype == INFINI_DTYPE_F32 && p.dtype != INFINI_DTYPE_F32)
      options += " -DBIAS_F32";
    options += correctlyRoundedDivideOptions(handle_);
    cl_program program = nullptr;
    INFINIOP_CHECK(
        getProgram(op_, handle_, {sources::common, sources::moe_gating}, options, &program));
    INFINIOP_CHECK(createKernel(op_, program, kernelName(p.kind), kernel_.out()));
    INFINIOP_CHECK(workGroupSize(op_, handle_, kernel_.get(), &group_));

    return uploadViewGeometry(op_, handle_,
                              {&p.y, &p.expert_idx, &p.row_idx, &p.probs, &p.x, &p.finished,
                               &p.bias, &p.grad_x, &p.grad_y},
                              &geometry_);
  }

  infiniStatus_t run(const moe::RouterData &data, void *stream) const override {
    const RouterPlan &p = plan_;
    if (p.rows == 0) return INFINI_STATUS_SUCCESS;
    cl_command_queue queue = nullptr;
    INFINIOP_CHECK(queueOf(op_, handle_, stream, &queue));
    // Every device range first: nothing is queued before all of them resolve. Absent views get
    // x's buffer (never read: OpenCL 1.2 drivers differ on NULL buffer arguments).
    ViewArg x, y, expert_idx, row_idx, probs, finished, bias, grad_x, grad_y, scratch;
    INFINIOP_CHECK(resolveRouterView(op_, handle_, p.x, data.x, nullptr, &x));
    // The grads and MoeGatingWeights read expert_idx.
    const bool grad = p.kind == RouterKind::top_k_softmax_grad ||
                      p.kind == RouterKind::top_k_grad || p.kind == RouterKind::weights;
    INFINIOP_CHECK(resolveRouterView(op_, handle_, p.y, data.y, x.mem, &y));
    INFINIOP_CHECK(resolveRouterView(op_, handle_, p.expert_idx,
                                     grad ? data.expert_idx_in : data.expert_idx, x.mem,
                                     &expert_idx));
    INFINIOP_CHECK(resolveRouterView(op_, handle_, p.row_idx, data.row_idx, x.mem, &row_idx));
    INFINIOP_CHECK(resolveRouterView(op_, handle_, p.probs, data.probs, x.mem, &probs));
    INFINIOP_CHECK(resolveRouterView(op_, handle_, p.finished, data.finished, x.mem, &finished));
    INFINIOP_CHECK(resolveRouterView(op_, handle_, p.bias, data.bias, x.mem, &bias));
    INFINIOP_CHECK(resolveRouterView(op_, handle_, p.grad_x, data.grad_x, x.mem, &grad_x));
    INFINIOP_CHECK(resolveRouterView(op_, handle_, p.grad_y, data.grad_y, x.mem, &grad_y));
    scratch.mem = x.mem;
    if (const size_t floats = scratchPerRow(p) * p.rows; floats > 0) {
      // From the first float boundary of the workspace (workspaceBytes has the slack).
      const auto address = reinterpret_cast<uintptr_t>(data.workspace);
      const void *aligned = reinterpret_cast<const void *>((address + 3) & ~uintptr_t{3});
      INFINIOP_CHECK(resolveSpan(op_, handle_, aligned, {0, static_cast<ptrdiff_t>(floats) - 1},
                                 sizeof(float), &scratch.mem, &scratch.index));
    }

    const cl_ulong R = p.rows, E = p.experts, k = p.k;
    const cl_uint renorm = p.renorm, score = p.sigmoid ? 1u : p.sqrt_softplus ? 2u : 0u;
    cl_kernel kernel = kernel_.get();
    // A cl_kernel's arguments are shared state: set them and enqueue as one step.
    std::lock_guard<std::mutex> lock(mutex_);
    switch (p.kind) {
      case RouterKind::top_k_softmax:
        INFINIOP_CHECK(setArgs(op_, kernel, 0, geometry_, y.mem, y.index, expert_idx.mem,
                               expert_idx.index, row_idx.mem, row_idx.index, probs.mem, probs.index,
                               x.mem, x.index, finished.mem, finished.index, scratch.mem,
                               scratch.index, R, E, k, renorm, present(p.row_idx), present(p.probs),
                               present(p.finished)));
        break;
      case RouterKind::top_k: {
        const cl_ulong groups = p.group_count, k_group = p.k_group, best_of = p.groupBest();
        INFINIOP_CHECK(setArgs(op_, kernel, 0, geometry_, y.mem, y.index, expert_idx.mem,
                               expert_idx.index, probs.mem, probs.index, x.mem, x.index, bias.mem,
                               bias.index, scratch.mem, scratch.index, E, k, groups, k_group,
                               best_of, score, p.scale, p.eps, present(p.probs), present(p.bias)));
        break;
      }
      case RouterKind::weights:
        INFINIOP_CHECK(setArgs(op_, kernel, 0, geometry_, y.mem, y.index, expert_idx.mem,
                               expert_idx.index, x.mem, x.index, scratch.mem, scratch.index, E, k,
                               score, p.scale, p.eps));
        break;
      case RouterKind::top_k_softmax_grad:
        INFINIOP_CHECK(setArgs(op_, kernel, 0, geometry_, grad_x.mem, grad_x.index, grad_y.mem,
                               grad_y.index, x.mem, x.index, expert_idx.mem, expert_idx.index,
                               finished.mem, finished.index, E, k, renorm, present(p.finished)));
        break;
      case RouterKind::top_k_grad:
        INFINIOP_CHECK(setArgs(op_, kernel, 0, geometry_, grad_x.mem, grad_x.index, grad_y.mem,
                               grad_y.index, x.mem, x.index, expert_idx.mem, expert_idx.index, E, k,
                               score, p.scale, p.eps));
        break;
    }
    return launch(op_, queue, kernel, p.rows, group_);
  }

 private:
  static cl_uint present(const RouterView &v) { return v.present ? 1u : 0u; }

  const char *op_;
  infiniopHandle_t handle_;
  RouterPlan plan_;
  KernelRef kernel_;
  size_t group_ = 1;
  cl_mem geometry_ = nullptr;
  mutable std::mutex mutex_;
};

}  // namespace

infiniStatus_t makeMoeRouterRunner(const char *op, infiniopHandle_t handle, const Plan &plan,
                                   std::unique_ptr<Runner> *runner) {
  return initialized(std::make_unique<Router>(op, handle, static_cast<const RouterPlan &>(plan)),
                     runner);
}

}  // namespace infiniop::opencl
