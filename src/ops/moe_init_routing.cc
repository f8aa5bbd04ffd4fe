// SPDX-License-Identifier: Apache-2.0
// MoeInitRoutingV2: the C ABI, the descriptor, its checks and the sort. The sort runs on the
// host, which reads expert_idx for the range check anyway: a counting sort of the R*K positions
// by expert, stable (positions of one expert keep their order), so its result is one and the
// same for any device and thread count. The device then moves the rows (moe::InitRunner).
#include "ops/moe_init_routing.h"

#include "infiniop/ops/moe_init_routing_v2.h"
#include "ops/moe_checks.h"

namespace {
using namespace infiniop::moe_checks;  // NOLINT: its helpers, fail, Tensor, gather, moe

constexpr const char *kInit = "MoeInitRoutingV2";
// The counting sort's table has expert_num entries: a bound well above any model's.
constexpr int64_t kMaxExperts = int64_t{1} << 24;

struct InitDescriptor : infiniop::OperatorDescriptor {
  InitDescriptor() : OperatorDescriptor(kInit) {}
  std::unique_ptr<moe::InitRunner> runner;
  moe::InitPlan plan;
  gather::IndexView expert_index;  // (R, K)
};

infiniStatus_t createInit(infiniopHandle_t handle, infiniopMoeInitRoutingV2Descriptor_t *desc_ptr,
                          const Tensor *expanded_x, const Tensor *row_index, const Tensor *counts,
                          const Tensor *before_capacity, const Tensor *x,
                          const Tensor *expert_index, int64_t active_num, int64_t capacity,
                          int64_t experts, int64_t mode, int64_t counts_flag,
                          bool before_capacity_flag) {
  Checker check(kInit);
  INFINIOP_CHECK(check.opening(desc_ptr, handle));
  INFINIOP_CHECK(check.required("expanded_x descriptor", expanded_x));
  INFINIOP_CHECK(check.required("expanded_row_idx descriptor", row_index));
  INFINIOP_CHECK(check.required("x descriptor", x));
  INFINIOP_CHECK(check.required("expert_idx descriptor", expert_index));
  INFINIOP_CHECK(check.device(handle, infiniop::KernelId::moe_init_routing));
  bool drop_pad = false;
  INFINIOP_CHECK(check.dropPadMode(mode, &drop_pad));
  if (experts <= 0 || experts > kMaxExperts)
    return check.fail(INFINI_STATUS_BAD_PARAM, "expert_num " + std::to_string(experts) +
                                                   " is outside [1, " +
                                                   std::to_string(kMaxExperts) + "]");
  if (counts_flag < 0 || counts_flag > 2)
    return check.fail(INFINI_STATUS_BAD_PARAM, "expert_tokens_count_or_cumsum_flag " +
                                                   std::to_string(counts_flag) +
                                                   " is not 0 (none), 1 (cumsum) or 2 (count)");
  if (!drop_pad && active_num < 0)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "active_num " + std::to_string(active_num) + " is negative");
  if (drop_pad && capacity <= 0)
    return check.fail(INFINI_STATUS_BAD_PARAM, "expert_capacity " + std::to_string(capacity) +
                                                   " must be > 0 in drop_pad_mode 1");
  if (drop_pad && capacity > std::numeric_limits<int32_t>::max() / experts)
    return check.fail(
        INFINI_STATUS_BAD_PARAM,
        "expert_num x expert_capacity exceeds the 2^31 - 1 slots index values may address");
  // The count outputs: one its flag (in its mode) asks for is required; others are ignored.
  if (drop_pad || counts_flag == 0) counts = nullptr;
  if (!drop_pad || !before_capacity_flag) before_capacity = nullptr;
  if (!drop_pad && counts_flag != 0 && !counts)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "expert_tokens_count_or_cumsum_flag " + std::to_string(counts_flag) +
                          " asks for expert_tokens_count_or_cumsum, which is NULL");
  if (drop_pad && before_capacity_flag && !before_capacity)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "expert_tokens_before_capacity_flag asks for "
                      "expert_tokens_before_capacity, which is NULL");

  INFINIOP_CHECK(check.floating("x", x));
  INFINIOP_CHECK(check.floating("expanded_x", expanded_x));
  INFINIOP_CHECK(check.index("expert_idx", expert_index));
  INFINIOP_CHECK(check.index("expanded_row_idx", row_index));
  INFINIOP_CHECK(check.index("expert_tokens_count_or_cumsum", counts));
  INFINIOP_CHECK(check.index("expert_tokens_before_capacity", before_capacity));

  INFINIOP_CHECK(check.rank("x", x, 2, "(R, H)"));
  INFINIOP_CHECK(check.rank("expert_idx", expert_index, 2, "(R, K)"));
  const size_t R = x->shape[0], H = x->shape[1], K = expert_index->shape[1];
  const auto E = static_cast<size_t>(experts);
  INFINIOP_CHECK(check.positions(R, K));
  INFINIOP_CHECK(check.shape("expert_idx", expert_index, {R, K}, "(R, K), R from x"));
  INFINIOP_CHECK(check.shape("expanded_row_idx", row_index, {R * K}, "(R*K)"));
  const size_t RK = R * K;
  const auto active = static_cast<size_t>(active_num);
  std::vector<size_t> expanded_shape =
      drop_pad ? std::vector<size_t>{E, static_cast<size_t>(capacity), H}
               : std::vector<size_t>{active > 0 && active < RK ? active : RK, H};
  INFINIOP_CHECK(check.shape("expanded_x", expanded_x, expanded_shape,
                             drop_pad
                                 ? "(expert_num, expert_capacity, H)"
                                 : "(A, H), A = active_num if 0 < active_num < R*K, else R*K"));
  INFINIOP_CHECK(check.shape("expert_tokens_count_or_cumsum", counts, {E}, "(expert_num)"));
  INFINIOP_CHECK(
      check.shape("expert_tokens_before_capacity", before_capacity, {E}, "(expert_num)"));
  for (auto [name, t] : {std::pair{"expanded_x", expanded_x},
                         {"expanded_row_idx", row_index},
                         {"expert_tokens_count_or_cumsum", counts},
                         {"expert_tokens_before_capacity", before_capacity}})
    INFINIOP_CHECK(check.output(name, t));

  auto desc = std::make_unique<InitDescriptor>();
  desc->handle = handle;
  moe::InitPlan &plan = desc->plan;
  plan.kernel = infiniop::KernelId::moe_init_routing;
  plan.element_size = infiniop::dtypeSize(check.dtype());
  plan.tokens = R;
  plan.topk = K;
  plan.hidden = H;
  plan.experts = E;
  plan.capacity = drop_pad ? static_cast<size_t>(capacity) : 0;
  plan.x = gather::rowView(x);
  plan.expanded_x = gather::rowView(expanded_x);
  plan.row_index = gather::flatIndexView(row_index, R, K, /*column_major=*/false);
  plan.counts = gather::flatIndexView(counts, E, 1, false);
  plan.before_capacity = gather::flatIndexView(before_capacity, E, 1, false);
  plan.cumsum = counts_flag == 1;
  desc->expert_index = gather::tableIndexView(expert_index);
  INFINIOP_CHECK(handle->device->runner(kInit, handle, plan, &desc->runner));
  desc->workspace_size = desc->runner->workspaceSize();
  infiniop::publishDescriptor(desc_ptr, desc.release());
  return infiniop::succeed();
}

