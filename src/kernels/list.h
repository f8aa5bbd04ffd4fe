// SPDX-License-Identifier: Apache-2.0
// Every kernel a device is asked to run, with its family: one list, written once. Adding an
// operator adds a line here; each device then defines the kernel under the id's name (a host
// function, a functor source a driver compiles, ...) and its kernel table (core/kernel.h) picks
// it up from this list. A family is a struct in family:: (kernels/families.h includes them)
// that says what its plan and host kernels are and how a host runs them.
#pragma once

// clang-format off
// The elementwise family first (ids [0, kElementwiseKernelCount)), so that a device may keep a
// table of its elementwise functors alone.
#define INFINIOP_ELEMENTWISE_KERNELS(X)             \
  X(Elementwise, copy)                              \
  X(Elementwise, gelu_backward)                     \
  X(Elementwise, swiglu)                            \
  X(Elementwise, swiglu_backward)                   \
  X(Elementwise, gelu_mul_erf)                      \
  X(Elementwise, gelu_mul_tanh)                     \
  X(Elementwise, gelu_mul_backward_erf)             \
  X(Elementwise, gelu_mul_backward_tanh)            \
  X(Elementwise, clipped_swiglu)                    \
  X(Elementwise, clipped_swiglu_backward)           \
  X(Elementwise, gelu_erf)                          \
  X(Elementwise, gelu_tanh)                         \
  X(Elementwise, gelu_backward_erf)
#define INFINIOP_KERNELS(X)                         \
  INFINIOP_ELEMENTWISE_KERNELS(X)                   \
  X(MoeForward, moe_finalize_routing)               \
  X(MoeGrad, moe_finalize_routing_grad)             \
  X(MoeInit, moe_init_routing)                      \
  X(MoeForward, moe_init_routing_grad)              \
  X(MoeRouter, moe_gating_top_k_softmax)            \
  X(MoeRouter, moe_gating_top_k_softmax_grad)       \
  X(MoeRouter, moe_gating_top_k)                    \
  X(MoeRouter, moe_gating_top_k_grad)               \
  X(MoeRouter, moe_gating_weights)                  \
  X(MoeCounts, moe_expert_counts)                   \
  X(MoeCounts, moe_bias_update)                     \
  X(MoeCounts, moe_expert_capacity)                 \
  X(MoeAuxLoss, moe_aux_loss)                       \
  X(MoeAuxLoss, moe_aux_loss_grad)                  \
  X(MoeZLoss, moe_z_loss)                           \
  X(MoeZLoss, moe_z_loss_grad)                      \
  X(GatedQuant, swiglu_quant)                       \
  X(GatedQuant, gelu_mul_quant)                     \
  X(GatedQuant, clipped_swiglu_quant)               \
  X(DequantSwigluQuant, dequant_swiglu_quant)       \
  X(MoeInit, moe_init_routing_quant)
// clang-format on

namespace infiniop {

#define INFINIOP_KERNEL_ID(Family, name) name,
enum class KernelId : int { INFINIOP_KERNELS(INFINIOP_KERNEL_ID) };
#undef INFINIOP_KERNEL_ID

#define INFINIOP_COUNT_KERNEL(Family, name) +1
constexpr int kKernelCount = 0 INFINIOP_KERNELS(INFINIOP_COUNT_KERNEL);
constexpr int kElementwiseKernelCount = 0 INFINIOP_ELEMENTWISE_KERNELS(INFINIOP_COUNT_KERNEL);
#undef INFINIOP_COUNT_KERNEL

}  // namespace infiniop
