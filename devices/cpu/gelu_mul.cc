// SPDX-License-Identifier: Apache-2.0
// GeluMul and GeluMulBackward on the cpu device: the gated activation with gelu. The
// approximation is a type, chosen at descriptor creation, so the loop never branches on it.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/gelu_mul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "cpu/elementwise-inl.h"
#include "cpu/gated-inl.h"
#include "cpu/parallel.h"
#include "hwy/highway.h"
#include "ops/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
using GeluMulErf = Gated<GeluErfActivation>;
using GeluMulTanh = Gated<GeluTanhActivation>;
using GeluMulBackwardErf = GatedBackward<GeluErfActivation>;
using GeluMulBackwardTanh = GatedBackward<GeluTanhActivation>;
}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

INFINIOP_CPU_ELEMENTWISE_RANGE(gelu_mul_erf, GeluMulErf);
INFINIOP_CPU_ELEMENTWISE_RANGE(gelu_mul_tanh, GeluMulTanh);
INFINIOP_CPU_ELEMENTWISE_RANGE(gelu_mul_backward_erf, GeluMulBackwardErf);
INFINIOP_CPU_ELEMENTWISE_RANGE(gelu_mul_backward_tanh, GeluMulBackwardTanh);

#if HWY_ONCE
INFINIOP_CPU_ELEMENTWISE_DISPATCH(gelu_mul_erf)
INFINIOP_CPU_ELEMENTWISE_DISPATCH(gelu_mul_tanh)
INFINIOP_CPU_ELEMENTWISE_DISPATCH(gelu_mul_backward_erf)
INFINIOP_CPU_ELEMENTWISE_DISPATCH(gelu_mul_backward_tanh)
#endif
