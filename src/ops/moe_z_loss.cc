// SPDX-License-Identifier: Apache-2.0
// MoeZLoss and MoeZLossGrad (family MoeZLoss, ops/moe_z_loss.h): the C ABI, the descriptors and
// their checks, and the family's host runner (the arithmetic is the device's:
// docs/moe_z_loss.md).
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "infiniop/ops/moe_z_loss.h"
#include "ops/moe_gating_checks.h"
#include "ops/moe_z_loss.h"

namespace {
using infiniop::Tensor;
using infiniop::moe_checks::Checker;
using infiniop::moe_gating::routerView;
namespace checks = infiniop::checks;
namespace moe = infiniop::moe;

constexpr const char *kZLoss = "MoeZLoss";
constexpr const char *kZLossGrad = "MoeZLossGrad";

struct ZLossDescriptor : infiniop::OperatorDescriptor {
  explicit ZLossDescriptor(const char *op) : OperatorDescriptor(op) {}
  moe::ZLossPlan plan;
  std::unique_ptr<moe::ZLossRunner> runner;
};

template <class Public>
infiniStatus_t publish(const char *op, infiniopHandle_t handle, Public *desc_ptr,
                       std::unique_ptr<ZLossDescriptor> desc) {
  desc->handle = handle;
  INFINIOP_CHECK(handle->device->runner(op, handle, desc->plan, &desc->runner));
  desc->workspace_size = desc->runner->workspaceSize();
  infiniop::publishDescriptor(desc_ptr, desc.release());
  return infiniop::succeed();
}

checks::Operand operand(const char *name, const void *data, const moe::RouterView &v) {
  return infiniop::moe_gating::routerOperand(name, data, v);
}

// A 0-D F32 tensor (loss, grad_loss).
infiniStatus_t checkScalar(const Checker &check, const char *name, const Tensor *t) {
  INFINIOP_CHECK(check.exactDtype(name, t, INFINI_DTYPE_F32));
  return check.rank(name, t, 0, "() (a 0-D tensor)");
}

// coeff finite in F32, and the scale (coeff or 2 coeff, over max(T, 1)) computed in double and
// rounded once to F32, finite and, unless coeff is 0, normal (a subnormal or zero scale would
// lose the bound's relative accuracy, or make an infinite sum NaN).
infiniStatus_t scaleOf(const Checker &check, double coeff, double factor, size_t rows,
                       float *scale) {
  if (!std::isfinite(static_cast<float>(coeff)))
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "coeff " + std::to_string(coeff) + " is not finite in F32");
  const double s = factor * coeff / static_cast<double>(std::max<size_t>(rows, 1));
  *scale = static_cast<float>(s);
  if (!std::isfinite(*scale))
    return check.fail(INFINI_STATUS_BAD_PARAM, "coeff " + std::to_string(coeff) +
                                                   " makes the scale " + std::to_string(s) +
                                                   " overflow F32");
  if (coeff != 0 && !(std::fabs(*scale) >= 0x1p-126f))
    return check.fail(INFINI_STATUS_BAD_PARAM, "coeff " + std::to_string(coeff) +
                                                   " makes the scale " + std::to_string(s) +
                                                   " fall below F32's normal range");
  return INFINI_STATUS_SUCCESS;
}

