// SPDX-License-Identifier: Apache-2.0
#include "opencl/elementwise.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/handle.h"
#include "core/tensor.h"
#include "elementwise/runner.h"
#include "kernels/list.h"
#include "opencl/kernel_table.h"
#include "opencl/program.h"
#include "opencl/runtime.h"
#include "opencl/sources.h"

namespace infiniop::opencl {
namespace {

namespace ew = elementwise;

// The functor source of each elementwise kernel, by KernelId: kernels/<name>.cl.
#define INFINIOP_OPENCL_FUNCTOR(Family, name) sources::name,
constexpr const char *kFunctors[] = {INFINIOP_ELEMENTWISE_KERNELS(INFINIOP_OPENCL_FUNCTOR)};
#undef INFINIOP_OPENCL_FUNCTOR

static_assert(ew::kMaxOperands == 8, "kernels/elementwise.cl takes 8 operand pointers");
static_assert(ew::kMaxAttributeBytes == sizeof(cl_uint16), "attributes travel as one uint16");

class OpenclRunner final : public ew::Runner {
 public:
  OpenclRunner(const char *op, infiniopHandle_t handle, const ew::Plan &plan)
      : op_(op), handle_(handle), plan_(plan) {}
  ~OpenclRunner() override {
    if (plan_buffer_) clReleaseMemObject(plan_buffer_);
  }

  infiniStatus_t init(cl_program program) {
    // The kernels of the plan's layout class: one stride-1 dim, one dim, or several (two dims
    // also by rows, when a call's range is whole rows).
    if (plan_.ndim == 1)
      INFINIOP_CHECK(
          pair_.init(op_, handle_, program, plan_.inner_contiguous ? "contiguous" : "row"));
    else
      INFINIOP_CHECK(pair_.init(op_, handle_, program, "strided"));
    if (plan_.ndim == 2) INFINIOP_CHECK(rows_.init(op_, handle_, program, "rows"));
    // What every call passes or checks that depends on the plan only: each operand's steps and
    // the byte range it reaches from its base.
    const auto size = static_cast<ptrdiff_t>(plan_.element_size);
    const std::vector<size_t> shape(plan_.shape, plan_.shape + plan_.ndim);
    for (int k = 0; k < plan_.numOperands(); ++k) {
      const ElementSpan span = elementSpan(
          shape, std::vector<ptrdiff_t>(plan_.strides[k], plan_.strides[k] + plan_.ndim));
      reach_[k] = {span.lowest * size, (span.highest + 1) * size};
      step_.s[k] = plan_.strides[k][plan_.ndim - 1];
      if (plan_.ndim == 2) row_step_.s[k] = plan_.strides[k][0];
    }
    // The plan as the strided kernel reads it: shape, then each operand's strides.
    std::vector<cl_long> words(plan_.ndim * (plan_.numOperands() + 1));
    for (int d = 0; d < plan_.ndim; ++d) {
      words[d] = static_cast<cl_long>(plan_.shape[d]);
      for (int k = 0; k < plan_.numOperands(); ++k)
        words[plan_.ndim * (k + 1) + d] = plan_.strides[k][d];
    }
    return planBuffer(op_, handle_, words, &plan_buffer_);
  }

  infiniStatus_t run(const void *attributes, char *const *operands, size_t begin, size_t end,
                     bool zero_fill, void *stream) const override {
    cl_command_queue queue = nullptr;
    INFINIOP_CHECK(queueOf(op_, handle_, stream, &queue));
    cl_ulong8 index{};
    cl_mem buffers[ew::kMaxOperands] = {};
    for (int k = 0; k < plan_.numOperands(); ++k) {
      BufferArg arg{};
      INFINIOP_CHECK(resolveView(op_, handle_, operands[k], reach_[k].lowest, reach_[k].end,
                                 plan_.element_size, &arg));
      buffers[k] = arg.mem;
      index.s[k] = arg.index;
    }
    for (int k = plan_.numOperands(); k < ew::kMaxOperands; ++k) buffers[k] = buffers[0];
    const cl_uint ndim = static_cast<cl_uint>(plan_.ndim);
    cl_uint16 words{};
    if (attributes) std::memcpy(&words, attributes, sizeof words);

    // Whole rows of a two-dim plan run as a 2-D grid (row length, rows).
    const size_t length = plan_.rowLength();
    const bool by_rows = plan_.ndim == 2 && begin % length == 0 && end % length == 0;
    const Pair &pair = by_rows ? rows_ : pair_;
    const cl_kernel kernel = zero_fill ? pair.zero.get() : pair.compute.get();
    const size_t group = zero_fill ? pair.zero_group : pair.compute_group;
    const cl_ulong first = by_rows ? begin / length : begin;
    // A cl_kernel's arguments are shared state: set them and enqueue as one step.
    std::lock_guard<std::mutex> lock(mutex_);
    INFINIOP_CHECK(setArgs(op_, kernel, 0, buffers[0], buffers[1], buffers[2], buffers[3],
                           buffers[4], buffers[5], buffers[6], buffers[7], index, first, words,
                           step_, row_step_, plan_buffer_, ndim));
    if (by_rows) return launch(op_, queue, kernel, length, group, (end - begin) / length);
    return launch(op_, queue, kernel, end - begin, group);
  }

