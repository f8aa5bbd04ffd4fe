// SPDX-License-Identifier: Apache-2.0
// DequantSwigluQuant on OpenCL (kernels/dequant_swiglu_quant.cl, after gated_quant.cl, whose
// quantization it shares): every value in double, as devices/cpu_reference/
// dequant_swiglu_quant.cc computes it, so y's bytes and the scales' bits are the reference's. That
// needs cl_khr_fp64: a device without it is refused at descriptor creation, as GatedQuant's. The
// views' geometry is uploaded once at creation; group_index's counts (checked on the host) are
// read by the kernel from group_index itself (no workspace).
#include <mutex>
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "opencl/elementwise.h"
#include "opencl/gather.h"
#include "opencl/kernel_table.h"
#include "opencl/program.h"
#include "opencl/quant_program.h"
#include "opencl/router_view.h"
#include "opencl/runtime.h"
#include "opencl/sources.h"
#include "ops/dequant_swiglu_quant.h"

namespace infiniop::opencl {
namespace {

using quant::DequantSwigluQuantData;
using quant::DequantSwigluQuantPlan;

class DequantSwigluQuant final : public quant::DequantSwigluQuantRunner {
 public:
  DequantSwigluQuant(const char *op, infiniopHandle_t handle, const DequantSwigluQuantPlan &plan)
      : op_(op), handle_(handle), plan_(plan) {}
  ~DequantSwigluQuant() override {
    if (geometry_) clReleaseMemObject(geometry_);
  }

  infiniStatus_t init() {
    const DequantSwigluQuantPlan &p = plan_;
    // storage_t is a float bias's dtype (its load_value); F32 where the bias is none or INT32.
    INFINIOP_CHECK(quantKernel(
        op_, handle_,
        {sources::common, sources::quant, sources::gated_quant, sources::dequant_swiglu_quant},
        floatBias() ? p.bias.dtype : INFINI_DTYPE_F32, "dequant_swiglu_quant", &kernel_, &group_));
    // The order of the .cl files' QVIEW_*.
    return uploadViewGeometry(op_, handle_,
                              {&p.x, &p.y, &p.scale, &p.smooth_scales, &p.group_index,
                               &p.weight_scale, &p.activation_scale, &p.bias},
                              &geometry_);
  }

  infiniStatus_t run(const DequantSwigluQuantData &data, void *stream) const override {
    const DequantSwigluQuantPlan &p = plan_;
    // Every (row, group) is a work-item; with none (H = 0 and group_size > 0) y is empty too.
    if (p.rows == 0 || p.groups == 0) return INFINI_STATUS_SUCCESS;
    cl_command_queue queue = nullptr;
    INFINIOP_CHECK(queueOf(op_, handle_, stream, &queue));
    // Every device range first: nothing is queued before all of them resolve. scale's buffer
    // (never empty here) stands in for the absent or empty views (never read).
    ViewArg scale, x, y, smooth, group_index, weight, activation, bias;
    INFINIOP_CHECK(resolveRouterView(op_, handle_, p.scale, data.scale, nullptr, &scale));
    INFINIOP_CHECK(resolveRouterView(op_, handle_, p.x, data.x, scale.mem, &x));
    INFINIOP_CHECK(resolveRouterView(op_, handle_, p.y, data.y, scale.mem, &y));
    INFINIOP_CHECK(
        resolveRouterView(op_, handle_, p.smooth_scales, data.smooth_scales, scale.mem, &smooth));
    INFINIOP_CHECK(
        resolveRouterView(op_, handle_, p.group_index, data.group_index, scale.mem, &group_index));
    INFINIOP_CHECK(
        resolveRouterView(op_, handle_, p.weight_scale, data.weight_scale, scale.mem, &weight));
    INFINIOP_CHECK(resolveRouterView(op_, handle_, p.activation_scale, data.activation_scale,
                                     scale.mem, &activation));
    INFINIOP_CHECK(resolveRouterView(op_, handle_, p.bias, data.bias, scale.mem, &bias));
    const cl_ulong half = p.half, group_size = p.group_size, experts = p.experts;
    const cl_uint activate_left = p.activate_left ? 1 : 0,
                  fp8 = p.format == quant::QuantFormat::fp8_e4m3 ? 1 : 0,
                  dynamic = p.dynamic ? 1 : 0, power_of_two = p.power_of_two ? 1 : 0,
                  has_smooth = p.smooth ? 1 : 0, has_weight = p.weight_scale.present ? 1 : 0,
                  weight_per_expert = p.weight_per_expert ? 1 : 0,
                  has_activation = p.activation_scale.present ? 1 : 0,
                  bias_kind = !p.bias.present ? 0u : (p.bias_int ? 2u : 1u),
                  bias_per_expert = p.bias_per_expert ? 1 : 0;
    // A cl_kernel's arguments are shared state: set them and enqueue as one step.
    std::lock_guard<std::mutex> lock(mutex_);
    INFINIOP_CHECK(
        setArgs(op_, kernel_.get(), 0, geometry_, y.mem, y.index, scale.mem, scale.index, x.mem,
                x.index, smooth.mem, smooth.index, group_index.mem, group_index.index, weight.mem,
                weight.index, activation.mem, activation.index, bias.mem, bias.mem, bias.index,
                half, group_size, experts, activate_left, fp8, dynamic, power_of_two, has_smooth,
                has_weight, weight_per_expert, has_activation, bias_kind, bias_per_expert));
    return launch(op_, queue, kernel_.get(), p.groups, group_, p.rows);
  }

 private:
  bool floatBias() const { return plan_.bias.present && !plan_.bias_int; }

  const char *op_;
  infiniopHandle_t handle_;
  DequantSwigluQuantPlan plan_;
  KernelRef kernel_;
  size_t group_ = 1;
  cl_mem geometry_ = nullptr;
  mutable std::mutex mutex_;
};

}  // namespace

infiniStatus_t makeDequantSwigluQuantRunner(const char *op, infiniopHandle_t handle,
                                            const Plan &plan, std::unique_ptr<Runner> *runner) {
  return initialized(std::make_unique<DequantSwigluQuant>(
                         op, handle, static_cast<const DequantSwigluQuantPlan &>(plan)),
                     runner);
}

}  // namespace infiniop::opencl
