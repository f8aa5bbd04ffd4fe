// SPDX-License-Identifier: Apache-2.0
// MoeInitRoutingV2: the C ABI, the descriptor, its checks and the sort. The sort runs on the
// host, which reads expert_idx for the range check anyway: a counting sort of the R*K positions
// by expert, stable (positions of one expert keep their order), so its result is one and the
// same for any device and thread count. The device then moves the rows (moe::InitRunner).
#include "ops/moe_init_routing.h"

#include "infiniop/ops/moe_init_routing_quant_v2.h"
#include "infiniop/ops/moe_init_routing_v2.h"
#include "ops/moe_checks.h"

namespace {
using namespace infiniop::moe_checks;  // NOLINT: its helpers, fail, Tensor, gather, moe

constexpr const char *kInit = "MoeInitRoutingV2";
constexpr const char *kInitQuant = "MoeInitRoutingQuantV2";
// The counting sort's table has expert_num entries: a bound well above any model's.
constexpr int64_t kMaxExperts = int64_t{1} << 24;

struct InitDescriptor : infiniop::OperatorDescriptor {
  explicit InitDescriptor(const char *op) : OperatorDescriptor(op) {}
  std::unique_ptr<moe::InitRunner> runner;
  moe::InitPlan plan;
  gather::IndexView expert_index;  // (R, K)
  // MoeInitRoutingQuantV2's inputs: scale and offset (static, (1) each) or the smooth scales.
  gather::TableView scale, offset;
};

// MoeInitRoutingQuantV2's own tensors and mode; NULL for MoeInitRoutingV2.
struct QuantArgs {
  const Tensor *dynamic_scale, *scale, *offset;
  int mode;
};

// A rank-1 or rank-2 F32 tensor as a table (a (1) tensor is (1, 1)).
gather::TableView floatTable(const Tensor *t) {
  gather::TableView v;
  if (!t) return v;
  v.present = true;
  v.span = infiniop::elementSpan(t->shape, t->strides);
  v.rows = t->ndim() == 2 ? t->shape[0] : 1;
  v.cols = t->shape.back();
  v.row_stride = t->ndim() == 2 ? t->strides[0] : 0;
  v.col_stride = t->strides.back();
  return v;
}

// dynamic_quant_scale, one F32 per expanded row: (A) or (E, C), read as rowView reads
// expanded_x, with a last dim of one column.
gather::RowView scaleRows(const Tensor *t) {
  if (!t) return {};
  std::vector<size_t> shape = t->shape;
  std::vector<ptrdiff_t> strides = t->strides;
  shape.push_back(1);
  strides.push_back(1);
  const Tensor column(t->dtype, shape, strides);
  return gather::rowView(&column);
}

// MoeInitRoutingQuantV2's checks beyond MoeInitRoutingV2's: the mode, expanded_x's format,
// scale and offset as the mode wants them, dynamic_quant_scale of the expanded rows' shape.
infiniStatus_t checkQuant(const Checker &check, const QuantArgs &q, const Tensor *expanded_x,
                          const std::vector<size_t> &expanded_shape, size_t experts, size_t H) {
  INFINIOP_CHECK(infiniop::checkTensor(check.name(), "expanded_x", expanded_x));
  if (expanded_x->dtype != INFINI_DTYPE_I8 && expanded_x->dtype != INFINI_DTYPE_F8)
    return check.fail(INFINI_STATUS_BAD_TENSOR_DTYPE,
                      std::string("expanded_x has dtype ") +
                          infiniop::dtypeName(expanded_x->dtype) +
                          "; I8 (INT8) or F8 (FP8 E4M3) is required");
  if (q.mode == INFINIOP_QUANT_STATIC) {
    if (!q.scale)
      return check.fail(INFINI_STATUS_BAD_PARAM,
                        "quant_mode 0 (static) reads scale (1), which is NULL");
    if (!q.offset)
      return check.fail(INFINI_STATUS_BAD_PARAM,
                        "quant_mode 0 (static) reads offset (1), which is NULL");
    INFINIOP_CHECK(check.exactDtype("scale", q.scale, INFINI_DTYPE_F32));
    INFINIOP_CHECK(check.exactDtype("offset", q.offset, INFINI_DTYPE_F32));
    INFINIOP_CHECK(check.shape("scale", q.scale, {1}, "(1): one static scale"));
    INFINIOP_CHECK(check.shape("offset", q.offset, {1}, "(1): one static offset"));
    return INFINI_STATUS_SUCCESS;
  }
  if (q.offset)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "offset is read in quant_mode 0 (static) only; pass NULL in quant_mode 1");
  INFINIOP_CHECK(check.required("dynamic_quant_scale descriptor", q.dynamic_scale));
  INFINIOP_CHECK(check.exactDtype("scale", q.scale, INFINI_DTYPE_F32));
  if (q.scale && (q.scale->ndim() != 2 || q.scale->shape[1] != H ||
                  (q.scale->shape[0] != 1 && q.scale->shape[0] != experts)))
    return check.fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                      "scale shape " + infiniop::shapeString(q.scale->shape) + " should be [" +
                          std::to_string(experts) + "," + std::to_string(H) +
                          "] (expert_num, H) or [1," + std::to_string(H) + "] (1, H)");
  INFINIOP_CHECK(check.exactDtype("dynamic_quant_scale", q.dynamic_scale, INFINI_DTYPE_F32));
  const std::vector<size_t> rows(expanded_shape.begin(), expanded_shape.end() - 1);
  INFINIOP_CHECK(check.shape("dynamic_quant_scale", q.dynamic_scale, rows,
                             "(expanded_x's rows: (A) dropless, (expert_num, expert_capacity) "
                             "drop/pad)"));
  return check.output("dynamic_quant_scale", q.dynamic_scale);
}

