// SPDX-License-Identifier: Apache-2.0
// MoeExpertCounts, MoeBiasUpdate and MoeExpertCapacity (family MoeCounts, ops/moe_counts.h): the
// C ABI, the descriptors and their checks, and the family's host runner (the arithmetic is the
// device's: docs/moe_expert_counts.md, docs/moe_bias_update.md, docs/moe_expert_capacity.md).
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "infiniop/ops/moe_bias_update.h"
#include "infiniop/ops/moe_expert_capacity.h"
#include "infiniop/ops/moe_expert_counts.h"
#include "ops/moe_counts.h"
#include "ops/moe_gating_checks.h"

namespace {
using infiniop::Tensor;
using infiniop::moe_checks::Checker;
using infiniop::moe_gating::routerView;
namespace checks = infiniop::checks;
namespace moe = infiniop::moe;

constexpr const char *kCounts = "MoeExpertCounts";
constexpr const char *kBias = "MoeBiasUpdate";
constexpr const char *kCapacity = "MoeExpertCapacity";
constexpr int64_t kMaxCapacityExperts = int64_t{1} << 24;

using CountsDescriptor = infiniop::moe_gating::RunnerDescriptor<moe::CountsPlan, moe::CountsRunner>;
using infiniop::moe_gating::publishRunner;

checks::Operand operand(const char *name, const void *data, const moe::RouterView &v) {
  return infiniop::moe_gating::routerOperand(name, data, v);
}
using HostValues = infiniop::moe_gating::HostCopy;

// ---- MoeExpertCounts ---------------------------------------------------------------------------

infiniStatus_t createCounts(infiniopHandle_t handle, infiniopMoeExpertCountsDescriptor_t *desc_ptr,
                            const Tensor *counts, const Tensor *expert_idx, int64_t num_experts) {
  Checker check(kCounts);
  INFINIOP_CHECK(check.opening(desc_ptr, handle));
  INFINIOP_CHECK(check.required("counts descriptor", counts));
  INFINIOP_CHECK(check.required("expert_idx descriptor", expert_idx));
  INFINIOP_CHECK(check.device(handle, infiniop::KernelId::moe_expert_counts));
  if (num_experts < 1)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "num_experts " + std::to_string(num_experts) + " is not >= 1");
  const auto E = static_cast<size_t>(num_experts);
  INFINIOP_CHECK(check.index("counts", counts));
  INFINIOP_CHECK(check.index("expert_idx", expert_idx));
  if (expert_idx->ndim() < 1)
    return check.fail(INFINI_STATUS_BAD_TENSOR_SHAPE, "expert_idx shape " +
                                                          infiniop::shapeString(expert_idx->shape) +
                                                          " must be (..., k), rank >= 1");
  if (counts->ndim() != 1 && counts->ndim() != 2)
    return check.fail(
        INFINI_STATUS_BAD_TENSOR_SHAPE,
        "counts shape " + infiniop::shapeString(counts->shape) + " must be (E) or (B, E)");
  INFINIOP_CHECK(check.shape(
      "counts", counts,
      counts->ndim() == 1 ? std::vector<size_t>{E} : std::vector<size_t>{counts->shape[0], E},
      "(E) or (B, E), E = num_experts"));
  // (B, E): row r of expert_idx counts in counts[r % B] (Megatron's (seq, batch) order).
  const size_t B = counts->ndim() == 2 ? counts->shape[0] : 1;
  size_t rows = 1;
  for (size_t d = 0; d + 1 < expert_idx->ndim(); ++d) rows *= expert_idx->shape[d];
  if (B == 0 || rows % B != 0)
    return check.fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                      "counts shape " + infiniop::shapeString(counts->shape) +
                          ": B = " + std::to_string(B) + " must be >= 1 and divide expert_idx's " +
                          std::to_string(rows) + " rows");
  INFINIOP_CHECK(infiniop::moe_gating::indexFits(check, "counts", counts, expert_idx->numel()));
  INFINIOP_CHECK(check.output("counts", counts));

  auto desc = std::make_unique<CountsDescriptor>(kCounts);
  moe::CountsPlan &p = desc->plan;
  p.kind = moe::CountsKind::expert_counts;
  p.kernel = infiniop::KernelId::moe_expert_counts;
  p.experts = E;
  p.sequences = B;
  INFINIOP_CHECK(routerView(check, "counts", counts, true, &p.counts));
  INFINIOP_CHECK(routerView(check, "expert_idx", expert_idx, true, &p.expert_idx));
  // An expert_idx of k = 0 columns holds no value however many rows it has (2^40 x 0): no rows
  // for the checks and kernels to walk.
  if (p.expert_idx.cols == 0) p.expert_idx.rows = 0;
  return publishRunner(kCounts, handle, desc_ptr, std::move(desc));
}

