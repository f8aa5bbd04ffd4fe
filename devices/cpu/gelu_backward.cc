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
#include "kernels/list.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {

template <class Activation, class D, class V>
HWY_NOINLINE void GeluBackwardExact(D d, V input, V grad_output, V &grad_input) {
  const auto exact = ExactLanes(d, input, input, Activation::kTailBound, grad_input);
  V derivative, unscale;
  Activation()(d, input, &derivative, &unscale);
  grad_input =
      hn::IfThenElse(exact, Unscale(hn::Mul(derivative, grad_output), unscale), grad_input);
}

// grad_input = grad_output act'(input), the activation a type (gated-inl.h).
template <class Activation>
struct GeluBackwardOf {
  static constexpr int kOutputs = 1, kInputs = 2;  // grad_input <- (input, grad_output)
  using Oracle = exact::GeluBackward<Activation::kExactDerivative>;

  template <class D, class V>
  HWY_INLINE void operator()(D d, V &grad_input, V input, V grad_output) const {
    Activation::WithAt(
        d, input, [&](const auto &act) __attribute__((always_inline)) {
          grad_input = act.Slope(d, grad_output, static_cast<const V *>(nullptr));
        });
    if (HWY_UNLIKELY(!FastPathHolds(d, input, input, Activation::kTailBound, grad_input))) {
      GeluBackwardExact<Activation>(d, input, grad_output, grad_input);
    }
  }
  // For a 16-bit output (RoundedOnce): grad_output act'(input), act' from its factor table.
  static constexpr bool kTabled = true;
  template <class T>
  static ActivationTables Tables() {
    const FactorTable derivative = factorTable<Activation::kExactDerivative, IsBf16<T>()>();
    return {nullptr, nullptr, derivative.hi, derivative.lo};
  }
  template <class D, class T, class V>
  HWY_INLINE auto ToRoundFromTables(D d, const ActivationTables &tables, const T *storage,
                                    V &grad_input, V input, V grad_output) const {
    grad_input = hn::Mul(grad_output, Lookup(d, tables.derivative, input, storage));
    return TableNear(d, grad_input, storage);
  }
  // Its near lanes, where the pairs decide (table-inl.h's DecideBeside); returns the oracle's.
  static constexpr bool kDecides = true;
  template <class D, class T, class V>
  HWY_INLINE auto Resolve(D d, const ActivationTables &tables, const T *storage, V &grad_input,
                          V input, V grad_output) const {
    auto open = hn::IsNaN(grad_input);
    grad_input =
        DecideBeside(d, grad_input, Lookup(d, tables.derivative, input, storage),
                     Lookup(d, tables.derivative_lo, input, storage), grad_output, &open, storage);
    return open;
  }
  // F32 outputs in the relaxed mode, as GatedBackward::Relaxed.
  static constexpr bool kRelaxed = Activation::kRelaxed;
  template <class D, class V>
  HWY_INLINE void Relaxed(D d, V &grad_input, V input, V grad_output) const {
    V derivative;
    Activation::Relaxed(d, input, &derivative);
    grad_input = hn::Mul(derivative, grad_output);
    if (HWY_UNLIKELY(!FastPathHolds(d, input, input, Activation::kTailBound, grad_input))) {
      GeluBackwardExact<Activation>(d, input, grad_output, grad_input);
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
