// SPDX-License-Identifier: Apache-2.0
// MoeInitRoutingV2 on OpenCL (kernels/moe_init_routing.cl): the host's sort is uploaded to the
// workspace in one write (destinations, counts, their cumsum, as INT32), then small kernels copy
// it into the index outputs (any stride, INT32 or INT64) and the rows move on the device.
// MoeInitRoutingQuantV2 (the same runner, its plan's quant part) quantizes the rows instead, in
// double as the reference does (cl_khr_fp64 required), with the positions' experts staged too
// where the smooth scales have a row per expert.
#include "ops/moe_init_routing.h"
#include "opencl/kernel_table.h"

#include <algorithm>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "opencl/elementwise.h"
#include "opencl/gather.h"
#include "opencl/program.h"
#include "opencl/runtime.h"
#include "opencl/sources.h"

namespace infiniop::opencl {
namespace {

constexpr size_t kChunk = 512;  // CHUNK of the .cl file: columns per work-item

class Init final : public moe::InitRunner {
 public:
  Init(const char *op, infiniopHandle_t handle, const moe::InitPlan &plan)
      : kInit(op), handle_(handle), plan_(plan) {}
  // The host's sort is staged in the workspace.
  size_t workspaceSize() const override { return workspaceBytes(plan_); }

  infiniStatus_t init() {
    const moe::InitPlan &p = plan_;
    const bool quant = p.quantized();
    if (quant && !hasFp64(handle_))
      return fail(INFINI_STATUS_DEVICE_TYPE_NOT_SUPPORTED,
                  std::string(kInit) +
                      ": the opencl device has no cl_khr_fp64; this operator needs double to "
                      "give the reference's bytes and scales");
    std::string options = "-cl-std=CL1.2 -DELEMENT_T=";
    options += quant                 ? "uchar -DVEC16_T=uchar16 -DQUANT "
               : p.element_size == 4 ? "uint -DVEC16_T=uint16"
                                     : "ushort -DVEC16_T=ushort16";
    if (quant) options += storageOption(p.quant.dtype);
    if (unitColumns({&p.x, &p.expanded_x})) options += " -DUNIT_COLUMNS";
    cl_program program = nullptr;
    INFINIOP_CHECK(getProgram(
        kInit, handle_,
        quant ? std::initializer_list<const char *>{sources::common, sources::gather,
                                                    sources::quant, sources::moe_init_routing}
              : std::initializer_list<const char *>{sources::gather, sources::moe_init_routing},
        options, &program));
    for (auto [name, kernel, group] :
         {std::tuple{quant ? "moe_init_quant_rows" : "moe_init_rows", &rows_, &rows_group_},
          {"moe_init_padding", &padding_, &padding_group_},
          {"moe_init_index32", &index32_, &index32_group_},
          {"moe_init_index64", &index64_, &index64_group_},
          {quant ? "moe_init_quant_padding" : nullptr, &scales_, &scales_group_}}) {
      if (!name) continue;
      INFINIOP_CHECK(createKernel(kInit, program, name, kernel->out()));
      INFINIOP_CHECK(workGroupSize(kInit, handle_, kernel->get(), group));
    }
    return INFINI_STATUS_SUCCESS;
  }

  // Whether the positions' experts are staged (a quantized plan's per-expert smooth rows).
  static bool stagesExperts(const moe::InitPlan &p) {
    return p.quantized() && p.quant.smooth_rows > 1;
  }
  // Workspace: R*K destinations, then E counts and E cumsums, then (stagesExperts) the R*K
  // positions' experts, INT32, from an int32 boundary.
  static size_t workspaceBytes(const moe::InitPlan &p) {
    const size_t RK = p.tokens * p.topk;
    return (RK + 2 * p.experts + (stagesExperts(p) ? RK : 0)) * sizeof(int32_t) + sizeof(int32_t) -
           1;
  }