// Every value in [0, E] (E: a finished row, not counted).
infiniStatus_t checkExperts(const char *op, const moe::RouterView &v, const HostValues &values,
                            size_t experts) {
  const auto E = static_cast<int64_t>(experts);
  if (v.cols == 0) return INFINI_STATUS_SUCCESS;  // no values, however many rows (2^40 x 0)
  for (size_t r = 0; r < v.rows; ++r)
    for (size_t c = 0; c < v.cols; ++c) {
      const int64_t value = values.integer(v, r, c);
      if (value >= 0 && value <= E) continue;
      return infiniop::fail(INFINI_STATUS_BAD_PARAM,
                            std::string(op) + ": expert_idx value " + std::to_string(value) +
                                " (row " + std::to_string(r) + ", column " + std::to_string(c) +
                                ") is outside [0, " + std::to_string(E) +
                                "] (E = " + std::to_string(E) + " marks a finished row)");
    }
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t runCounts(const CountsDescriptor *desc, size_t workspace_size, void *workspace,
                         void *counts, const void *expert_idx, void *stream) {
  const moe::CountsPlan &p = desc->plan;
  const char *op = desc->name();
  INFINIOP_CHECK(checks::checkWorkspaceSize(op, workspace_size, desc->workspace_size));
  INFINIOP_CHECK(checks::checkOperands(
      op,
      {operand("counts", counts, p.counts), operand("expert_idx", expert_idx, p.expert_idx),
       checks::workspaceOperand(workspace, desc->workspace_size)},
      1, /*last_is_workspace=*/true));
  HostValues values;
  INFINIOP_CHECK(values.read(op, desc->handle, stream, p.expert_idx, expert_idx));
  INFINIOP_CHECK(checkExperts(op, p.expert_idx, values, p.experts));
  moe::CountsData data{};
  data.expert_idx = expert_idx;
  data.counts = counts;
  data.workspace = workspace;
  INFINIOP_CHECK(desc->runner->run(data, stream));
  return infiniop::succeed();
}

// ---- MoeBiasUpdate -----------------------------------------------------------------------------

infiniStatus_t createBias(infiniopHandle_t handle, infiniopMoeBiasUpdateDescriptor_t *desc_ptr,
                          const Tensor *bias, const Tensor *counts, double update_rate) {
  Checker check(kBias);
  INFINIOP_CHECK(check.opening(desc_ptr, handle));
  INFINIOP_CHECK(check.required("bias descriptor", bias));
  INFINIOP_CHECK(check.required("counts descriptor", counts));
  INFINIOP_CHECK(check.device(handle, infiniop::KernelId::moe_bias_update));
  // Rounded to F32 first: a double beyond F32's range is infinite there.
  const auto u = static_cast<float>(update_rate);
  if (!std::isfinite(u))
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "update_rate " + std::to_string(update_rate) + " is not finite in F32");
  INFINIOP_CHECK(check.exactDtype("bias", bias, INFINI_DTYPE_F32));
  INFINIOP_CHECK(check.index("counts", counts));
  INFINIOP_CHECK(check.rank("bias", bias, 1, "(E)"));
  if (bias->shape[0] == 0)
    return check.fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                      "bias shape (0) has no experts: E must be >= 1 (the mean divides by it)");
  const size_t E = bias->shape[0];
  INFINIOP_CHECK(check.rank("counts", counts, 1, "(E)"));
  INFINIOP_CHECK(check.shape("counts", counts, {E}, "(E), E from bias"));
  INFINIOP_CHECK(check.output("bias", bias));

  auto desc = std::make_unique<CountsDescriptor>(kBias);
  moe::CountsPlan &p = desc->plan;
  p.kind = moe::CountsKind::bias_update;
  p.kernel = infiniop::KernelId::moe_bias_update;
  p.experts = E;
  p.update_rate = u;
  INFINIOP_CHECK(routerView(check, "bias", bias, true, &p.bias));
  INFINIOP_CHECK(routerView(check, "counts", counts, true, &p.counts));
  return publishRunner(kBias, handle, desc_ptr, std::move(desc));
}

