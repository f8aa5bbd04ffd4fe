// SPDX-License-Identifier: Apache-2.0
// The operator table. Every float input is filled with signed values over [-10, 10]; split
// activations split the last dim (dim = -1). The MoE operators route every token to K distinct
// rows (a permutation) with scales, bias and expanded_x, as in training. ClippedSwiglu runs with
// the vendor API's defaults (alpha 1.702, limit 7.0, bias 1.0, no group_index), interleaved (the
// default) or in halves.
#include "ops.h"

namespace bench {
namespace {

using H = infiniopHandle_t;
constexpr Extent S = Extent::kSame, S2 = Extent::kDoubleLast;

template <infiniopGeluApproximate_t kApproximate>
Binder geluMul() {
  return bind<infiniopGeluMulDescriptor_t>(
      [](H h, auto *d, const Descs &o, const Descs &i) {
        return infiniopCreateGeluMulDescriptor(h, d, o[0], i[0], kApproximate);
      },
      infiniopGetGeluMulWorkspaceSize,
      [](auto d, void *w, size_t ws, OutPtrs o, InPtrs i) {
        return infiniopGeluMul(d, w, ws, o[0], i[0], nullptr);
      },
      infiniopDestroyGeluMulDescriptor);
}

template <infiniopGeluApproximate_t kApproximate>
Binder geluMulBackward() {
  return bind<infiniopGeluMulBackwardDescriptor_t>(
      [](H h, auto *d, const Descs &o, const Descs &i) {
        return infiniopCreateGeluMulBackwardDescriptor(h, d, o[0], i[0], i[1], kApproximate);
      },
      infiniopGetGeluMulBackwardWorkspaceSize,
      [](auto d, void *w, size_t ws, OutPtrs o, InPtrs i) {
        return infiniopGeluMulBackward(d, w, ws, o[0], i[0], i[1], nullptr);
      },
      infiniopDestroyGeluMulBackwardDescriptor);
}

template <infiniopGeluApproximate_t kApproximate>
Binder gelu() {
  return bind<infiniopGeluDescriptor_t>(
      [](H h, auto *d, const Descs &o, const Descs &i) {
        return infiniopCreateGeluDescriptor(h, d, o[0], i[0], kApproximate);
      },
      infiniopGetGeluWorkspaceSize,
      [](auto d, void *w, size_t ws, OutPtrs o, InPtrs i) {
        return infiniopGelu(d, w, ws, o[0], i[0], nullptr);
      },
      infiniopDestroyGeluDescriptor);
}

template <infiniopGeluApproximate_t kApproximate>
Binder geluBackwardV2() {
  return bind<infiniopGeluBackwardV2Descriptor_t>(
      [](H h, auto *d, const Descs &o, const Descs &i) {
        return infiniopCreateGeluBackwardV2Descriptor(h, d, o[0], i[0], i[1], kApproximate);
      },
      infiniopGetGeluBackwardV2WorkspaceSize,
      [](auto d, void *w, size_t ws, OutPtrs o, InPtrs i) {
        return infiniopGeluBackwardV2(d, w, ws, o[0], i[0], i[1], nullptr);
      },
      infiniopDestroyGeluBackwardV2Descriptor);
}

// The vendor API's defaults (aclnnClippedSwiglu); no group_index: every row is computed.
constexpr float kClippedAlpha = 1.702f, kClippedLimit = 7.0f, kClippedBias = 1.0f;

// kClampMode 1: aclnnClippedSwigluV2's clamp after the activation (alpha and bias unused).
template <bool kInterleaved, int64_t kClampMode = 0>
Binder clippedSwiglu() {
  return bind<infiniopClippedSwigluDescriptor_t>(
      [](H h, auto *d, const Descs &o, const Descs &i) {
        return infiniopCreateClippedSwigluV2Descriptor(h, d, o[0], i[0], nullptr, -1, kClippedAlpha,
                                                       kClippedLimit, kClippedBias, kInterleaved,
                                                       kClampMode);
      },
      infiniopGetClippedSwigluWorkspaceSize,
      [](auto d, void *w, size_t ws, OutPtrs o, InPtrs i) {
        return infiniopClippedSwiglu(d, w, ws, o[0], i[0], nullptr, nullptr);
      },
      infiniopDestroyClippedSwigluDescriptor);
}

template <bool kInterleaved, int64_t kClampMode = 0>
Binder clippedSwigluBackward() {
  return bind<infiniopClippedSwigluBackwardDescriptor_t>(
      [](H h, auto *d, const Descs &o, const Descs &i) {
        return infiniopCreateClippedSwigluBackwardV2Descriptor(
            h, d, o[0], i[0], i[1], nullptr, -1, kClippedAlpha, kClippedLimit, kClippedBias,
            kInterleaved, kClampMode);
      },
      infiniopGetClippedSwigluBackwardWorkspaceSize,
      [](auto d, void *w, size_t ws, OutPtrs o, InPtrs i) {
        return infiniopClippedSwigluBackward(d, w, ws, o[0], i[0], i[1], nullptr, nullptr);
      },
      infiniopDestroyClippedSwigluBackwardDescriptor);
}

// drop_pad_mode 0 (dropless); the grad with active_num 0 (every row), expert_num and
// expert_capacity unused.
Binder moeFinalizeRouting() {
  return bind<infiniopMoeFinalizeRoutingV2Descriptor_t>(
      [](H h, auto *d, const Descs &o, const Descs &i) {
        return infiniopCreateMoeFinalizeRoutingV2Descriptor(h, d, o[0], i[0], i[1], i[2], i[3],
                                                            i[4], i[5], i[6], 0);
      },
      infiniopGetMoeFinalizeRoutingV2WorkspaceSize,
      [](auto d, void *w, size_t ws, OutPtrs o, InPtrs i) {
        return infiniopMoeFinalizeRoutingV2(d, w, ws, o[0], i[0], i[1], i[2], i[3], i[4], i[5],
                                            i[6], nullptr);
      },
      infiniopDestroyMoeFinalizeRoutingV2Descriptor);
}

Binder moeFinalizeRoutingGrad() {
  return bind<infiniopMoeFinalizeRoutingV2GradDescriptor_t>(
      [](H h, auto *d, const Descs &o, const Descs &i) {
        return infiniopCreateMoeFinalizeRoutingV2GradDescriptor(h, d, o[0], o[1], i[0], i[1], i[2],
                                                                i[3], i[4], i[5], 0, 0, 0, 0);
      },
      infiniopGetMoeFinalizeRoutingV2GradWorkspaceSize,
      [](auto d, void *w, size_t ws, OutPtrs o, InPtrs i) {
        return infiniopMoeFinalizeRoutingV2Grad(d, w, ws, o[0], o[1], i[0], i[1], i[2], i[3], i[4],
                                                i[5], nullptr);
      },
      infiniopDestroyMoeFinalizeRoutingV2GradDescriptor);
}

// Dropless (mode 0, every row active) with the counts' cumsum, the layout MoeFinalizeRoutingV2
// mode 2 reads; its grad in the same mode.
Binder moeInitRouting() {
  return bind<infiniopMoeInitRoutingV2Descriptor_t>(
      [](H h, auto *d, const Descs &o, const Descs &i) {
        return infiniopCreateMoeInitRoutingV2Descriptor(h, d, o[0], o[1], o[2], nullptr, i[0], i[1],
                                                        0, 0, kMoeExperts, 0, 1, false);
      },
      infiniopGetMoeInitRoutingV2WorkspaceSize,
      [](auto d, void *w, size_t ws, OutPtrs o, InPtrs i) {
        return infiniopMoeInitRoutingV2(d, w, ws, o[0], o[1], o[2], nullptr, i[0], i[1], nullptr);
      },
      infiniopDestroyMoeInitRoutingV2Descriptor);
}

Binder moeInitRoutingGrad() {
  return bind<infiniopMoeInitRoutingV2GradDescriptor_t>(
      [](H h, auto *d, const Descs &o, const Descs &i, const std::vector<size_t> &shape) {
        return infiniopCreateMoeInitRoutingV2GradDescriptor(
            h, d, o[0], i[0], i[1], static_cast<int64_t>(moeTopk(shape)), 0, 0);
      },
      infiniopGetMoeInitRoutingV2GradWorkspaceSize,
      [](auto d, void *w, size_t ws, OutPtrs o, InPtrs i) {
        return infiniopMoeInitRoutingV2Grad(d, w, ws, o[0], i[0], i[1], nullptr);
      },
      infiniopDestroyMoeInitRoutingV2GradDescriptor);
}

// The routers at the torch_npu defaults of their configurations: MoeGatingTopKSoftmax renorm 0
// (softmax, then top-k) with row_idx; MoeGatingTopK as DeepSeek-V3 (sigmoid, bias, 8 groups of
// E / 8 experts scored by their two largest, k_group 4, routed_scaling_factor 2.5), where E
// allows it (E a multiple of 8 with groups of >= 2), else ungrouped.
constexpr double kRoutedScaling = 2.5, kGateEps = 1e-20;

int64_t gateGroups(const std::vector<size_t> &shape) {
  return shape.back() % 8 == 0 && shape.back() >= 16 ? 8 : 1;
}

Binder moeGatingTopKSoftmax() {
  return bind<infiniopMoeGatingTopKSoftmaxDescriptor_t>(
      [](H h, auto *d, const Descs &o, const Descs &i, const std::vector<size_t> &shape) {
        return infiniopCreateMoeGatingTopKSoftmaxDescriptor(
            h, d, o[0], o[1], o[2], nullptr, i[0], nullptr, static_cast<int64_t>(moeTopk(shape)),
            0);
      },
      infiniopGetMoeGatingTopKSoftmaxWorkspaceSize,
      [](auto d, void *w, size_t ws, OutPtrs o, InPtrs i) {
        return infiniopMoeGatingTopKSoftmax(d, w, ws, o[0], o[1], o[2], nullptr, i[0], nullptr,
                                            nullptr);
      },
      infiniopDestroyMoeGatingTopKSoftmaxDescriptor);
}

Binder moeGatingTopKSoftmaxGrad() {
  return bind<infiniopMoeGatingTopKSoftmaxGradDescriptor_t>(
      [](H h, auto *d, const Descs &o, const Descs &i) {
        return infiniopCreateMoeGatingTopKSoftmaxGradDescriptor(h, d, o[0], i[0], i[1], i[2],
                                                                nullptr, 0);
      },
      infiniopGetMoeGatingTopKSoftmaxGradWorkspaceSize,
      [](auto d, void *w, size_t ws, OutPtrs o, InPtrs i) {
        return infiniopMoeGatingTopKSoftmaxGrad(d, w, ws, o[0], i[0], i[1], i[2], nullptr, nullptr);
      },
      infiniopDestroyMoeGatingTopKSoftmaxGradDescriptor);
}

Binder moeGatingTopK() {
  return bind<infiniopMoeGatingTopKDescriptor_t>(
      [](H h, auto *d, const Descs &o, const Descs &i, const std::vector<size_t> &shape) {
        const int64_t groups = gateGroups(shape), grouped = groups > 1;
        return infiniopCreateMoeGatingTopKDescriptor(
            h, d, o[0], o[1], nullptr, i[0], i[1], static_cast<int64_t>(moeTopk(shape)),
            grouped ? 4 : 1, groups, grouped, 0, 1, kRoutedScaling, kGateEps);
      },
      infiniopGetMoeGatingTopKWorkspaceSize,
      [](auto d, void *w, size_t ws, OutPtrs o, InPtrs i) {
        return infiniopMoeGatingTopK(d, w, ws, o[0], o[1], nullptr, i[0], i[1], nullptr);
      },
      infiniopDestroyMoeGatingTopKDescriptor);
}

Binder moeGatingTopKGrad() {
  return bind<infiniopMoeGatingTopKGradDescriptor_t>(
      [](H h, auto *d, const Descs &o, const Descs &i) {
        return infiniopCreateMoeGatingTopKGradDescriptor(h, d, o[0], i[0], i[1], i[2], 1, 0,
                                                         kRoutedScaling, kGateEps);
      },
      infiniopGetMoeGatingTopKGradWorkspaceSize,
      [](auto d, void *w, size_t ws, OutPtrs o, InPtrs i) {
        return infiniopMoeGatingTopKGrad(d, w, ws, o[0], i[0], i[1], i[2], nullptr);
      },
      infiniopDestroyMoeGatingTopKGradDescriptor);
}

}  // namespace

bool OpInfo::gathers() const {
  for (const std::vector<Extent> *extents : {&inputs, &outputs})
    for (Extent e : *extents)
      if (isIndex(e)) return true;
  return false;
}

const std::vector<OpInfo> &allOps() {
  static const std::vector<OpInfo> ops = {
      {"gelu_backward",
       {S},
       {S, S},  // grad_input; input, grad_output
       bind<infiniopGeluBackwardDescriptor_t>(
           [](H h, auto *d, const Descs &o, const Descs &i) {
             return infiniopCreateGeluBackwardDescriptor(h, d, o[0], i[0], i[1]);
           },
           infiniopGetGeluBackwardWorkspaceSize,
           [](auto d, void *w, size_t ws, OutPtrs o, InPtrs i) {
             return infiniopGeluBackward(d, w, ws, o[0], i[0], i[1], nullptr);
           },
           infiniopDestroyGeluBackwardDescriptor)},
      {"swiglu",
       {S},
       {S2},  // y; x
       bind<infiniopSwiGluDescriptor_t>(
           [](H h, auto *d, const Descs &o, const Descs &i) {
             return infiniopCreateSwiGluDescriptor(h, d, o[0], i[0], -1);
           },
           infiniopGetSwiGluWorkspaceSize,
           [](auto d, void *w, size_t ws, OutPtrs o, InPtrs i) {
             return infiniopSwiGlu(d, w, ws, o[0], i[0], nullptr);
           },
           infiniopDestroySwiGluDescriptor)},
      {"swiglu_backward",
       {S2},
       {S, S2},  // x_grad; y_grad, x
       bind<infiniopSwiGluBackwardDescriptor_t>(
           [](H h, auto *d, const Descs &o, const Descs &i) {
             return infiniopCreateSwiGluBackwardDescriptor(h, d, o[0], i[0], i[1], -1);
           },
           infiniopGetSwiGluBackwardWorkspaceSize,
           [](auto d, void *w, size_t ws, OutPtrs o, InPtrs i) {
             return infiniopSwiGluBackward(d, w, ws, o[0], i[0], i[1], nullptr);
           },
           infiniopDestroySwiGluBackwardDescriptor)},
      {"gelu_mul", {S}, {S2}, geluMul<INFINIOP_GELU_APPROXIMATE_NONE>()},  // out; input
      {"gelu_mul_tanh", {S}, {S2}, geluMul<INFINIOP_GELU_APPROXIMATE_TANH>()},
      {"gelu_mul_backward",
       {S2},
       {S, S2},  // input_grad; out_grad, input
       geluMulBackward<INFINIOP_GELU_APPROXIMATE_NONE>()},
      {"gelu_mul_backward_tanh", {S2}, {S, S2}, geluMulBackward<INFINIOP_GELU_APPROXIMATE_TANH>()},
      {"gelu", {S}, {S}, gelu<INFINIOP_GELU_APPROXIMATE_NONE>()},  // output; input
      {"gelu_tanh", {S}, {S}, gelu<INFINIOP_GELU_APPROXIMATE_TANH>()},
      {"gelu_backward_v2",
       {S},
       {S, S},  // grad_input; input, grad_output
       geluBackwardV2<INFINIOP_GELU_APPROXIMATE_NONE>()},
      {"gelu_backward_v2_tanh", {S}, {S, S}, geluBackwardV2<INFINIOP_GELU_APPROXIMATE_TANH>()},
      {"clipped_swiglu", {S}, {S2}, clippedSwiglu<true>()},          // y; x (interleaved = true)
      {"clipped_swiglu_halves", {S}, {S2}, clippedSwiglu<false>()},  // interleaved = false
      {"clipped_swiglu_backward",
       {S2},
       {S, S2},  // x_grad; y_grad, x (interleaved = true)
       clippedSwigluBackward<true>()},
      {"clipped_swiglu_backward_halves", {S2}, {S, S2}, clippedSwigluBackward<false>()},
      {"clipped_swiglu_v2", {S}, {S2}, clippedSwiglu<true, 1>()},  // clamp_mode 1, interleaved
      {"clipped_swiglu_backward_v2", {S2}, {S, S2}, clippedSwigluBackward<true, 1>()},
      {"moe_finalize_routing",
       {Extent::kTokens},  // out; expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx
       {Extent::kExpanded, Extent::kRowIndex, Extent::kTokens, Extent::kTokens, Extent::kBias,
        Extent::kTopk, Extent::kExpertIndex},
       moeFinalizeRouting(),
       {4096, 8, 4096}},
      {"moe_finalize_routing_grad",
       {Extent::kExpanded, Extent::kTopk},  // grad_expanded_x, grad_scales; grad_y,
       {Extent::kTokens, Extent::kRowIndex, Extent::kExpanded, Extent::kTopk,  // expanded_row_idx,
        Extent::kExpertIndex, Extent::kBias},  // expanded_x, scales, expert_idx, bias
       moeFinalizeRoutingGrad(),
       {4096, 8, 4096}},
      {"moe_init_routing",
       {Extent::kExpanded, Extent::kRowIndex, Extent::kExpertCounts},  // expanded_x,
       {Extent::kTokens, Extent::kExpertIndex},  // expanded_row_idx, counts' cumsum; x, expert_idx
       moeInitRouting(),
       {4096, 8, 4096}},
      {"moe_init_routing_grad",
       {Extent::kTokens},                       // grad_x;
       {Extent::kExpanded, Extent::kRowIndex},  // grad_expanded_x, expanded_row_idx
       moeInitRoutingGrad(),
       {4096, 8, 4096}},
      {"moe_gating_top_k_softmax",
       {Extent::kGateTopk, Extent::kGateIndex, Extent::kGateRowIndex},  // y, expert_idx, row_idx;
       {Extent::kGateLogits},                                           // x
       moeGatingTopKSoftmax(),
       {16384, 8, 256}},
      {"moe_gating_top_k_softmax_grad",
       {Extent::kGateLogits},  // grad_x; grad_y, x, expert_idx
       {Extent::kGateTopk, Extent::kGateLogits, Extent::kGateExperts},
       moeGatingTopKSoftmaxGrad(),
       {16384, 8, 256}},
      {"moe_gating_top_k",
       {Extent::kGateTopk, Extent::kGateIndex},   // y, expert_idx;
       {Extent::kGateLogits, Extent::kGateBias},  // x, bias
       moeGatingTopK(),
       {16384, 8, 256}},
      {"moe_gating_top_k_grad",
       {Extent::kGateLogits},  // grad_x; grad_y, x, expert_idx
       {Extent::kGateTopk, Extent::kGateLogits, Extent::kGateExperts},
       moeGatingTopKGrad(),
       {16384, 8, 256}},
  };
  return ops;
}

const OpInfo *findOp(const std::string &name) {
  for (const OpInfo &op : allOps())
    if (name == op.name) return &op;
  return nullptr;
}

}  // namespace bench
