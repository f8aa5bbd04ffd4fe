// SPDX-License-Identifier: Apache-2.0
// op_specs.h's table and lookups, compiled once into the test support library
// (tests/CMakeLists.txt) rather than in each suite that drives every operator.
#include "op_specs.h"

#include <string>
#include <utility>

namespace infiniop_test {

namespace {
// ClippedSwiglu(Backward) under the V2 name: the same descriptor and calls, created by the V2
// function with clamp_mode 1 (attribute 5).
OpSpec clampAfter(const OpSpec &base, const char *name, decltype(OpSpec::create) create) {
  OpSpec op = base;
  op.name = name;
  op.attrs.push_back(1);
  op.create = std::move(create);
  return op;
}

// The table with ClippedSwigluV2 and ClippedSwigluBackwardV2 after ClippedSwigluBackward (so
// that neighbours, whose descriptors the bad-input table swaps, stay of other kinds).
std::vector<OpSpec> withClampAfter(const std::vector<OpSpec> &base) {
  std::vector<OpSpec> all;
  const OpSpec *forward = nullptr;
  for (const OpSpec &op : base) {
    all.push_back(op);
    if (std::string(op.name) == "ClippedSwiglu") forward = &op;
    if (std::string(op.name) != "ClippedSwigluBackward" || !forward) continue;
    all.push_back(clampAfter(*forward, "ClippedSwigluV2",
                             [](infiniopHandle_t h, void **d, const Descs &t, const Attrs &a) {
                               return infiniopCreateClippedSwigluV2Descriptor(
                                   h, asOut<infiniopClippedSwigluDescriptor_t>(d), t[0], t[1], t[2],
                                   i64(a[0]), f32(a[1]), f32(a[2]), f32(a[3]), a[4] != 0,
                                   i64(a[5]));
                             }));
    all.push_back(clampAfter(op, "ClippedSwigluBackwardV2",
                             [](infiniopHandle_t h, void **d, const Descs &t, const Attrs &a) {
                               return infiniopCreateClippedSwigluBackwardV2Descriptor(
                                   h, asOut<infiniopClippedSwigluBackwardDescriptor_t>(d), t[0],
                                   t[1], t[2], t[3], i64(a[0]), f32(a[1]), f32(a[2]), f32(a[3]),
                                   a[4] != 0, i64(a[5]));
                             }));
  }
  return all;
}
}  // namespace

const std::vector<OpSpec> &specs() {
  static const std::vector<OpSpec> base = {
      {"GeluBackward",
       {{"grad_input", {2, 4}, F32, true, false, {}},
        {"input", {2, 4}, F32, false, false, {}},
        {"grad_output", {2, 4}, F32, false, false, {}}},
       {},
       [](infiniopHandle_t h, void **d, const Descs &t, const Attrs &) {
         return infiniopCreateGeluBackwardDescriptor(h, asOut<infiniopGeluBackwardDescriptor_t>(d),
                                                     t[0], t[1], t[2]);
       },
       [](void *d, size_t *s) {
         return infiniopGetGeluBackwardWorkspaceSize(as<infiniopGeluBackwardDescriptor_t>(d), s);
       },
       [](void *d, void *w, size_t ws, const Ptrs &p, void *stream) {
         return infiniopGeluBackward(as<infiniopGeluBackwardDescriptor_t>(d), w, ws, p[0], p[1],
                                     p[2], stream);
       },
       [](void *d) {
         return infiniopDestroyGeluBackwardDescriptor(as<infiniopGeluBackwardDescriptor_t>(d));
       }},
      {"Gelu",
       {{"output", {2, 4}, F32, true, false, {}}, {"input", {2, 4}, F32, false, false, {}}},
       {1},
       [](infiniopHandle_t h, void **d, const Descs &t, const Attrs &a) {
         return infiniopCreateGeluDescriptor(h, asOut<infiniopGeluDescriptor_t>(d), t[0], t[1],
                                             static_cast<infiniopGeluApproximate_t>(i64(a[0])));
       },
       [](void *d, size_t *s) {
         return infiniopGetGeluWorkspaceSize(as<infiniopGeluDescriptor_t>(d), s);
       },
       [](void *d, void *w, size_t ws, const Ptrs &p, void *stream) {
         return infiniopGelu(as<infiniopGeluDescriptor_t>(d), w, ws, p[0], p[1], stream);
       },
       [](void *d) { return infiniopDestroyGeluDescriptor(as<infiniopGeluDescriptor_t>(d)); }},
      {"GeluBackwardV2",
       {{"grad_input", {2, 4}, F32, true, false, {}},
        {"input", {2, 4}, F32, false, false, {}},
        {"grad_output", {2, 4}, F32, false, false, {}}},
       {0},
       [](infiniopHandle_t h, void **d, const Descs &t, const Attrs &a) {
         return infiniopCreateGeluBackwardV2Descriptor(
             h, asOut<infiniopGeluBackwardV2Descriptor_t>(d), t[0], t[1], t[2],
             static_cast<infiniopGeluApproximate_t>(i64(a[0])));
       },
       [](void *d, size_t *s) {
         return infiniopGetGeluBackwardV2WorkspaceSize(as<infiniopGeluBackwardV2Descriptor_t>(d),
                                                       s);
       },
       [](void *d, void *w, size_t ws, const Ptrs &p, void *stream) {
         return infiniopGeluBackwardV2(as<infiniopGeluBackwardV2Descriptor_t>(d), w, ws, p[0], p[1],
                                       p[2], stream);
       },
       [](void *d) {
         return infiniopDestroyGeluBackwardV2Descriptor(as<infiniopGeluBackwardV2Descriptor_t>(d));
       }},
      {"SwiGlu",
       {{"y", {2, 4}, F32, true, false, {}}, {"x", {2, 8}, F32, false, false, {}}},
       {-1},
       [](infiniopHandle_t h, void **d, const Descs &t, const Attrs &a) {
         return infiniopCreateSwiGluDescriptor(h, asOut<infiniopSwiGluDescriptor_t>(d), t[0], t[1],
                                               static_cast<int32_t>(a[0]));
       },
       [](void *d, size_t *s) {
         return infiniopGetSwiGluWorkspaceSize(as<infiniopSwiGluDescriptor_t>(d), s);
       },
       [](void *d, void *w, size_t ws, const Ptrs &p, void *stream) {
         return infiniopSwiGlu(as<infiniopSwiGluDescriptor_t>(d), w, ws, p[0], p[1], stream);
       },
       [](void *d) { return infiniopDestroySwiGluDescriptor(as<infiniopSwiGluDescriptor_t>(d)); }},
      {"SwiGluBackward",
       {{"x_grad", {2, 8}, F32, true, false, {}},
        {"y_grad", {2, 4}, F32, false, false, {}},
        {"x", {2, 8}, F32, false, false, {}}},
       {-1},
       [](infiniopHandle_t h, void **d, const Descs &t, const Attrs &a) {
         return infiniopCreateSwiGluBackwardDescriptor(
             h, asOut<infiniopSwiGluBackwardDescriptor_t>(d), t[0], t[1], t[2],
             static_cast<int32_t>(a[0]));
       },
       [](void *d, size_t *s) {
         return infiniopGetSwiGluBackwardWorkspaceSize(as<infiniopSwiGluBackwardDescriptor_t>(d),
                                                       s);
       },
       [](void *d, void *w, size_t ws, const Ptrs &p, void *stream) {
         return infiniopSwiGluBackward(as<infiniopSwiGluBackwardDescriptor_t>(d), w, ws, p[0], p[1],
                                       p[2], stream);
       },
       [](void *d) {
         return infiniopDestroySwiGluBackwardDescriptor(as<infiniopSwiGluBackwardDescriptor_t>(d));
       }},
      {"GeluMul",
       {{"out", {2, 4}, F32, true, false, {}}, {"input", {2, 8}, F32, false, false, {}}},
       {1},
       [](infiniopHandle_t h, void **d, const Descs &t, const Attrs &a) {
         return infiniopCreateGeluMulDescriptor(h, asOut<infiniopGeluMulDescriptor_t>(d), t[0],
                                                t[1],
                                                static_cast<infiniopGeluApproximate_t>(i64(a[0])));
       },
       [](void *d, size_t *s) {
         return infiniopGetGeluMulWorkspaceSize(as<infiniopGeluMulDescriptor_t>(d), s);
       },
       [](void *d, void *w, size_t ws, const Ptrs &p, void *stream) {
         return infiniopGeluMul(as<infiniopGeluMulDescriptor_t>(d), w, ws, p[0], p[1], stream);
       },
       [](void *d) {
         return infiniopDestroyGeluMulDescriptor(as<infiniopGeluMulDescriptor_t>(d));
       }},
      {"GeluMulBackward",
       {{"input_grad", {2, 8}, F32, true, false, {}},
        {"out_grad", {2, 4}, F32, false, false, {}},
        {"input", {2, 8}, F32, false, false, {}}},
       {0},
       [](infiniopHandle_t h, void **d, const Descs &t, const Attrs &a) {
         return infiniopCreateGeluMulBackwardDescriptor(
             h, asOut<infiniopGeluMulBackwardDescriptor_t>(d), t[0], t[1], t[2],
             static_cast<infiniopGeluApproximate_t>(i64(a[0])));
       },
       [](void *d, size_t *s) {
         return infiniopGetGeluMulBackwardWorkspaceSize(as<infiniopGeluMulBackwardDescriptor_t>(d),
                                                        s);
       },
       [](void *d, void *w, size_t ws, const Ptrs &p, void *stream) {
         return infiniopGeluMulBackward(as<infiniopGeluMulBackwardDescriptor_t>(d), w, ws, p[0],
                                        p[1], p[2], stream);
       },
       [](void *d) {
         return infiniopDestroyGeluMulBackwardDescriptor(
             as<infiniopGeluMulBackwardDescriptor_t>(d));
       }},
      {"ClippedSwiglu",
       {{"y", {2, 4}, F32, true, false, {}},
        {"x", {2, 8}, F32, false, false, {}},
        {"group_index", {1}, I64, false, true, {2}}},
       {-1, 1.702, 7.0, 1.0, 1},
       [](infiniopHandle_t h, void **d, const Descs &t, const Attrs &a) {
         return infiniopCreateClippedSwigluDescriptor(
             h, asOut<infiniopClippedSwigluDescriptor_t>(d), t[0], t[1], t[2], i64(a[0]), f32(a[1]),
             f32(a[2]), f32(a[3]), a[4] != 0);
       },
       [](void *d, size_t *s) {
         return infiniopGetClippedSwigluWorkspaceSize(as<infiniopClippedSwigluDescriptor_t>(d), s);
       },
       [](void *d, void *w, size_t ws, const Ptrs &p, void *stream) {
         return infiniopClippedSwiglu(as<infiniopClippedSwigluDescriptor_t>(d), w, ws, p[0], p[1],
                                      p[2], stream);
       },
       [](void *d) {
         return infiniopDestroyClippedSwigluDescriptor(as<infiniopClippedSwigluDescriptor_t>(d));
       }},
      {"ClippedSwigluBackward",
       {{"x_grad", {2, 8}, F32, true, false, {}},
        {"y_grad", {2, 4}, F32, false, false, {}},
        {"x", {2, 8}, F32, false, false, {}},
        {"group_index", {1}, I64, false, true, {2}}},
       {-1, 1.702, 7.0, 1.0, 0},
       [](infiniopHandle_t h, void **d, const Descs &t, const Attrs &a) {
         return infiniopCreateClippedSwigluBackwardDescriptor(
             h, asOut<infiniopClippedSwigluBackwardDescriptor_t>(d), t[0], t[1], t[2], t[3],
             i64(a[0]), f32(a[1]), f32(a[2]), f32(a[3]), a[4] != 0);
       },
       [](void *d, size_t *s) {
         return infiniopGetClippedSwigluBackwardWorkspaceSize(
             as<infiniopClippedSwigluBackwardDescriptor_t>(d), s);
       },
       [](void *d, void *w, size_t ws, const Ptrs &p, void *stream) {
         return infiniopClippedSwigluBackward(as<infiniopClippedSwigluBackwardDescriptor_t>(d), w,
                                              ws, p[0], p[1], p[2], p[3], stream);
       },
       [](void *d) {
         return infiniopDestroyClippedSwigluBackwardDescriptor(
             as<infiniopClippedSwigluBackwardDescriptor_t>(d));
       }},
      {"MoeFinalizeRoutingV2",
       {{"out", {2, 4}, F32, true, false, {}},
        {"expanded_x", {2, 4}, F32, false, false, {}},
        {"expanded_row_idx", {2}, I32, false, false, {1, 0}},
        {"x1", {2, 4}, F32, false, true, {}},
        {"x2", {2, 4}, F32, false, true, {}},
        {"bias", {3, 4}, F32, false, true, {}},
        {"scales", {2, 1}, F32, false, true, {}},
        {"expert_idx", {2, 1}, I32, false, true, {2, 0}}},
       {0},
       [](infiniopHandle_t h, void **d, const Descs &t, const Attrs &a) {
         return infiniopCreateMoeFinalizeRoutingV2Descriptor(
             h, asOut<infiniopMoeFinalizeRoutingV2Descriptor_t>(d), t[0], t[1], t[2], t[3], t[4],
             t[5], t[6], t[7], i64(a[0]));
       },
       [](void *d, size_t *s) {
         return infiniopGetMoeFinalizeRoutingV2WorkspaceSize(
             as<infiniopMoeFinalizeRoutingV2Descriptor_t>(d), s);
       },
       [](void *d, void *w, size_t ws, const Ptrs &p, void *stream) {
         return infiniopMoeFinalizeRoutingV2(as<infiniopMoeFinalizeRoutingV2Descriptor_t>(d), w, ws,
                                             p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7],
                                             stream);
       },
       [](void *d) {
         return infiniopDestroyMoeFinalizeRoutingV2Descriptor(
             as<infiniopMoeFinalizeRoutingV2Descriptor_t>(d));
       }},
      {"MoeFinalizeRoutingV2Grad",
       {{"grad_expanded_x", {2, 4}, F32, true, false, {}},
        {"grad_scales", {2, 1}, F32, true, true, {}},
        {"grad_y", {2, 4}, F32, false, false, {}},
        {"expanded_row_idx", {2}, I32, false, false, {1, 0}},
        {"expanded_x", {2, 4}, F32, false, true, {}},
        {"scales", {2, 1}, F32, false, true, {}},
        {"expert_idx", {2, 1}, I32, false, true, {2, 0}},
        {"bias", {3, 4}, F32, false, true, {}}},
       {0, 0, 3, 0},
       [](infiniopHandle_t h, void **d, const Descs &t, const Attrs &a) {
         return infiniopCreateMoeFinalizeRoutingV2GradDescriptor(
             h, asOut<infiniopMoeFinalizeRoutingV2GradDescriptor_t>(d), t[0], t[1], t[2], t[3],
             t[4], t[5], t[6], t[7], i64(a[0]), i64(a[1]), i64(a[2]), i64(a[3]));
       },
       [](void *d, size_t *s) {
         return infiniopGetMoeFinalizeRoutingV2GradWorkspaceSize(
             as<infiniopMoeFinalizeRoutingV2GradDescriptor_t>(d), s);
       },
       [](void *d, void *w, size_t ws, const Ptrs &p, void *stream) {
         return infiniopMoeFinalizeRoutingV2Grad(
             as<infiniopMoeFinalizeRoutingV2GradDescriptor_t>(d), w, ws, p[0], p[1], p[2], p[3],
             p[4], p[5], p[6], p[7], stream);
       },
       [](void *d) {
         return infiniopDestroyMoeFinalizeRoutingV2GradDescriptor(
             as<infiniopMoeFinalizeRoutingV2GradDescriptor_t>(d));
       }},
      {"MoeInitRoutingV2",
       {{"expanded_x", {2, 4}, F32, true, false, {}},
        {"expanded_row_idx", {2}, I32, true, false, {}},
        {"expert_tokens_count_or_cumsum", {3}, I64, true, true, {}},
        {"expert_tokens_before_capacity", {3}, I64, true, true, {}, true},  // mode 1 only
        {"x", {2, 4}, F32, false, false, {}},
        {"expert_idx", {2, 1}, I32, false, false, {2, 0}}},
       {0, 0, 3, 0, 1, 0},
       [](infiniopHandle_t h, void **d, const Descs &t, const Attrs &a) {
         return infiniopCreateMoeInitRoutingV2Descriptor(
             h, asOut<infiniopMoeInitRoutingV2Descriptor_t>(d), t[0], t[1], t[2], t[3], t[4], t[5],
             i64(a[0]), i64(a[1]), i64(a[2]), i64(a[3]), i64(a[4]), a[5] != 0);
       },
       [](void *d, size_t *s) {
         return infiniopGetMoeInitRoutingV2WorkspaceSize(
             as<infiniopMoeInitRoutingV2Descriptor_t>(d), s);
       },
       [](void *d, void *w, size_t ws, const Ptrs &p, void *stream) {
         return infiniopMoeInitRoutingV2(as<infiniopMoeInitRoutingV2Descriptor_t>(d), w, ws, p[0],
                                         p[1], p[2], p[3], p[4], p[5], stream);
       },
       [](void *d) {
         return infiniopDestroyMoeInitRoutingV2Descriptor(
             as<infiniopMoeInitRoutingV2Descriptor_t>(d));
       }},
      {"MoeInitRoutingV2Grad",
       {{"grad_x", {2, 4}, F32, true, false, {}},
        {"grad_expanded_x", {2, 4}, F32, false, false, {}},
        {"expanded_row_idx", {2}, I32, false, false, {1, 0}}},
       {1, 0, 0},
       [](infiniopHandle_t h, void **d, const Descs &t, const Attrs &a) {
         return infiniopCreateMoeInitRoutingV2GradDescriptor(
             h, asOut<infiniopMoeInitRoutingV2GradDescriptor_t>(d), t[0], t[1], t[2], i64(a[0]),
             i64(a[1]), i64(a[2]));
       },
       [](void *d, size_t *s) {
         return infiniopGetMoeInitRoutingV2GradWorkspaceSize(
             as<infiniopMoeInitRoutingV2GradDescriptor_t>(d), s);
       },
       [](void *d, void *w, size_t ws, const Ptrs &p, void *stream) {
         return infiniopMoeInitRoutingV2Grad(as<infiniopMoeInitRoutingV2GradDescriptor_t>(d), w, ws,
                                             p[0], p[1], p[2], stream);
       },
       [](void *d) {
         return infiniopDestroyMoeInitRoutingV2GradDescriptor(
             as<infiniopMoeInitRoutingV2GradDescriptor_t>(d));
       }},
      // The router operators: E = 4 experts, k = 1; finished marks row 1.
      {"MoeGatingTopKSoftmax",
       {{"y", {2, 1}, F32, true, false, {}},
        {"expert_idx", {2, 1}, I32, true, false, {}},
        {"row_idx", {2, 1}, I32, true, true, {}},
        {"softmax_out", {2, 4}, F32, true, true, {}},
        {"x", {2, 4}, F32, false, false, {}},
        {"finished", {2}, BOOL, false, true, {0, 1}}},
       {1, 0},
       [](infiniopHandle_t h, void **d, const Descs &t, const Attrs &a) {
         return infiniopCreateMoeGatingTopKSoftmaxDescriptor(
             h, asOut<infiniopMoeGatingTopKSoftmaxDescriptor_t>(d), t[0], t[1], t[2], t[3], t[4],
             t[5], i64(a[0]), i64(a[1]));
       },
       [](void *d, size_t *s) {
         return infiniopGetMoeGatingTopKSoftmaxWorkspaceSize(
             as<infiniopMoeGatingTopKSoftmaxDescriptor_t>(d), s);
       },
       [](void *d, void *w, size_t ws, const Ptrs &p, void *stream) {
         return infiniopMoeGatingTopKSoftmax(as<infiniopMoeGatingTopKSoftmaxDescriptor_t>(d), w, ws,
                                             p[0], p[1], p[2], p[3], p[4], p[5], stream);
       },
       [](void *d) {
         return infiniopDestroyMoeGatingTopKSoftmaxDescriptor(
             as<infiniopMoeGatingTopKSoftmaxDescriptor_t>(d));
       }},
      {"MoeGatingTopKSoftmaxGrad",
       {{"grad_x", {2, 4}, F32, true, false, {}},
        {"grad_y", {2, 1}, F32, false, false, {}},
        {"x", {2, 4}, F32, false, false, {}},
        {"expert_idx", {2, 1}, I32, false, false, {1, 4}},
        {"finished", {2}, BOOL, false, true, {0, 1}}},
       {0},
       [](infiniopHandle_t h, void **d, const Descs &t, const Attrs &a) {
         return infiniopCreateMoeGatingTopKSoftmaxGradDescriptor(
             h, asOut<infiniopMoeGatingTopKSoftmaxGradDescriptor_t>(d), t[0], t[1], t[2], t[3],
             t[4], i64(a[0]));
       },
       [](void *d, size_t *s) {
         return infiniopGetMoeGatingTopKSoftmaxGradWorkspaceSize(
             as<infiniopMoeGatingTopKSoftmaxGradDescriptor_t>(d), s);
       },
       [](void *d, void *w, size_t ws, const Ptrs &p, void *stream) {
         return infiniopMoeGatingTopKSoftmaxGrad(
             as<infiniopMoeGatingTopKSoftmaxGradDescriptor_t>(d), w, ws, p[0], p[1], p[2], p[3],
             p[4], stream);
       },
       [](void *d) {
         return infiniopDestroyMoeGatingTopKSoftmaxGradDescriptor(
             as<infiniopMoeGatingTopKSoftmaxGradDescriptor_t>(d));
       }},
      // attrs: k, k_group, group_count, group_select_mode, renorm, norm_type, scale, eps.
      {"MoeGatingTopK",
       {{"y", {2, 1}, F32, true, false, {}},
        {"expert_idx", {2, 1}, I32, true, false, {}},
        {"norm_out", {2, 4}, F32, true, true, {}},
        {"x", {2, 4}, F32, false, false, {}},
        {"bias", {4}, F32, false, true, {}}},
       {1, 1, 1, 0, 0, 1, 1.0, 1e-20},
       [](infiniopHandle_t h, void **d, const Descs &t, const Attrs &a) {
         return infiniopCreateMoeGatingTopKDescriptor(
             h, asOut<infiniopMoeGatingTopKDescriptor_t>(d), t[0], t[1], t[2], t[3], t[4],
             i64(a[0]), i64(a[1]), i64(a[2]), i64(a[3]), i64(a[4]), i64(a[5]), a[6], a[7]);
       },
       [](void *d, size_t *s) {
         return infiniopGetMoeGatingTopKWorkspaceSize(as<infiniopMoeGatingTopKDescriptor_t>(d), s);
       },
       [](void *d, void *w, size_t ws, const Ptrs &p, void *stream) {
         return infiniopMoeGatingTopK(as<infiniopMoeGatingTopKDescriptor_t>(d), w, ws, p[0], p[1],
                                      p[2], p[3], p[4], stream);
       },
       [](void *d) {
         return infiniopDestroyMoeGatingTopKDescriptor(as<infiniopMoeGatingTopKDescriptor_t>(d));
       }},
      // attrs: norm_type, renorm, scale, eps.
      {"MoeGatingTopKGrad",
       {{"grad_x", {2, 4}, F32, true, false, {}},
        {"grad_y", {2, 1}, F32, false, false, {}},
        {"x", {2, 4}, F32, false, false, {}},
        {"expert_idx", {2, 1}, I32, false, false, {1, 0}}},
       {1, 0, 1.0, 1e-20},
       [](infiniopHandle_t h, void **d, const Descs &t, const Attrs &a) {
         return infiniopCreateMoeGatingTopKGradDescriptor(
             h, asOut<infiniopMoeGatingTopKGradDescriptor_t>(d), t[0], t[1], t[2], t[3], i64(a[0]),
             i64(a[1]), a[2], a[3]);
       },
       [](void *d, size_t *s) {
         return infiniopGetMoeGatingTopKGradWorkspaceSize(
             as<infiniopMoeGatingTopKGradDescriptor_t>(d), s);
       },
       [](void *d, void *w, size_t ws, const Ptrs &p, void *stream) {
         return infiniopMoeGatingTopKGrad(as<infiniopMoeGatingTopKGradDescriptor_t>(d), w, ws, p[0],
                                          p[1], p[2], p[3], stream);
       },
       [](void *d) {
         return infiniopDestroyMoeGatingTopKGradDescriptor(
             as<infiniopMoeGatingTopKGradDescriptor_t>(d));
       }},
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
