// SPDX-License-Identifier: Apache-2.0
// The operator table. Every float input is filled with signed values over [-10, 10]; split
// activations split the last dim (dim = -1). The MoE operators route every token to K distinct
// rows (a permutation) with scales, bias and expanded_x, as in training. ClippedSwiglu runs with
// the vendor API's defaults (alpha 1.702, limit 7.0, bias 1.0, no group_index), interleaved (the
// default) or in halves.
#include <cmath>
#include "ops.h"

#include <array>

#include "operators.h"

namespace bench {
namespace {

namespace ops = infiniop_ops;
using Shape = std::vector<size_t>;
constexpr Extent S = Extent::kSame, S2 = Extent::kDoubleLast;

// Binds operator Op of the table (tests/common/operators.h) with its attributes (in API order,
// as doubles; a function of the case's shape). The bench's outs and ins fill Op's output and
// input slots in API order; the slots past them (nullable ones) are NULL.
template <class Op>
Binder bindOpByShape(std::function<std::vector<double>(const Shape &)> attrs) {
  using Desc = typename Op::Desc;
  constexpr size_t kSlots = ops::kSlotCount<Op>;
  return [attrs](infiniopHandle_t handle, const Descs &outs, const Descs &ins, const Shape &shape,
                 Bound *bound) {
    // Each slot's place in outs or ins (-1: NULL).
    std::array<int, kSlots> place{};
    size_t next_out = 0, next_in = 0;
    Descs t(kSlots, nullptr);
    for (size_t s = 0; s < kSlots; ++s) {
      const bool output = Op::slots[s].output;
      const Descs &given = output ? outs : ins;
      size_t &next = output ? next_out : next_in;
      place[s] = next < given.size() ? static_cast<int>(next++) : -1;
      if (place[s] >= 0) t[s] = given[place[s]];
    }
    Desc desc = nullptr;
    const std::vector<double> values = attrs(shape);
    infiniStatus_t status = ops::create<Op>(handle, &desc, t, ops::DoubleAttrs{values});
    if (status != INFINI_STATUS_SUCCESS) return status;
    bound->desc = std::shared_ptr<void>(desc, [](void *d) { Op::destroy(static_cast<Desc>(d)); });
    status = Op::workspace(desc, &bound->workspace_size);
    bound->calculate = [desc, place](void *w, size_t size, OutPtrs o, InPtrs i) {
      std::array<void *, kSlots> p{};
      for (size_t s = 0; s < kSlots; ++s)
        if (place[s] >= 0)  // the API takes an input as const void *: the cast is undone there
          p[s] = Op::slots[s].output ? o[place[s]] : const_cast<void *>(i[place[s]]);
      return ops::calculate<Op>(desc, w, size, p, nullptr);
    };
    return status;
  };
}

template <class Op>
Binder bindOp(std::vector<double> attrs) {
  return bindOpByShape<Op>([attrs](const Shape &) { return attrs; });
}

// The vendor API's defaults (aclnnClippedSwiglu); no group_index: every row is computed.
// ClippedSwigluV2's attributes: dim, alpha, limit, bias, interleaved, clamp_mode (1:
// aclnnClippedSwigluV2's clamp after the activation, alpha and bias unused).
std::vector<double> clipped(bool interleaved, int clamp_mode = 0) {
  return {-1, 1.702, 7.0, 1.0, interleaved ? 1.0 : 0.0, static_cast<double>(clamp_mode)};
}

// The routers at the torch_npu defaults of their configurations: MoeGatingTopKSoftmax renorm 0
// (softmax, then top-k) with row_idx; MoeGatingTopK as DeepSeek-V3 (sigmoid, bias, 8 groups of
// E / 8 experts scored by their two largest, k_group 4, routed_scaling_factor 2.5), where E
// allows it (E a multiple of 8 with groups of >= 2), else ungrouped.
constexpr double kRoutedScaling = 2.5, kGateEps = 1e-20;

double gateGroups(const Shape &shape) {
  return shape.back() % 8 == 0 && shape.back() >= 16 ? 8 : 1;
}
double topk(const Shape &shape) {
  return static_cast<double>(moeTopk(shape));
}

constexpr double kNone = INFINIOP_GELU_APPROXIMATE_NONE, kTanh = INFINIOP_GELU_APPROXIMATE_TANH;

// A grouped *Quant operator's attributes: `leading`, then group_size (kQuantGroup, or 0 where
// the last dim is no multiple of it: quantGroups) and scale_format.
std::function<std::vector<double>(const Shape &)> quantAttrs(std::vector<double> leading,
                                                             double scale_format) {
  return [leading, scale_format](const Shape &s) {
    std::vector<double> a = leading;
    a.push_back(s.back() % kQuantGroup == 0 ? static_cast<double>(kQuantGroup) : 0.0);
    a.push_back(scale_format);
    return a;
  };
}

}  // namespace

bool OpInfo::gathers() const {
  for (const std::vector<Extent> *extents : {&inputs, &outputs})
    for (Extent e : *extents)
      if (isIndex(e) || isLoss(e)) return true;
  return false;
}

const std::vector<OpInfo> &allOps() {
  static const std::vector<OpInfo> ops = {
      // grad_input; input, grad_output
      {"gelu_backward", {S}, {S, S}, bindOp<ops::GeluBackward>({})},
      {"swiglu", {S}, {S2}, bindOp<ops::SwiGlu>({-1})},                       // y; x
      {"swiglu_backward", {S2}, {S, S2}, bindOp<ops::SwiGluBackward>({-1})},  // x_grad; y_grad, x
      {"gelu_mul", {S}, {S2}, bindOp<ops::GeluMul>({kNone})},                 // out; input
      {"gelu_mul_tanh", {S}, {S2}, bindOp<ops::GeluMul>({kTanh})},
      {"gelu_mul_backward",
       {S2},
       {S, S2},  // input_grad; out_grad, input
       bindOp<ops::GeluMulBackward>({kNone})},
      {"gelu_mul_backward_tanh", {S2}, {S, S2}, bindOp<ops::GeluMulBackward>({kTanh})},
      {"gelu", {S}, {S}, bindOp<ops::Gelu>({kNone})},  // output; input
      {"gelu_tanh", {S}, {S}, bindOp<ops::Gelu>({kTanh})},
      {"gelu_backward_v2",
       {S},
       {S, S},  // grad_input; input, grad_output
       bindOp<ops::GeluBackwardV2>({kNone})},
      {"gelu_backward_v2_tanh", {S}, {S, S}, bindOp<ops::GeluBackwardV2>({kTanh})},
      {"clipped_swiglu", {S}, {S2}, bindOp<ops::ClippedSwigluV2>(clipped(true))},  // y; x
      {"clipped_swiglu_halves", {S}, {S2}, bindOp<ops::ClippedSwigluV2>(clipped(false))},
      {"clipped_swiglu_backward",
       {S2},
       {S, S2},  // x_grad; y_grad, x (interleaved = true)
       bindOp<ops::ClippedSwigluBackwardV2>(clipped(true))},
      {"clipped_swiglu_backward_halves",
       {S2},
       {S, S2},
       bindOp<ops::ClippedSwigluBackwardV2>(clipped(false))},
      {"clipped_swiglu_v2", {S}, {S2}, bindOp<ops::ClippedSwigluV2>(clipped(true, 1))},
      {"clipped_swiglu_backward_v2",
       {S2},
       {S, S2},
       bindOp<ops::ClippedSwigluBackwardV2>(clipped(true, 1))},
      // drop_pad_mode 0 (dropless); the grad with active_num 0 (every row), expert_num and
      // expert_capacity unused.
      {"moe_finalize_routing",
       {Extent::kTokens},  // out; expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx
       {Extent::kExpanded, Extent::kRowIndex, Extent::kTokens, Extent::kTokens, Extent::kBias,
        Extent::kTopk, Extent::kExpertIndex},
       bindOp<ops::MoeFinalizeRoutingV2>({0}),
       {4096, 8, 4096}},
      {"moe_finalize_routing_grad",
       {Extent::kExpanded, Extent::kTopk},  // grad_expanded_x, grad_scales; grad_y,
       {Extent::kTokens, Extent::kRowIndex, Extent::kExpanded, Extent::kTopk,  // expanded_row_idx,
        Extent::kExpertIndex, Extent::kBias},  // expanded_x, scales, expert_idx, bias
       bindOp<ops::MoeFinalizeRoutingV2Grad>({0, 0, 0, 0}),
       {4096, 8, 4096}},
      // Dropless (mode 0, every row active) with the counts' cumsum, the layout
      // MoeFinalizeRoutingV2 mode 2 reads; its grad in the same mode.
      {"moe_init_routing",
       {Extent::kExpanded, Extent::kRowIndex, Extent::kExpertCounts},  // expanded_x,
       {Extent::kTokens, Extent::kExpertIndex},  // expanded_row_idx, counts' cumsum; x, expert_idx
       bindOp<ops::MoeInitRoutingV2>({0, 0, kMoeExperts, 0, 1, 0}),
       {4096, 8, 4096}},
      // The same routing quantized: dynamic INT8 per expanded row with (E, H) smooth scales
      // (CANN's MoeInitRoutingQuantV2 for W8A8 experts). The before-capacity output (NULL's place
      // filled, unused in mode 0) precedes the dynamic scales.
      {"moe_init_routing_quant_v2_int8",
       {Extent::kExpandedInt8, Extent::kRowIndex, Extent::kExpertCounts, Extent::kExpertCounts,
        Extent::kExpandedScales},  // expanded_x, row_idx, cumsum, (before), scales;
       {Extent::kTokens, Extent::kExpertIndex, Extent::kExpertScales},  // x, expert_idx, scale
       bindOp<ops::MoeInitRoutingQuantV2>({0, 0, kMoeExperts, 0, 1, 0, 1}),
       {4096, 8, 4096}},
      {"moe_init_routing_grad",
       {Extent::kTokens},                       // grad_x;
       {Extent::kExpanded, Extent::kRowIndex},  // grad_expanded_x, expanded_row_idx
       bindOpByShape<ops::MoeInitRoutingV2Grad>([](const Shape &s) {
         return std::vector<double>{topk(s), 0, 0};
       }),
       {4096, 8, 4096}},
      {"moe_gating_top_k_softmax",
       {Extent::kGateTopk, Extent::kGateIndex, Extent::kGateRowIndex},  // y, expert_idx, row_idx;
       {Extent::kGateLogits},                                           // x
       bindOpByShape<ops::MoeGatingTopKSoftmax>([](const Shape &s) {
         return std::vector<double>{topk(s), 0};
       }),
       {16384, 8, 256}},
      {"moe_gating_top_k_softmax_grad",
       {Extent::kGateLogits},  // grad_x; grad_y, x, expert_idx
       {Extent::kGateTopk, Extent::kGateLogits, Extent::kGateExperts},
       bindOp<ops::MoeGatingTopKSoftmaxGrad>({0}),
       {16384, 8, 256}},
      {"moe_gating_top_k",
       {Extent::kGateTopk, Extent::kGateIndex},   // y, expert_idx;
       {Extent::kGateLogits, Extent::kGateBias},  // x, bias
       bindOpByShape<ops::MoeGatingTopK>([](const Shape &s) {
         const double groups = gateGroups(s), grouped = groups > 1;
         return std::vector<double>{topk(s), grouped ? 4.0 : 1.0, groups,  grouped, 0,
                                    1,       kRoutedScaling,      kGateEps};
       }),
       {16384, 8, 256}},
      {"moe_gating_top_k_grad",
       {Extent::kGateLogits},  // grad_x; grad_y, x, expert_idx
       {Extent::kGateTopk, Extent::kGateLogits, Extent::kGateExperts},
       bindOp<ops::MoeGatingTopKGrad>({1, 0, kRoutedScaling, kGateEps}),
       {16384, 8, 256}},
      // MoeGatingTopK's weights at given expert indices (replay, hash routing).
      {"moe_gating_weights",
       {Extent::kGateTopk},                          // y;
       {Extent::kGateLogits, Extent::kGateExperts},  // x, expert_idx
       bindOp<ops::MoeGatingWeights>({1, 0, kRoutedScaling, kGateEps}),
       {16384, 8, 256}},
      // DeepSeek-V4's router: sqrtsoftplus (norm_type 2), ungrouped top-6 of 256 (or of 384: the
      // shape 16384x6x384), bias, routed_scaling_factor 1.5.
      {"moe_gating_top_k_v4",
       {Extent::kGateTopk, Extent::kGateIndex},   // y, expert_idx;
       {Extent::kGateLogits, Extent::kGateBias},  // x, bias
       bindOpByShape<ops::MoeGatingTopK>([](const Shape &s) {
         return std::vector<double>{topk(s), 1, 1, 0, 0, 2, 1.5, kGateEps};
       }),
       {16384, 6, 256}},
      {"moe_gating_top_k_grad_v4",
       {Extent::kGateLogits},  // grad_x; grad_y, x, expert_idx
       {Extent::kGateTopk, Extent::kGateLogits, Extent::kGateExperts},
       bindOp<ops::MoeGatingTopKGrad>({2, 0, 1.5, kGateEps}),
       {16384, 6, 256}},
      // Tokens per expert of a routing: 16384 tokens x top-8 of 256 experts by default.
      {"moe_expert_counts",
       {Extent::kGateCounts},   // counts;
       {Extent::kGateExperts},  // expert_idx
       bindOpByShape<ops::MoeExpertCounts>(
           [](const Shape &s) { return std::vector<double>{static_cast<double>(s.back())}; }),
       {16384, 8, 256}},
      // Capacity with the probability drop policy at capacity factor 1 (C = R K / E, rounded up):
      // 16384 tokens x top-8 of 256 experts by default.
      {"moe_expert_capacity",
       {Extent::kGateRowIndex, Extent::kGateTopk},  // kept_idx, weights_out;
       {Extent::kGateExperts, Extent::kGateTopk},   // expert_idx, weights
       bindOpByShape<ops::MoeExpertCapacity>([](const Shape &s) {
         const double E = static_cast<double>(s.back()), slots = s.front() * topk(s);
         return std::vector<double>{E, std::ceil(slots / E), 1};
       }),
       {16384, 8, 256}},
      // The Switch aux loss of a router's logits (softmax scores, N = T, coeff 1e-2) and its
      // grad: 16384 tokens x top-8 of 256 experts by default.
      {"moe_aux_loss",
       {Extent::kLoss},                             // loss;
       {Extent::kGateLogits, Extent::kGateCounts},  // x, tokens_per_expert
       bindOpByShape<ops::MoeAuxLoss>([](const Shape &s) {
         return std::vector<double>{0, topk(s), static_cast<double>(s.front()), 1e-2};
       }),
       {16384, 8, 256}},
      {"moe_aux_loss_grad",
       {Extent::kGateLogits},                                      // grad_x;
       {Extent::kLoss, Extent::kGateLogits, Extent::kGateCounts},  // grad_loss, x, counts
       bindOpByShape<ops::MoeAuxLossGrad>([](const Shape &s) {
         return std::vector<double>{0, topk(s), static_cast<double>(s.front()), 1e-2};
       }),
       {16384, 8, 256}},
      // The router z-loss: 16384 tokens x 256 experts by default (a 3-D shape's middle dim is
      // ignored).
      {"moe_z_loss",
       {Extent::kLoss},        // loss;
       {Extent::kGateLogits},  // x
       bindOp<ops::MoeZLoss>({1e-3}),
       {16384, 8, 256}},
      {"moe_z_loss_grad",
       {Extent::kGateLogits},                 // grad_x;
       {Extent::kLoss, Extent::kGateLogits},  // grad_loss, x
       bindOp<ops::MoeZLossGrad>({1e-3}),
       {16384, 8, 256}},
      // The quantized gated activations, dynamic scales, activate_left 1: FP8 E4M3 per group of
      // 128 (DeepSeek-V3's recipe; UE8M0 scales in the _ue8m0 row) and INT8 per token (W8A8).
      {"swiglu_quant_fp8",
       {Extent::kFp8, Extent::kGroupScales},  // y, scale;
       {S2},                                  // x
       bindOpByShape<ops::SwiGluQuant>(quantAttrs({1, 1}, 0))},
      {"swiglu_quant_fp8_ue8m0",
       {Extent::kFp8, Extent::kGroupScales},
       {S2},
       bindOpByShape<ops::SwiGluQuant>(quantAttrs({1, 1}, 1))},
      {"swiglu_quant_int8",
       {Extent::kInt8, Extent::kTokenScales},
       {S2},
       bindOp<ops::SwiGluQuant>({1, 1, 0, 0})},
      {"gelu_mul_quant_fp8",
       {Extent::kFp8, Extent::kGroupScales},
       {S2},
       bindOpByShape<ops::GeluMulQuant>(quantAttrs({kNone, 1, 1}, 0))},
      {"gelu_mul_quant_tanh_int8",
       {Extent::kInt8, Extent::kTokenScales},
       {S2},
       bindOp<ops::GeluMulQuant>({kTanh, 1, 1, 0, 0})},
      // ClippedSwigluQuant at the vendor's defaults (alpha 1.702, limit 7, bias 1, interleaved).
      {"clipped_swiglu_quant_fp8",
       {Extent::kFp8, Extent::kGroupScales},
       {S2},
       bindOpByShape<ops::ClippedSwigluQuant>(quantAttrs({1.702, 7.0, 1.0, 1, 1}, 0))},
      // W8A8's activation: INT32 accumulators, weight_scale (2H), activation_scale (rows, 1),
      // INT8 per token, activate_left 1 (no bias, smooth scales or group_index).
      {"dequant_swiglu_quant_int8",
       {Extent::kInt8, Extent::kTokenScales},                                  // y, scale;
       {Extent::kAccumulators, Extent::kChannelScales, Extent::kTokenScales},  // x, w, s_a
       bindOp<ops::DequantSwigluQuant>({1, 1, 0, 0})},
  };
  return ops;
}

const OpInfo *findOp(const std::string &name) {
  for (const OpInfo &op : allOps())
    if (name == op.name) return &op;
  return nullptr;
}

}  // namespace bench
