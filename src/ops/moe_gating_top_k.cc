// SPDX-License-Identifier: Apache-2.0
// MoeGatingTopK (DeepSeek-V3's grouped router), its grad and MoeGatingWeights (its y for given
// indices): the C ABI, the descriptors and their checks (the arithmetic is the device's:
// docs/moe_gating_top_k.md, docs/moe_gating_weights.md).
#include "infiniop/ops/moe_gating_top_k.h"

#include <cmath>

#include "infiniop/ops/moe_gating_top_k_grad.h"
#include "infiniop/ops/moe_gating_weights.h"
#include "ops/moe_gating_checks.h"

namespace {
using namespace infiniop::moe_gating;  // NOLINT: its names and checks
using infiniop::Tensor;
namespace moe = infiniop::moe;

// norm_type, renorm, routed_scaling_factor and eps, which the forward and the grad share.
infiniStatus_t checkNorm(const Checker &check, moe::RouterPlan *p, int64_t norm_type,
                         int64_t renorm, double scale, double eps) {
  if (norm_type < 0 || norm_type > 2)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "norm_type " + std::to_string(norm_type) +
                          " is not 0 (softmax), 1 (sigmoid) or 2 (sqrtsoftplus)");
  if (renorm != 0)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "renorm " + std::to_string(renorm) +
                          " is not 0 (normalize, then select: the only mode of this operator)");
  // Rounded to F32 first: a double beyond F32's range is infinite there.
  const auto c = static_cast<float>(scale), e = static_cast<float>(eps);
  if (!std::isfinite(c))
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "routed_scaling_factor " + std::to_string(scale) + " is not finite in F32");
  if (!std::isfinite(e) || !(eps >= 0))
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "eps " + std::to_string(eps) + " is not a finite F32 value >= 0");
  p->sigmoid = norm_type == 1;
  p->sqrt_softplus = norm_type == 2;
  p->scale = c;
  p->eps = e;
  return INFINI_STATUS_SUCCESS;
}

