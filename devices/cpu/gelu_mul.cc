// SPDX-License-Identifier: Apache-2.0
// GeluMul on the cpu device: the gated activation with gelu. The approximation is a type, chosen
// at descriptor creation, so the loop never branches on it. The backward is gelu_mul_backward.cc
// (one translation unit each, so that they compile in parallel and a change rebuilds one).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/gelu_mul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "cpu/elementwise-inl.h"
#include "cpu/gated-inl.h"
#include "cpu/parallel.h"
#include "hwy/highway.h"
#include "kernels/list.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
using GeluMulErf = Gated<GeluErfActivation>;
using GeluMulTanh = Gated<GeluTanhActivation>;
}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

INFINIOP_CPU_ELEMENTWISE_RANGE(gelu_mul_erf, GeluMulErf);
INFINIOP_CPU_ELEMENTWISE_RANGE(gelu_mul_tanh, GeluMulTanh);

#if HWY_ONCE
INFINIOP_CPU_ELEMENTWISE_DISPATCH(gelu_mul_erf)
INFINIOP_CPU_ELEMENTWISE_DISPATCH(gelu_mul_tanh)
#endif