// The stable counting sort of positions p = r*K + k by expert (values checked to be in
// [0, experts)): the rank of p among all positions (dropless) or within its expert (drop/pad).
moe::InitRouting sortPositions(const moe::InitPlan &p, const gather::IndexView &expert_index,
                               const void *experts_of) {
  moe::InitRouting routing;
  routing.counts.assign(p.experts, 0);
  for (size_t r = 0; r < p.tokens; ++r)
    for (size_t k = 0; k < p.topk; ++k) ++routing.counts[expert_index.at(experts_of, r, k)];
  // next[e]: where expert e's next position goes (its first row dropless, else slot 0).
  std::vector<int64_t> next(p.experts, 0);
  if (p.capacity == 0)
    for (size_t e = 1; e < p.experts; ++e) next[e] = next[e - 1] + routing.counts[e - 1];
  routing.row_index.resize(p.tokens * p.topk);
  const auto capacity = static_cast<int64_t>(p.capacity);
  for (size_t r = 0, position = 0; r < p.tokens; ++r)
    for (size_t k = 0; k < p.topk; ++k, ++position) {
      const int64_t e = expert_index.at(experts_of, r, k);
      const int64_t rank = next[e]++;
      routing.row_index[position] = static_cast<int32_t>(capacity == 0     ? rank
                                                         : rank < capacity ? e * capacity + rank
                                                                           : -1);
    }
  return routing;
}