// The grouping attributes against E (vendor rules; docs/moe_gating_top_k.md).
infiniStatus_t checkGroups(const Checker &check, moe::RouterPlan *p, size_t E, int64_t k,
                           int64_t k_group, int64_t group_count, int64_t mode) {
  if (group_count < 1 || E % static_cast<uint64_t>(group_count) != 0)
    return check.fail(INFINI_STATUS_BAD_PARAM, "group_count " + std::to_string(group_count) +
                                                   " does not divide E = " + std::to_string(E) +
                                                   " into groups");
  if (k_group < 1 || k_group > group_count)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "k_group " + std::to_string(k_group) +
                          " is outside [1, group_count = " + std::to_string(group_count) + "]");
  const size_t size = E / static_cast<size_t>(group_count);
  if (mode < 0 || mode > 2)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "group_select_mode " + std::to_string(mode) +
                          " is not 0 (a group's max), 1 (the sum of its two largest) or 2 (the "
                          "sum of its k / k_group largest)");
  if (mode == 1 && size < 2)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "group_select_mode 1 sums a group's two largest scores, but groups of E / "
                      "group_count = " +
                          std::to_string(size) + " expert have one");
  const size_t selectable = static_cast<size_t>(k_group) * size;
  if (k < 1 || static_cast<uint64_t>(k) > selectable)
    return check.fail(INFINI_STATUS_BAD_PARAM, "k " + std::to_string(k) +
                                                   " is outside [1, k_group * E / group_count = " +
                                                   std::to_string(selectable) + "]");
  if (mode == 2 && (k / k_group < 1 || static_cast<size_t>(k / k_group) > size))
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "group_select_mode 2 sums a group's k / k_group = " + std::to_string(k) +
                          " / " + std::to_string(k_group) + " = " + std::to_string(k / k_group) +
                          " largest scores, which is outside [1, E / group_count = " +
                          std::to_string(size) + "]");
  p->group_count = static_cast<size_t>(group_count);
  p->k_group = static_cast<size_t>(k_group);
  p->group_select_mode = static_cast<int>(mode);
  p->k = static_cast<size_t>(k);
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t createTopK(infiniopHandle_t handle, infiniopMoeGatingTopKDescriptor_t *desc_ptr,
                          const Tensor *y, const Tensor *expert_idx, const Tensor *norm_out,
                          const Tensor *x, const Tensor *bias, int64_t k, int64_t k_group,
                          int64_t group_count, int64_t mode, int64_t renorm, int64_t norm_type,
                          double scale, double eps) {
  Checker check(kTopK);
  INFINIOP_CHECK(check.opening(desc_ptr, handle));
  INFINIOP_CHECK(check.required("y descriptor", y));
  INFINIOP_CHECK(check.required("expert_idx descriptor", expert_idx));
  INFINIOP_CHECK(check.required("x descriptor", x));
  INFINIOP_CHECK(check.device(handle, infiniop::KernelId::moe_gating_top_k));
  auto desc = std::make_unique<RouterDescriptor>(kTopK);
  moe::RouterPlan &p = desc->plan;
  p.kind = moe::RouterKind::top_k;
  p.kernel = infiniop::KernelId::moe_gating_top_k;
  INFINIOP_CHECK(checkNorm(check, &p, norm_type, renorm, scale, eps));
  INFINIOP_CHECK(check.floating("x", x));
  INFINIOP_CHECK(check.floating("y", y));
  INFINIOP_CHECK(check.scales("bias", bias));  // x's dtype or F32
  INFINIOP_CHECK(check.index("expert_idx", expert_idx));
  INFINIOP_CHECK(checkF32(check, "norm_out", norm_out));
  std::vector<size_t> leading;
  INFINIOP_CHECK(checkX(check, "x", x, &leading));
  const size_t E = x->shape.back();
  INFINIOP_CHECK(checkGroups(check, &p, E, k, k_group, group_count, mode));
  INFINIOP_CHECK(checkRows(check, "y", y, leading, p.k, "(x's leading shape, k)"));
  INFINIOP_CHECK(
      checkRows(check, "expert_idx", expert_idx, leading, p.k, "(x's leading shape, k)"));
  INFINIOP_CHECK(checkRows(check, "norm_out", norm_out, leading, E, "(x's shape)"));
  INFINIOP_CHECK(check.rank("bias", bias, 1, "(E)"));
  INFINIOP_CHECK(check.shape("bias", bias, {E}, "(E), E from x"));
  INFINIOP_CHECK(indexFits(check, "expert_idx", expert_idx, E - 1));
  INFINIOP_CHECK(check.output("y", y));
  INFINIOP_CHECK(check.output("expert_idx", expert_idx));
  INFINIOP_CHECK(check.output("norm_out", norm_out));

  p.dtype = check.dtype();
  p.rows = x->numel() / E;
  p.experts = E;
  INFINIOP_CHECK(routerView(check, "y", y, true, &p.y));
  INFINIOP_CHECK(routerView(check, "expert_idx", expert_idx, true, &p.expert_idx));
  INFINIOP_CHECK(routerView(check, "norm_out", norm_out, true, &p.probs));
  INFINIOP_CHECK(routerView(check, "x", x, true, &p.x));
  INFINIOP_CHECK(routerView(check, "bias", bias, true, &p.bias));
  return publish(kTopK, handle, desc_ptr, std::move(desc));
}

infiniStatus_t createTopKGrad(infiniopHandle_t handle,
                              infiniopMoeGatingTopKGradDescriptor_t *desc_ptr, const Tensor *grad_x,
                              const Tensor *grad_y, const Tensor *x, const Tensor *expert_idx,
                              int64_t norm_type, int64_t renorm, double scale, double eps) {
  Checker check(kTopKGrad);
  INFINIOP_CHECK(check.opening(desc_ptr, handle));
  INFINIOP_CHECK(gradOpening(check, handle, infiniop::KernelId::moe_gating_top_k_grad, grad_x,
                             grad_y, x, expert_idx));
  auto desc = std::make_unique<RouterDescriptor>(kTopKGrad);
  moe::RouterPlan &p = desc->plan;
  p.kind = moe::RouterKind::top_k_grad;
  p.kernel = infiniop::KernelId::moe_gating_top_k_grad;
  INFINIOP_CHECK(checkNorm(check, &p, norm_type, renorm, scale, eps));
  std::vector<size_t> leading;
  INFINIOP_CHECK(gradTensors(check, grad_x, grad_y, x, expert_idx, &leading, &p));
  return publish(kTopKGrad, handle, desc_ptr, std::move(desc));
}

}  // namespace

