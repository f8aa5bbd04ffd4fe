// SPDX-License-Identifier: Apache-2.0
// The load-balancing auxiliary losses (MoeAuxLoss, MoeAuxLossGrad: Megatron-LM's Switch and
// sequence-level losses, fused from the router's logits) as the devices see them: one validated
// plan per descriptor, fixed at creation, and the data pointers of one call, whose counts have
// been checked on the host to be in [0, 2^24] before a kernel runs. The arithmetic every device
// follows is docs/moe_aux_loss.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "infinicore.h"
#include "kernels/host_family.h"
#include "ops/moe_gating.h"

namespace infiniop::moe {

// The rows' values v_t are summed in blocks of this many rows (in row order from +0), the block
// sums then in block order from +0: a fixed order, whatever the thread count or device.
inline constexpr size_t kAuxLossBlock = 256;
// The largest count: every count is then exact in F32.
inline constexpr int64_t kAuxLossMaxCount = int64_t{1} << 24;
// The normalized sigmoid's (and sqrtsoftplus's) epsilon, Megatron's 1e-20, rounded to F32.
inline constexpr float kAuxLossEps = 1e-20f;

enum class AuxScore : int { softmax = 0, sigmoid = 1, sqrtsoftplus = 2 };

// T rows of E experts, B sequences (B = 1: the Switch loss); row t counts with n[t % B].
struct AuxLossPlan : Plan {
  bool grad = false;  // MoeAuxLossGrad
  AuxScore score = AuxScore::softmax;
  infiniDtype_t dtype = INFINI_DTYPE_INVALID;   // of x and grad_x: F32, F16 or BF16
  size_t rows = 0, experts = 0, sequences = 1;  // T, E, B
  float scale = 0.0f;                           // K = coeff E / (k B L^2), rounded to F32 once
  double exact_scale = 0.0;                     // K in double (cpu_reference's oracle)
  RouterView x;                                 // (T, E)
  RouterView counts;                            // (B, E) I32/I64
  RouterView loss;                              // MoeAuxLoss: () F32 (1 row of 1)
  RouterView grad_x;                            // MoeAuxLossGrad: (T, E) x's dtype
  RouterView grad_loss;                         // MoeAuxLossGrad: () F32
};

// One call's device addresses (NULL where the operator has no such tensor).
struct AuxLossData {
  const void *x, *counts, *grad_loss;
  void *loss, *grad_x;
  void *workspace;
};

// Made once at descriptor creation by the device's kernel table; run() is called after every
// check of the call has passed and writes every output of the plan (the loss is 0 with no rows).
class AuxLossRunner : public Runner {
 public:
  virtual infiniStatus_t run(const AuxLossData &data, void *stream) const = 0;
};

}  // namespace infiniop::moe

namespace infiniop::family {

// The two aux-loss operators as host devices run them: a synchronous function of host memory per
// kernel.
INFINIOP_HOST_FAMILY(MoeAuxLoss, moe::AuxLossPlan, const moe::AuxLossData &data);

}  // namespace infiniop::family
