// SPDX-License-Identifier: Apache-2.0
// SwiGluBackward on the cpu device (gated-inl.h's GatedBackward with silu).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/swiglu_backward.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "cpu/elementwise-inl.h"
#include "cpu/gated-inl.h"
#include "cpu/parallel.h"
#include "hwy/highway.h"
#include "kernels/list.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
using SwiGluBackward = GatedBackward<SiluActivation>;
}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

INFINIOP_CPU_ELEMENTWISE_RANGE(swiglu_backward, SwiGluBackward);

#if HWY_ONCE
INFINIOP_CPU_ELEMENTWISE_DISPATCH(swiglu_backward)
#endif