extern "C" infiniStatus_t infiniopCreateMoeGatingTopKDescriptor(
    infiniopHandle_t handle, infiniopMoeGatingTopKDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t y_desc, infiniopTensorDescriptor_t expert_idx_desc,
    infiniopTensorDescriptor_t norm_out_desc, infiniopTensorDescriptor_t x_desc,
    infiniopTensorDescriptor_t bias_desc, int64_t k, int64_t k_group, int64_t group_count,
    int64_t group_select_mode, int64_t renorm, int64_t norm_type, double routed_scaling_factor,
    double eps) {
  return infiniop::guarded(kTopK, [&] {
    return createTopK(handle, desc_ptr, y_desc, expert_idx_desc, norm_out_desc, x_desc, bias_desc,
                      k, k_group, group_count, group_select_mode, renorm, norm_type,
                      routed_scaling_factor, eps);
  });
}

INFINIOP_DESCRIPTOR_QUERIES(MoeGatingTopK, kTopK)

extern "C" infiniStatus_t infiniopMoeGatingTopK(infiniopMoeGatingTopKDescriptor_t desc,
                                                void *workspace, size_t workspace_size, void *y,
                                                void *expert_idx, void *norm_out, const void *x,
                                                const void *bias, void *stream) {
  RouterDescriptor *d = nullptr;
  INFINIOP_CHECK(infiniop::unwrapDescriptor(kTopK, desc, &d));
  const moe::RouterPlan &p = d->plan;
  return infiniop::guarded(kTopK, [&] {
    moe::RouterData data{};
    data.y = y;
    data.expert_idx = expert_idx;
    data.probs = p.probs.present ? norm_out : nullptr;
    data.x = x;
    data.bias = p.bias.present ? bias : nullptr;
    data.workspace = workspace;
    return runRouter(d, workspace_size, data, stream);
  });
}

extern "C" infiniStatus_t infiniopCreateMoeGatingTopKGradDescriptor(
    infiniopHandle_t handle, infiniopMoeGatingTopKGradDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t grad_x_desc, infiniopTensorDescriptor_t grad_y_desc,
    infiniopTensorDescriptor_t x_desc, infiniopTensorDescriptor_t expert_idx_desc,
    int64_t norm_type, int64_t renorm, double routed_scaling_factor, double eps) {
  return infiniop::guarded(kTopKGrad, [&] {
    return createTopKGrad(handle, desc_ptr, grad_x_desc, grad_y_desc, x_desc, expert_idx_desc,
                          norm_type, renorm, routed_scaling_factor, eps);
  });
}

INFINIOP_DESCRIPTOR_QUERIES(MoeGatingTopKGrad, kTopKGrad)

extern "C" infiniStatus_t infiniopMoeGatingTopKGrad(infiniopMoeGatingTopKGradDescriptor_t desc,
                                                    void *workspace, size_t workspace_size,
                                                    void *grad_x, const void *grad_y, const void *x,
                                                    const void *expert_idx, void *stream) {
  RouterDescriptor *d = nullptr;
  INFINIOP_CHECK(infiniop::unwrapDescriptor(kTopKGrad, desc, &d));
  return infiniop::guarded(kTopKGrad, [&] {
    moe::RouterData data{};
    data.grad_x = grad_x;
    data.grad_y = grad_y;
    data.x = x;
    data.expert_idx_in = expert_idx;
    data.workspace = workspace;
    return runRouter(d, workspace_size, data, stream);
  });
}

