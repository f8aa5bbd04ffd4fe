// SPDX-License-Identifier: Apache-2.0
// MoeGatingTopKSoftmax and its grad: the C ABI, the descriptors and their checks (the
// arithmetic is the device's: docs/moe_gating_top_k_softmax.md).
#include "infiniop/ops/moe_gating_top_k_softmax.h"

#include "infiniop/ops/moe_gating_top_k_softmax_grad.h"
#include "ops/moe_gating_checks.h"

namespace {
using namespace infiniop::moe_gating;  // NOLINT: its names and checks
using infiniop::Tensor;
namespace moe = infiniop::moe;

infiniStatus_t checkRenorm(const Checker &check, int64_t renorm) {
  if (renorm == 0 || renorm == 1) return INFINI_STATUS_SUCCESS;
  return check.fail(INFINI_STATUS_BAD_PARAM, "renorm " + std::to_string(renorm) + " is not 0 or 1");
}

infiniStatus_t createSoftmax(infiniopHandle_t handle,
                             infiniopMoeGatingTopKSoftmaxDescriptor_t *desc_ptr, const Tensor *y,
                             const Tensor *expert_idx, const Tensor *row_idx,
                             const Tensor *softmax_out, const Tensor *x, const Tensor *finished,
                             int64_t k, int64_t renorm) {
  Checker check(kSoftmax);
  INFINIOP_CHECK(check.opening(desc_ptr, handle));
  INFINIOP_CHECK(check.required("y descriptor", y));
  INFINIOP_CHECK(check.required("expert_idx descriptor", expert_idx));
  INFINIOP_CHECK(check.required("x descriptor", x));
  INFINIOP_CHECK(check.device(handle, infiniop::KernelId::moe_gating_top_k_softmax));
  INFINIOP_CHECK(checkRenorm(check, renorm));
  if (renorm == 1 && softmax_out)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "softmax_out is given with renorm 1, which has no softmax over E to write");
  INFINIOP_CHECK(check.floating("x", x));
  INFINIOP_CHECK(check.floating("y", y));
  INFINIOP_CHECK(check.index("expert_idx", expert_idx));
  INFINIOP_CHECK(check.index("row_idx", row_idx));
  INFINIOP_CHECK(checkF32(check, "softmax_out", softmax_out));
  std::vector<size_t> leading;
  INFINIOP_CHECK(checkX(check, "x", x, &leading));
  const size_t E = x->shape.back();
  if (k < 1 || static_cast<uint64_t>(k) > E)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "k " + std::to_string(k) + " is outside [1, E = " + std::to_string(E) + "]");
  const auto K = static_cast<size_t>(k);
  INFINIOP_CHECK(checkRows(check, "y", y, leading, K, "(x's leading shape, k)"));
  INFINIOP_CHECK(checkRows(check, "expert_idx", expert_idx, leading, K, "(x's leading shape, k)"));
  INFINIOP_CHECK(checkRows(check, "row_idx", row_idx, leading, K, "(x's leading shape, k)"));
  INFINIOP_CHECK(checkRows(check, "softmax_out", softmax_out, leading, E, "(x's shape)"));
  INFINIOP_CHECK(checkFinished(check, finished, leading));
  const size_t R = x->numel() / E;
  // Index values written: up to E (finished rows) and k * R - 1 (row_idx).
  INFINIOP_CHECK(indexFits(check, "expert_idx", expert_idx, E));
  if (R > 0) INFINIOP_CHECK(indexFits(check, "row_idx", row_idx, K * R - 1));
  INFINIOP_CHECK(check.output("y", y));
  INFINIOP_CHECK(check.output("expert_idx", expert_idx));
  INFINIOP_CHECK(check.output("row_idx", row_idx));
  INFINIOP_CHECK(check.output("softmax_out", softmax_out));

  auto desc = std::make_unique<RouterDescriptor>(kSoftmax);
  moe::RouterPlan &p = desc->plan;
  p.kind = moe::RouterKind::top_k_softmax;
  p.kernel = infiniop::KernelId::moe_gating_top_k_softmax;
  p.dtype = check.dtype();
  p.rows = R;
  p.experts = E;
  p.k = K;
  p.renorm = renorm == 1;
  INFINIOP_CHECK(routerView(check, "y", y, true, &p.y));
  INFINIOP_CHECK(routerView(check, "expert_idx", expert_idx, true, &p.expert_idx));
  INFINIOP_CHECK(routerView(check, "row_idx", row_idx, true, &p.row_idx));
  INFINIOP_CHECK(routerView(check, "softmax_out", softmax_out, true, &p.probs));
  INFINIOP_CHECK(routerView(check, "x", x, true, &p.x));
  INFINIOP_CHECK(routerView(check, "finished", finished, false, &p.finished));
  return publish(kSoftmax, handle, desc_ptr, std::move(desc));
}

