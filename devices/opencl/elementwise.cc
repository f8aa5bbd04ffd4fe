#include "opencl/elementwise.h"

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/handle.h"
#include "opencl/program.h"
#include "opencl/runtime.h"
#include "opencl/sources.h"

namespace infiniop::opencl {
namespace {

namespace ew = elementwise;

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
    // The kernel pair for the plan's layout class: one stride-1 dim, one dim, or any.
    const char *layout = plan_.ndim > 1 ? "strided" : plan_.inner_contiguous ? "contiguous" : "row";
    INFINIOP_CHECK(createKernel(op_, program, ("elementwise_" + std::string(layout)).c_str(),
                                compute_.kernel.out()));
    INFINIOP_CHECK(
        createKernel(op_, program, ("zero_" + std::string(layout)).c_str(), zero_.kernel.out()));
    INFINIOP_CHECK(workGroupSize(op_, handle_, compute_.kernel.get(), &compute_.group));
    INFINIOP_CHECK(workGroupSize(op_, handle_, zero_.kernel.get(), &zero_.group));
    // The plan as the strided kernel reads it: shape, then each operand's strides.
    std::vector<cl_long> words(plan_.ndim * (plan_.numOperands() + 1));
    for (int d = 0; d < plan_.ndim; ++d) {
      words[d] = static_cast<cl_long>(plan_.shape[d]);
      for (int k = 0; k < plan_.numOperands(); ++k)
        words[plan_.ndim * (k + 1) + d] = plan_.strides[k][d];
    }
    cl_int code = CL_SUCCESS;
    plan_buffer_ = clCreateBuffer(handle_->opencl->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                  words.size() * sizeof(cl_long), words.data(), &code);
    INFINIOP_CL_CHECK(op_, "clCreateBuffer", code);
    return INFINI_STATUS_SUCCESS;
  }

  infiniStatus_t run(const void *attributes, char *const *operands, size_t begin, size_t end,
                     bool zero_fill, void *stream) const override {
    cl_command_queue queue = nullptr;
    INFINIOP_CHECK(queueOf(op_, handle_, stream, &queue));
    cl_ulong8 index{};
    cl_long8 step{};
    cl_mem buffers[ew::kMaxOperands] = {};
    const auto size = static_cast<ptrdiff_t>(plan_.element_size);
    for (int k = 0; k < plan_.numOperands(); ++k) {
      ptrdiff_t lowest = 0, highest = 0;  // element offsets the operand reaches
      for (int d = 0; d < plan_.ndim; ++d) {
        const ptrdiff_t reach = plan_.strides[k][d] * static_cast<ptrdiff_t>(plan_.shape[d] - 1);
        (reach < 0 ? lowest : highest) += reach;
      }
      BufferArg arg{};
      INFINIOP_CHECK(resolveView(op_, handle_, operands[k], lowest * size, (highest + 1) * size,
                                 plan_.element_size, &arg));
      buffers[k] = arg.mem;
      index.s[k] = arg.index;
      step.s[k] = plan_.strides[k][plan_.ndim - 1];
    }
    for (int k = plan_.numOperands(); k < ew::kMaxOperands; ++k) buffers[k] = buffers[0];
    const cl_ulong first = begin;
    const cl_uint ndim = static_cast<cl_uint>(plan_.ndim);
    cl_uint16 words{};
    if (attributes) std::memcpy(&words, attributes, sizeof words);

    // A cl_kernel's arguments are shared state: set them and enqueue as one step.
    const Launchable &launchable = zero_fill ? zero_ : compute_;
    std::lock_guard<std::mutex> lock(mutex_);
    INFINIOP_CHECK(setArgs(op_, launchable.kernel.get(), 0, buffers[0], buffers[1], buffers[2],
                           buffers[3], buffers[4], buffers[5], buffers[6], buffers[7], index, first,
                           words, step, plan_buffer_, ndim));
    return launch(op_, queue, launchable.kernel.get(), end - begin, launchable.group);
  }

 private:
  const char *op_;
  infiniopHandle_t handle_;
  ew::Plan plan_;
  struct Launchable {
    KernelRef kernel;
    size_t group = 1;
  };
  Launchable compute_, zero_;  // the functor, and the zero-fill of skipped rows
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
                                     const char *functor_source, const ew::Plan &plan,
                                     std::unique_ptr<ew::Runner> *runner) {
  cl_program program = nullptr;
  INFINIOP_CHECK(getProgram(op, handle, {sources::common, functor_source, sources::elementwise},
                            std::string("-cl-std=CL1.2 ") + storageOption(plan.dtype), &program));
  auto made = std::make_unique<OpenclRunner>(op, handle, plan);
  INFINIOP_CHECK(made->init(program));
  *runner = std::move(made);
  return INFINI_STATUS_SUCCESS;
}

}  // namespace infiniop::opencl
