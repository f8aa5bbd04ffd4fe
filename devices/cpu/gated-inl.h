// SPDX-License-Identifier: Apache-2.0
// Per-target functors of the gated activations: out = act(x1) * x2 and its gradient,
// grad1 = dy * x2 * act'(x1), grad2 = dy * act(x1). SwiGlu (act = silu) and GeluMul (act = gelu,
// erf or tanh) are instances; an Activation is `V operator()(D, V x, V *derivative) const`,
// derivative null when unwanted (math-inl.h).
#if defined(INFINIOP_CPU_GATED_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef INFINIOP_CPU_GATED_INL_H_
#undef INFINIOP_CPU_GATED_INL_H_
#else
#define INFINIOP_CPU_GATED_INL_H_
#endif

#include <cmath>
#include <type_traits>

#include "cpu/math-inl.h"
#include "cpu/table-inl.h"
#include "exact/gated.h"
#include "exact/gelu.h"
#include "exact/sigmoid.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {

// The exact paths, out of line: one instance per functor and target, called only for a vector
// with a lane that needs it (FastPathHolds), so that the rare path costs neither code size nor
// registers in the row loops. Each result is unscaled last (math-inl.h's Unscale).
template <class Activation, class D, class V>
HWY_NOINLINE V GatedExact(D d, V x1, V x2, V out) {
  const auto exact = ExactLanes(d, x1, x1, Activation::kTailBound, out);
  V unscale;
  const V value = Activation()(d, x1, static_cast<V *>(nullptr), &unscale);
  return hn::IfThenElse(exact, UnscaleProduct(d, value, x2, unscale), out);
}

template <class Activation, class D, class V>
HWY_NOINLINE void GatedBackwardExact(D d, V out_grad, V x1, V x2, V &grad1, V &grad2) {
  const auto exact = ExactLanes(d, x1, x1, Activation::kTailBound, grad1, grad2);
  V derivative, unscale;
  const V activation = Activation()(d, x1, &derivative, &unscale);
  grad1 =
      hn::IfThenElse(exact, Unscale(hn::Mul(hn::Mul(out_grad, x2), derivative), unscale), grad1);
  grad2 = hn::IfThenElse(exact, UnscaleProduct(d, activation, out_grad, unscale), grad2);
}

template <class Activation>
struct Gated {
  static constexpr int kOutputs = 1, kInputs = 2;  // out <- (x1, x2)
  using Oracle = exact::Gated<Activation::kExact>;

  template <class D, class V>
  HWY_INLINE void operator()(D d, V &out, V x1, V x2) const {
    out = Activation::WithAt(
        d, x1, [&](const auto &act) __attribute__((always_inline)) { return act.Value(d, x2); });
    if (HWY_UNLIKELY(!FastPathHolds(d, x1, x1, Activation::kTailBound, out))) {
      out = GatedExact<Activation>(d, x1, x2, out);
    }
  }
  // For a 16-bit output (RoundedOnce): x2 act(x1), act(x1) from its factor table.
  static constexpr bool kTabled = true;
  template <class T>
  static ActivationTables Tables() {
    const FactorTable value = factorTable<Activation::kExact, IsBf16<T>()>();
    return {value.hi, value.lo, nullptr, nullptr};
  }
  template <class D, class T, class V>
  HWY_INLINE auto ToRoundFromTables(D d, const ActivationTables &tables, const T *storage, V &out,
                                    V x1, V x2) const {
    out = hn::Mul(Lookup(d, tables.value, x1, storage), x2);
    return TableNear(d, out, storage);
  }
  // Its near lanes, where the pairs decide (table-inl.h's DecideBeside); returns the oracle's.
  static constexpr bool kDecides = true;
  template <class D, class T, class V>
  HWY_INLINE auto Resolve(D d, const ActivationTables &tables, const T *storage, V &out, V x1,
                          V x2) const {
    auto open = hn::IsNaN(out);
    out = DecideBeside(d, out, Lookup(d, tables.value, x1, storage),
                       Lookup(d, tables.value_lo, x1, storage), x2, &open, storage);
    return open;
  }
  // For an F32 output in the relaxed mode (elementwise-inl.h's RelaxedF32), where the activation
  // has one: a short evaluation with the same bits on every target, within K = 8.
  static constexpr bool kRelaxed = Activation::kRelaxed;
  template <class D, class V>
  HWY_INLINE void Relaxed(D d, V &out, V x1, V x2) const {
    out = Activation::RelaxedValue(d, x1, x2);
    if (HWY_UNLIKELY(!FastPathHolds(d, x1, x1, Activation::kTailBound, out))) {
      out = GatedExact<Activation>(d, x1, x2, out);
    }
  }
};