// Every count >= 0 and their sum below 2^63: the sum S.
infiniStatus_t countsTotal(const char *op, const moe::RouterView &v, const HostValues &values,
                           int64_t *total) {
  int64_t sum = 0;
  for (size_t e = 0; e < v.cols; ++e) {
    const int64_t count = values.integer(v, 0, e);
    if (count < 0)
      return infiniop::fail(INFINI_STATUS_BAD_PARAM, std::string(op) + ": counts value " +
                                                         std::to_string(count) + " (expert " +
                                                         std::to_string(e) + ") is negative");
    if (count > std::numeric_limits<int64_t>::max() - sum)
      return infiniop::fail(
          INFINI_STATUS_BAD_PARAM,
          std::string(op) + ": the counts' sum exceeds 2^63 - 1 at expert " + std::to_string(e));
    sum += count;
  }
  *total = sum;
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t runBias(const CountsDescriptor *desc, size_t workspace_size, void *workspace,
                       void *bias, const void *counts, void *stream) {
  const moe::CountsPlan &p = desc->plan;
  const char *op = desc->name();
  INFINIOP_CHECK(checks::checkWorkspaceSize(op, workspace_size, desc->workspace_size));
  INFINIOP_CHECK(
      checks::checkOperands(op,
                            {operand("bias", bias, p.bias), operand("counts", counts, p.counts),
                             checks::workspaceOperand(workspace, desc->workspace_size)},
                            1, /*last_is_workspace=*/true));
  HostValues values;
  INFINIOP_CHECK(values.read(op, desc->handle, stream, p.counts, counts));
  moe::CountsData data{};
  INFINIOP_CHECK(countsTotal(op, p.counts, values, &data.total));
  data.counts_in = counts;
  data.bias = bias;
  data.workspace = workspace;
  INFINIOP_CHECK(desc->runner->run(data, stream));
  return infiniop::succeed();
}

// ---- MoeExpertCapacity -------------------------------------------------------------------------

infiniStatus_t createCapacity(infiniopHandle_t handle,
                              infiniopMoeExpertCapacityDescriptor_t *desc_ptr,
                              const Tensor *kept_idx, const Tensor *weights_out,
                              const Tensor *expert_idx, const Tensor *weights, int64_t num_experts,
                              int64_t capacity, int64_t drop_policy) {
  Checker check(kCapacity);
  INFINIOP_CHECK(check.opening(desc_ptr, handle));
  INFINIOP_CHECK(check.required("kept_idx descriptor", kept_idx));
  INFINIOP_CHECK(check.required("expert_idx descriptor", expert_idx));
  INFINIOP_CHECK(check.device(handle, infiniop::KernelId::moe_expert_capacity));
  // MoeInitRoutingV2's bound: the devices keep per-expert state (opencl a work-item each).
  if (num_experts < 1 || num_experts > kMaxCapacityExperts)
    return check.fail(INFINI_STATUS_BAD_PARAM, "num_experts " + std::to_string(num_experts) +
                                                   " is outside [1, " +
                                                   std::to_string(kMaxCapacityExperts) + "]");
  if (capacity < 0)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "capacity " + std::to_string(capacity) + " is negative");
  if (drop_policy != 0 && drop_policy != 1)
    return check.fail(INFINI_STATUS_BAD_PARAM, "drop_policy " + std::to_string(drop_policy) +
                                                   " is not 0 (position) or 1 (probability)");
  if (!weights && (drop_policy == 1 || weights_out))
    return check.fail(INFINI_STATUS_NULL_POINTER,
                      drop_policy == 1
                          ? "weights descriptor is NULL; drop_policy 1 (probability) ranks by it"
                          : "weights descriptor is NULL but weights_out is given");
  INFINIOP_CHECK(check.index("kept_idx", kept_idx));
  INFINIOP_CHECK(check.index("expert_idx", expert_idx));
  if (expert_idx->ndim() < 1)
    return check.fail(INFINI_STATUS_BAD_TENSOR_SHAPE, "expert_idx shape " +
                                                          infiniop::shapeString(expert_idx->shape) +
                                                          " must be (..., k), rank >= 1");
  INFINIOP_CHECK(check.shape("kept_idx", kept_idx, expert_idx->shape, "expert_idx's shape"));
  // kept_idx holds experts up to E.
  INFINIOP_CHECK(infiniop::moe_gating::indexFits(check, "kept_idx", kept_idx,
                                                 static_cast<size_t>(num_experts)));
  INFINIOP_CHECK(check.floating("weights", weights));
  INFINIOP_CHECK(check.floating("weights_out", weights_out));
  if (weights)
    INFINIOP_CHECK(check.shape("weights", weights, expert_idx->shape, "expert_idx's shape"));
  if (weights_out)
    INFINIOP_CHECK(
        check.shape("weights_out", weights_out, expert_idx->shape, "expert_idx's shape"));
  INFINIOP_CHECK(check.output("kept_idx", kept_idx));
  if (weights_out) INFINIOP_CHECK(check.output("weights_out", weights_out));

  auto desc = std::make_unique<CountsDescriptor>(kCapacity);
  moe::CountsPlan &p = desc->plan;
  p.kind = moe::CountsKind::capacity;
  p.kernel = infiniop::KernelId::moe_expert_capacity;
  p.experts = static_cast<size_t>(num_experts);
  p.capacity = static_cast<size_t>(capacity);
  p.policy = drop_policy == 1 ? moe::DropPolicy::probability : moe::DropPolicy::position;
  INFINIOP_CHECK(routerView(check, "kept_idx", kept_idx, true, &p.kept_idx));
  INFINIOP_CHECK(routerView(check, "expert_idx", expert_idx, true, &p.expert_idx));
  INFINIOP_CHECK(routerView(check, "weights", weights, true, &p.weights));
  INFINIOP_CHECK(routerView(check, "weights_out", weights_out, true, &p.weights_out));
  // k = 0 columns: no slots however many rows (2^40 x 0), so no rows to walk.
  if (p.expert_idx.cols == 0)
    for (infiniop::moe::RouterView *v : {&p.kept_idx, &p.expert_idx, &p.weights, &p.weights_out})
      v->rows = 0;
  return publishRunner(kCapacity, handle, desc_ptr, std::move(desc));
}

