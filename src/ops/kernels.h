// SPDX-License-Identifier: Apache-2.0
// Every device's kernel entry points, declared from one list: adding an elementwise operator
// adds one line here, and the device folders define `void <name>(Plan, attributes, operands)`.
#pragma once

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
  X(clipped_swiglu_backward)
// clang-format on

#define INFINIOP_DECLARE_KERNEL(name)                                                     \
  void name(const elementwise::Plan &plan, const void *attributes, char *const *operands, \
            size_t begin, size_t end);

namespace infiniop {
namespace cpu_reference {
INFINIOP_ELEMENTWISE_OPS(INFINIOP_DECLARE_KERNEL)
}
#if INFINIOP_WITH_CPU
namespace cpu {
INFINIOP_ELEMENTWISE_OPS(INFINIOP_DECLARE_KERNEL)
}
#define INFINIOP_CPU_KERNEL(name) ::infiniop::cpu::name
#else
#define INFINIOP_CPU_KERNEL(name) nullptr
#endif
}  // namespace infiniop

#if INFINIOP_WITH_OPENCL
#include "opencl/sources.h"  // generated from devices/opencl/kernels/*.cl
#define INFINIOP_OPENCL_FUNCTOR(name) ::infiniop::opencl::sources::name
#else
#define INFINIOP_OPENCL_FUNCTOR(name) nullptr
#endif

// The kernel table of one operator (elementwise::KernelTable: cpu, opencl, cpu_reference).
#define INFINIOP_KERNEL_TABLE(name) \
  { INFINIOP_CPU_KERNEL(name), INFINIOP_OPENCL_FUNCTOR(name), ::infiniop::cpu_reference::name }
