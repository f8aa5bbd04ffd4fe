// SPDX-License-Identifier: Apache-2.0
// GeluBackward (tanh) and GeluBackwardV2's erf form on the cpu device, one Highway body for
// every target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/gelu_backward.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "cpu/elementwise-inl.h"
#include "cpu/gated-inl.h"
#include "cpu/parallel.h"
#include "hwy/highway.h"
#include "ops/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {

template <class Activation, class D, class V>
HWY_NOINLINE void GeluBackwardExact(D d, V input, V grad_output, V &grad_input, V *bound) {
  const auto exact = ExactLanes(d, input, input, Activation::kTailBound, grad_input);
  V derivative, unscale;
  Activation()(d, input, &derivative, &unscale);
  grad_input =
      hn::IfThenElse(exact, Unscale(hn::Mul(derivative, grad_output), unscale), grad_input);
  if (bound != nullptr) *bound = TailBound<Activation, 4>(d, exact, input, grad_input, *bound);
}

// grad_input = grad_output act'(input), the activation a type (gated-inl.h).
template <class Activation>
struct GeluBackwardOf {
  static constexpr int kOutputs = 1, kInputs = 2;  // grad_input <- (input, grad_output)
  // 16-bit outputs: this F32 path within its ErrorBound (K = 4, as the F32 bound).
  static constexpr bool kErrorBounds = true;
  using Oracle = cpu_reference::GeluBackward<Activation::kExactDerivative>;

  template <class D, class V>
  HWY_INLINE void operator()(D d, V &grad_input, V input, V grad_output) const {
    Evaluate(d, grad_input, static_cast<V *>(nullptr), input, grad_output);
  }
  template <class D, class V>
  HWY_INLINE void ToRound(D d, V &grad_input, V &bound, V input, V grad_output) const {
    Evaluate(d, grad_input, &bound, input, grad_output);
  }
  // F32 outputs in the relaxed mode, as GatedBackward::Relaxed.
  static constexpr bool kRelaxed = Activation::kRelaxed;
  template <class D, class V>
  HWY_INLINE void Relaxed(D d, V &grad_input, V input, V grad_output) const {
    V derivative;
    Activation::Relaxed(d, input, &derivative);
    grad_input = hn::Mul(derivative, grad_output);
    if (HWY_UNLIKELY(!FastPathHolds(d, input, input, Activation::kTailBound, grad_input))) {
      GeluBackwardExact<Activation>(d, input, grad_output, grad_input, static_cast<V *>(nullptr));
    }
  }

 private:
  // The bound only where asked for (not null: the 16-bit path).
  template <class D, class V>
  HWY_INLINE void Evaluate(D d, V &grad_input, V *bound, V input, V grad_output) const {
    Activation::WithAt(
        d, input, [&](const auto &act) __attribute__((always_inline)) {
          grad_input = act.Slope(d, grad_output, static_cast<const V *>(nullptr));
          if (bound != nullptr) {
            *bound = ErrorBound<4>(d, hn::Mul(hn::Abs(grad_output), act.SlopeTerms(d)),
                                   act.Condition(d));
          }
        });
    if (HWY_UNLIKELY(!FastPathHolds(d, input, input, Activation::kTailBound, grad_input))) {
      GeluBackwardExact<Activation>(d, input, grad_output, grad_input, bound);
    }
  }
};
using GeluBackward = GeluBackwardOf<GeluTanhActivation>;
using GeluBackwardErf = GeluBackwardOf<GeluErfActivation>;

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

INFINIOP_CPU_ELEMENTWISE_RANGE(gelu_backward, GeluBackward);
INFINIOP_CPU_ELEMENTWISE_RANGE(gelu_backward_erf, GeluBackwardErf);

#if HWY_ONCE
INFINIOP_CPU_ELEMENTWISE_DISPATCH(gelu_backward)
INFINIOP_CPU_ELEMENTWISE_DISPATCH(gelu_backward_erf)
#endif