  infiniStatus_t run(const moe::InitData &data, const moe::InitRouting &routing,
                     void *stream) const override {
    const moe::InitPlan &p = plan_;
    const size_t RK = p.tokens * p.topk, E = p.experts;
    cl_command_queue queue = nullptr;
    INFINIOP_CHECK(queueOf(kInit, handle_, stream, &queue));
    // Every device range first: nothing is written before all of them resolve.
    Operand expanded{}, x{}, row_index{}, counts{}, before{};
    RowArg expanded_v, x_v;
    TableArg row_index_v, counts_v, before_v;
    INFINIOP_CHECK(resolveRows(kInit, handle_, p.expanded_x, data.expanded_x, p.element_size,
                               nullptr, &expanded, &expanded_v));
    const size_t x_size = p.quantized() ? dtypeSize(p.quant.dtype) : p.element_size;
    INFINIOP_CHECK(resolveRows(kInit, handle_, p.x, data.x, x_size, nullptr, &x, &x_v));
    INFINIOP_CHECK(resolveTable(kInit, handle_, p.row_index, data.row_index,
                                p.row_index.elementSize(), nullptr, &row_index, &row_index_v));
    INFINIOP_CHECK(resolveTable(kInit, handle_, p.counts, data.counts, p.counts.elementSize(),
                                nullptr, &counts, &counts_v));
    INFINIOP_CHECK(resolveTable(kInit, handle_, p.before_capacity, data.before_capacity,
                                p.before_capacity.elementSize(), nullptr, &before, &before_v));
    const bool quant = p.quantized();
    Operand dynamic{}, scale{}, offset{};
    RowArg dynamic_v;
    TableArg scale_v, offset_v;
    if (quant) {
      INFINIOP_CHECK(resolveRows(kInit, handle_, p.quant.dynamic_scale, data.dynamic_scale, 4,
                                 nullptr, &dynamic, &dynamic_v));
      if (p.quant.dynamic) {
        INFINIOP_CHECK(
            resolveTable(kInit, handle_, p.quant.smooth, data.scale, 4, nullptr, &scale, &scale_v));
      } else {  // scale and offset (1): one element each
        const gather::TableView one{true, 1, 1, 0, 0, {0, 0}};
        INFINIOP_CHECK(resolveTable(kInit, handle_, one, data.scale, 4, nullptr, &scale, &scale_v));
        INFINIOP_CHECK(
            resolveTable(kInit, handle_, one, data.offset, 4, nullptr, &offset, &offset_v));
      }
    }
    std::vector<int32_t> staged(RK + 2 * E + (stagesExperts(p) ? RK : 0));
    std::copy(routing.row_index.begin(), routing.row_index.end(), staged.begin());
    int32_t sum = 0;
    for (size_t e = 0; e < E; ++e) {
      staged[RK + e] = routing.counts[e];
      staged[RK + E + e] = sum += routing.counts[e];
    }
    if (stagesExperts(p))
      std::copy(routing.experts.begin(), routing.experts.end(), staged.begin() + RK + 2 * E);
    const auto address = reinterpret_cast<uintptr_t>(data.workspace);
    const void *aligned = reinterpret_cast<const void *>((address + 3) & ~uintptr_t{3});
    cl_mem workspace = nullptr;
    cl_ulong base = 0;
    INFINIOP_CHECK(resolveSpan(kInit, handle_, aligned,
                               {0, static_cast<ptrdiff_t>(staged.size()) - 1}, 4, &workspace,
                               &base));

    // Everything is checked: from here on the call writes. Blocking, so `staged` may go.
    INFINIOP_CL_CHECK(kInit, "clEnqueueWriteBuffer",
                      clEnqueueWriteBuffer(queue, workspace, CL_TRUE, base * 4, staged.size() * 4,
                                           staged.data(), 0, nullptr, nullptr));
    std::lock_guard<std::mutex> lock(mutex_);
    INFINIOP_CHECK(writeIndex(queue, p.row_index, row_index, row_index_v, workspace, base));
    INFINIOP_CHECK(
        writeIndex(queue, p.counts, counts, counts_v, workspace, base + RK + (p.cumsum ? E : 0)));
    INFINIOP_CHECK(writeIndex(queue, p.before_capacity, before, before_v, workspace, base + RK));
    const cl_ulong topk = p.topk, rows = p.expanded_x.rows, capacity = p.capacity,
                   hidden = p.hidden;
    if (quant)
      return runQuant(queue, expanded, expanded_v, x, x_v, dynamic, dynamic_v, scale, scale_v,
                      offset, offset_v, workspace, base);
    if (p.hidden == 0) return INFINI_STATUS_SUCCESS;
    const size_t chunks = (p.hidden + kChunk - 1) / kChunk;
    if (RK > 0 && rows > 0) {
      INFINIOP_CHECK(setArgs(kInit, rows_.get(), 0, expanded.mem, expanded_v, x.mem, x_v, workspace,
                             base, topk, rows, hidden));
      INFINIOP_CHECK(launch(kInit, queue, rows_.get(), chunks, rows_group_, p.tokens));
    }
    if (capacity > 0 && rows > 0) {
      const cl_ulong counts_index = base + RK;
      INFINIOP_CHECK(setArgs(kInit, padding_.get(), 0, expanded.mem, expanded_v, workspace,
                             counts_index, capacity, hidden));
      INFINIOP_CHECK(launch(kInit, queue, padding_.get(), chunks, padding_group_, rows));
    }
    return INFINI_STATUS_SUCCESS;
  }