infiniStatus_t createSoftmaxGrad(infiniopHandle_t handle,
                                 infiniopMoeGatingTopKSoftmaxGradDescriptor_t *desc_ptr,
                                 const Tensor *grad_x, const Tensor *grad_y, const Tensor *x,
                                 const Tensor *expert_idx, const Tensor *finished, int64_t renorm) {
  Checker check(kSoftmaxGrad);
  INFINIOP_CHECK(check.opening(desc_ptr, handle));
  INFINIOP_CHECK(gradOpening(check, handle, infiniop::KernelId::moe_gating_top_k_softmax_grad,
                             grad_x, grad_y, x, expert_idx));
  INFINIOP_CHECK(checkRenorm(check, renorm));
  auto desc = std::make_unique<RouterDescriptor>(kSoftmaxGrad);
  moe::RouterPlan &p = desc->plan;
  p.kind = moe::RouterKind::top_k_softmax_grad;
  p.kernel = infiniop::KernelId::moe_gating_top_k_softmax_grad;
  p.renorm = renorm == 1;
  std::vector<size_t> leading;
  INFINIOP_CHECK(gradTensors(check, grad_x, grad_y, x, expert_idx, &leading, &p));
  INFINIOP_CHECK(checkFinished(check, finished, leading));
  INFINIOP_CHECK(routerView(check, "finished", finished, false, &p.finished));
  return publish(kSoftmaxGrad, handle, desc_ptr, std::move(desc));
}

}  // namespace

extern "C" infiniStatus_t infiniopCreateMoeGatingTopKSoftmaxDescriptor(
    infiniopHandle_t handle, infiniopMoeGatingTopKSoftmaxDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t y_desc, infiniopTensorDescriptor_t expert_idx_desc,
    infiniopTensorDescriptor_t row_idx_desc, infiniopTensorDescriptor_t softmax_out_desc,
    infiniopTensorDescriptor_t x_desc, infiniopTensorDescriptor_t finished_desc, int64_t k,
    int64_t renorm) {
  return infiniop::guarded(kSoftmax, [&] {
    return createSoftmax(handle, desc_ptr, y_desc, expert_idx_desc, row_idx_desc, softmax_out_desc,
                         x_desc, finished_desc, k, renorm);
  });
}

INFINIOP_DESCRIPTOR_QUERIES(MoeGatingTopKSoftmax, kSoftmax)

extern "C" infiniStatus_t infiniopMoeGatingTopKSoftmax(
    infiniopMoeGatingTopKSoftmaxDescriptor_t desc, void *workspace, size_t workspace_size, void *y,
    void *expert_idx, void *row_idx, void *softmax_out, const void *x, const void *finished,
    void *stream) {
  RouterDescriptor *d = nullptr;
  INFINIOP_CHECK(infiniop::unwrapDescriptor(kSoftmax, desc, &d));
  const moe::RouterPlan &p = d->plan;
  return infiniop::guarded(kSoftmax, [&] {
    moe::RouterData data{};
    data.y = y;
    data.expert_idx = expert_idx;
    data.row_idx = p.row_idx.present ? row_idx : nullptr;
    data.probs = p.probs.present ? softmax_out : nullptr;
    data.x = x;
    data.finished = p.finished.present ? finished : nullptr;
    data.workspace = workspace;
    return runRouter(d, workspace_size, data, stream);
  });
}

extern "C" infiniStatus_t infiniopCreateMoeGatingTopKSoftmaxGradDescriptor(
    infiniopHandle_t handle, infiniopMoeGatingTopKSoftmaxGradDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t grad_x_desc, infiniopTensorDescriptor_t grad_y_desc,
    infiniopTensorDescriptor_t x_desc, infiniopTensorDescriptor_t expert_idx_desc,
    infiniopTensorDescriptor_t finished_desc, int64_t renorm) {
  return infiniop::guarded(kSoftmaxGrad, [&] {
    return createSoftmaxGrad(handle, desc_ptr, grad_x_desc, grad_y_desc, x_desc, expert_idx_desc,
                             finished_desc, renorm);
  });
}

INFINIOP_DESCRIPTOR_QUERIES(MoeGatingTopKSoftmaxGrad, kSoftmaxGrad)

extern "C" infiniStatus_t infiniopMoeGatingTopKSoftmaxGrad(
    infiniopMoeGatingTopKSoftmaxGradDescriptor_t desc, void *workspace, size_t workspace_size,
    void *grad_x, const void *grad_y, const void *x, const void *expert_idx, const void *finished,
    void *stream) {
  RouterDescriptor *d = nullptr;
  INFINIOP_CHECK(infiniop::unwrapDescriptor(kSoftmaxGrad, desc, &d));
  return infiniop::guarded(kSoftmaxGrad, [&] {
    moe::RouterData data{};
    data.grad_x = grad_x;
    data.grad_y = grad_y;
    data.x = x;
    data.expert_idx_in = expert_idx;
    data.finished = d->plan.finished.present ? finished : nullptr;
    data.workspace = workspace;
    return runRouter(d, workspace_size, data, stream);
  });
}
