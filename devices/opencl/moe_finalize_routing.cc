// SPDX-License-Identifier: Apache-2.0
// MoeFinalizeRoutingV2 and its grad on OpenCL (kernels/moe_finalize_routing.cl). The views of
// the plan travel as kernel arguments (base index in the buffer and strides); the grad's
// scatter becomes a gather over the inversion of expanded_row_idx, built on the host from the
// copy the index check already read and uploaded into the caller's workspace.
#include "ops/moe_finalize_routing.h"

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/handle.h"
#include "opencl/elementwise.h"
#include "opencl/kernel_table.h"
#include "opencl/gather.h"
#include "opencl/program.h"
#include "opencl/runtime.h"
#include "opencl/sources.h"

namespace infiniop::opencl {
namespace {

constexpr const char *kGrad = "MoeFinalizeRoutingV2Grad";

// The flags of the .cl file.
constexpr cl_uint kHasX1 = 1, kHasX2 = 2, kHasBias = 4, kHasScales = 8;

// The program for the rows' dtype, the dtypes of scales and of the two indices (absent ones:
// INT32), and the column layout.
template <class Plan>
infiniStatus_t programOf(const char *op, infiniopHandle_t handle, const Plan &plan,
                         bool unit_columns, cl_program *program) {
  std::string options = std::string("-cl-std=CL1.2 ") + storageOption(plan.dtype);
  if (unit_columns) options += " -DUNIT_COLUMNS";
  if (plan.scales_dtype == INFINI_DTYPE_F32 && plan.dtype != INFINI_DTYPE_F32)
    options += " -DSCALES_F32";
  if (plan.row_index.wide) options += " -DROW_INDEX_T=long";
  if (plan.expert_index.wide) options += " -DEXPERT_INDEX_T=long";
  return getProgram(op, handle, {sources::common, sources::gather, sources::moe_finalize_routing},
                    options, program);
}

// A kernel over (columns, rows) and, in unit-column programs, its twin doing kColumns columns
// per work-item (`<name>_columns`), which then covers all but the last columns % kColumns. Both
// take the same arguments but the last, first_column.
constexpr size_t kColumns = 32;  // COLUMNS of the .cl file
class ColumnKernels {
 public:
  infiniStatus_t init(const char *op, infiniopHandle_t handle, cl_program program,
                      const std::string &name, bool vectorized) {
    INFINIOP_CHECK(createKernel(op, program, name.c_str(), scalar_.out()));
    INFINIOP_CHECK(workGroupSize(op, handle, scalar_.get(), &scalar_group_));
    if (!vectorized) return INFINI_STATUS_SUCCESS;
    INFINIOP_CHECK(createKernel(op, program, (name + "_columns").c_str(), vector_.out()));
    return workGroupSize(op, handle, vector_.get(), &vector_group_);
  }

  // Sets the arguments and enqueues; the caller holds the lock of the kernels' arguments.
  template <class... Args>
  infiniStatus_t run(const char *op, cl_command_queue queue, size_t columns, size_t rows,
                     const Args &...args) const {
    const size_t vector_items = vector_.get() ? columns / kColumns : 0;
    const cl_ulong first_column = vector_items * kColumns;
    if (vector_items > 0) {
      INFINIOP_CHECK(setArgs(op, vector_.get(), 0, args..., cl_ulong{0}));
      INFINIOP_CHECK(launch(op, queue, vector_.get(), vector_items, vector_group_, rows));
    }
    if (columns == first_column) return INFINI_STATUS_SUCCESS;
    INFINIOP_CHECK(setArgs(op, scalar_.get(), 0, args..., first_column));
    return launch(op, queue, scalar_.get(), columns - first_column, scalar_group_, rows);
  }

 private:
  KernelRef scalar_, vector_;
  size_t scalar_group_ = 1, vector_group_ = 1;
};

class Forward final : public moe::ForwardRunner {
 public:
  // `op`: the operator running it (MoeFinalizeRoutingV2, or MoeInitRoutingV2Grad), its messages'.
  Forward(const char *op, infiniopHandle_t handle, const moe::ForwardPlan &plan)
      : op_(op), handle_(handle), plan_(plan) {}

