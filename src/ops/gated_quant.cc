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
using HostValues = infiniop::moe_gating::HostCopy;

checks::Operand operand(const char *name, const void *data, const infiniop::moe::RouterView &v) {
  return infiniop::moe_gating::routerOperand(name, data, v);
}

// The attributes every *Quant operator shares, the enums as ints (infiniop::enumValue: a C caller
// may pass any int, which a C++ enum may not hold).
struct QuantAttributes {
  int32_t activate_left;
  int quant_mode;
  int64_t group_size;
  int scale_format;
};

// ClippedSwigluQuant's gate: its split and ClippedSwiglu's attributes (checked).
struct ClippedGate {
  bool interleaved;
  infiniop::ClippedSwigluAttributes attributes;
};

infiniStatus_t checkAttributes(const Checker &check, const QuantAttributes &a) {
  if (a.activate_left != 0 && a.activate_left != 1)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "activate_left " + std::to_string(a.activate_left) + " is not 0 or 1");
  if (a.quant_mode != INFINIOP_QUANT_STATIC && a.quant_mode != INFINIOP_QUANT_DYNAMIC)
    return check.fail(INFINI_STATUS_BAD_PARAM, "quant_mode " + std::to_string(a.quant_mode) +
                                                   " is not 0 (static) or 1 (dynamic)");
  if (a.scale_format != INFINIOP_QUANT_SCALE_F32 && a.scale_format != INFINIOP_QUANT_SCALE_UE8M0)
    return check.fail(INFINI_STATUS_BAD_PARAM, "scale_format " + std::to_string(a.scale_format) +
                                                   " is not 0 (F32) or 1 (UE8M0)");
  if (a.quant_mode == INFINIOP_QUANT_STATIC && a.scale_format != INFINIOP_QUANT_SCALE_F32)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "scale_format UE8M0 rounds dynamic scales; a static scale is used as given "
                      "(scale_format 0)");
  if (a.group_size < 0)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "group_size " + std::to_string(a.group_size) + " is negative");
  return INFINI_STATUS_SUCCESS;
}

// The shape of x's leading dims plus `last`.
std::vector<size_t> rowsShape(const Tensor *x, size_t last) {
  std::vector<size_t> shape(x->shape.begin(), x->shape.end() - 1);
  shape.push_back(last);
  return shape;
}

