// The operator table. Every input is filled with signed values over [-10, 10]; split
// activations split the last dim (dim = -1).
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

}  // namespace

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
  };
  return ops;
}

const OpInfo *findOp(const std::string &name) {
  for (const OpInfo &op : allOps())
    if (name == op.name) return &op;
  return nullptr;
}

}  // namespace bench
