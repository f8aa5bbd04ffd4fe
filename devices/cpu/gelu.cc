// SPDX-License-Identifier: Apache-2.0
// Gelu on the cpu device, erf and tanh: the activation alone (GeluMul without its multiplier),
// one Highway body for every target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/gelu.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "cpu/elementwise-inl.h"
#include "cpu/gated-inl.h"
#include "cpu/parallel.h"
#include "cpu/table-inl.h"
#include "hwy/highway.h"
#include "kernels/list.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {

template <class Activation, class D, class V>
HWY_NOINLINE V ActivatedExact(D d, V input, V output) {  // out of line, as GatedExact
  const auto exact = ExactLanes(d, input, input, Activation::kTailBound, output);
  V unscale;
  const V value = Activation()(d, input, static_cast<V *>(nullptr), &unscale);
  return hn::IfThenElse(exact, Unscale(value, unscale), output);
}

template <class Activation>
struct Activated {
  static constexpr int kOutputs = 1, kInputs = 1;  // output <- input
  using Oracle = exact::Activated<Activation::kExact>;

  template <class D, class V>
  HWY_INLINE void operator()(D d, V &output, V input) const {
    output = Activation::WithAt(
        d, input, [&](const auto &act) __attribute__((always_inline)) { return act.Value(d); });
    if (HWY_UNLIKELY(!FastPathHolds(d, input, input, Activation::kTailBound, output))) {
      output = ActivatedExact<Activation>(d, input, output);
    }
  }
  // For a 16-bit output (RoundedOnce): the exact value rounded once, from the table; no lane is
  // near a boundary.
  static constexpr bool kTabled = true, kFinalFromTables = true;
  template <class T>
  static ActivationTables Tables() {
    return {roundedTable<Activation::kExact, IsBf16<T>()>(), nullptr, nullptr, nullptr};
  }
  template <class D, class T, class V>
  HWY_INLINE auto ToRoundFromTables(D d, const ActivationTables &tables, const T *storage,
                                    V &output, V input) const {
    output = Lookup(d, tables.value, input, storage);
    return hn::FirstN(d, 0);
  }
  // For an F32 output in the relaxed mode, as Gated::Relaxed.
  static constexpr bool kRelaxed = Activation::kRelaxed;
  template <class D, class V>
  HWY_INLINE void Relaxed(D d, V &output, V input) const {
    output = Activation::RelaxedValue(d, input, hn::Set(d, 1.0f));
    if (HWY_UNLIKELY(!FastPathHolds(d, input, input, Activation::kTailBound, output))) {
      output = ActivatedExact<Activation>(d, input, output);
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
