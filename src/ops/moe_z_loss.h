// SPDX-License-Identifier: Apache-2.0
// The router z-loss (MoeZLoss, MoeZLossGrad: ST-MoE, Megatron-LM's z_loss_func) as the devices
// see it: one validated plan per descriptor, fixed at creation, and the data pointers of one
// call. The arithmetic every device follows is docs/moe_z_loss.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "infinicore.h"
#include "kernels/host_family.h"
#include "ops/moe_gating.h"

namespace infiniop::moe {

enum class ZLossKind : int {
  forward,  // MoeZLoss
  grad,     // MoeZLossGrad
};

// The forward's rows per block: z_t summed in row order from +0 within a block of this many
// rows, the blocks' sums then in block order from +0 (never a split that depends on threads).
inline constexpr size_t kZLossBlockRows = 256;

inline size_t zLossBlocks(size_t rows) {
  return (rows + kZLossBlockRows - 1) / kZLossBlockRows;
}

// T rows of E logits. MoeZLoss: x (T, E) -> loss () F32. MoeZLossGrad: grad_loss () F32 and
// x -> grad_x (T, E), x's dtype.
struct ZLossPlan : Plan {
  ZLossKind kind = ZLossKind::forward;
  infiniDtype_t dtype = INFINI_DTYPE_INVALID;  // of x (and grad_x): F32, F16 or BF16
  size_t rows = 0, experts = 0;                // T (may be 0), E >= 1
  double coeff = 0.0;                          // as given (the reference device's)
  // The forward's coeff / max(T, 1) and the grad's 2 coeff / max(T, 1), each computed in double
  // and rounded once to F32 at creation (finite: checked).
  float scale = 0.0f;
  RouterView x, loss, grad_x, grad_loss;  // loss, grad_loss: one element (rows 1, cols 1)
};

// One call's device addresses (NULL where the operator has no such tensor).
struct ZLossData {
  void *loss;             // MoeZLoss
  void *grad_x;           // MoeZLossGrad
  const void *grad_loss;  // MoeZLossGrad
  const void *x;
  void *workspace;
};

// Made once at descriptor creation by the device's kernel table; run() is called after every
// check of the call has passed and writes every output of the plan (the loss with T = 0 too).
class ZLossRunner : public Runner {
 public:
  virtual infiniStatus_t run(const ZLossData &data, void *stream) const = 0;
};

}  // namespace infiniop::moe

namespace infiniop::family {

// The two z-loss operators as host devices run them: a synchronous function of host memory per
// kernel.
INFINIOP_HOST_FAMILY(MoeZLoss, moe::ZLossPlan, const moe::ZLossData &data);

}  // namespace infiniop::family
