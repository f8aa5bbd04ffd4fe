// SPDX-License-Identifier: Apache-2.0
// op_specs.h's table and lookups, compiled once into the test support library
// (tests/CMakeLists.txt) rather than in each suite that drives every operator.
#include "op_specs.h"

#include "operators.h"

#include <string>
#include <utility>

namespace infiniop_test {

namespace {
namespace ops = infiniop_ops;

// One slot's configuration; its name and flags are the table's (operators.h).
struct Config {
  std::vector<size_t> shape;
  infiniDtype_t dtype;
  std::vector<int64_t> values = {};
  bool absent = false;
};

template <class Op>
decltype(OpSpec::create) createOf() {
  return [](infiniopHandle_t h, void **d, const Descs &t, const Attrs &a) {
    return ops::create<Op>(h, reinterpret_cast<typename Op::Desc *>(d), t, ops::DoubleAttrs{a});
  };
}

// Op from the table with this configuration.
template <class Op>
OpSpec make(const std::vector<Config> &config, Attrs attrs) {
  using Desc = typename Op::Desc;
  OpSpec op;
  op.name = Op::name;
  if (config.size() != Op::slots.size()) ADD_FAILURE() << Op::name << ": a slot not configured";
  for (size_t i = 0; i < config.size() && i < Op::slots.size(); ++i) {
    const ops::Slot &s = Op::slots[i];
    op.slots.push_back({s.name, config[i].shape, config[i].dtype, s.output, s.nullable,
                        config[i].values, config[i].absent});
  }
  op.attrs = std::move(attrs);
  op.create = createOf<Op>();
  op.workspace = [](void *d, size_t *s) { return Op::workspace(static_cast<Desc>(d), s); };
  op.calculate = [](void *d, void *w, size_t ws, const Ptrs &p, void *stream) {
    return ops::calculate<Op>(static_cast<Desc>(d), w, ws, p, stream);
  };
  op.destroy = [](void *d) { return Op::destroy(static_cast<Desc>(d)); };
  return op;
}

// ClippedSwiglu(Backward) under the V2 name: the same descriptor and calls, created by the V2
// function with clamp_mode 1 (attribute 5).
template <class Op>
OpSpec clampAfter(const OpSpec &base) {
  OpSpec op = base;
  op.name = Op::name;
  op.attrs.push_back(1);
  op.create = createOf<Op>();
  return op;
}

// The table with ClippedSwigluV2 and ClippedSwigluBackwardV2 after ClippedSwigluBackward (so
// that neighbours, whose descriptors the bad-input table swaps, stay of other kinds).
std::vector<OpSpec> withClampAfter(const std::vector<OpSpec> &base) {
  std::vector<OpSpec> all;
  const OpSpec *forward = nullptr;
  for (const OpSpec &op : base) {
    all.push_back(op);
    if (std::string(op.name) == ops::ClippedSwiglu::name) forward = &op;
    if (std::string(op.name) != ops::ClippedSwigluBackward::name || !forward) continue;
    all.push_back(clampAfter<ops::ClippedSwigluV2>(*forward));
    all.push_back(clampAfter<ops::ClippedSwigluBackwardV2>(op));
  }
  return all;
}
}  // namespace

const std::vector<OpSpec> &specs() {
  static const std::vector<OpSpec> base = {
      make<ops::GeluBackward>({{{2, 4}, F32}, {{2, 4}, F32}, {{2, 4}, F32}}, {}),
      make<ops::Gelu>({{{2, 4}, F32}, {{2, 4}, F32}}, {1}),
      make<ops::GeluBackwardV2>({{{2, 4}, F32}, {{2, 4}, F32}, {{2, 4}, F32}}, {0}),
      make<ops::SwiGlu>({{{2, 4}, F32}, {{2, 8}, F32}}, {-1}),
      make<ops::SwiGluBackward>({{{2, 8}, F32}, {{2, 4}, F32}, {{2, 8}, F32}}, {-1}),
      make<ops::GeluMul>({{{2, 4}, F32}, {{2, 8}, F32}}, {1}),
      make<ops::GeluMulBackward>({{{2, 8}, F32}, {{2, 4}, F32}, {{2, 8}, F32}}, {0}),
      // y, x, group_index
      make<ops::ClippedSwiglu>({{{2, 4}, F32}, {{2, 8}, F32}, {{1}, I64, {2}}},
                               {-1, 1.702, 7.0, 1.0, 1}),
      // x_grad, y_grad, x, group_index
      make<ops::ClippedSwigluBackward>(
          {{{2, 8}, F32}, {{2, 4}, F32}, {{2, 8}, F32}, {{1}, I64, {2}}}, {-1, 1.702, 7.0, 1.0, 0}),
      // out, expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx
      make<ops::MoeFinalizeRoutingV2>({{{2, 4}, F32},
                                       {{2, 4}, F32},
                                       {{2}, I32, {1, 0}},
                                       {{2, 4}, F32},
                                       {{2, 4}, F32},
                                       {{3, 4}, F32},
                                       {{2, 1}, F32},
                                       {{2, 1}, I32, {2, 0}}},
                                      {0}),
      // grad_expanded_x, grad_scales, grad_y, expanded_row_idx, expanded_x, scales, expert_idx,
      // bias
      make<ops::MoeFinalizeRoutingV2Grad>({{{2, 4}, F32},
                                           {{2, 1}, F32},
                                           {{2, 4}, F32},
                                           {{2}, I32, {1, 0}},
                                           {{2, 4}, F32},
                                           {{2, 1}, F32},
                                           {{2, 1}, I32, {2, 0}},
                                           {{3, 4}, F32}},
                                          {0, 0, 3, 0}),
      // expanded_x, expanded_row_idx, expert_tokens_count_or_cumsum,
      // expert_tokens_before_capacity (mode 1 only: absent), x, expert_idx
      make<ops::MoeInitRoutingV2>({{{2, 4}, F32},
                                   {{2}, I32},
                                   {{3}, I64},
                                   {{3}, I64, {}, true},
                                   {{2, 4}, F32},
                                   {{2, 1}, I32, {2, 0}}},
                                  {0, 0, 3, 0, 1, 0}),
      // grad_x, grad_expanded_x, expanded_row_idx
      make<ops::MoeInitRoutingV2Grad>({{{2, 4}, F32}, {{2, 4}, F32}, {{2}, I32, {1, 0}}},
                                      {1, 0, 0}),
      // The router operators: E = 4 experts, k = 1; finished marks row 1.
      // y, expert_idx, row_idx, softmax_out, x, finished
      make<ops::MoeGatingTopKSoftmax>({{{2, 1}, F32},
                                       {{2, 1}, I32},
                                       {{2, 1}, I32},
                                       {{2, 4}, F32},
                                       {{2, 4}, F32},
                                       {{2}, BOOL, {0, 1}}},
                                      {1, 0}),
      // grad_x, grad_y, x, expert_idx, finished
      make<ops::MoeGatingTopKSoftmaxGrad>(
          {{{2, 4}, F32}, {{2, 1}, F32}, {{2, 4}, F32}, {{2, 1}, I32, {1, 4}}, {{2}, BOOL, {0, 1}}},
          {0}),
      // y, expert_idx, norm_out, x, bias; attrs: k, k_group, group_count, group_select_mode,
      // renorm, norm_type, scale, eps.
      make<ops::MoeGatingTopK>(
          {{{2, 1}, F32}, {{2, 1}, I32}, {{2, 4}, F32}, {{2, 4}, F32}, {{4}, F32}},
          {1, 1, 1, 0, 0, 1, 1.0, 1e-20}),
      // grad_x, grad_y, x, expert_idx; attrs: norm_type, renorm, scale, eps.
      make<ops::MoeGatingTopKGrad>(
          {{{2, 4}, F32}, {{2, 1}, F32}, {{2, 4}, F32}, {{2, 1}, I32, {1, 0}}}, {1, 0, 1.0, 1e-20}),
      // y, x, expert_idx (a duplicate in row 1); attrs: norm_type, renorm, scale, eps.
      make<ops::MoeGatingWeights>({{{2, 2}, F32}, {{2, 4}, F32}, {{2, 2}, I32, {1, 3, 2, 2}}},
                                  {1, 0, 1.0, 1e-20}),
      // counts, expert_idx (row 1 finished: E); attrs: num_experts.
      make<ops::MoeExpertCounts>({{{3}, I32}, {{2, 2}, I32, {2, 0, 3, 1}}}, {3}),
      // bias, counts; attrs: update_rate.
      make<ops::MoeBiasUpdate>({{{3}, F32}, {{3}, I64, {1, 0, 2}}}, {0.001}),
      // The aux losses: E = 4 experts, T = 2 rows, k = 2; attrs: score_function, topk,
      // total_tokens, coeff. loss, x, tokens_per_expert.
      make<ops::MoeAuxLoss>({{{}, F32}, {{2, 4}, F32}, {{4}, I32, {1, 0, 2, 1}}}, {0, 2, 2, 0.01}),
      // grad_x, grad_loss, x, tokens_per_expert
      make<ops::MoeAuxLossGrad>({{{2, 4}, F32}, {{}, F32}, {{2, 4}, F32}, {{4}, I32, {1, 0, 2, 1}}},
                                {0, 2, 2, 0.01}),
      // loss (0-D), x (R = 2 rows of E = 3); attrs: coeff.
      make<ops::MoeZLoss>({{{}, F32}, {{2, 3}, F32}}, {0.001}),
      // grad_x, grad_loss (0-D), x; attrs: coeff.
      make<ops::MoeZLossGrad>({{{2, 3}, F32}, {{}, F32}, {{2, 3}, F32}}, {0.001}),
      // kept_idx, weights_out, expert_idx (slot 2 marked E = 3), weights; attrs: num_experts,
      // capacity, drop_policy (probability).
      make<ops::MoeExpertCapacity>(
          {{{2, 2}, I32}, {{2, 2}, F32}, {{2, 2}, I32, {2, 0, 3, 0}}, {{2, 2}, F32}}, {3, 1, 1}),
      // y (INT8), scale (2 groups of 2), x (R = 2, 2H = 8), smooth_scales (E = 2, H),
      // group_index (counts 1, 1); attrs: activate_left, quant_mode (dynamic), group_size,
      // scale_format (F32).
      make<ops::SwiGluQuant>({{{2, 4}, INFINI_DTYPE_I8},
                              {{2, 2}, F32},
                              {{2, 8}, F32},
                              {{2, 4}, F32},
                              {{2}, I64, {1, 1}}},
                             {1, 1, 2, 0}),
      // As SwiGluQuant with FP8 and UE8M0; attrs: approximate (tanh) first.
      make<ops::GeluMulQuant>({{{2, 4}, INFINI_DTYPE_F8},
                               {{2, 2}, F32},
                               {{2, 8}, F32},
                               {{2, 4}, F32},
                               {{2}, I64, {1, 1}}},
                              {1, 0, 1, 2, 1}),
      // As SwiGluQuant; attrs: alpha, limit, bias, interleaved, then SwiGluQuant's after
      // activate_left (dynamic, group_size 2, F32).
      make<ops::ClippedSwigluQuant>({{{2, 4}, INFINI_DTYPE_I8},
                                     {{2, 2}, F32},
                                     {{2, 8}, F32},
                                     {{2, 4}, F32},
                                     {{2}, I64, {1, 1}}},
                                    {1.702, 7.0, 1.0, 1, 1, 2, 0}),
      // y (INT8), scale (2 groups of 2), x (R = 2, 2H = 8) INT32, weight_scale (E = 2, 2H),
      // activation_scale (R, 1), bias (2H) F32, smooth_scales (E, H), group_index (counts 1, 1);
      // attrs: activate_left, quant_mode (dynamic), group_size, scale_format (F32).
      make<ops::DequantSwigluQuant>({{{2, 4}, INFINI_DTYPE_I8},
                                     {{2, 2}, F32},
                                     {{2, 8}, I32},
                                     {{2, 8}, F32},
                                     {{2, 1}, F32},
                                     {{8}, F32},
                                     {{2, 4}, F32},
                                     {{2}, I64, {1, 1}}},
                                    {1, 1, 2, 0}),
      // MoeInitRoutingV2's configuration quantized, dynamic with (E, H) smooth scales:
      // expanded_x (INT8), expanded_row_idx, counts, before (absent), dynamic_quant_scale (A),
      // x, expert_idx, scale (E = 3, H), offset (static only: absent); attrs: V2's, quant_mode.
      make<ops::MoeInitRoutingQuantV2>({{{2, 4}, INFINI_DTYPE_I8},
                                        {{2}, I32},
                                        {{3}, I64},
                                        {{3}, I64, {}, true},
                                        {{2}, F32},
                                        {{2, 4}, F32},
                                        {{2, 1}, I32, {2, 0}},
                                        {{3, 4}, F32},
                                        {{1}, F32, {}, true}},
                                       {0, 0, 3, 0, 1, 0, 1}),
  };
  static const std::vector<OpSpec> all = withClampAfter(base);
  return all;
}

const OpSpec &spec(const std::string &name) {
  for (const OpSpec &s : specs())
    if (name == s.name) return s;
  static OpSpec none{};
  ADD_FAILURE() << "no operator " << name;
  return none;
}

size_t slotIndex(const OpSpec &op, const std::string &name) {
  for (size_t i = 0; i < op.slots.size(); ++i)
    if (name == op.slots[i].name) return i;
  ADD_FAILURE() << op.name << " has no tensor " << name;
  return 0;
}

void writeValues(TensorBuffer &b, const std::vector<int64_t> &values) {
  for (size_t i = 0; i < b.numel() && i < values.size(); ++i) {
    if (b.dtype() == I64) {
      std::memcpy(b.at(i), &values[i], 8);
    } else if (b.dtype() == I32) {
      const int32_t v = static_cast<int32_t>(values[i]);
      std::memcpy(b.at(i), &v, 4);
    } else if (b.dtype() == BOOL) {
      *b.at(i) = static_cast<char>(values[i] != 0);
    }
  }
}

}  // namespace infiniop_test
