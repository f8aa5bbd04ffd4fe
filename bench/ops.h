// SPDX-License-Identifier: Apache-2.0
// The operator table of infiniop-bench. Adding an operator is one entry in allOps() (ops.cc):
// its name, how each tensor's shape follows the bench's --shape, and its attributes; its C
// signature (the four API functions, the tensors' order) is tests/common/operators.h's.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "infiniop.h"

namespace bench {

using Descs = std::vector<infiniopTensorDescriptor_t>;
using OutPtrs = void *const *;
using InPtrs = const void *const *;

// An operator descriptor created on some handle, with its type erased.
struct Bound {
  std::shared_ptr<void> desc;  // owns the descriptor: destroys it when the last copy goes
  size_t workspace_size = 0;
  std::function<infiniStatus_t(void *workspace, size_t workspace_size, OutPtrs, InPtrs)> calculate;
};

// Creates an operator for these tensor descriptors (outputs, then inputs, in API order) of the
// case's shape (the bench's --shape). On failure it returns the library's status;
// infiniopGetLastError() says why.
using Binder = std::function<infiniStatus_t(infiniopHandle_t, const Descs &outs, const Descs &ins,
                                            const std::vector<size_t> &shape, Bound *)>;

// How a tensor's shape follows the case's shape S (the bench's --shape).
enum class Extent {
  kSame,        // S
  kDoubleLast,  // S with its last dim doubled: the [x1, x2] input of a split activation
  // Row-indexed (MoE) operators read S as R x K x H (a 2-D S = R x H means K = 4), with
  // kMoeExperts experts:
  kTokens,        // (R, H): out, x1, x2, grad_y
  kExpanded,      // (R*K, H): expanded_x and its gradient
  kTopk,          // (R, K): scales and their gradient
  kBias,          // (E, H)
  kRowIndex,      // (R*K) INT32: a fixed permutation of [0, R*K), so no duplicate destinations
  kExpertIndex,   // (R, K) INT32 in [0, E)
  kExpertCounts,  // (E) INT32: an output (tokens per expert)
  // The routers (MoeGatingTopKSoftmax, MoeGatingTopK and their grads) read S as R x K x E (a 2-D
  // R x E means K = 4):
  kGateLogits,    // (R, E): x, grad_x
  kGateTopk,      // (R, K): y, grad_y
  kGateBias,      // (E): MoeGatingTopK's bias, of x's dtype
  kGateIndex,     // (R, K) INT32: expert_idx, an output (compared through y: see case.cc)
  kGateRowIndex,  // (R, K) INT32: row_idx, an output (exact)
  kGateExperts,   // (R, K) INT32 in [0, E), duplicates allowed: the grads' expert_idx input
  kGateCounts,    // (E) INT32: MoeExpertCounts' counts, an output (exact); MoeAuxLoss's input
  kLoss,          // () F32 whatever the case's dtype: MoeAuxLoss's and MoeZLoss's loss, their
                  // grads' grad_loss
  // The *Quant operators' outputs, whatever the case's dtype (compared bit for bit):
  kInt8,         // S, INT8
  kFp8,          // S, FP8 E4M3
  kGroupScales,  // S with its last dim / kQuantGroup (quantGroups), F32: per-group scales
  kTokenScales,  // S with its last dim 1, F32: per-token scales
  // DequantSwigluQuant's inputs (kTokenScales is its activation_scale):
  kAccumulators,   // S with its last dim doubled, INT32: x, signed accumulators
  kChannelScales,  // (2 x S's last dim) F32: weight_scale
  // MoeInitRoutingQuantV2's (R x K x H as the MoE operators read S):
  kExpandedInt8,    // (R*K, H) INT8: expanded_x
  kExpandedScales,  // (R*K) F32: its dynamic scales
  kExpertScales,    // (E, H) F32: the smooth scales, an input
};
constexpr size_t kQuantGroup = 128;
// Groups of kQuantGroup along a last dim of h elements (one per row where h is no multiple: the
// smoke shapes).
inline size_t quantGroups(size_t h) {
  return h % kQuantGroup == 0 ? h / kQuantGroup : 1;
}
constexpr size_t kMoeExperts = 64;
inline size_t moeTopk(const std::vector<size_t> &shape) {
  return shape.size() == 3 ? shape[1] : 4;
}

// A 0-D F32 tensor (a loss, or its gradient): the operator reduces over every row, so its case
// is checked whole, as the row-indexed ones.
inline bool isLoss(Extent e) {
  return e == Extent::kLoss;
}

inline bool isIndex(Extent e) {
  return e == Extent::kRowIndex || e == Extent::kExpertIndex || e == Extent::kExpertCounts ||
         e == Extent::kGateIndex || e == Extent::kGateRowIndex || e == Extent::kGateExperts ||
         e == Extent::kGateCounts || e == Extent::kAccumulators;
}

// An output compared bit for bit (exact by contract), of its own dtype.
inline bool isQuant(Extent e) {
  return e == Extent::kInt8 || e == Extent::kFp8 || e == Extent::kGroupScales ||
         e == Extent::kTokenScales || e == Extent::kExpandedInt8 || e == Extent::kExpandedScales;
}
// The dtype of a tensor of extent e in a case of dtype `dtype`.
inline infiniDtype_t extentDtype(Extent e, infiniDtype_t dtype) {
  switch (e) {
    case Extent::kInt8:
    case Extent::kExpandedInt8:
      return INFINI_DTYPE_I8;
    case Extent::kFp8:
      return INFINI_DTYPE_F8;
    case Extent::kGroupScales:
    case Extent::kTokenScales:
    case Extent::kExpandedScales:
    case Extent::kExpertScales:
    case Extent::kLoss:
    case Extent::kChannelScales:
      return INFINI_DTYPE_F32;
    default:
      return isIndex(e) ? INFINI_DTYPE_I32 : dtype;
  }
}

struct OpInfo {
  const char *name;
  std::vector<Extent> outputs, inputs;  // in API order
  Binder bind;
  std::vector<size_t> default_shape = {4096, 4096};  // 16M elements

  // Row-indexed (an index input or output, or a router's rows): a sample of elements would
  // break its rows or indices, so it is checked whole.
  bool gathers() const;
};

const std::vector<OpInfo> &allOps();
const OpInfo *findOp(const std::string &name);

}  // namespace bench
