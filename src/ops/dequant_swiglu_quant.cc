// SPDX-License-Identifier: Apache-2.0
// DequantSwigluQuant (family DequantSwigluQuant, ops/dequant_swiglu_quant.h): the C ABI, the
// descriptor and its checks (SwiGluQuant's for y, scale, smooth_scales and group_index:
// ops/gated_quant_checks.h), and the family's host runner. The arithmetic is the device's:
// docs/dequant_swiglu_quant.md.
#include <memory>
#include <string>
#include <vector>

#include "infiniop/ops/dequant_swiglu_quant.h"
#include "ops/dequant_swiglu_quant.h"
#include "ops/gated_quant_checks.h"
#include "ops/moe_gating_checks.h"

namespace {
using infiniop::Tensor;
using infiniop::moe_checks::Checker;
using infiniop::moe_gating::routerView;
namespace checks = infiniop::checks;
namespace quant = infiniop::quant;

constexpr const char *kOp = "DequantSwigluQuant";

using Descriptor = infiniop::moe_gating::RunnerDescriptor<quant::DequantSwigluQuantPlan,
                                                          quant::DequantSwigluQuantRunner>;

checks::Operand operand(const char *name, const void *data, const infiniop::moe::RouterView &v) {
  return infiniop::moe_gating::routerOperand(name, data, v);
}

// weight_scale or bias: (2H), or (E, 2H) with group_index; *per_expert says which.
infiniStatus_t checkColumns(const Checker &check, const char *name, const Tensor *t, size_t H,
                            size_t experts, bool *per_expert) {
  *per_expert = false;
  if (!t) return INFINI_STATUS_SUCCESS;
  if (experts > 0 && t->ndim() == 2) {
    *per_expert = true;
    return check.shape(name, t, {experts, 2 * H}, "(E, 2H), E from group_index");
  }
  return check.shape(name, t, {2 * H},
                     experts > 0 ? "(2H) or (E, 2H), E from group_index"
                                 : "(2H), 2H = x's last dim (E, 2H needs group_index)");
}

infiniStatus_t create(infiniopHandle_t handle, infiniopDequantSwigluQuantDescriptor_t *desc_ptr,
                      const Tensor *y, const Tensor *scale, const Tensor *x,
                      const Tensor *weight_scale, const Tensor *activation_scale,
                      const Tensor *bias, const Tensor *smooth, const Tensor *group_index,
                      const quant::QuantAttributes &a) {
  Checker check(kOp);
  INFINIOP_CHECK(check.opening(desc_ptr, handle));
  INFINIOP_CHECK(check.required("y descriptor", y));
  INFINIOP_CHECK(check.required("scale descriptor", scale));
  INFINIOP_CHECK(check.required("x descriptor", x));
  INFINIOP_CHECK(check.device(handle, infiniop::KernelId::dequant_swiglu_quant));
  INFINIOP_CHECK(quant::checkAttributes(check, a));
  INFINIOP_CHECK(check.exactDtype("x", x, INFINI_DTYPE_I32));

  auto desc = std::make_unique<Descriptor>(kOp);
  quant::DequantSwigluQuantPlan &p = desc->plan;
  INFINIOP_CHECK(quant::planGatedQuant(check, y, scale, x, smooth, group_index, a,
                                       /*group_index_needs_smooth=*/false, &p));
  p.kernel = infiniop::KernelId::dequant_swiglu_quant;
  p.activation = quant::GateActivation::silu;
  p.dtype = INFINI_DTYPE_I32;
  const size_t H = p.half;

  INFINIOP_CHECK(check.exactDtype("weight_scale", weight_scale, INFINI_DTYPE_F32));
  INFINIOP_CHECK(
      checkColumns(check, "weight_scale", weight_scale, H, p.experts, &p.weight_per_expert));
  INFINIOP_CHECK(check.exactDtype("activation_scale", activation_scale, INFINI_DTYPE_F32));
  bool trailing_one = false;
  if (activation_scale) {
    const std::vector<size_t> lead = quant::rowsShape(x, 1);
    trailing_one = activation_scale->shape == lead;
    if (!trailing_one)
      INFINIOP_CHECK(check.shape(
          "activation_scale", activation_scale, std::vector<size_t>(lead.begin(), lead.end() - 1),
          "(x's leading dims) or (x's leading dims, 1): one scale per row of x"));
  }
  if (bias) {
    INFINIOP_CHECK(infiniop::checkTensor(kOp, "bias", bias));
    if (bias->dtype != INFINI_DTYPE_F32 && bias->dtype != INFINI_DTYPE_F16 &&
        bias->dtype != INFINI_DTYPE_BF16 && bias->dtype != INFINI_DTYPE_I32)
      return check.fail(INFINI_STATUS_BAD_TENSOR_DTYPE, std::string("bias has dtype ") +
                                                            infiniop::dtypeName(bias->dtype) +
                                                            "; F32, F16, BF16 or I32 is required");
  }
  INFINIOP_CHECK(checkColumns(check, "bias", bias, H, p.experts, &p.bias_per_expert));
  if (group_index && !smooth && !p.weight_per_expert && !p.bias_per_expert)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "group_index chooses rows of smooth_scales (E, H) or of weight_scale or "
                      "bias (E, 2H), and none is given");
  p.bias_int = bias && bias->dtype == INFINI_DTYPE_I32;
  INFINIOP_CHECK(routerView(check, "weight_scale", weight_scale, true, &p.weight_scale));
  INFINIOP_CHECK(
      routerView(check, "activation_scale", activation_scale, trailing_one, &p.activation_scale));
  INFINIOP_CHECK(routerView(check, "bias", bias, true, &p.bias));
  return infiniop::moe_gating::publishRunner(kOp, handle, desc_ptr, std::move(desc));
}

}  // namespace