infiniStatus_t runInit(const InitDescriptor *desc, size_t workspace_size, const moe::InitData &data,
                       const void *experts_of, void *stream) {
  const moe::InitPlan &p = desc->plan;
  const size_t needed = desc->workspace_size, bytes = p.element_size, H = p.hidden;
  const std::vector<Operand> operands = {
      floatOperand("expanded_x", data.expanded_x, p.expanded_x, bytes, p.expanded_x.rows * H),
      indexOperand("expanded_row_idx", data.row_index, p.row_index),
      indexOperand("expert_tokens_count_or_cumsum", data.counts, p.counts),
      indexOperand("expert_tokens_before_capacity", data.before_capacity, p.before_capacity),
      floatOperand("x", data.x, p.x, bytes, p.tokens * H),
      indexOperand("expert_idx", experts_of, desc->expert_index),
      workspaceOperand(data.workspace, needed),
  };
  INFINIOP_CHECK(checkWorkspaceSize(kInit, workspace_size, needed));
  INFINIOP_CHECK(checkOperands(kInit, operands, 4, /*last_is_workspace=*/true));
  HostIndex expert_index;
  INFINIOP_CHECK(expert_index.read(kInit, desc->handle, stream, desc->expert_index, experts_of));
  INFINIOP_CHECK(gather::checkIndexRange(kInit, "expert_idx", desc->expert_index,
                                         expert_index.data(), 0, static_cast<int64_t>(p.experts)));
  INFINIOP_CHECK(
      desc->runner->run(data, sortPositions(p, desc->expert_index, expert_index.data()), stream));
  return infiniop::succeed();
}

}  // namespace

namespace infiniop::moe {
void writeInitIndices(const InitPlan &plan, const InitData &data, const InitRouting &routing) {
  for (size_t r = 0, position = 0; r < plan.tokens; ++r)
    for (size_t k = 0; k < plan.topk; ++k, ++position)
      plan.row_index.store(data.row_index, r, k, routing.row_index[position]);
  int64_t sum = 0;
  for (size_t e = 0; e < plan.experts; ++e) {
    sum += routing.counts[e];
    if (plan.counts.present)
      plan.counts.store(data.counts, e, 0, plan.cumsum ? sum : routing.counts[e]);
    if (plan.before_capacity.present)
      plan.before_capacity.store(data.before_capacity, e, 0, routing.counts[e]);
  }
}
}  // namespace infiniop::moe

extern "C" infiniStatus_t infiniopCreateMoeInitRoutingV2Descriptor(
    infiniopHandle_t handle, infiniopMoeInitRoutingV2Descriptor_t *desc_ptr,
    infiniopTensorDescriptor_t expanded_x, infiniopTensorDescriptor_t expanded_row_idx,
    infiniopTensorDescriptor_t expert_tokens_count_or_cumsum,
    infiniopTensorDescriptor_t expert_tokens_before_capacity, infiniopTensorDescriptor_t x,
    infiniopTensorDescriptor_t expert_idx, int64_t active_num, int64_t expert_capacity,
    int64_t expert_num, int64_t drop_pad_mode, int64_t expert_tokens_count_or_cumsum_flag,
    bool expert_tokens_before_capacity_flag) {
  return infiniop::guarded(kInit, [&] {
    return createInit(handle, desc_ptr, expanded_x, expanded_row_idx, expert_tokens_count_or_cumsum,
                      expert_tokens_before_capacity, x, expert_idx, active_num, expert_capacity,
                      expert_num, drop_pad_mode, expert_tokens_count_or_cumsum_flag,
                      expert_tokens_before_capacity_flag);
  });
}

INFINIOP_DESCRIPTOR_QUERIES(MoeInitRoutingV2, kInit)

extern "C" infiniStatus_t infiniopMoeInitRoutingV2(
    infiniopMoeInitRoutingV2Descriptor_t desc, void *workspace, size_t workspace_size,
    void *expanded_x, void *expanded_row_idx, void *expert_tokens_count_or_cumsum,
    void *expert_tokens_before_capacity, const void *x, const void *expert_idx, void *stream) {
  InitDescriptor *d = nullptr;
  INFINIOP_CHECK(infiniop::unwrapDescriptor(kInit, desc, &d));
  return infiniop::guarded(kInit, [&] {
    return runInit(
        d, workspace_size,
        {expanded_x, expanded_row_idx,
         d->plan.counts.present ? expert_tokens_count_or_cumsum : nullptr,
         d->plan.before_capacity.present ? expert_tokens_before_capacity : nullptr, x, workspace},
        expert_idx, stream);
  });
}