// x (..., E): a float dtype, rank >= 2, E >= 1; fills the plan's dtype, rows, experts and view.
infiniStatus_t xPlan(Checker &check, const Tensor *x, moe::ZLossPlan *p) {
  INFINIOP_CHECK(check.floating("x", x));
  std::vector<size_t> leading;
  INFINIOP_CHECK(infiniop::moe_gating::checkX(check, "x", x, &leading));
  INFINIOP_CHECK(routerView(check, "x", x, true, &p->x));
  p->dtype = x->dtype;
  p->rows = p->x.rows;
  p->experts = p->x.cols;
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t createForward(infiniopHandle_t handle, infiniopMoeZLossDescriptor_t *desc_ptr,
                             const Tensor *loss, const Tensor *x, double coeff) {
  Checker check(kZLoss);
  INFINIOP_CHECK(check.opening(desc_ptr, handle));
  INFINIOP_CHECK(check.required("loss descriptor", loss));
  INFINIOP_CHECK(check.required("x descriptor", x));
  INFINIOP_CHECK(check.device(handle, infiniop::KernelId::moe_z_loss));
  auto desc = std::make_unique<ZLossDescriptor>(kZLoss);
  moe::ZLossPlan &p = desc->plan;
  INFINIOP_CHECK(checkScalar(check, "loss", loss));
  INFINIOP_CHECK(xPlan(check, x, &p));
  INFINIOP_CHECK(scaleOf(check, coeff, 1.0, p.rows, &p.scale));
  p.kind = moe::ZLossKind::forward;
  p.kernel = infiniop::KernelId::moe_z_loss;
  p.coeff = coeff;
  INFINIOP_CHECK(routerView(check, "loss", loss, false, &p.loss));
  return publish(kZLoss, handle, desc_ptr, std::move(desc));
}

infiniStatus_t createGrad(infiniopHandle_t handle, infiniopMoeZLossGradDescriptor_t *desc_ptr,
                          const Tensor *grad_x, const Tensor *grad_loss, const Tensor *x,
                          double coeff) {
  Checker check(kZLossGrad);
  INFINIOP_CHECK(check.opening(desc_ptr, handle));
  INFINIOP_CHECK(check.required("grad_x descriptor", grad_x));
  INFINIOP_CHECK(check.required("grad_loss descriptor", grad_loss));
  INFINIOP_CHECK(check.required("x descriptor", x));
  INFINIOP_CHECK(check.device(handle, infiniop::KernelId::moe_z_loss_grad));
  auto desc = std::make_unique<ZLossDescriptor>(kZLossGrad);
  moe::ZLossPlan &p = desc->plan;
  INFINIOP_CHECK(check.floating("grad_x", grad_x));
  INFINIOP_CHECK(checkScalar(check, "grad_loss", grad_loss));
  INFINIOP_CHECK(xPlan(check, x, &p));
  INFINIOP_CHECK(check.shape("grad_x", grad_x, x->shape, "(x's shape)"));
  INFINIOP_CHECK(check.output("grad_x", grad_x));
  INFINIOP_CHECK(scaleOf(check, coeff, 2.0, p.rows, &p.scale));
  p.kind = moe::ZLossKind::grad;
  p.kernel = infiniop::KernelId::moe_z_loss_grad;
  p.coeff = coeff;
  INFINIOP_CHECK(routerView(check, "grad_x", grad_x, true, &p.grad_x));
  INFINIOP_CHECK(routerView(check, "grad_loss", grad_loss, false, &p.grad_loss));
  return publish(kZLossGrad, handle, desc_ptr, std::move(desc));
}

infiniStatus_t run(const ZLossDescriptor *desc, size_t workspace_size, void *workspace,
                   const moe::ZLossData &given, void *stream) {
  const moe::ZLossPlan &p = desc->plan;
  const char *op = desc->name();
  INFINIOP_CHECK(checks::checkWorkspaceSize(op, workspace_size, desc->workspace_size));
  const auto ws = checks::workspaceOperand(workspace, desc->workspace_size);
  if (p.kind == moe::ZLossKind::forward) {
    INFINIOP_CHECK(checks::checkOperands(
        op, {operand("loss", given.loss, p.loss), operand("x", given.x, p.x), ws}, 1,
        /*last_is_workspace=*/true));
  } else {
    INFINIOP_CHECK(checks::checkOperands(
        op,
        {operand("grad_x", given.grad_x, p.grad_x),
         operand("grad_loss", given.grad_loss, p.grad_loss), operand("x", given.x, p.x), ws},
        1, /*last_is_workspace=*/true));
    if (p.rows == 0) return infiniop::succeed();  // nothing to write
  }
  moe::ZLossData data = given;
  data.workspace = workspace;
  INFINIOP_CHECK(desc->runner->run(data, stream));
  return infiniop::succeed();
}

}  // namespace

// ---- the host runner ---------------------------------------------------------------------------

namespace infiniop::family {
infiniStatus_t MoeZLoss::hostRunner(HostKernel *kernel, const Plan &plan,
                                    std::unique_ptr<Runner> *runner) {
  *runner =
      std::make_unique<HostCallRunner<moe::ZLossRunner, MoeZLoss, moe::ZLossData>>(kernel, plan);
  return INFINI_STATUS_SUCCESS;
}
}  // namespace infiniop::family

// ---- the C ABI ---------------------------------------------------------------------------------

extern "C" infiniStatus_t infiniopCreateMoeZLossDescriptor(infiniopHandle_t handle,
                                                           infiniopMoeZLossDescriptor_t *desc_ptr,
                                                           infiniopTensorDescriptor_t loss_desc,
                                                           infiniopTensorDescriptor_t x_desc,
                                                           double coeff) {
  return infiniop::guarded(
      kZLoss, [&] { return createForward(handle, desc_ptr, loss_desc, x_desc, coeff); });
}

INFINIOP_DESCRIPTOR_QUERIES(MoeZLoss, kZLoss)

extern "C" infiniStatus_t infiniopMoeZLoss(infiniopMoeZLossDescriptor_t desc, void *workspace,
                                           size_t workspace_size, void *loss, const void *x,
                                           void *stream) {
  ZLossDescriptor *d = nullptr;
  INFINIOP_CHECK(infiniop::unwrapDescriptor(kZLoss, desc, &d));
  return infiniop::guarded(kZLoss, [&] {
    moe::ZLossData data{};
    data.loss = loss;
    data.x = x;
    return run(d, workspace_size, workspace, data, stream);
  });
}

extern "C" infiniStatus_t infiniopCreateMoeZLossGradDescriptor(
    infiniopHandle_t handle, infiniopMoeZLossGradDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t grad_x_desc, infiniopTensorDescriptor_t grad_loss_desc,
    infiniopTensorDescriptor_t x_desc, double coeff) {
  return infiniop::guarded(kZLossGrad, [&] {
    return createGrad(handle, desc_ptr, grad_x_desc, grad_loss_desc, x_desc, coeff);
  });
}

INFINIOP_DESCRIPTOR_QUERIES(MoeZLossGrad, kZLossGrad)

extern "C" infiniStatus_t infiniopMoeZLossGrad(infiniopMoeZLossGradDescriptor_t desc,
                                               void *workspace, size_t workspace_size, void *grad_x,
                                               const void *grad_loss, const void *x, void *stream) {
  ZLossDescriptor *d = nullptr;
  INFINIOP_CHECK(infiniop::unwrapDescriptor(kZLossGrad, desc, &d));
  return infiniop::guarded(kZLossGrad, [&] {
    moe::ZLossData data{};
    data.grad_x = grad_x;
    data.grad_loss = grad_loss;
    data.x = x;
    return run(d, workspace_size, workspace, data, stream);
  });
}