template <class Public>
infiniStatus_t createInit(const char *op, infiniopHandle_t handle, Public *desc_ptr,
                          const Tensor *expanded_x, const Tensor *row_index, const Tensor *counts,
                          const Tensor *before_capacity, const Tensor *x,
                          const Tensor *expert_index, int64_t active_num, int64_t capacity,
                          int64_t experts, int64_t mode, int64_t counts_flag,
                          bool before_capacity_flag, const QuantArgs *quant) {
  Checker check(op);
  const auto kernel =
      quant ? infiniop::KernelId::moe_init_routing_quant : infiniop::KernelId::moe_init_routing;
  INFINIOP_CHECK(check.opening(desc_ptr, handle));
  INFINIOP_CHECK(check.required("expanded_x descriptor", expanded_x));
  INFINIOP_CHECK(check.required("expanded_row_idx descriptor", row_index));
  INFINIOP_CHECK(check.required("x descriptor", x));
  INFINIOP_CHECK(check.required("expert_idx descriptor", expert_index));
  INFINIOP_CHECK(check.device(handle, kernel));
  if (quant && quant->mode != INFINIOP_QUANT_STATIC && quant->mode != INFINIOP_QUANT_DYNAMIC)
    return check.fail(INFINI_STATUS_BAD_PARAM, "quant_mode " + std::to_string(quant->mode) +
                                                   " is not 0 (static) or 1 (dynamic)");
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
  if (!quant) INFINIOP_CHECK(check.floating("expanded_x", expanded_x));
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
  if (quant) INFINIOP_CHECK(checkQuant(check, *quant, expanded_x, expanded_shape, E, H));
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

  auto desc = std::make_unique<InitDescriptor>(op);
  desc->handle = handle;
  moe::InitPlan &plan = desc->plan;
  plan.kernel = kernel;
  plan.element_size = quant ? 1 : infiniop::dtypeSize(check.dtype());
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
  if (quant) {
    moe::InitPlan::Quant &q = plan.quant;
    q.dtype = x->dtype;
    q.format = expanded_x->dtype == INFINI_DTYPE_I8 ? infiniop::exact::QuantFormat::int8
                                                    : infiniop::exact::QuantFormat::fp8_e4m3;
    q.dynamic = quant->mode == INFINIOP_QUANT_DYNAMIC;
    desc->scale = floatTable(quant->scale);
    desc->offset = floatTable(quant->offset);
    if (q.dynamic) {
      q.smooth = desc->scale;
      q.smooth_rows = quant->scale ? quant->scale->shape[0] : 0;
      q.dynamic_scale = scaleRows(quant->dynamic_scale);
    }
  }
  desc->expert_index = gather::tableIndexView(expert_index);
  INFINIOP_CHECK(handle->device->runner(op, handle, plan, &desc->runner));
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
  const bool experts = p.quantized() && p.quant.smooth_rows > 1;  // per-expert smooth rows
  if (experts) routing.experts.resize(p.tokens * p.topk);
  const auto capacity = static_cast<int64_t>(p.capacity);
  for (size_t r = 0, position = 0; r < p.tokens; ++r)
    for (size_t k = 0; k < p.topk; ++k, ++position) {
      const int64_t e = expert_index.at(experts_of, r, k);
      const int64_t rank = next[e]++;
      if (experts) routing.experts[position] = static_cast<int32_t>(e);
      routing.row_index[position] = static_cast<int32_t>(capacity == 0     ? rank
                                                         : rank < capacity ? e * capacity + rank
                                                                           : -1);
    }
  return routing;
}

