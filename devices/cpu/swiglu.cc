// SPDX-License-Identifier: Apache-2.0
// SwiGlu on the cpu device: the gated activation with silu; the backward is swiglu_backward.cc.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/swiglu.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "cpu/elementwise-inl.h"
#include "cpu/gated-inl.h"
#include "cpu/parallel.h"
#include "hwy/highway.h"
#include "kernels/list.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
using SwiGlu = Gated<SiluActivation>;
}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

INFINIOP_CPU_ELEMENTWISE_RANGE(swiglu, SwiGlu);

#if HWY_ONCE
INFINIOP_CPU_ELEMENTWISE_DISPATCH(swiglu)
#endif
