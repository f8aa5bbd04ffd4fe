// SPDX-License-Identifier: Apache-2.0
// MoeExpertCounts, MoeBiasUpdate and MoeExpertCapacity on OpenCL (kernels/moe_counts.cl): one
// work-item per expert (per sequence and expert with counts (B, E); capacity: and one for the
// slots marked E).
// expert_idx's view (leading dims and strides) is uploaded once at descriptor creation; a call
// passes each tensor's buffer and element index, and the bias update the exact mean as the
// quotient and remainder of the host's checked sum by E.
#include <mutex>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/handle.h"
#include "ops/moe_counts.h"
#include "opencl/elementwise.h"
#include "opencl/gather.h"
#include "opencl/kernel_table.h"
#include "opencl/program.h"
#include "opencl/router_view.h"
#include "opencl/runtime.h"
#include "opencl/sources.h"

namespace infiniop::opencl {
namespace {

using moe::CountsKind;
using moe::CountsPlan;
using moe::RouterView;

class Counts final : public moe::CountsRunner {
 public:
  Counts(const char *op, infiniopHandle_t handle, const CountsPlan &plan)
      : op_(op), handle_(handle), plan_(plan) {}
  ~Counts() override {
    if (geometry_) clReleaseMemObject(geometry_);
  }

  infiniStatus_t init() {
    const CountsPlan &p = plan_;
    const bool counting = p.kind == CountsKind::expert_counts;
    std::string options = std::string("-cl-std=CL1.2 ") + storageOption(INFINI_DTYPE_F32);
    if (counting && p.expert_idx.dtype == INFINI_DTYPE_I64) options += " -DINDEX_T=long";
    if (p.counts.dtype == INFINI_DTYPE_I64) options += " -DCOUNT_T=long";
    cl_program program = nullptr;
    INFINIOP_CHECK(
        getProgram(op_, handle_, {sources::common, sources::moe_counts}, options, &program));
    INFINIOP_CHECK(createKernel(op_, program, counting ? "moe_expert_counts" : "moe_bias_update",
                                kernel_.out()));
    INFINIOP_CHECK(workGroupSize(op_, handle_, kernel_.get(), &group_));
    if (!counting) return INFINI_STATUS_SUCCESS;
    return uploadViewGeometry(op_, handle_, {&p.expert_idx}, &geometry_);
  }

  infiniStatus_t run(const moe::CountsData &data, void *stream) const override {
    const CountsPlan &p = plan_;
    cl_command_queue queue = nullptr;
    INFINIOP_CHECK(queueOf(op_, handle_, stream, &queue));
    // Every device range first: nothing is queued before all of them resolve.
    cl_mem counts = nullptr, other = nullptr;
    cl_ulong counts_index = 0, other_index = 0;
    const bool counting = p.kind == CountsKind::expert_counts;
    INFINIOP_CHECK(resolveSpan(op_, handle_, counting ? data.counts : data.counts_in, p.counts.span,
                               dtypeSize(p.counts.dtype), &counts, &counts_index));
    const cl_long counts_stride = p.counts.col_stride;
    cl_kernel kernel = kernel_.get();
    if (counting) {
      // An empty expert_idx is never read: counts' buffer stands in for it.
      other = counts;
      if (p.expert_idx.rows * p.expert_idx.cols > 0)
        INFINIOP_CHECK(resolveSpan(op_, handle_, data.expert_idx, p.expert_idx.span,
                                   dtypeSize(p.expert_idx.dtype), &other, &other_index));
      const cl_ulong rows = p.expert_idx.rows, cols = p.expert_idx.cols, E = p.experts,
                     B = p.sequences;
      // counts (B, E): its rows' stride (counts (E): one row, never stepped).
      const cl_long counts_row_stride = p.counts.ndim > 0 ? p.counts.strides[p.counts.ndim - 1] : 0;
      // A cl_kernel's arguments are shared state: set them and enqueue as one step.
      std::lock_guard<std::mutex> lock(mutex_);
      INFINIOP_CHECK(setArgs(op_, kernel, 0, geometry_, other, other_index, counts, counts_index,
                             counts_stride, counts_row_stride, rows, cols, E, B));
      return launch(op_, queue, kernel, p.experts * p.sequences, group_);
    }
    INFINIOP_CHECK(
        resolveSpan(op_, handle_, data.bias, p.bias.span, sizeof(float), &other, &other_index));
    const auto E = static_cast<int64_t>(p.experts);
    const cl_long quotient = data.total / E, remainder = data.total % E;
    const cl_long bias_stride = p.bias.col_stride;
    std::lock_guard<std::mutex> lock(mutex_);
    INFINIOP_CHECK(setArgs(op_, kernel, 0, other, other_index, bias_stride, counts, counts_index,
                           counts_stride, quotient, remainder, p.update_rate));
    return launch(op_, queue, kernel, p.experts, group_);
  }

