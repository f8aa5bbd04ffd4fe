// SPDX-License-Identifier: Apache-2.0
// The router operators' shared checks and calculate path (ops/moe_gating_checks.h).
#include <cstring>

#include "ops/moe_gating_checks.h"

namespace infiniop::moe_gating {
namespace {
using infiniop::moe_checks::Operand;
Operand operand(const char *name, const void *data, const moe::RouterView &v) {
  return routerOperand(name, data, v);
}

// The grads' data-dependent check: expert_idx in [0, E) on every row finished does not mark.
infiniStatus_t checkExperts(const char *op, const moe::RouterPlan &p, const char *experts,
                            const char *finished) {
  const auto E = static_cast<int64_t>(p.experts);
  const bool wide = p.expert_idx.dtype == INFINI_DTYPE_I64;
  for (size_t r = 0; r < p.rows; ++r) {
    if (finished && finished[p.finished.rowOffset(r)] != 0) continue;
    for (size_t i = 0; i < p.k; ++i) {
      const ptrdiff_t at = p.expert_idx.offset(r, i);
      const int64_t value = wide ? reinterpret_cast<const int64_t *>(experts)[at]
                                 : reinterpret_cast<const int32_t *>(experts)[at];
      if (value >= 0 && value < E) continue;
      return infiniop::fail(INFINI_STATUS_BAD_PARAM,
                            std::string(op) + ": expert_idx value " + std::to_string(value) +
                                " (row " + std::to_string(r) + ", column " + std::to_string(i) +
                                ") is outside [0, " + std::to_string(E) + ")" +
                                (p.finished.present ? " on a row finished does not mark" : ""));
    }
  }
  return INFINI_STATUS_SUCCESS;
}

}  // namespace

infiniStatus_t routerView(const Checker &check, const char *name, const Tensor *t, bool last_dim,
                          moe::RouterView *view) {
  moe::RouterView v;
  if (!t) {
    *view = v;
    return INFINI_STATUS_SUCCESS;
  }
  v.present = true;
  v.dtype = t->dtype;
  v.span = infiniop::elementSpan(t->shape, t->strides);
  const size_t lead = last_dim ? t->ndim() - 1 : t->ndim();
  v.cols = last_dim ? t->shape[lead] : 1;
  v.col_stride = last_dim ? t->strides[lead] : 0;
  v.rows = 1;
  // Merge a dim into the one before it where stepping over it whole is one step of the outer.
  std::vector<size_t> dims;
  std::vector<ptrdiff_t> strides;
  for (size_t d = 0; d < lead; ++d) {
    v.rows *= t->shape[d];
    if (t->shape[d] == 1) continue;
    if (!dims.empty() && strides.back() == t->strides[d] * static_cast<ptrdiff_t>(t->shape[d])) {
      dims.back() *= t->shape[d];
      strides.back() = t->strides[d];
      continue;
    }
    dims.push_back(t->shape[d]);
    strides.push_back(t->strides[d]);
  }
  const int n = static_cast<int>(dims.size());
  if (n > moe::kRouterMaxLeading)
    return check.fail(INFINI_STATUS_BAD_TENSOR_STRIDES,
                      std::string(name) + " (shape " + infiniop::shapeString(t->shape) +
                          ", strides " + infiniop::stridesString(t->strides) + ") has " +
                          std::to_string(n) + " leading dims that no stride merges; at most " +
                          std::to_string(moe::kRouterMaxLeading) + " are supported");
  v.ndim = n;
  for (int d = 0; d < n; ++d) {
    v.dims[d] = dims[d];
    v.strides[d] = strides[d];
  }
  *view = v;
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t checkX(const Checker &check, const char *name, const Tensor *x,
                      std::vector<size_t> *leading) {
  if (x->ndim() < 2)
    return check.fail(INFINI_STATUS_BAD_TENSOR_SHAPE, std::string(name) + " shape " +
                                                          infiniop::shapeString(x->shape) +
                                                          " must be (..., E), rank >= 2");
  if (x->shape.back() == 0)
    return check.fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                      std::string(name) + " shape " + infiniop::shapeString(x->shape) +
                          " has no experts: E (the last dim) must be >= 1");
  leading->assign(x->shape.begin(), x->shape.end() - 1);
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t checkRows(const Checker &check, const char *name, const Tensor *t,
                         const std::vector<size_t> &leading, size_t last, const char *layout) {
  if (!t) return INFINI_STATUS_SUCCESS;
  std::vector<size_t> expected = leading;
  expected.push_back(last);
  return check.shape(name, t, expected, layout);
}

infiniStatus_t checkFinished(const Checker &check, const Tensor *finished,
                             const std::vector<size_t> &leading) {
  if (!finished) return INFINI_STATUS_SUCCESS;
  INFINIOP_CHECK(infiniop::checkTensor(check.name(), "finished", finished));
  if (finished->dtype != INFINI_DTYPE_BOOL)
    return check.fail(INFINI_STATUS_BAD_TENSOR_DTYPE, std::string("finished has dtype ") +
                                                          infiniop::dtypeName(finished->dtype) +
                                                          "; BOOL is required");
  return check.shape("finished", finished, leading, "(x's leading shape)");
}

infiniStatus_t indexFits(const Checker &check, const char *name, const Tensor *t, size_t highest) {
  if (!t || t->dtype != INFINI_DTYPE_I32 ||
      highest <= static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    return INFINI_STATUS_SUCCESS;
  return check.fail(INFINI_STATUS_BAD_TENSOR_DTYPE,
                    std::string(name) + " is I32 but its values reach " + std::to_string(highest) +
                        "; I64 is required");
}

infiniStatus_t checkF32(const Checker &check, const char *name, const Tensor *t) {
  if (!t) return INFINI_STATUS_SUCCESS;
  INFINIOP_CHECK(infiniop::checkTensor(check.name(), name, t));
  if (t->dtype == INFINI_DTYPE_F32) return INFINI_STATUS_SUCCESS;
  return check.fail(
      INFINI_STATUS_BAD_TENSOR_DTYPE,
      std::string(name) + " has dtype " + infiniop::dtypeName(t->dtype) + "; F32 is required");
}

infiniStatus_t gradOpening(const Checker &check, infiniopHandle_t handle, infiniop::KernelId kernel,
                           const Tensor *grad_x, const Tensor *grad_y, const Tensor *x,
                           const Tensor *expert_idx) {
  INFINIOP_CHECK(check.required("grad_x descriptor", grad_x));
  INFINIOP_CHECK(check.required("grad_y descriptor", grad_y));
  INFINIOP_CHECK(check.required("x descriptor", x));
  INFINIOP_CHECK(check.required("expert_idx descriptor", expert_idx));
  return check.device(handle, kernel);
}

infiniStatus_t gradTensors(Checker &check, const Tensor *grad_x, const Tensor *grad_y,
                           const Tensor *x, const Tensor *expert_idx, std::vector<size_t> *leading,
                           moe::RouterPlan *p) {
  INFINIOP_CHECK(check.floating("x", x));
  INFINIOP_CHECK(check.floating("grad_x", grad_x));
  INFINIOP_CHECK(check.floating("grad_y", grad_y));
  INFINIOP_CHECK(check.index("expert_idx", expert_idx));
  INFINIOP_CHECK(checkX(check, "x", x, leading));
  const size_t E = x->shape.back();
  INFINIOP_CHECK(checkRows(check, "grad_x", grad_x, *leading, E, "(x's shape)"));
  INFINIOP_CHECK(check.rank("grad_y", grad_y, x->ndim(), "(x's leading shape, k)"));
  const size_t K = grad_y->shape.back();
  if (K < 1 || K > E)
    return check.fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                      "grad_y shape " + infiniop::shapeString(grad_y->shape) + ": k " +
                          std::to_string(K) +
                          " (its last dim) is outside [1, E = " + std::to_string(E) + "]");
  INFINIOP_CHECK(checkRows(check, "grad_y", grad_y, *leading, K, "(x's leading shape, k)"));
  INFINIOP_CHECK(checkRows(check, "expert_idx", expert_idx, *leading, K, "(grad_y's shape)"));
  INFINIOP_CHECK(check.output("grad_x", grad_x));
  p->dtype = check.dtype();
  p->rows = x->numel() / E;
  p->experts = E;
  p->k = K;
  INFINIOP_CHECK(routerView(check, "grad_x", grad_x, true, &p->grad_x));
  INFINIOP_CHECK(routerView(check, "grad_y", grad_y, true, &p->grad_y));
  INFINIOP_CHECK(routerView(check, "x", x, true, &p->x));
  return routerView(check, "expert_idx", expert_idx, true, &p->expert_idx);
}

infiniStatus_t runRouter(const RouterDescriptor *desc, size_t workspace_size,
                         const moe::RouterData &data, void *stream) {
  const moe::RouterPlan &p = desc->plan;
  const char *op = desc->name();
  const bool grad =
      p.kind == moe::RouterKind::top_k_softmax_grad || p.kind == moe::RouterKind::top_k_grad;
  // MoeGatingWeights reads expert_idx as the grads do.
  const bool weights = p.kind == moe::RouterKind::weights;
  const size_t needed = desc->workspace_size;
  INFINIOP_CHECK(moe_checks::checkWorkspaceSize(op, workspace_size, needed));
  std::vector<Operand> operands;
  size_t outputs = 0;
  if (grad) {
    operands = {operand("grad_x", data.grad_x, p.grad_x), operand("grad_y", data.grad_y, p.grad_y),
                operand("x", data.x, p.x), operand("expert_idx", data.expert_idx_in, p.expert_idx),
                operand("finished", data.finished, p.finished)};
    outputs = 1;
  } else if (weights) {
    operands = {operand("y", data.y, p.y), operand("x", data.x, p.x),
                operand("expert_idx", data.expert_idx_in, p.expert_idx)};
    outputs = 1;
  } else {
    const char *probs = p.kind == moe::RouterKind::top_k ? "norm_out" : "softmax_out";
    operands = {operand("y", data.y, p.y),
                operand("expert_idx", data.expert_idx, p.expert_idx),
                operand("row_idx", data.row_idx, p.row_idx),
                operand(probs, data.probs, p.probs),
                operand("x", data.x, p.x),
                operand("finished", data.finished, p.finished),
                operand("bias", data.bias, p.bias)};
    outputs = 4;
  }
  operands.push_back(moe_checks::workspaceOperand(data.workspace, needed));
  INFINIOP_CHECK(moe_checks::checkOperands(op, operands, outputs, /*last_is_workspace=*/true));
  if (grad || weights) {
    HostCopy experts, finished;
    INFINIOP_CHECK(experts.read(op, desc->handle, stream, p.expert_idx, data.expert_idx_in));
    INFINIOP_CHECK(finished.read(op, desc->handle, stream, p.finished, data.finished));
    INFINIOP_CHECK(
        checkExperts(op, p, experts.data(), p.finished.present ? finished.data() : nullptr));
  }
  if (p.rows == 0) return infiniop::succeed();
  INFINIOP_CHECK(desc->runner->run(data, stream));
  return infiniop::succeed();
}

}  // namespace infiniop::moe_gating