 private:
  const char *op_;
  infiniopHandle_t handle_;
  ew::Plan plan_;
  // elementwise_<layout> and zero_<layout> of the program, with their work-group sizes.
  struct Pair {
    KernelRef compute, zero;
    size_t compute_group = 1, zero_group = 1;
    infiniStatus_t init(const char *op, infiniopHandle_t handle, cl_program program,
                        const std::string &layout) {
      INFINIOP_CHECK(createKernel(op, program, ("elementwise_" + layout).c_str(), compute.out()));
      INFINIOP_CHECK(createKernel(op, program, ("zero_" + layout).c_str(), zero.out()));
      INFINIOP_CHECK(workGroupSize(op, handle, compute.get(), &compute_group));
      return workGroupSize(op, handle, zero.get(), &zero_group);
    }
  };
  Pair pair_;  // by element
  Pair rows_;  // two-dim plans, by rows
  struct Reach {
    ptrdiff_t lowest, end;  // bytes from the operand's base: [lowest, end)
  };
  Reach reach_[ew::kMaxOperands] = {};
  cl_long8 step_{}, row_step_{};
  cl_mem plan_buffer_ = nullptr;
  mutable std::mutex mutex_;
};

}  // namespace

const char *storageOption(infiniDtype_t dtype) {
  switch (dtype) {
    case INFINI_DTYPE_F16:
      return "-DSTORAGE_F16";
    case INFINI_DTYPE_BF16:
      return "-DSTORAGE_BF16";
    default:
      return "-DSTORAGE_F32";
  }
}

infiniStatus_t makeElementwiseRunner(const char *op, infiniopHandle_t handle,
                                     const Plan &kernel_plan, std::unique_ptr<Runner> *runner) {
  const auto &plan = static_cast<const ew::Plan &>(kernel_plan);
  const char *functor_source = kFunctors[static_cast<int>(plan.kernel)];
  // A one- or two-dim plan whose inner steps are all 1 or 2 (interleaved pairs) gets them as
  // constants: one more program per such pattern, instead of a loop PoCL cannot vectorize.
  std::string options = std::string("-cl-std=CL1.2 ") + storageOption(plan.dtype);
  // The relaxed mode of F32 outputs (Plan::relaxed): kernels with a relaxed evaluation take it.
  if (plan.relaxed) options += " -DRELAXED";
  const int inner = plan.ndim - 1;
  bool constant_steps = plan.ndim <= 2 && !plan.inner_contiguous;
  for (int k = 0; k < plan.numOperands(); ++k)
    constant_steps = constant_steps && (plan.strides[k][inner] == 1 || plan.strides[k][inner] == 2);
  if (constant_steps) {
    options += " -DCONSTANT_STEPS";
    for (int k = 0; k < ew::kMaxOperands; ++k) {
      const bool operand = k < plan.numOperands();
      options += " -DSTEP_" + std::to_string(k) + "=" +
                 std::to_string(operand ? plan.strides[k][inner] : 1);
      // The odd half of an interleaved pair is addressed through the even half's pointer.
      const bool second =
          operand && plan.role[k] == ew::Plan::kPairSecond &&
          plan.source[k] == plan.source[k - 1] &&
          std::equal(plan.strides[k], plan.strides[k] + plan.ndim, plan.strides[k - 1]);
      options += " -DPAIRED_" + std::to_string(k) + "=" + (second ? "1" : "0");
    }
  }
  cl_program program = nullptr;
  INFINIOP_CHECK(getProgram(op, handle, {sources::common, functor_source, sources::elementwise},
                            options, &program));
  auto made = std::make_unique<OpenclRunner>(op, handle, plan);
  INFINIOP_CHECK(made->init(program));
  *runner = std::move(made);
  return INFINI_STATUS_SUCCESS;
}

}  // namespace infiniop::opencl
