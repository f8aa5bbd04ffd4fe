// SPDX-License-Identifier: Apache-2.0
// The operators' kernels as every device knows them: one list, written once. Adding an
// elementwise operator adds one line here; each device folder maps the id to its own kernel (a
// host function, a functor source a driver compiles, ...) in its device table.
#pragma once

#include <cstddef>

#include "elementwise/plan.h"

// clang-format off
#define INFINIOP_ELEMENTWISE_OPS(X) \
  X(copy)                           \
  X(gelu_backward)                  \
  X(swiglu)                         \
  X(swiglu_backward)                \
  X(gelu_mul_erf)                   \
  X(gelu_mul_tanh)                  \
  X(gelu_mul_backward_erf)          \
  X(gelu_mul_backward_tanh)         \
  X(clipped_swiglu)                 \
  X(clipped_swiglu_backward)        \
  X(gelu_erf)                       \
  X(gelu_tanh)                      \
  X(gelu_backward_erf)
// The gather framework's operators (src/ops/moe_finalize_routing.h, moe_init_routing.h,
// moe_gating.h).
#define INFINIOP_GATHER_OPS(X)     \
  X(moe_finalize_routing)          \
  X(moe_finalize_routing_grad)     \
  X(moe_init_routing)              \
  X(moe_init_routing_grad)         \
  X(moe_gating_top_k_softmax)      \
  X(moe_gating_top_k_softmax_grad) \
  X(moe_gating_top_k)              \
  X(moe_gating_top_k_grad)
// clang-format on

namespace infiniop {

#define INFINIOP_KERNEL_ID(name) name,
// What a device is asked to run. Elementwise ids come first: [0, kElementwiseCount).
enum class KernelId : int {
  INFINIOP_ELEMENTWISE_OPS(INFINIOP_KERNEL_ID) INFINIOP_GATHER_OPS(INFINIOP_KERNEL_ID)
};
#undef INFINIOP_KERNEL_ID

#define INFINIOP_COUNT_KERNEL(name) +1
constexpr int kElementwiseKernelCount = 0 INFINIOP_ELEMENTWISE_OPS(INFINIOP_COUNT_KERNEL);
#undef INFINIOP_COUNT_KERNEL

}  // namespace infiniop

// Declares a host device's elementwise kernel `name` (in the enclosing namespace):
// INFINIOP_ELEMENTWISE_OPS(INFINIOP_DECLARE_KERNEL) declares them all.
#define INFINIOP_DECLARE_KERNEL(name)                                          \
  void name(const ::infiniop::elementwise::Plan &plan, const void *attributes, \
            char *const *operands, size_t begin, size_t end);