infiniStatus_t runInit(const InitDescriptor *desc, size_t workspace_size, const moe::InitData &data,
                       const void *experts_of, void *stream) {
  const moe::InitPlan &p = desc->plan;
  const char *op = desc->name();
  const size_t needed = desc->workspace_size, H = p.hidden;
  const size_t x_bytes = p.quantized() ? infiniop::dtypeSize(p.quant.dtype) : p.element_size;
  const std::vector<Operand> operands = {
      floatOperand("expanded_x", data.expanded_x, p.expanded_x, p.element_size,
                   p.expanded_x.rows * H),
      indexOperand("expanded_row_idx", data.row_index, p.row_index),
      indexOperand("expert_tokens_count_or_cumsum", data.counts, p.counts),
      indexOperand("expert_tokens_before_capacity", data.before_capacity, p.before_capacity),
      floatOperand("dynamic_quant_scale", data.dynamic_scale, p.quant.dynamic_scale, 4,
                   p.quant.dynamic_scale.rows),
      floatOperand("x", data.x, p.x, x_bytes, p.tokens * H),
      indexOperand("expert_idx", experts_of, desc->expert_index),
      floatOperand("scale", data.scale, desc->scale, 4, desc->scale.rows * desc->scale.cols),
      floatOperand("offset", data.offset, desc->offset, 4, desc->offset.rows),
      workspaceOperand(data.workspace, needed),
  };
  INFINIOP_CHECK(checkWorkspaceSize(op, workspace_size, needed));
  INFINIOP_CHECK(checkOperands(op, operands, 5, /*last_is_workspace=*/true));
  HostIndex expert_index;
  INFINIOP_CHECK(expert_index.read(op, desc->handle, stream, desc->expert_index, experts_of));
  INFINIOP_CHECK(gather::checkIndexRange(op, "expert_idx", desc->expert_index, expert_index.data(),
                                         0, static_cast<int64_t>(p.experts)));
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
    return createInit(kInit, handle, desc_ptr, expanded_x, expanded_row_idx,
                      expert_tokens_count_or_cumsum, expert_tokens_before_capacity, x, expert_idx,
                      active_num, expert_capacity, expert_num, drop_pad_mode,
                      expert_tokens_count_or_cumsum_flag, expert_tokens_before_capacity_flag,
                      nullptr);
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
    return runInit(d, workspace_size,
                   {expanded_x, expanded_row_idx,
                    d->plan.counts.present ? expert_tokens_count_or_cumsum : nullptr,
                    d->plan.before_capacity.present ? expert_tokens_before_capacity : nullptr, x,
                    workspace, nullptr, nullptr, nullptr},
                   expert_idx, stream);
  });
}

extern "C" infiniStatus_t infiniopCreateMoeInitRoutingQuantV2Descriptor(
    infiniopHandle_t handle, infiniopMoeInitRoutingQuantV2Descriptor_t *desc_ptr,
    infiniopTensorDescriptor_t expanded_x, infiniopTensorDescriptor_t expanded_row_idx,
    infiniopTensorDescriptor_t expert_tokens_count_or_cumsum,
    infiniopTensorDescriptor_t expert_tokens_before_capacity,
    infiniopTensorDescriptor_t dynamic_quant_scale, infiniopTensorDescriptor_t x,
    infiniopTensorDescriptor_t expert_idx, infiniopTensorDescriptor_t scale,
    infiniopTensorDescriptor_t offset, int64_t active_num, int64_t expert_capacity,
    int64_t expert_num, int64_t drop_pad_mode, int64_t expert_tokens_count_or_cumsum_flag,
    bool expert_tokens_before_capacity_flag, infiniopQuantMode_t quant_mode) {
  return infiniop::guarded(kInitQuant, [&] {
    const QuantArgs quant{dynamic_quant_scale, scale, offset, infiniop::enumValue(quant_mode)};
    return createInit(kInitQuant, handle, desc_ptr, expanded_x, expanded_row_idx,
                      expert_tokens_count_or_cumsum, expert_tokens_before_capacity, x, expert_idx,
                      active_num, expert_capacity, expert_num, drop_pad_mode,
                      expert_tokens_count_or_cumsum_flag, expert_tokens_before_capacity_flag,
                      &quant);
  });
}

INFINIOP_DESCRIPTOR_QUERIES(MoeInitRoutingQuantV2, kInitQuant)

extern "C" infiniStatus_t infiniopMoeInitRoutingQuantV2(
    infiniopMoeInitRoutingQuantV2Descriptor_t desc, void *workspace, size_t workspace_size,
    void *expanded_x, void *expanded_row_idx, void *expert_tokens_count_or_cumsum,
    void *expert_tokens_before_capacity, void *dynamic_quant_scale, const void *x,
    const void *expert_idx, const void *scale, const void *offset, void *stream) {
  InitDescriptor *d = nullptr;
  INFINIOP_CHECK(infiniop::unwrapDescriptor(kInitQuant, desc, &d));
  return infiniop::guarded(kInitQuant, [&] {
    const moe::InitPlan &p = d->plan;
    return runInit(
        d, workspace_size,
        {expanded_x, expanded_row_idx, p.counts.present ? expert_tokens_count_or_cumsum : nullptr,
         p.before_capacity.present ? expert_tokens_before_capacity : nullptr, x, workspace,
         p.quant.dynamic ? dynamic_quant_scale : nullptr, d->scale.present ? scale : nullptr,
         d->offset.present ? offset : nullptr},
        expert_idx, stream);
  });
}
