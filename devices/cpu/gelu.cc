// SPDX-License-Identifier: Apache-2.0
// Gelu on the cpu device, erf and tanh: the activation alone (GeluMul without its multiplier),
// one Highway body for every target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/gelu.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "cpu/elementwise-inl.h"
#include "cpu/gated-inl.h"
#include "cpu/parallel.h"
#include "hwy/highway.h"
#include "ops/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {

template <class Activation>
struct Activated {
  static constexpr int kOutputs = 1, kInputs = 1;  // output <- input

  template <class D, class V>
  HWY_INLINE void operator()(D d, V &output, V input) const {
    output = typename Activation::template At<V>(d, input).Value(d);
    if (HWY_UNLIKELY(!FastPathHolds(d, input, output))) {  // the exact path, for those lanes only
      const auto exact = ExactLanes(d, input, output);
      output = hn::IfThenElse(exact, Activation()(d, input, static_cast<V *>(nullptr)), output);
    }
  }
};
using GeluErfForward = Activated<GeluErfActivation>;
using GeluTanhForward = Activated<GeluTanhActivation>;

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

INFINIOP_CPU_ELEMENTWISE_RANGE(gelu_erf, GeluErfForward);
INFINIOP_CPU_ELEMENTWISE_RANGE(gelu_tanh, GeluTanhForward);

#if HWY_ONCE
INFINIOP_CPU_ELEMENTWISE_DISPATCH(gelu_erf)
INFINIOP_CPU_ELEMENTWISE_DISPATCH(gelu_tanh)
#endif
