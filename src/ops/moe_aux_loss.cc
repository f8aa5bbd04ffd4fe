// SPDX-License-Identifier: Apache-2.0
// MoeAuxLoss and MoeAuxLossGrad (family MoeAuxLoss, ops/moe_aux_loss.h): the C ABI, the
// descriptors and their checks, and the family's host runner (the arithmetic is the device's:
// docs/moe_aux_loss.md).
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "infiniop/ops/moe_aux_loss.h"
#include "ops/moe_aux_loss.h"
#include "ops/moe_gating_checks.h"

namespace {
using infiniop::Tensor;
using infiniop::moe_checks::Checker;
using infiniop::moe_gating::routerView;
namespace checks = infiniop::checks;
namespace moe = infiniop::moe;

constexpr const char *kLoss = "MoeAuxLoss";
constexpr const char *kGrad = "MoeAuxLossGrad";

using AuxLossDescriptor =
    infiniop::moe_gating::RunnerDescriptor<moe::AuxLossPlan, moe::AuxLossRunner>;
using infiniop::moe_gating::publishRunner;

checks::Operand operand(const char *name, const void *data, const moe::RouterView &v) {
  return infiniop::moe_gating::routerOperand(name, data, v);
}

// The attributes and tensors both operators share: score_function, topk, total_tokens, coeff,
// x (..., E) and tokens_per_expert (E) or (B, E). Fills the plan's score, dtype, rows, experts,
// sequences, scale and the x and counts views.
infiniStatus_t common(Checker &check, const Tensor *x, const Tensor *counts, int64_t score_function,
                      int64_t topk, int64_t total_tokens, double coeff, moe::AuxLossPlan *p) {
  if (score_function < 0 || score_function > 2)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "score_function " + std::to_string(score_function) +
                          " is not 0 (softmax), 1 (sigmoid) or 2 (sqrtsoftplus)");
  if (topk < 1)
    return check.fail(INFINI_STATUS_BAD_PARAM, "topk " + std::to_string(topk) + " is not >= 1");
  if (!std::isfinite(coeff))
    return check.fail(INFINI_STATUS_BAD_PARAM, "coeff " + std::to_string(coeff) + " is not finite");
  INFINIOP_CHECK(check.floating("x", x));
  std::vector<size_t> leading;
  INFINIOP_CHECK(infiniop::moe_gating::checkX(check, "x", x, &leading));
  const size_t E = x->shape.back();
  size_t T = 1;
  for (size_t d : leading) T *= d;
  INFINIOP_CHECK(check.index("tokens_per_expert", counts));
  if (counts->ndim() != 1 && counts->ndim() != 2)
    return check.fail(INFINI_STATUS_BAD_TENSOR_SHAPE, "tokens_per_expert shape " +
                                                          infiniop::shapeString(counts->shape) +
                                                          " must be (E) or (B, E)");
  if (counts->shape.back() != E)
    return check.fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                      "tokens_per_expert shape " + infiniop::shapeString(counts->shape) +
                          " should end in E = " + std::to_string(E) + " (x's last dim)");
  const bool sequence = counts->ndim() == 2;
  const size_t B = sequence ? counts->shape[0] : 1;
  double L = 0;
  if (sequence) {
    if (B == 0 || T % B != 0)
      return check.fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                        "tokens_per_expert shape " + infiniop::shapeString(counts->shape) +
                            ": B = " + std::to_string(B) + " must be >= 1 and divide x's " +
                            std::to_string(T) + " rows");
    if (T == 0 || total_tokens != static_cast<int64_t>(T))
      return check.fail(INFINI_STATUS_BAD_PARAM,
                        "total_tokens " + std::to_string(total_tokens) +
                            " must equal x's rows T = " + std::to_string(T) +
                            " >= 1 for the sequence-level loss (tokens_per_expert (B, E))");
    L = static_cast<double>(T / B);
  } else {
    if (total_tokens < 1)
      return check.fail(INFINI_STATUS_BAD_PARAM,
                        "total_tokens " + std::to_string(total_tokens) + " is not >= 1");
    L = static_cast<double>(total_tokens);
  }
  // K = coeff E / (k B L^2) in double (each step rounded to 53 bits), then once to F32.
  const double K =
      coeff * static_cast<double>(E) / static_cast<double>(topk) / static_cast<double>(B) / L / L;
  const auto scale = static_cast<float>(K);
  if (!std::isfinite(scale))
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "coeff E / (topk B L^2) = " + std::to_string(K) + " is not finite in F32");
  p->score = static_cast<moe::AuxScore>(score_function);
  p->dtype = x->dtype;
  p->rows = T;
  p->experts = E;
  p->sequences = B;
  p->scale = scale;
  p->exact_scale = K;
  INFINIOP_CHECK(routerView(check, "x", x, true, &p->x));
  return routerView(check, "tokens_per_expert", counts, true, &p->counts);
}