template <class Activation>
struct GatedBackward {
  static constexpr int kOutputs = 2, kInputs = 3;  // (grad1, grad2) <- (out_grad, x1, x2)
  using Oracle = exact::GatedBackward<Activation::kExact, Activation::kExactDerivative>;

  template <class D, class V>
  HWY_INLINE void operator()(D d, V &grad1, V &grad2, V out_grad, V x1, V x2) const {
    V g_lo;
    const V g = ProductPair(d, out_grad, x2, &g_lo);
    Activation::WithAt(
        d, x1, [&](const auto &act) __attribute__((always_inline)) {
          grad1 = act.Slope(d, g, &g_lo);
          grad2 = act.Value(d, out_grad);
        });
    if (HWY_UNLIKELY(!FastPathHolds(d, x1, x1, Activation::kTailBound, grad1, grad2))) {
      GatedBackwardExact<Activation>(d, out_grad, x1, x2, grad1, grad2);
    }
  }
  // For 16-bit outputs (RoundedOnce): grad1 = (dy x2) act'(x1), grad2 = dy act(x1) from the
  // factor tables. dy x2 is exact (two 16-bit significands fit F32's) but where it overflows or
  // underflows: an overflow is caught here; an underflow's rounding (half a subnormal step) times
  // act' (below 1.2) keeps grad1 inside the window (table-inl.h; F16's never underflow).
  static constexpr bool kTabled = true;
  template <class T>
  static ActivationTables Tables() {
    const FactorTable value = factorTable<Activation::kExact, IsBf16<T>()>();
    const FactorTable derivative = factorTable<Activation::kExactDerivative, IsBf16<T>()>();
    return {value.hi, value.lo, derivative.hi, derivative.lo};
  }
  template <class D, class T, class V>
  HWY_INLINE auto ToRoundFromTables(D d, const ActivationTables &tables, const T *storage, V &grad1,
                                    V &grad2, V out_grad, V x1, V x2) const {
    const V g = hn::Mul(out_grad, x2);
    grad1 = hn::Mul(g, Lookup(d, tables.derivative, x1, storage));
    grad2 = hn::Mul(out_grad, Lookup(d, tables.value, x1, storage));
    const auto near =
        hn::Or(TableBoundaryNear(d, grad1, storage), TableBoundaryNear(d, grad2, storage));
    return hn::Or(near, Unsettled(d, grad1, grad2, storage));
  }
  // Its near lanes, where the pairs decide (table-inl.h's DecideBeside); returns the oracle's.
  static constexpr bool kDecides = true;
  template <class D, class T, class V>
  HWY_INLINE auto Resolve(D d, const ActivationTables &tables, const T *storage, V &grad1, V &grad2,
                          V out_grad, V x1, V x2) const {
    auto open = Unsettled(d, grad1, grad2, storage);
    grad1 = DecideBeside(d, grad1, Lookup(d, tables.derivative, x1, storage),
                         Lookup(d, tables.derivative_lo, x1, storage), hn::Mul(out_grad, x2), &open,
                         storage);
    grad2 = DecideBeside(d, grad2, Lookup(d, tables.value, x1, storage),
                         Lookup(d, tables.value_lo, x1, storage), out_grad, &open, storage);
    return open;
  }

 private:
  // The lanes that only the oracle settles: a NaN, or grad1 infinite from dy x2's overflow with a
  // finite exact value (BF16; F16's dy x2 is below 2^32).
  template <class D, class T, class V>
  static HWY_INLINE auto Unsettled(D d, V grad1, V grad2, const T *) {
    const auto nan2 = hn::IsNaN(grad2);
    if constexpr (IsBf16<T>()) {
      return hn::Or(nan2, hn::Not(hn::Lt(hn::Abs(grad1), hn::Set(d, HUGE_VALF))));
    } else {
      return hn::Or(nan2, hn::IsNaN(grad1));
    }
  }