 private:
  // MoeInitRoutingQuantV2's rows: a work-item per position quantizes its row (and, dynamic,
  // writes its scale); then the unfilled capacity slots get zero bytes and a zero scale.
  infiniStatus_t runQuant(cl_command_queue queue, const Operand &expanded, const RowArg &expanded_v,
                          const Operand &x, const RowArg &x_v, const Operand &dynamic,
                          const RowArg &dynamic_v, const Operand &scale, const TableArg &scale_v,
                          const Operand &offset, const TableArg &offset_v, cl_mem staged,
                          cl_ulong base) const {
    const moe::InitPlan &p = plan_;
    const size_t RK = p.tokens * p.topk, E = p.experts;
    const cl_ulong topk = p.topk, rows = p.expanded_x.rows, capacity = p.capacity,
                   hidden = p.hidden, smooth_rows = p.quant.smooth_rows;
    const cl_uint fp8 = p.quant.format == exact::QuantFormat::fp8_e4m3, dyn = p.quant.dynamic;
    // Nothing to write without rows, or without columns and scales.
    if (rows == 0 || (hidden == 0 && !dyn)) return INFINI_STATUS_SUCCESS;
    // Absent or empty buffers are never read: a present one of the call stands in for them.
    const cl_mem some = expanded.present ? expanded.mem : dynamic.mem;
    auto or_some = [&](const Operand &o) { return o.present ? o.mem : some; };
    if (RK > 0) {
      const cl_ulong experts_index = base + RK + 2 * E, offset_index = offset_v.v.s[0];
      INFINIOP_CHECK(setArgs(kInit, rows_.get(), 0, or_some(expanded), expanded_v, or_some(x), x_v,
                             staged, base, experts_index, topk, rows, hidden, or_some(scale),
                             scale_v, or_some(offset), offset_index, or_some(dynamic), dynamic_v,
                             fp8, dyn, smooth_rows));
      INFINIOP_CHECK(launch(kInit, queue, rows_.get(), RK, rows_group_));
    }
    if (capacity == 0) return INFINI_STATUS_SUCCESS;
    const cl_ulong counts_index = base + RK;
    if (hidden > 0) {
      INFINIOP_CHECK(setArgs(kInit, padding_.get(), 0, expanded.mem, expanded_v, staged,
                             counts_index, capacity, hidden));
      INFINIOP_CHECK(launch(kInit, queue, padding_.get(), (p.hidden + kChunk - 1) / kChunk,
                            padding_group_, rows));
    }
    if (dyn) {
      INFINIOP_CHECK(
          setArgs(kInit, scales_.get(), 0, dynamic.mem, dynamic_v, staged, counts_index, capacity));
      INFINIOP_CHECK(launch(kInit, queue, scales_.get(), rows, scales_group_));
    }
    return INFINI_STATUS_SUCCESS;
  }

  // An index output (if present and not empty) from `values` staged at element `at`.
  infiniStatus_t writeIndex(cl_command_queue queue, const gather::IndexView &view,
                            const Operand &out, const TableArg &arg, cl_mem staged,
                            cl_ulong at) const {
    if (!out.present) return INFINI_STATUS_SUCCESS;
    // A flat (n) view read as (n, 1) or (R, K) in row layout: element i at index + i * step.
    const cl_long index = arg.v.s[0], step = view.cols > 1 ? arg.v.s[2] : arg.v.s[1];
    cl_kernel kernel = view.wide ? index64_.get() : index32_.get();
    INFINIOP_CHECK(setArgs(kInit, kernel, 0, out.mem, index, step, staged, at));
    return launch(kInit, queue, kernel, view.rows * view.cols,
                  view.wide ? index64_group_ : index32_group_);
  }

  const char *kInit;  // the operator's name, for messages
  infiniopHandle_t handle_;
  moe::InitPlan plan_;
  KernelRef rows_, padding_, index32_, index64_, scales_;
  size_t rows_group_ = 1, padding_group_ = 1, index32_group_ = 1, index64_group_ = 1,
         scales_group_ = 1;
  mutable std::mutex mutex_;  // a cl_kernel's arguments are shared state
};

}  // namespace

infiniStatus_t makeMoeInitRunner(const char *op, infiniopHandle_t handle, const Plan &plan,
                                 std::unique_ptr<Runner> *runner) {
  return initialized(std::make_unique<Init>(op, handle, static_cast<const moe::InitPlan &>(plan)),
                     runner);
}

}  // namespace infiniop::opencl
