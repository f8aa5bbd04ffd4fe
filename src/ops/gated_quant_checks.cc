// SPDX-License-Identifier: Apache-2.0
// The checks the quantized gated activations share (ops/gated_quant_checks.h).
#include "ops/gated_quant_checks.h"

#include <string>

#include "ops/moe_gating_checks.h"

namespace infiniop::quant {

using moe_checks::Checker;
using moe_gating::routerView;

infiniStatus_t checkAttributes(const moe_checks::Checker &check, const QuantAttributes &a) {
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

infiniStatus_t planGatedQuant(const Checker &check, const Tensor *y, const Tensor *scale,
                              const Tensor *x, const Tensor *smooth, const Tensor *group_index,
                              const QuantAttributes &a, bool group_index_needs_smooth,
                              GatedQuantPlan *p) {
  if (x->ndim() < 1 || x->shape.back() % 2 != 0)
    return check.fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                      "x shape " + infiniop::shapeString(x->shape) +
                          " must be (..., 2H): rank >= 1, an even last dim");
  const size_t H = x->shape.back() / 2;
  INFINIOP_CHECK(infiniop::checkTensor(check.name(), "y", y));
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
  if (group_index && !smooth && group_index_needs_smooth)
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

  p->format = y->dtype == INFINI_DTYPE_I8 ? QuantFormat::int8 : QuantFormat::fp8_e4m3;
  p->activate_left = a.activate_left == 1;
  p->dynamic = dynamic;
  p->power_of_two = a.scale_format == INFINIOP_QUANT_SCALE_UE8M0;
  p->half = H;
  p->group_size = group_size;
  p->groups = groups;
  p->smooth = smooth != nullptr;
  p->experts = experts;
  INFINIOP_CHECK(routerView(check, "x", x, true, &p->x));
  INFINIOP_CHECK(routerView(check, "y", y, true, &p->y));
  INFINIOP_CHECK(routerView(check, "scale", scale, true, &p->scale));
  INFINIOP_CHECK(routerView(check, "smooth_scales", smooth, true, &p->smooth_scales));
  INFINIOP_CHECK(routerView(check, "group_index", group_index, true, &p->group_index));
  p->rows = p->x.rows;
  return INFINI_STATUS_SUCCESS;
}

// group_index's counts: each >= 0, their sum at most the rows.
infiniStatus_t readCounts(const char *op, const GatedQuantPlan &p,
                          const moe_gating::HostCopy &values, std::vector<int64_t> *counts) {
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

infiniStatus_t callCounts(const char *op, infiniopHandle_t handle, void *stream,
                          const GatedQuantPlan &p, const void *group_index,
                          std::vector<int64_t> *counts, bool *write) {
  counts->clear();
  if (p.experts > 0) {
    moe_gating::HostCopy values;
    INFINIOP_CHECK(values.read(op, handle, stream, p.group_index, group_index));
    INFINIOP_CHECK(readCounts(op, p, values, counts));
  }
  *write = p.rows > 0 && (p.half > 0 || (p.groups > 0 && p.dynamic));
  return INFINI_STATUS_SUCCESS;
}

GatedQuantData callData(void *y, void *scale, const void *x, const void *smooth_scales,
                        const void *group_index, const std::vector<int64_t> &counts,
                        void *workspace) {
  GatedQuantData data{};
  data.y = y;
  data.scale = scale;
  data.x = x;
  data.smooth_scales = smooth_scales;
  data.group_index = group_index;
  data.counts = counts.empty() ? nullptr : counts.data();
  data.workspace = workspace;
  return data;
}

}  // namespace infiniop::quant