  infiniStatus_t init() {
    cl_program program = nullptr;
    const moe::ForwardPlan &p = plan_;
    const bool unit = unitColumns({&p.out, &p.expanded_x, &p.x1, &p.x2, &p.bias});
    INFINIOP_CHECK(programOf(op_, handle_, p, unit, &program));
    return kernels_.init(op_, handle_, program, "moe_forward", unit);
  }

  infiniStatus_t run(const moe::ForwardData &data, const void * /*host_row_index*/,
                     void *stream) const override {
    const moe::ForwardPlan &p = plan_;
    if (p.tokens * p.hidden == 0) return INFINI_STATUS_SUCCESS;
    cl_command_queue queue = nullptr;
    INFINIOP_CHECK(queueOf(op_, handle_, stream, &queue));
    const size_t bytes = dtypeSize(p.dtype);
    Operand out{}, expanded{}, x1{}, x2{}, bias{}, scales{}, row_index{}, expert_index{};
    RowArg out_v, expanded_v, x1_v, x2_v, bias_v;
    TableArg scales_v, row_index_v, expert_index_v;
    INFINIOP_CHECK(resolveRows(op_, handle_, p.out, data.out, bytes, nullptr, &out, &out_v));
    const cl_mem unused = out.mem;
    INFINIOP_CHECK(resolveRows(op_, handle_, p.expanded_x, data.expanded_x, bytes, unused,
                               &expanded, &expanded_v));
    INFINIOP_CHECK(resolveRows(op_, handle_, p.x1, data.x1, bytes, unused, &x1, &x1_v));
    INFINIOP_CHECK(resolveRows(op_, handle_, p.x2, data.x2, bytes, unused, &x2, &x2_v));
    INFINIOP_CHECK(resolveRows(op_, handle_, p.bias, data.bias, bytes, unused, &bias, &bias_v));
    INFINIOP_CHECK(resolveTable(op_, handle_, p.scales, data.scales, dtypeSize(p.scales_dtype),
                                unused, &scales, &scales_v));
    INFINIOP_CHECK(resolveTable(op_, handle_, p.row_index, data.row_index,
                                p.row_index.elementSize(), unused, &row_index, &row_index_v));
    INFINIOP_CHECK(resolveTable(op_, handle_, p.expert_index, data.expert_index,
                                p.expert_index.elementSize(), unused, &expert_index,
                                &expert_index_v));
    const cl_uint flags = (x1.present ? kHasX1 : 0) | (x2.present ? kHasX2 : 0) |
                          (p.bias.present ? kHasBias : 0) | (p.scales.present ? kHasScales : 0);
    const cl_ulong tokens = p.tokens, topk = p.topk, hidden = p.hidden, rows = p.expanded_x.rows;

    // A cl_kernel's arguments are shared state: set them and enqueue as one step.
    std::lock_guard<std::mutex> lock(mutex_);
    return kernels_.run(op_, queue, p.hidden, p.tokens, out.mem, out_v, expanded.mem, expanded_v,
                        x1.mem, x1_v, x2.mem, x2_v, bias.mem, bias_v, scales.mem, scales_v,
                        row_index.mem, row_index_v, expert_index.mem, expert_index_v, tokens, topk,
                        hidden, rows, flags);
  }

 private:
  const char *op_;
  infiniopHandle_t handle_;
  moe::ForwardPlan plan_;
  ColumnKernels kernels_;
  mutable std::mutex mutex_;
};

class Grad final : public moe::GradRunner {
 public:
  Grad(infiniopHandle_t handle, const moe::GradPlan &plan) : handle_(handle), plan_(plan) {}
  // The host inverts expanded_row_idx and uploads the inversion to the workspace.
  size_t workspaceSize() const override {
    return gather::inverseWorkspaceBytes(plan_.grad_expanded_x.rows, plan_.tokens * plan_.topk);
  }

