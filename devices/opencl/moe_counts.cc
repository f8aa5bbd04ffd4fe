// SPDX-License-Identifier: Apache-2.0
// MoeExpertCounts and MoeBiasUpdate on OpenCL (kernels/moe_counts.cl): one work-item per expert
// (per sequence and expert with counts (B, E)).
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
    std::vector<cl_long> geometry(2 + 2 * moe::kRouterMaxLeading, 0);
    geometry[0] = p.expert_idx.col_stride;
    geometry[1] = p.expert_idx.ndim;
    for (int d = 0; d < p.expert_idx.ndim; ++d) {
      geometry[2 + d] = static_cast<cl_long>(p.expert_idx.dims[d]);
      geometry[2 + moe::kRouterMaxLeading + d] = p.expert_idx.strides[d];
    }
    return planBuffer(op_, handle_, geometry, &geometry_);
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

}  // namespace

infiniStatus_t makeMoeCountsRunner(const char *op, infiniopHandle_t handle, const Plan &plan,
                                   std::unique_ptr<Runner> *runner) {
  return initialized(std::make_unique<Counts>(op, handle, static_cast<const CountsPlan &>(plan)),
                     runner);
}

}  // namespace infiniop::opencl