// MoeGatingWeights: MoeGatingTopK's y for a given expert_idx (its grad's attributes and checks).
namespace {

infiniStatus_t createWeights(infiniopHandle_t handle,
                             infiniopMoeGatingWeightsDescriptor_t *desc_ptr, const Tensor *y,
                             const Tensor *x, const Tensor *expert_idx, int64_t norm_type,
                             int64_t renorm, double scale, double eps) {
  Checker check(kWeights);
  INFINIOP_CHECK(check.opening(desc_ptr, handle));
  INFINIOP_CHECK(check.required("y descriptor", y));
  INFINIOP_CHECK(check.required("x descriptor", x));
  INFINIOP_CHECK(check.required("expert_idx descriptor", expert_idx));
  INFINIOP_CHECK(check.device(handle, infiniop::KernelId::moe_gating_weights));
  auto desc = std::make_unique<RouterDescriptor>(kWeights);
  moe::RouterPlan &p = desc->plan;
  p.kind = moe::RouterKind::weights;
  p.kernel = infiniop::KernelId::moe_gating_weights;
  INFINIOP_CHECK(checkNorm(check, &p, norm_type, renorm, scale, eps));
  INFINIOP_CHECK(check.floating("x", x));
  INFINIOP_CHECK(check.floating("y", y));
  INFINIOP_CHECK(check.index("expert_idx", expert_idx));
  std::vector<size_t> leading;
  INFINIOP_CHECK(checkX(check, "x", x, &leading));
  const size_t E = x->shape.back();
  INFINIOP_CHECK(check.rank("y", y, x->ndim(), "(x's leading shape, k)"));
  const size_t K = y->shape.back();
  if (K < 1 || K > E)
    return check.fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                      "y shape " + infiniop::shapeString(y->shape) + ": k " + std::to_string(K) +
                          " (its last dim) is outside [1, E = " + std::to_string(E) + "]");
  INFINIOP_CHECK(checkRows(check, "y", y, leading, K, "(x's leading shape, k)"));
  INFINIOP_CHECK(checkRows(check, "expert_idx", expert_idx, leading, K, "(y's shape)"));
  INFINIOP_CHECK(check.output("y", y));
  p.dtype = check.dtype();
  p.rows = x->numel() / E;
  p.experts = E;
  p.k = K;
  INFINIOP_CHECK(routerView(check, "y", y, true, &p.y));
  INFINIOP_CHECK(routerView(check, "x", x, true, &p.x));
  INFINIOP_CHECK(routerView(check, "expert_idx", expert_idx, true, &p.expert_idx));
  return publish(kWeights, handle, desc_ptr, std::move(desc));
}

}  // namespace

extern "C" infiniStatus_t infiniopCreateMoeGatingWeightsDescriptor(
    infiniopHandle_t handle, infiniopMoeGatingWeightsDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t y_desc, infiniopTensorDescriptor_t x_desc,
    infiniopTensorDescriptor_t expert_idx_desc, int64_t norm_type, int64_t renorm,
    double routed_scaling_factor, double eps) {
  return infiniop::guarded(kWeights, [&] {
    return createWeights(handle, desc_ptr, y_desc, x_desc, expert_idx_desc, norm_type, renorm,
                         routed_scaling_factor, eps);
  });
}

INFINIOP_DESCRIPTOR_QUERIES(MoeGatingWeights, kWeights)

extern "C" infiniStatus_t infiniopMoeGatingWeights(infiniopMoeGatingWeightsDescriptor_t desc,
                                                   void *workspace, size_t workspace_size, void *y,
                                                   const void *x, const void *expert_idx,
                                                   void *stream) {
  RouterDescriptor *d = nullptr;
  INFINIOP_CHECK(infiniop::unwrapDescriptor(kWeights, desc, &d));
  return infiniop::guarded(kWeights, [&] {
    moe::RouterData data{};
    data.y = y;
    data.x = x;
    data.expert_idx_in = expert_idx;
    data.workspace = workspace;
    return runRouter(d, workspace_size, data, stream);
  });
}