// Every count in [0, 2^24] (exact in F32).
infiniStatus_t checkCounts(const char *op, const moe::RouterView &v,
                           const infiniop::moe_gating::HostCopy &values) {
  for (size_t b = 0; b < v.rows; ++b)
    for (size_t e = 0; e < v.cols; ++e) {
      const int64_t count = values.integer(v, b, e);
      if (count >= 0 && count <= moe::kAuxLossMaxCount) continue;
      return infiniop::fail(INFINI_STATUS_BAD_PARAM,
                            std::string(op) + ": tokens_per_expert value " + std::to_string(count) +
                                " (row " + std::to_string(b) + ", expert " + std::to_string(e) +
                                ") is outside [0, 2^24]");
    }
  return INFINI_STATUS_SUCCESS;
}

// The counts read to the host (after the work queued on the stream) and checked.
infiniStatus_t readCounts(const AuxLossDescriptor *desc, void *stream, const void *counts) {
  infiniop::moe_gating::HostCopy values;
  INFINIOP_CHECK(values.read(desc->name(), desc->handle, stream, desc->plan.counts, counts));
  return checkCounts(desc->name(), desc->plan.counts, values);
}

// ---- MoeAuxLoss --------------------------------------------------------------------------------

infiniStatus_t createLoss(infiniopHandle_t handle, infiniopMoeAuxLossDescriptor_t *desc_ptr,
                          const Tensor *loss, const Tensor *x, const Tensor *counts,
                          int64_t score_function, int64_t topk, int64_t total_tokens,
                          double coeff) {
  Checker check(kLoss);
  INFINIOP_CHECK(check.opening(desc_ptr, handle));
  INFINIOP_CHECK(check.required("loss descriptor", loss));
  INFINIOP_CHECK(check.required("x descriptor", x));
  INFINIOP_CHECK(check.required("tokens_per_expert descriptor", counts));
  INFINIOP_CHECK(check.device(handle, infiniop::KernelId::moe_aux_loss));
  auto desc = std::make_unique<AuxLossDescriptor>(kLoss);
  moe::AuxLossPlan &p = desc->plan;
  INFINIOP_CHECK(common(check, x, counts, score_function, topk, total_tokens, coeff, &p));
  INFINIOP_CHECK(check.exactDtype("loss", loss, INFINI_DTYPE_F32));
  INFINIOP_CHECK(check.rank("loss", loss, 0, "() (a scalar)"));
  p.grad = false;
  p.kernel = infiniop::KernelId::moe_aux_loss;
  INFINIOP_CHECK(routerView(check, "loss", loss, false, &p.loss));
  return publishRunner(kLoss, handle, desc_ptr, std::move(desc));
}

infiniStatus_t runLoss(const AuxLossDescriptor *desc, size_t workspace_size, void *workspace,
                       void *loss, const void *x, const void *counts, void *stream) {
  const moe::AuxLossPlan &p = desc->plan;
  const char *op = desc->name();
  INFINIOP_CHECK(checks::checkWorkspaceSize(op, workspace_size, desc->workspace_size));
  INFINIOP_CHECK(checks::checkOperands(op,
                                       {operand("loss", loss, p.loss), operand("x", x, p.x),
                                        operand("tokens_per_expert", counts, p.counts),
                                        checks::workspaceOperand(workspace, desc->workspace_size)},
                                       1, /*last_is_workspace=*/true));
  INFINIOP_CHECK(readCounts(desc, stream, counts));
  moe::AuxLossData data{};
  data.x = x;
  data.counts = counts;
  data.loss = loss;
  data.workspace = workspace;
  INFINIOP_CHECK(desc->runner->run(data, stream));
  return infiniop::succeed();
}

// ---- MoeAuxLossGrad ----------------------------------------------------------------------------

infiniStatus_t createGrad(infiniopHandle_t handle, infiniopMoeAuxLossGradDescriptor_t *desc_ptr,
                          const Tensor *grad_x, const Tensor *grad_loss, const Tensor *x,
                          const Tensor *counts, int64_t score_function, int64_t topk,
                          int64_t total_tokens, double coeff) {
  Checker check(kGrad);
  INFINIOP_CHECK(check.opening(desc_ptr, handle));
  INFINIOP_CHECK(check.required("grad_x descriptor", grad_x));
  INFINIOP_CHECK(check.required("grad_loss descriptor", grad_loss));
  INFINIOP_CHECK(check.required("x descriptor", x));
  INFINIOP_CHECK(check.required("tokens_per_expert descriptor", counts));
  INFINIOP_CHECK(check.device(handle, infiniop::KernelId::moe_aux_loss_grad));
  auto desc = std::make_unique<AuxLossDescriptor>(kGrad);
  moe::AuxLossPlan &p = desc->plan;
  INFINIOP_CHECK(common(check, x, counts, score_function, topk, total_tokens, coeff, &p));
  INFINIOP_CHECK(check.floating("grad_x", grad_x));
  INFINIOP_CHECK(check.shape("grad_x", grad_x, x->shape, "(x's shape)"));
  INFINIOP_CHECK(check.output("grad_x", grad_x));
  INFINIOP_CHECK(check.exactDtype("grad_loss", grad_loss, INFINI_DTYPE_F32));
  INFINIOP_CHECK(check.rank("grad_loss", grad_loss, 0, "() (a scalar)"));
  p.grad = true;
  p.kernel = infiniop::KernelId::moe_aux_loss_grad;
  INFINIOP_CHECK(routerView(check, "grad_x", grad_x, true, &p.grad_x));
  INFINIOP_CHECK(routerView(check, "grad_loss", grad_loss, false, &p.grad_loss));
  return publishRunner(kGrad, handle, desc_ptr, std::move(desc));
}