 public:
  // F32 outputs in the relaxed mode, where the activation has one (its Relaxed: value and
  // derivative without the pairs), the same bits on every target: K = 8.
  static constexpr bool kRelaxed = Activation::kRelaxed;
  template <class D, class V>
  HWY_INLINE void Relaxed(D d, V &grad1, V &grad2, V out_grad, V x1, V x2) const {
    V derivative;
    const V value = Activation::Relaxed(d, x1, &derivative);
    grad1 = hn::Mul(hn::Mul(out_grad, x2), derivative);
    grad2 = hn::Mul(out_grad, value);
    if (HWY_UNLIKELY(!FastPathHolds(d, x1, x1, Activation::kTailBound, grad1, grad2))) {
      GatedBackwardExact<Activation>(d, out_grad, x1, x2, grad1, grad2);
    }
  }
};

// An activation: its fast path (WithAt: calls a body with the *At view of x, math-inl.h), its
// exact path (operator(), math-inl.h) and the input below which its tail takes the exact path.
struct SiluActivation {
  template <class D, class V, class Body>
  static HWY_INLINE auto WithAt(D d, V x, const Body &body) {
    return WithSiluAt(d, x, body);
  }
  static constexpr float kTailBound = kSiluTailBound;
  static constexpr double (*kExact)(double) = exact::silu;
  static constexpr double (*kExactDerivative)(double) = exact::siluDerivative;
  // The relaxed F32 value and, for the gradients, value and derivative (SiluRelaxed): 1.2x the
  // strict rate in cache (AVX3).
  static constexpr bool kRelaxed = true;
  template <class D, class V>
  static HWY_INLINE V Relaxed(D d, V x, V *derivative) {
    return SiluRelaxed(d, x, derivative);
  }
  template <class D, class V>
  static HWY_INLINE V RelaxedValue(D d, V x, V g) {
    return SiluValueShort(d, x, g);
  }
  template <class D, class V>
  HWY_INLINE V operator()(D d, V x, V *derivative, V *unscale) const {
    return Silu(d, x, derivative, unscale);
  }
};
struct GeluErfActivation {
  template <class D, class V, class Body>
  static HWY_INLINE auto WithAt(D d, V x, const Body &body) {
    return WithGeluErfAt(d, x, body);
  }
  static constexpr float kTailBound = kGeluErfTailBound;
  static constexpr double (*kExact)(double) = exact::geluErf;
  static constexpr double (*kExactDerivative)(double) = exact::geluErfDerivative;
  // The relaxed F32 value and, for the gradients, value and derivative (GeluErfRelaxed):
  // 1.3-1.4x the strict rate in cache (AVX3).
  static constexpr bool kRelaxed = true;
  template <class D, class V>
  static HWY_INLINE V Relaxed(D d, V x, V *derivative) {
    return GeluErfRelaxed(d, x, derivative);
  }
  template <class D, class V>
  static HWY_INLINE V RelaxedValue(D d, V x, V g) {
    return GeluErfValueShort(d, x, g);
  }
  template <class D, class V>
  HWY_INLINE V operator()(D d, V x, V *derivative, V *unscale) const {
    return GeluErf(d, x, derivative, unscale);
  }
};
struct GeluTanhActivation {
  template <class D, class V, class Body>
  static HWY_INLINE auto WithAt(D d, V x, const Body &body) {
    return WithGeluTanhAt(d, x, body);
  }
  static constexpr float kTailBound = kGeluTanhTailBound;
  static constexpr double (*kExact)(double) = exact::geluTanh;
  static constexpr double (*kExactDerivative)(double) = exact::geluTanhDerivative;
  static constexpr bool kRelaxed = true;
  template <class D, class V>
  static HWY_INLINE V Relaxed(D d, V x, V *derivative) {
    return GeluTanhRelaxed(d, x, derivative);
  }
  // g x s from the rounded v (GeluTanhRelaxed, as the strict exact path).
  template <class D, class V>
  static HWY_INLINE V RelaxedValue(D d, V x, V g) {
    return hn::Mul(g, GeluTanhRelaxed(d, x, static_cast<V *>(nullptr)));
  }
  template <class D, class V>
  HWY_INLINE V operator()(D d, V x, V *derivative, V *unscale) const {
    return GeluTanh(d, x, derivative, unscale);
  }
};

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // INFINIOP_CPU_GATED_INL_H_