  infiniStatus_t init() {
    cl_program program = nullptr;
    const moe::GradPlan &p = plan_;
    const bool unit = unitColumns({&p.grad_expanded_x, &p.grad_y, &p.expanded_x, &p.bias});
    INFINIOP_CHECK(programOf(kGrad, handle_, p, unit, &program));
    INFINIOP_CHECK(expanded_kernels_.init(kGrad, handle_, program, "moe_grad_expanded", unit));
    INFINIOP_CHECK(createKernel(kGrad, program, "moe_grad_scales", scales_kernel_.out()));
    INFINIOP_CHECK(workGroupSize(kGrad, handle_, scales_kernel_.get(), &scales_group_));
    if (!unit) return INFINI_STATUS_SUCCESS;
    INFINIOP_CHECK(createKernel(kGrad, program, "moe_grad_fused", fused_kernel_.out()));
    return workGroupSize(kGrad, handle_, fused_kernel_.get(), &fused_group_);
  }

  infiniStatus_t run(const moe::GradData &data, const void *host_row_index,
                     void *stream) const override {
    const moe::GradPlan &p = plan_;
    const size_t rows = p.grad_expanded_x.rows, RK = p.tokens * p.topk;
    const bool write_rows = rows * p.hidden > 0, write_scales = p.grad_scales.present && RK > 0;
    if (!write_rows && !write_scales) return INFINI_STATUS_SUCCESS;
    cl_command_queue queue = nullptr;
    INFINIOP_CHECK(queueOf(kGrad, handle_, stream, &queue));
    const size_t bytes = dtypeSize(p.dtype);
    Operand grad_x{}, grad_scales{}, grad_y{}, expanded{}, bias{}, scales{}, row_index{},
        expert_index{};
    RowArg grad_x_v, grad_y_v, expanded_v, bias_v;
    TableArg grad_scales_v, scales_v, row_index_v, expert_index_v;
    INFINIOP_CHECK(resolveRows(kGrad, handle_, p.grad_expanded_x, data.grad_expanded_x, bytes,
                               nullptr, &grad_x, &grad_x_v));
    const size_t scale_bytes = dtypeSize(p.scales_dtype);
    INFINIOP_CHECK(resolveTable(kGrad, handle_, p.grad_scales, data.grad_scales, scale_bytes,
                                grad_x.mem, &grad_scales, &grad_scales_v));
    const cl_mem unused = grad_x.present ? grad_x.mem : grad_scales.mem;
    INFINIOP_CHECK(
        resolveRows(kGrad, handle_, p.grad_y, data.grad_y, bytes, unused, &grad_y, &grad_y_v));
    INFINIOP_CHECK(resolveRows(kGrad, handle_, p.expanded_x, data.expanded_x, bytes, unused,
                               &expanded, &expanded_v));
    INFINIOP_CHECK(resolveRows(kGrad, handle_, p.bias, data.bias, bytes, unused, &bias, &bias_v));
    INFINIOP_CHECK(resolveTable(kGrad, handle_, p.scales, data.scales, scale_bytes, unused, &scales,
                                &scales_v));
    INFINIOP_CHECK(resolveTable(kGrad, handle_, p.row_index, data.row_index,
                                p.row_index.elementSize(), unused, &row_index, &row_index_v));
    INFINIOP_CHECK(resolveTable(kGrad, handle_, p.expert_index, data.expert_index,
                                p.expert_index.elementSize(), unused, &expert_index,
                                &expert_index_v));
    // The inversion: first[rows + 1] then the sources, at the first int32 boundary of the
    // workspace (any address is allowed; inverseWorkspaceBytes has the slack).
    std::vector<int32_t> inversion;
    cl_mem workspace = unused;
    cl_ulong inverse_index = 0;
    bool fused = false;
    if (write_rows) {
      inversion.resize(rows + 1 + RK);
      gather::invertIndex(p.row_index, host_row_index, rows, inversion.data());
      // Every row reached by exactly one position (a permutation: nothing dropped or summed):
      // one pass writes the rows and the scales' gradient (moe_grad_fused).
      fused = fused_kernel_.get() != nullptr && write_scales && rows == RK;
      for (size_t d = 0; fused && d < rows; ++d) fused = inversion[d + 1] - inversion[d] == 1;
      const auto address = reinterpret_cast<uintptr_t>(data.workspace);
      const void *aligned = reinterpret_cast<const void *>((address + 3) & ~uintptr_t{3});
      INFINIOP_CHECK(resolveSpan(kGrad, handle_, aligned,
                                 {0, static_cast<ptrdiff_t>(inversion.size()) - 1}, 4, &workspace,
                                 &inverse_index));
    }
    const cl_uint flags = (p.bias.present ? kHasBias : 0) | (p.scales.present ? kHasScales : 0);
    const cl_ulong topk = p.topk, hidden = p.hidden, rows_arg = rows;

    // Everything is checked: from here on the call writes. Blocking, so `inversion` may go.
    if (write_rows && !fused)
      INFINIOP_CL_CHECK(
          kGrad, "clEnqueueWriteBuffer",
          clEnqueueWriteBuffer(queue, workspace, CL_TRUE, inverse_index * 4, inversion.size() * 4,
                               inversion.data(), 0, nullptr, nullptr));
    std::lock_guard<std::mutex> lock(mutex_);
    if (fused) {
      INFINIOP_CHECK(setArgs(kGrad, fused_kernel_.get(), 0, grad_x.mem, grad_x_v, grad_scales.mem,
                             grad_scales_v, grad_y.mem, grad_y_v, expanded.mem, expanded_v,
                             bias.mem, bias_v, scales.mem, scales_v, row_index.mem, row_index_v,
                             expert_index.mem, expert_index_v, topk, hidden, flags));
      return launch(kGrad, queue, fused_kernel_.get(), RK, fused_group_);
    }
    if (write_rows) {
      INFINIOP_CHECK(expanded_kernels_.run(kGrad, queue, p.hidden, rows, grad_x.mem, grad_x_v,
                                           grad_y.mem, grad_y_v, scales.mem, scales_v, workspace,
                                           inverse_index, rows_arg, topk, hidden, flags));
    }
    if (write_scales) {
      const cl_ulong positions = RK;
      INFINIOP_CHECK(setArgs(kGrad, scales_kernel_.get(), 0, grad_scales.mem, grad_scales_v,
                             grad_y.mem, grad_y_v, expanded.mem, expanded_v, bias.mem, bias_v,
                             row_index.mem, row_index_v, expert_index.mem, expert_index_v,
                             positions, topk, hidden, rows_arg, flags));
      INFINIOP_CHECK(launch(kGrad, queue, scales_kernel_.get(), RK, scales_group_));
    }
    return INFINI_STATUS_SUCCESS;
  }

 private:
  infiniopHandle_t handle_;
  moe::GradPlan plan_;
  ColumnKernels expanded_kernels_;          // grad_expanded_x
  KernelRef scales_kernel_, fused_kernel_;  // fused_kernel_: unit columns only
  size_t scales_group_ = 1, fused_group_ = 1;
  mutable std::mutex mutex_;
};

}  // namespace

// `op` starts its messages (MoeInitRoutingV2Grad runs on it too).
infiniStatus_t makeMoeForwardRunner(const char *op, infiniopHandle_t handle, const Plan &plan,
                                    std::unique_ptr<Runner> *runner) {
  return initialized(
      std::make_unique<Forward>(op, handle, static_cast<const moe::ForwardPlan &>(plan)), runner);
}

infiniStatus_t makeMoeGradRunner(const char *, infiniopHandle_t handle, const Plan &plan,
                                 std::unique_ptr<Runner> *runner) {
  return initialized(std::make_unique<Grad>(handle, static_cast<const moe::GradPlan &>(plan)),
                     runner);
}

}  // namespace infiniop::opencl