template <class Public>
infiniStatus_t create(const char *op, infiniop::KernelId kernel, quant::GateActivation activation,
                      infiniopHandle_t handle, Public *desc_ptr, const Tensor *y,
                      const Tensor *scale, const Tensor *x, const Tensor *smooth,
                      const Tensor *group_index, const QuantAttributes &a,
                      const ClippedGate *clipped = nullptr) {
  Checker check(op);
  INFINIOP_CHECK(check.opening(desc_ptr, handle));
  INFINIOP_CHECK(check.required("y descriptor", y));
  INFINIOP_CHECK(check.required("scale descriptor", scale));
  INFINIOP_CHECK(check.required("x descriptor", x));
  INFINIOP_CHECK(check.device(handle, kernel));
  INFINIOP_CHECK(checkAttributes(check, a));

  INFINIOP_CHECK(check.floating("x", x));
  if (x->ndim() < 1 || x->shape.back() % 2 != 0)
    return check.fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                      "x shape " + infiniop::shapeString(x->shape) +
                          " must be (..., 2H): rank >= 1, an even last dim");
  const size_t H = x->shape.back() / 2;
  INFINIOP_CHECK(infiniop::checkTensor(op, "y", y));
  if (y->dtype != INFINI_DTYPE_I8 && y->dtype != INFINI_DTYPE_F8)
    return check.fail(INFINI_STATUS_BAD_TENSOR_DTYPE,
                      std::string("y has dtype ") + infiniop::dtypeName(y->dtype) +
                          "; I8 (INT8) or F8 (FP8 E4M3) is required");
  INFINIOP_CHECK(check.shape("y", y, rowsShape(x, H), "(x's leading dims, H)"));
  size_t group_size = H, groups = 1;
  if (a.group_size > 0) {
    group_size = static_cast<size_t>(a.group_size);
    if (H % group_size != 0)
      return check.fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                        "H = " + std::to_string(H) +
                            " (x's last dim / 2) is not a multiple of "
                            "group_size " +
                            std::to_string(group_size));
    groups = H / group_size;
  }
  INFINIOP_CHECK(check.exactDtype("scale", scale, INFINI_DTYPE_F32));
  INFINIOP_CHECK(check.shape("scale", scale, rowsShape(x, groups),
                             "(x's leading dims, G), G = H / group_size (1 for group_size 0)"));
  const bool dynamic = a.quant_mode == INFINIOP_QUANT_DYNAMIC;
  if (group_index && !smooth)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "group_index chooses rows of smooth_scales (E, H), which is NULL");
  INFINIOP_CHECK(check.exactDtype("smooth_scales", smooth, INFINI_DTYPE_F32));
  INFINIOP_CHECK(check.exactDtype("group_index", group_index, INFINI_DTYPE_I64));
  size_t experts = 0;
  if (group_index) {
    INFINIOP_CHECK(check.rank("group_index", group_index, 1, "(E)"));
    experts = group_index->shape[0];
    if (experts == 0)
      return check.fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                        "group_index shape (0) has no groups: E must be >= 1");
    INFINIOP_CHECK(
        check.shape("smooth_scales", smooth, {experts, H}, "(E, H), E from group_index"));
  } else if (smooth) {
    INFINIOP_CHECK(check.shape("smooth_scales", smooth, {H}, "(H), H = x's last dim / 2"));
  }
  INFINIOP_CHECK(check.output("y", y));
  if (dynamic) INFINIOP_CHECK(check.output("scale", scale));

  auto desc = std::make_unique<Descriptor>(op);
  quant::GatedQuantPlan &p = desc->plan;
  p.kernel = kernel;
  p.activation = activation;
  p.dtype = x->dtype;
  p.format = y->dtype == INFINI_DTYPE_I8 ? quant::QuantFormat::int8 : quant::QuantFormat::fp8_e4m3;
  p.activate_left = a.activate_left == 1;
  if (clipped) {
    p.interleaved = clipped->interleaved;
    p.clipped = clipped->attributes;
  }
  p.dynamic = dynamic;
  p.power_of_two = a.scale_format == INFINIOP_QUANT_SCALE_UE8M0;
  p.half = H;
  p.group_size = group_size;
  p.groups = groups;
  p.smooth = smooth != nullptr;
  p.experts = experts;
  INFINIOP_CHECK(routerView(check, "x", x, true, &p.x));
  INFINIOP_CHECK(routerView(check, "y", y, true, &p.y));
  INFINIOP_CHECK(routerView(check, "scale", scale, true, &p.scale));
  INFINIOP_CHECK(routerView(check, "smooth_scales", smooth, true, &p.smooth_scales));
  INFINIOP_CHECK(routerView(check, "group_index", group_index, true, &p.group_index));
  p.rows = p.x.rows;
  return infiniop::moe_gating::publishRunner(op, handle, desc_ptr, std::move(desc));
}

// group_index's counts: each >= 0, their sum at most the rows.
infiniStatus_t readCounts(const char *op, const quant::GatedQuantPlan &p, const HostValues &values,
                          std::vector<int64_t> *counts) {
  counts->resize(p.experts);
  size_t sum = 0;
  for (size_t e = 0; e < p.experts; ++e) {
    const int64_t count = values.integer(p.group_index, 0, e);
    if (count < 0 || static_cast<size_t>(count) > p.rows - sum)
      return infiniop::fail(INFINI_STATUS_BAD_PARAM,
                            std::string(op) + ": group_index value " + std::to_string(count) +
                                " (group " + std::to_string(e) + ") is " +
                                (count < 0 ? std::string("negative")
                                           : "past the " + std::to_string(p.rows) +
                                                 " rows of x (the counts before it sum to " +
                                                 std::to_string(sum) + ")"));
    sum += static_cast<size_t>(count);
    (*counts)[e] = count;
  }
  return INFINI_STATUS_SUCCESS;
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
    if (p.experts > 0) {
      HostValues values;
      INFINIOP_CHECK(values.read(op, desc->handle, stream, p.group_index, group_index));
      INFINIOP_CHECK(readCounts(op, p, values, &counts));
    }
    // Nothing to write: no rows, or no columns and no scale written (2^40 rows of 0 columns).
    if (p.rows == 0 || (p.half == 0 && (p.groups == 0 || !p.dynamic))) return infiniop::succeed();
    quant::GatedQuantData data{};
    data.y = y;
    data.scale = scale;
    data.x = x;
    data.smooth_scales = smooth;
    data.group_index = group_index;
    data.counts = counts.empty() ? nullptr : counts.data();
    data.workspace = workspace;
    INFINIOP_CHECK(desc->runner->run(data, stream));
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
