// SPDX-License-Identifier: Apache-2.0
// SwiGluQuant, GeluMulQuant and ClippedSwigluQuant on OpenCL (kernels/gated_quant.cl): every value
// in double, as devices/cpu_reference/gated_quant.cc computes it, so y's bytes and the scales' bits
// are the reference's. That needs cl_khr_fp64: a device without it is refused at descriptor
// creation. The views' geometry is uploaded once at creation; a call passes each tensor's buffer
// and element index. group_index's counts (checked on the host before the call) are read by the
// kernel from group_index itself, so a call writes no buffer of its own (the operator has no
// workspace).
#include <mutex>
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/gated_quant.h"
#include "opencl/elementwise.h"
#include "opencl/gather.h"
#include "opencl/kernel_table.h"
#include "opencl/program.h"
#include "opencl/quant_program.h"
#include "opencl/router_view.h"
#include "opencl/runtime.h"
#include "opencl/sources.h"

namespace infiniop::opencl {
namespace {

using quant::GatedQuantData;
using quant::GatedQuantPlan;

class GatedQuant final : public quant::GatedQuantRunner {
 public:
  GatedQuant(const char *op, infiniopHandle_t handle, const GatedQuantPlan &plan)
      : op_(op), handle_(handle), plan_(plan) {}
  ~GatedQuant() override {
    if (geometry_) clReleaseMemObject(geometry_);
  }

  infiniStatus_t init() {
    const GatedQuantPlan &p = plan_;
    INFINIOP_CHECK(quantKernel(op_, handle_,
                               {sources::common, sources::quant, sources::gated_quant}, p.dtype,
                               "gated_quant", &kernel_, &group_));
    // The order of the .cl file's QVIEW_*.
    return uploadViewGeometry(op_, handle_,
                              {&p.x, &p.y, &p.scale, &p.smooth_scales, &p.group_index}, &geometry_);
  }

  infiniStatus_t run(const GatedQuantData &data, void *stream) const override {
    const GatedQuantPlan &p = plan_;
    // Every (row, group) is a work-item; with none (H = 0 and group_size > 0) y is empty too.
    if (p.rows == 0 || p.groups == 0) return INFINI_STATUS_SUCCESS;
    cl_command_queue queue = nullptr;
    INFINIOP_CHECK(queueOf(op_, handle_, stream, &queue));
    // Every device range first: nothing is queued before all of them resolve. scale has
    // rows x groups elements, never empty here: its buffer stands in for the absent or empty
    // views (never read).
    ViewArg scale, x, y, smooth, group_index;
    INFINIOP_CHECK(resolveRouterView(op_, handle_, p.scale, data.scale, nullptr, &scale));
    INFINIOP_CHECK(resolveRouterView(op_, handle_, p.x, data.x, scale.mem, &x));
    INFINIOP_CHECK(resolveRouterView(op_, handle_, p.y, data.y, scale.mem, &y));
    INFINIOP_CHECK(
        resolveRouterView(op_, handle_, p.smooth_scales, data.smooth_scales, scale.mem, &smooth));
    INFINIOP_CHECK(
        resolveRouterView(op_, handle_, p.group_index, data.group_index, scale.mem, &group_index));
    const cl_ulong half = p.half, group_size = p.group_size, experts = p.experts;
    const cl_uint activation = static_cast<cl_uint>(p.activation),
                  activate_left = p.activate_left ? 1 : 0,
                  fp8 = p.format == quant::QuantFormat::fp8_e4m3 ? 1 : 0,
                  dynamic = p.dynamic ? 1 : 0, power_of_two = p.power_of_two ? 1 : 0,
                  has_smooth = p.smooth ? 1 : 0, interleaved = p.interleaved ? 1 : 0;
    // The clipped gate's attributes (unused by the others).
    const cl_float alpha = p.clipped.alpha, limit = p.clipped.limit, bias = p.clipped.bias,
                   a_limit = p.clipped.a_limit;
    // A cl_kernel's arguments are shared state: set them and enqueue as one step.
    std::lock_guard<std::mutex> lock(mutex_);
    INFINIOP_CHECK(setArgs(op_, kernel_.get(), 0, geometry_, y.mem, y.index, scale.mem, scale.index,
                           x.mem, x.index, smooth.mem, smooth.index, group_index.mem,
                           group_index.index, half, group_size, experts, activation, activate_left,
                           fp8, dynamic, power_of_two, has_smooth, interleaved, alpha, limit, bias,
                           a_limit));
    return launch(op_, queue, kernel_.get(), p.groups, group_, p.rows);
  }

 private:
  const char *op_;
  infiniopHandle_t handle_;
  GatedQuantPlan plan_;
  KernelRef kernel_;
  size_t group_ = 1;
  cl_mem geometry_ = nullptr;
  mutable std::mutex mutex_;
};

static_assert(static_cast<int>(quant::GateActivation::silu) == 0 &&
                  static_cast<int>(quant::GateActivation::gelu_erf) == 1 &&
                  static_cast<int>(quant::GateActivation::gelu_tanh) == 2 &&
                  static_cast<int>(quant::GateActivation::clipped) == 3,
              "kernels/gated_quant.cl's ACT_* values");

}  // namespace

infiniStatus_t quantKernel(const char *op, infiniopHandle_t handle,
                           std::initializer_list<const char *> sources, infiniDtype_t storage,
                           const char *name, KernelRef *kernel, size_t *group) {
  if (!hasFp64(handle))
    return fail(INFINI_STATUS_DEVICE_TYPE_NOT_SUPPORTED,
                std::string(op) +
                    ": the opencl device has no cl_khr_fp64; this operator needs double to "
                    "give the reference's bytes and scales");
  const std::string options =
      std::string("-cl-std=CL1.2 ") + storageOption(storage) + " -DEXACT_FORMULAS";
  cl_program program = nullptr;
  INFINIOP_CHECK(getProgram(op, handle, sources, options, &program));
  INFINIOP_CHECK(createKernel(op, program, name, kernel->out()));
  return workGroupSize(op, handle, kernel->get(), group);
}

infiniStatus_t makeGatedQuantRunner(const char *op, infiniopHandle_t handle, const Plan &plan,
                                    std::unique_ptr<Runner> *runner) {
  return initialized(
      std::make_unique<GatedQuant>(op, handle, static_cast<const GatedQuantPlan &>(plan)), runner);
}

}  // namespace infiniop::opencl
