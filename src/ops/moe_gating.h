// SPDX-License-Identifier: Apache-2.0
// The router operators (MoeGatingTopKSoftmax, MoeGatingTopK and their grads) as the devices see
// them: one validated plan, fixed at descriptor creation, for the four; the data pointers of one
// call, whose expert_idx values (grads) have been range-checked on the host before a kernel runs.
// The arithmetic every device follows is docs/moe_gating_top_k_softmax.md and
// docs/moe_gating_top_k.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/host_family.h"
#include "core/tensor.h"
#include "infinicore.h"

namespace infiniop::moe {

// A tensor (..., n) seen as `rows` rows of `cols` elements (strides in elements, any value). The
// leading dims are merged where their strides allow and size-1 dims dropped, so a contiguous or
// row-strided tensor has one leading dim; at most kRouterMaxLeading remain (creation checks).
// A tensor without the last dim (finished: x's leading shape) has cols = 1, col_stride = 0.
inline constexpr int kRouterMaxLeading = 8;
struct RouterView {
  bool present = false;
  infiniDtype_t dtype = INFINI_DTYPE_INVALID;
  size_t rows = 0, cols = 0;
  ptrdiff_t col_stride = 0;
  int ndim = 0;  // leading dims, outermost first: row r is their row-major index
  size_t dims[kRouterMaxLeading] = {};
  ptrdiff_t strides[kRouterMaxLeading] = {};
  ElementSpan span;  // for the overlap checks

  ptrdiff_t rowOffset(size_t r) const {
    ptrdiff_t offset = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      offset += static_cast<ptrdiff_t>(r % dims[d]) * strides[d];
      r /= dims[d];
    }
    return offset;
  }
  ptrdiff_t offset(size_t r, size_t c) const {
    return rowOffset(r) + static_cast<ptrdiff_t>(c) * col_stride;
  }
};

enum class RouterKind : int {
  top_k_softmax,       // MoeGatingTopKSoftmax
  top_k_softmax_grad,  // MoeGatingTopKSoftmaxGrad
  top_k,               // MoeGatingTopK
  top_k_grad,          // MoeGatingTopKGrad
  weights,             // MoeGatingWeights: MoeGatingTopK's y for a given expert_idx
};

// R rows of E experts, k selected per row. Views absent where the operator has no such tensor
// or the caller passed none.
struct RouterPlan : Plan {
  RouterKind kind = RouterKind::top_k_softmax;
  infiniDtype_t dtype = INFINI_DTYPE_INVALID;  // of x, y, grad_x, grad_y: F32, F16 or BF16
  size_t rows = 0, experts = 0, k = 0;         // R, E, k
  // MoeGatingTopKSoftmax(Grad): renorm 1 selects on x and normalizes over the k. MoeGatingTopK:
  // always false (renorm must be 0).
  bool renorm = false;
  // MoeGatingTopK(Grad): norm_type 1 (p = sigmoid(x)); norm_type 2, a library extension
  // (DeepSeek-V4: p = sqrt(softplus(x)), normalized as sigmoid); else p = softmax(x).
  bool sigmoid = false, sqrt_softplus = false;
  // MoeGatingTopK: group_count groups of experts / group_count; group_count 1 = no groups.
  size_t group_count = 1, k_group = 1;
  // 0: a group's max v; 1: the sum of its two largest v; 2 (Megatron / TransformerEngine): the sum
  // of its k / k_group largest v. groupBest() is how many each mode sums.
  int group_select_mode = 0;
  float scale = 1.0f, eps = 0.0f;  // routed_scaling_factor and eps rounded to F32 (top_k, grad)

  // Forward outputs: y (R, k) x's dtype; expert_idx (R, k) I32/I64; row_idx (R, k) I32/I64
  // (top_k_softmax, nullable); probs (R, E) F32: softmax_out / norm_out (nullable).
  RouterView y, expert_idx, row_idx, probs;
  // Forward inputs: x (R, E); finished (R, cols 1) BOOL bytes (top_k_softmax(_grad), nullable);
  // bias (1 row, E) of x's dtype or F32 (top_k, nullable).
  RouterView x, finished, bias;
  // Grads: grad_x (R, E) output; grad_y (R, k) input; expert_idx (above) an input, its values
  // checked on the host to be in [0, E) (finished rows: any value). MoeGatingWeights: y (above)
  // its output, x and expert_idx (an input, checked as the grads') its inputs.
  RouterView grad_x, grad_y;

  // The number of a group's largest v (in selection order) whose sum is its score.
  size_t groupBest() const {
    return group_select_mode == 0 ? 1 : group_select_mode == 1 ? 2 : k / k_group;
  }
  // p_j is a function of x_j alone (sigmoid, sqrtsoftplus): normalized over the selected k.
  bool elementwise() const { return sigmoid || sqrt_softplus; }
};

// One call's device addresses; NULL where the plan's view is absent.
struct RouterData {
  void *y, *expert_idx, *row_idx, *probs;  // forwards
  void *grad_x;                            // grads
  const void *x, *finished, *bias, *grad_y;
  const void *expert_idx_in;  // grads and MoeGatingWeights: expert_idx
  void *workspace;
};

// Made once at descriptor creation by the device's kernel table; run() is called
// after every check of the call has passed (with R > 0) and writes every output of the plan. It
// may still fail (a pointer that is not device memory of the handle) but writes nothing before
// it has checked everything; the work is queued on `stream` where the device has streams.
class RouterRunner : public Runner {
 public:
  virtual infiniStatus_t run(const RouterData &data, void *stream) const = 0;
};

}  // namespace infiniop::moe

namespace infiniop::family {

// The four router operators as host devices run them: a synchronous function of host memory per
// kernel.
INFINIOP_HOST_FAMILY(MoeRouter, moe::RouterPlan, const moe::RouterData &data);

}  // namespace infiniop::family