// ---- the host runner ---------------------------------------------------------------------------

namespace infiniop::family {
infiniStatus_t DequantSwigluQuant::hostRunner(HostKernel *kernel, const Plan &plan,
                                              std::unique_ptr<Runner> *runner) {
  *runner = std::make_unique<HostCallRunner<quant::DequantSwigluQuantRunner, DequantSwigluQuant,
                                            quant::DequantSwigluQuantData>>(kernel, plan);
  return INFINI_STATUS_SUCCESS;
}
}  // namespace infiniop::family

// ---- the C ABI ---------------------------------------------------------------------------------

extern "C" infiniStatus_t infiniopCreateDequantSwigluQuantDescriptor(
    infiniopHandle_t handle, infiniopDequantSwigluQuantDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t y_desc, infiniopTensorDescriptor_t scale_desc,
    infiniopTensorDescriptor_t x_desc, infiniopTensorDescriptor_t weight_scale_desc,
    infiniopTensorDescriptor_t activation_scale_desc, infiniopTensorDescriptor_t bias_desc,
    infiniopTensorDescriptor_t smooth_scales_desc, infiniopTensorDescriptor_t group_index_desc,
    int32_t activate_left, infiniopQuantMode_t quant_mode, int64_t group_size,
    infiniopQuantScaleFormat_t scale_format) {
  return infiniop::guarded(kOp, [&] {
    return create(handle, desc_ptr, y_desc, scale_desc, x_desc, weight_scale_desc,
                  activation_scale_desc, bias_desc, smooth_scales_desc, group_index_desc,
                  {activate_left, infiniop::enumValue(quant_mode), group_size,
                   infiniop::enumValue(scale_format)});
  });
}

INFINIOP_DESCRIPTOR_QUERIES(DequantSwigluQuant, kOp)

extern "C" infiniStatus_t infiniopDequantSwigluQuant(
    infiniopDequantSwigluQuantDescriptor_t public_desc, void *workspace, size_t workspace_size,
    void *y, void *scale, const void *x, const void *weight_scale, const void *activation_scale,
    const void *bias, const void *smooth_scales, const void *group_index, void *stream) {
  Descriptor *desc = nullptr;
  INFINIOP_CHECK(infiniop::unwrapDescriptor(kOp, public_desc, &desc));
  return infiniop::guarded(kOp, [&] {
    const quant::DequantSwigluQuantPlan &p = desc->plan;
    INFINIOP_CHECK(checks::checkWorkspaceSize(kOp, workspace_size, desc->workspace_size));
    const auto ws = checks::workspaceOperand(workspace, desc->workspace_size);
    // scale is written (dynamic) or read (static).
    INFINIOP_CHECK(checks::checkOperands(
        kOp,
        {operand("y", y, p.y), operand("scale", scale, p.scale), operand("x", x, p.x),
         operand("weight_scale", weight_scale, p.weight_scale),
         operand("activation_scale", activation_scale, p.activation_scale),
         operand("bias", bias, p.bias), operand("smooth_scales", smooth_scales, p.smooth_scales),
         operand("group_index", group_index, p.group_index), ws},
        p.dynamic ? 2 : 1, /*last_is_workspace=*/true));
    std::vector<int64_t> counts;
    bool write = false;
    INFINIOP_CHECK(quant::callCounts(kOp, desc->handle, stream, p, group_index, &counts, &write));
    if (!write) return infiniop::succeed();
    const quant::DequantSwigluQuantData data{
        quant::callData(y, scale, x, smooth_scales, group_index, counts, workspace), weight_scale,
        activation_scale, bias};
    INFINIOP_CHECK(desc->runner->run(data, stream));
    return infiniop::succeed();
  });
}
