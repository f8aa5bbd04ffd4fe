// SPDX-License-Identifier: Apache-2.0
// SwiGluQuant, GeluMulQuant and ClippedSwigluQuant (family GatedQuant, ops/gated_quant.h): the C
// ABI, the descriptors and their checks, and the family's host runner (the arithmetic is the
// device's: docs/swiglu_quant.md).
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "infiniop/ops/clipped_swiglu_quant.h"
#include "infiniop/ops/gelu_mul_quant.h"
#include "infiniop/ops/swiglu_quant.h"
#include "ops/gated_quant.h"
#include "ops/gated_quant_checks.h"
#include "ops/moe_gating_checks.h"

namespace {
using infiniop::Tensor;
using infiniop::moe_checks::Checker;
using infiniop::moe_gating::routerView;
namespace checks = infiniop::checks;
namespace quant = infiniop::quant;

constexpr const char *kSwiGluQuant = "SwiGluQuant";
constexpr const char *kGeluMulQuant = "GeluMulQuant";
constexpr const char *kClippedSwigluQuant = "ClippedSwigluQuant";

using Descriptor =
    infiniop::moe_gating::RunnerDescriptor<quant::GatedQuantPlan, quant::GatedQuantRunner>;

checks::Operand operand(const char *name, const void *data, const infiniop::moe::RouterView &v) {
  return infiniop::moe_gating::routerOperand(name, data, v);
}

// ClippedSwigluQuant's gate: its split and ClippedSwiglu's attributes (checked).
struct ClippedGate {
  bool interleaved;
  infiniop::ClippedSwigluAttributes attributes;
};

template <class Public>
infiniStatus_t create(const char *op, infiniop::KernelId kernel, quant::GateActivation activation,
                      infiniopHandle_t handle, Public *desc_ptr, const Tensor *y,
                      const Tensor *scale, const Tensor *x, const Tensor *smooth,
                      const Tensor *group_index, const quant::QuantAttributes &a,
                      const ClippedGate *clipped = nullptr) {
  Checker check(op);
  INFINIOP_CHECK(check.opening(desc_ptr, handle));
  INFINIOP_CHECK(check.required("y descriptor", y));
  INFINIOP_CHECK(check.required("scale descriptor", scale));
  INFINIOP_CHECK(check.required("x descriptor", x));
  INFINIOP_CHECK(check.device(handle, kernel));
  INFINIOP_CHECK(quant::checkAttributes(check, a));

  INFINIOP_CHECK(check.floating("x", x));
  auto desc = std::make_unique<Descriptor>(op);
  quant::GatedQuantPlan &p = desc->plan;
  INFINIOP_CHECK(quant::planGatedQuant(check, y, scale, x, smooth, group_index, a,
                                       /*group_index_needs_smooth=*/true, &p));
  p.kernel = kernel;
  p.activation = activation;
  p.dtype = x->dtype;
  if (clipped) {
    p.interleaved = clipped->interleaved;
    p.clipped = clipped->attributes;
  }
  return infiniop::moe_gating::publishRunner(op, handle, desc_ptr, std::move(desc));
}

infiniStatus_t run(void *public_desc, const char *op, size_t workspace_size, void *workspace,
                   void *y, void *scale, const void *x, const void *smooth, const void *group_index,
                   void *stream) {
  Descriptor *desc = nullptr;
  INFINIOP_CHECK(infiniop::unwrapDescriptor(op, public_desc, &desc));
  return infiniop::guarded(op, [&] {
    const quant::GatedQuantPlan &p = desc->plan;
    INFINIOP_CHECK(checks::checkWorkspaceSize(op, workspace_size, desc->workspace_size));
    const auto ws = checks::workspaceOperand(workspace, desc->workspace_size);
    // scale is written (dynamic) or read (static).
    INFINIOP_CHECK(checks::checkOperands(
        op,
        {operand("y", y, p.y), operand("scale", scale, p.scale), operand("x", x, p.x),
         operand("smooth_scales", smooth, p.smooth_scales),
         operand("group_index", group_index, p.group_index), ws},
        p.dynamic ? 2 : 1, /*last_is_workspace=*/true));
    std::vector<int64_t> counts;
    bool write = false;
    INFINIOP_CHECK(quant::callCounts(op, desc->handle, stream, p, group_index, &counts, &write));
    if (write)
      INFINIOP_CHECK(desc->runner->run(
          quant::callData(y, scale, x, smooth, group_index, counts, workspace), stream));
    return infiniop::succeed();
  });
}

quant::GateActivation geluActivation(int approximate) {
  return approximate == INFINIOP_GELU_APPROXIMATE_TANH ? quant::GateActivation::gelu_tanh
                                                       : quant::GateActivation::gelu_erf;
}

}  // namespace

// ---- the host runner ---------------------------------------------------------------------------

namespace infiniop::family {
infiniStatus_t GatedQuant::hostRunner(HostKernel *kernel, const Plan &plan,
                                      std::unique_ptr<Runner> *runner) {
  *runner =
      std::make_unique<HostCallRunner<quant::GatedQuantRunner, GatedQuant, quant::GatedQuantData>>(
          kernel, plan);
  return INFINI_STATUS_SUCCESS;
}
}  // namespace infiniop::family

// ---- the C ABI ---------------------------------------------------------------------------------

