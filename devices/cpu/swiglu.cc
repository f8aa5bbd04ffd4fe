// SPDX-License-Identifier: Apache-2.0
// SwiGlu and SwiGluBackward on the cpu device: the gated activation with silu.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/swiglu.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "cpu/elementwise-inl.h"
#include "cpu/gated-inl.h"
#include "cpu/parallel.h"
#include "hwy/highway.h"
#include "ops/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
using SwiGlu = Gated<SiluActivation>;
using SwiGluBackward = GatedBackward<SiluActivation>;
}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

INFINIOP_CPU_ELEMENTWISE_RANGE(swiglu, SwiGlu);
INFINIOP_CPU_ELEMENTWISE_RANGE(swiglu_backward, SwiGluBackward);

#if HWY_ONCE
INFINIOP_CPU_ELEMENTWISE_DISPATCH(swiglu)
INFINIOP_CPU_ELEMENTWISE_DISPATCH(swiglu_backward)
#endif