infiniStatus_t runCapacity(const CountsDescriptor *desc, size_t workspace_size, void *workspace,
                           void *kept_idx, void *weights_out, const void *expert_idx,
                           const void *weights, void *stream) {
  const moe::CountsPlan &p = desc->plan;
  const char *op = desc->name();
  INFINIOP_CHECK(checks::checkWorkspaceSize(op, workspace_size, desc->workspace_size));
  INFINIOP_CHECK(checks::checkOperands(
      op,
      {operand("kept_idx", kept_idx, p.kept_idx),
       operand("weights_out", weights_out, p.weights_out),
       operand("expert_idx", expert_idx, p.expert_idx), operand("weights", weights, p.weights),
       checks::workspaceOperand(workspace, desc->workspace_size)},
      2, /*last_is_workspace=*/true));
  HostValues values;
  INFINIOP_CHECK(values.read(op, desc->handle, stream, p.expert_idx, expert_idx));
  INFINIOP_CHECK(checkExperts(op, p.expert_idx, values, p.experts));
  if (p.expert_idx.rows * p.expert_idx.cols == 0) return infiniop::succeed();  // nothing to write
  moe::CountsData data{};
  data.expert_idx = expert_idx;
  data.kept_idx = kept_idx;
  data.weights = p.weights.present ? weights : nullptr;
  data.weights_out = p.weights_out.present ? weights_out : nullptr;
  data.workspace = workspace;
  INFINIOP_CHECK(desc->runner->run(data, stream));
  return infiniop::succeed();
}
}  // namespace