extern "C" infiniStatus_t infiniopCreateSwiGluQuantDescriptor(
    infiniopHandle_t handle, infiniopSwiGluQuantDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t y_desc, infiniopTensorDescriptor_t scale_desc,
    infiniopTensorDescriptor_t x_desc, infiniopTensorDescriptor_t smooth_scales_desc,
    infiniopTensorDescriptor_t group_index_desc, int32_t activate_left,
    infiniopQuantMode_t quant_mode, int64_t group_size, infiniopQuantScaleFormat_t scale_format) {
  return infiniop::guarded(kSwiGluQuant, [&] {
    return create(kSwiGluQuant, infiniop::KernelId::swiglu_quant, quant::GateActivation::silu,
                  handle, desc_ptr, y_desc, scale_desc, x_desc, smooth_scales_desc,
                  group_index_desc,
                  {activate_left, infiniop::enumValue(quant_mode), group_size,
                   infiniop::enumValue(scale_format)});
  });
}

INFINIOP_DESCRIPTOR_QUERIES(SwiGluQuant, kSwiGluQuant)

extern "C" infiniStatus_t infiniopSwiGluQuant(infiniopSwiGluQuantDescriptor_t desc, void *workspace,
                                              size_t workspace_size, void *y, void *scale,
                                              const void *x, const void *smooth_scales,
                                              const void *group_index, void *stream) {
  return run(desc, kSwiGluQuant, workspace_size, workspace, y, scale, x, smooth_scales, group_index,
             stream);
}

extern "C" infiniStatus_t infiniopCreateGeluMulQuantDescriptor(
    infiniopHandle_t handle, infiniopGeluMulQuantDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t y_desc, infiniopTensorDescriptor_t scale_desc,
    infiniopTensorDescriptor_t x_desc, infiniopTensorDescriptor_t smooth_scales_desc,
    infiniopTensorDescriptor_t group_index_desc, infiniopGeluApproximate_t approximate,
    int32_t activate_left, infiniopQuantMode_t quant_mode, int64_t group_size,
    infiniopQuantScaleFormat_t scale_format) {
  return infiniop::guarded(kGeluMulQuant, [&] {
    Checker check(kGeluMulQuant);
    const int raw = infiniop::enumValue(approximate);
    if (raw != INFINIOP_GELU_APPROXIMATE_NONE && raw != INFINIOP_GELU_APPROXIMATE_TANH) {
      INFINIOP_CHECK(check.opening(desc_ptr, handle));
      return check.fail(INFINI_STATUS_BAD_PARAM,
                        "approximate " + std::to_string(raw) + " is not 0 (none) or 1 (tanh)");
    }
    return create(kGeluMulQuant, infiniop::KernelId::gelu_mul_quant, geluActivation(raw), handle,
                  desc_ptr, y_desc, scale_desc, x_desc, smooth_scales_desc, group_index_desc,
                  {activate_left, infiniop::enumValue(quant_mode), group_size,
                   infiniop::enumValue(scale_format)});
  });
}

INFINIOP_DESCRIPTOR_QUERIES(GeluMulQuant, kGeluMulQuant)

extern "C" infiniStatus_t infiniopGeluMulQuant(infiniopGeluMulQuantDescriptor_t desc,
                                               void *workspace, size_t workspace_size, void *y,
                                               void *scale, const void *x,
                                               const void *smooth_scales, const void *group_index,
                                               void *stream) {
  return run(desc, kGeluMulQuant, workspace_size, workspace, y, scale, x, smooth_scales,
             group_index, stream);
}

extern "C" infiniStatus_t infiniopCreateClippedSwigluQuantDescriptor(
    infiniopHandle_t handle, infiniopClippedSwigluQuantDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t y_desc, infiniopTensorDescriptor_t scale_desc,
    infiniopTensorDescriptor_t x_desc, infiniopTensorDescriptor_t smooth_scales_desc,
    infiniopTensorDescriptor_t group_index_desc, float alpha, float limit, float bias,
    bool interleaved, infiniopQuantMode_t quant_mode, int64_t group_size,
    infiniopQuantScaleFormat_t scale_format) {
  return infiniop::guarded(kClippedSwigluQuant, [&] {
    Checker check(kClippedSwigluQuant);
    INFINIOP_CHECK(check.opening(desc_ptr, handle));
    // ClippedSwiglu's checks and attributes (clamp_mode 0); activate_left has no part here.
    ClippedGate gate{interleaved, {}};
    INFINIOP_CHECK(infiniop::clippedSwigluAttributes(kClippedSwigluQuant, alpha, limit, bias, 0,
                                                     &gate.attributes));
    return create(
        kClippedSwigluQuant, infiniop::KernelId::clipped_swiglu_quant,
        quant::GateActivation::clipped, handle, desc_ptr, y_desc, scale_desc, x_desc,
        smooth_scales_desc, group_index_desc,
        {1, infiniop::enumValue(quant_mode), group_size, infiniop::enumValue(scale_format)}, &gate);
  });
}

INFINIOP_DESCRIPTOR_QUERIES(ClippedSwigluQuant, kClippedSwigluQuant)

extern "C" infiniStatus_t infiniopClippedSwigluQuant(infiniopClippedSwigluQuantDescriptor_t desc,
                                                     void *workspace, size_t workspace_size,
                                                     void *y, void *scale, const void *x,
                                                     const void *smooth_scales,
                                                     const void *group_index, void *stream) {
  return run(desc, kClippedSwigluQuant, workspace_size, workspace, y, scale, x, smooth_scales,
             group_index, stream);
}