infiniStatus_t runGrad(const AuxLossDescriptor *desc, size_t workspace_size, void *workspace,
                       void *grad_x, const void *grad_loss, const void *x, const void *counts,
                       void *stream) {
  const moe::AuxLossPlan &p = desc->plan;
  const char *op = desc->name();
  INFINIOP_CHECK(checks::checkWorkspaceSize(op, workspace_size, desc->workspace_size));
  INFINIOP_CHECK(checks::checkOperands(
      op,
      {operand("grad_x", grad_x, p.grad_x), operand("grad_loss", grad_loss, p.grad_loss),
       operand("x", x, p.x), operand("tokens_per_expert", counts, p.counts),
       checks::workspaceOperand(workspace, desc->workspace_size)},
      1, /*last_is_workspace=*/true));
  INFINIOP_CHECK(readCounts(desc, stream, counts));
  moe::AuxLossData data{};
  data.x = x;
  data.counts = counts;
  data.grad_loss = grad_loss;
  data.grad_x = grad_x;
  data.workspace = workspace;
  INFINIOP_CHECK(desc->runner->run(data, stream));
  return infiniop::succeed();
}

}  // namespace

// ---- the host runner ---------------------------------------------------------------------------

namespace infiniop::family {
infiniStatus_t MoeAuxLoss::hostRunner(HostKernel *kernel, const Plan &plan,
                                      std::unique_ptr<Runner> *runner) {
  *runner = std::make_unique<HostCallRunner<moe::AuxLossRunner, MoeAuxLoss, moe::AuxLossData>>(
      kernel, plan);
  return INFINI_STATUS_SUCCESS;
}
}  // namespace infiniop::family

// ---- the C ABI ---------------------------------------------------------------------------------

extern "C" infiniStatus_t infiniopCreateMoeAuxLossDescriptor(
    infiniopHandle_t handle, infiniopMoeAuxLossDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t loss_desc, infiniopTensorDescriptor_t x_desc,
    infiniopTensorDescriptor_t tokens_per_expert_desc, int64_t score_function, int64_t topk,
    int64_t total_tokens, double coeff) {
  return infiniop::guarded(kLoss, [&] {
    return createLoss(handle, desc_ptr, loss_desc, x_desc, tokens_per_expert_desc, score_function,
                      topk, total_tokens, coeff);
  });
}

INFINIOP_DESCRIPTOR_QUERIES(MoeAuxLoss, kLoss)

extern "C" infiniStatus_t infiniopMoeAuxLoss(infiniopMoeAuxLossDescriptor_t desc, void *workspace,
                                             size_t workspace_size, void *loss, const void *x,
                                             const void *tokens_per_expert, void *stream) {
  AuxLossDescriptor *d = nullptr;
  INFINIOP_CHECK(infiniop::unwrapDescriptor(kLoss, desc, &d));
  return infiniop::guarded(kLoss, [&] {
    return runLoss(d, workspace_size, workspace, loss, x, tokens_per_expert, stream);
  });
}

extern "C" infiniStatus_t infiniopCreateMoeAuxLossGradDescriptor(
    infiniopHandle_t handle, infiniopMoeAuxLossGradDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t grad_x_desc, infiniopTensorDescriptor_t grad_loss_desc,
    infiniopTensorDescriptor_t x_desc, infiniopTensorDescriptor_t tokens_per_expert_desc,
    int64_t score_function, int64_t topk, int64_t total_tokens, double coeff) {
  return infiniop::guarded(kGrad, [&] {
    return createGrad(handle, desc_ptr, grad_x_desc, grad_loss_desc, x_desc, tokens_per_expert_desc,
                      score_function, topk, total_tokens, coeff);
  });
}

INFINIOP_DESCRIPTOR_QUERIES(MoeAuxLossGrad, kGrad)

extern "C" infiniStatus_t infiniopMoeAuxLossGrad(infiniopMoeAuxLossGradDescriptor_t desc,
                                                 void *workspace, size_t workspace_size,
                                                 void *grad_x, const void *grad_loss, const void *x,
                                                 const void *tokens_per_expert, void *stream) {
  AuxLossDescriptor *d = nullptr;
  INFINIOP_CHECK(infiniop::unwrapDescriptor(kGrad, desc, &d));
  return infiniop::guarded(kGrad, [&] {
    return runGrad(d, workspace_size, workspace, grad_x, grad_loss, x, tokens_per_expert, stream);
  });
}