 private:
  const char *op_;
  infiniopHandle_t handle_;
  CountsPlan plan_;
  KernelRef kernel_;
  size_t group_ = 1;
  cl_mem geometry_ = nullptr;
  mutable std::mutex mutex_;
};

// MoeExpertCapacity: one work-item per expert and one for the slots marked E.
class Capacity final : public moe::CountsRunner {
 public:
  Capacity(const char *op, infiniopHandle_t handle, const CountsPlan &plan)
      : op_(op), handle_(handle), plan_(plan) {}
  ~Capacity() override {
    if (geometry_) clReleaseMemObject(geometry_);
  }

  infiniStatus_t init() {
    const CountsPlan &p = plan_;
    // Without weights (the position policy, no weights_out) the F32 program, never reading them.
    const infiniDtype_t weights = p.weights.present ? p.weights.dtype : INFINI_DTYPE_F32;
    std::string options = std::string("-cl-std=CL1.2 ") + storageOption(weights);
    if (p.expert_idx.dtype == INFINI_DTYPE_I64) options += " -DINDEX_T=long";
    if (p.kept_idx.dtype == INFINI_DTYPE_I64) options += " -DCOUNT_T=long";
    if (dtypeSize(weights) == 2) options += " -DBITS_T=ushort";
    cl_program program = nullptr;
    INFINIOP_CHECK(
        getProgram(op_, handle_, {sources::common, sources::moe_counts}, options, &program));
    INFINIOP_CHECK(createKernel(op_, program, "moe_expert_capacity", kernel_.out()));
    INFINIOP_CHECK(workGroupSize(op_, handle_, kernel_.get(), &group_));
    return uploadViewGeometry(op_, handle_,
                              {&p.expert_idx, &p.kept_idx, &p.weights, &p.weights_out}, &geometry_);
  }

  infiniStatus_t run(const moe::CountsData &data, void *stream) const override {
    const CountsPlan &p = plan_;
    cl_command_queue queue = nullptr;
    INFINIOP_CHECK(queueOf(op_, handle_, stream, &queue));
    // Every device range first: nothing is queued before all of them resolve. An absent weights
    // tensor gets kept_idx's buffer (never read or written).
    cl_mem expert_idx = nullptr, kept_idx = nullptr, weights = nullptr, weights_out = nullptr;
    cl_ulong expert_idx_index = 0, kept_idx_index = 0, weights_index = 0, weights_out_index = 0;
    INFINIOP_CHECK(resolveSpan(op_, handle_, data.expert_idx, p.expert_idx.span,
                               dtypeSize(p.expert_idx.dtype), &expert_idx, &expert_idx_index));
    INFINIOP_CHECK(resolveSpan(op_, handle_, data.kept_idx, p.kept_idx.span,
                               dtypeSize(p.kept_idx.dtype), &kept_idx, &kept_idx_index));
    weights = weights_out = kept_idx;
    if (data.weights)
      INFINIOP_CHECK(resolveSpan(op_, handle_, data.weights, p.weights.span,
                                 dtypeSize(p.weights.dtype), &weights, &weights_index));
    if (data.weights_out)
      INFINIOP_CHECK(resolveSpan(op_, handle_, data.weights_out, p.weights_out.span,
                                 dtypeSize(p.weights_out.dtype), &weights_out, &weights_out_index));
    const cl_ulong slots = p.expert_idx.rows * p.expert_idx.cols, k = p.expert_idx.cols,
                   E = p.experts, C = p.capacity;
    const cl_int policy = p.policy == moe::DropPolicy::probability ? 1 : 0;
    const cl_int has_weights_out = data.weights_out ? 1 : 0;
    // A cl_kernel's arguments are shared state: set them and enqueue as one step.
    std::lock_guard<std::mutex> lock(mutex_);
    INFINIOP_CHECK(setArgs(op_, kernel_.get(), 0, geometry_, expert_idx, expert_idx_index, kept_idx,
                           kept_idx_index, weights, weights, weights_index, weights_out,
                           weights_out_index, slots, k, E, C, policy, has_weights_out));
    return launch(op_, queue, kernel_.get(), p.experts + 1, group_);
  }

 private:
  const char *op_;
  infiniopHandle_t handle_;
  CountsPlan plan_;
  KernelRef kernel_;
  size_t group_ = 1;
  cl_mem geometry_ = nullptr;
  mutable std::mutex mutex_;
};

}  // namespace

infiniStatus_t makeMoeCountsRunner(const char *op, infiniopHandle_t handle, const Plan &plan,
                                   std::unique_ptr<Runner> *runner) {
  const auto &counts = static_cast<const CountsPlan &>(plan);
  if (counts.kind == CountsKind::capacity)
    return initialized(std::make_unique<Capacity>(op, handle, counts), runner);
  return initialized(std::make_unique<Counts>(op, handle, counts), runner);
}

}  // namespace infiniop::opencl