// ---- the host runner ---------------------------------------------------------------------------

namespace infiniop::family {
infiniStatus_t MoeCounts::hostRunner(HostKernel *kernel, const Plan &plan,
                                     std::unique_ptr<Runner> *runner) {
  *runner =
      std::make_unique<HostCallRunner<moe::CountsRunner, MoeCounts, moe::CountsData>>(kernel, plan);
  return INFINI_STATUS_SUCCESS;
}
}  // namespace infiniop::family

// ---- the C ABI ---------------------------------------------------------------------------------

extern "C" infiniStatus_t infiniopCreateMoeExpertCountsDescriptor(
    infiniopHandle_t handle, infiniopMoeExpertCountsDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t counts_desc, infiniopTensorDescriptor_t expert_idx_desc,
    int64_t num_experts) {
  return infiniop::guarded(kCounts, [&] {
    return createCounts(handle, desc_ptr, counts_desc, expert_idx_desc, num_experts);
  });
}

INFINIOP_DESCRIPTOR_QUERIES(MoeExpertCounts, kCounts)

extern "C" infiniStatus_t infiniopMoeExpertCounts(infiniopMoeExpertCountsDescriptor_t desc,
                                                  void *workspace, size_t workspace_size,
                                                  void *counts, const void *expert_idx,
                                                  void *stream) {
  CountsDescriptor *d = nullptr;
  INFINIOP_CHECK(infiniop::unwrapDescriptor(kCounts, desc, &d));
  return infiniop::guarded(
      kCounts, [&] { return runCounts(d, workspace_size, workspace, counts, expert_idx, stream); });
}

extern "C" infiniStatus_t infiniopCreateMoeBiasUpdateDescriptor(
    infiniopHandle_t handle, infiniopMoeBiasUpdateDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t bias_desc, infiniopTensorDescriptor_t counts_desc,
    double update_rate) {
  return infiniop::guarded(
      kBias, [&] { return createBias(handle, desc_ptr, bias_desc, counts_desc, update_rate); });
}

INFINIOP_DESCRIPTOR_QUERIES(MoeBiasUpdate, kBias)

extern "C" infiniStatus_t infiniopMoeBiasUpdate(infiniopMoeBiasUpdateDescriptor_t desc,
                                                void *workspace, size_t workspace_size, void *bias,
                                                const void *counts, void *stream) {
  CountsDescriptor *d = nullptr;
  INFINIOP_CHECK(infiniop::unwrapDescriptor(kBias, desc, &d));
  return infiniop::guarded(
      kBias, [&] { return runBias(d, workspace_size, workspace, bias, counts, stream); });
}

extern "C" infiniStatus_t infiniopCreateMoeExpertCapacityDescriptor(
    infiniopHandle_t handle, infiniopMoeExpertCapacityDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t kept_idx_desc, infiniopTensorDescriptor_t weights_out_desc,
    infiniopTensorDescriptor_t expert_idx_desc, infiniopTensorDescriptor_t weights_desc,
    int64_t num_experts, int64_t capacity, int64_t drop_policy) {
  return infiniop::guarded(kCapacity, [&] {
    return createCapacity(handle, desc_ptr, kept_idx_desc, weights_out_desc, expert_idx_desc,
                          weights_desc, num_experts, capacity, drop_policy);
  });
}

INFINIOP_DESCRIPTOR_QUERIES(MoeExpertCapacity, kCapacity)

extern "C" infiniStatus_t infiniopMoeExpertCapacity(infiniopMoeExpertCapacityDescriptor_t desc,
                                                    void *workspace, size_t workspace_size,
                                                    void *kept_idx, void *weights_out,
                                                    const void *expert_idx, const void *weights,
                                                    void *stream) {
  CountsDescriptor *d = nullptr;
  INFINIOP_CHECK(infiniop::unwrapDescriptor(kCapacity, desc, &d));
  return infiniop::guarded(kCapacity, [&] {
    return runCapacity(d, workspace_size, workspace, kept_idx, weights_out, expert_idx, weights,
                       stream);
  });
}
