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
#include "cpu_reference/gated.h"
#include "cpu_reference/gelu.h"
#include "cpu_reference/sigmoid.h"
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

// The 16-bit error bound (ErrorBound) of an exact-path result in the far-left tail, in place of
// the fast path's, whose terms are taken at its clamp, far above the tail's values: the tail's
// value and slope are computed scaled and hold K u |result| (1 + c) (c: the activation's
// TailCondition, its rounded argument's), down to its clamp (kTailClamp), below which every lane
// is near. Other lanes keep `bound`.
template <class Activation, int K, class D, class M, class V>
HWY_INLINE V TailBound(D d, M exact, V x, V result, V bound) {
  const auto tail = hn::And(exact, hn::Lt(x, hn::Set(d, Activation::kTailBound)));
  const V relative = ErrorBound<K>(d, hn::Abs(result), Activation::TailCondition(d, x));
  const V inf = hn::Set(d, HUGE_VALF);
  return hn::IfThenElse(
      tail, hn::IfThenElse(hn::Lt(x, hn::Set(d, Activation::kTailClamp)), inf, relative), bound);
}

template <class Activation, class D, class V>
HWY_NOINLINE void GatedBackwardExact(D d, V out_grad, V x1, V x2, V &grad1, V &grad2, V *bound1,
                                     V *bound2) {
  const auto exact = ExactLanes(d, x1, x1, Activation::kTailBound, grad1, grad2);
  V derivative, unscale;
  const V activation = Activation()(d, x1, &derivative, &unscale);
  grad1 =
      hn::IfThenElse(exact, Unscale(hn::Mul(hn::Mul(out_grad, x2), derivative), unscale), grad1);
  grad2 = hn::IfThenElse(exact, UnscaleProduct(d, activation, out_grad, unscale), grad2);
  if (bound1 != nullptr) {  // the 16-bit path
    *bound1 = TailBound<Activation, 6>(d, exact, x1, grad1, *bound1);
    *bound2 = TailBound<Activation, 6>(d, exact, x1, grad2, *bound2);
  }
}

// The F32 steps within which a forward value x2 act(x1) (or act(x) alone) lies of the exact one
// (elementwise-inl.h's RoundedOnce): its bound K u |value| (docs/accuracy.md; the value never
// cancels, and c = 0) is within 2K steps of the value, a step in the binade below being half as
// large, plus one for a subnormal's absolute 2^-149 and one to spare.
constexpr uint32_t RoundingWindow(int k) {
  return static_cast<uint32_t>(2 * k + 2);
}

// The oracle of a forward functor: the reference's, in double, where the activation's values are
// correctly rounded (kRoundsOnce), else none.
template <class Activation, class Reference>
using ValueOracle = std::conditional_t<Activation::kRoundsOnce, Reference, void>;

template <class Activation>
struct Gated {
  static constexpr int kOutputs = 1, kInputs = 2;  // out <- (x1, x2)
  using Oracle = ValueOracle<Activation, cpu_reference::Gated<Activation::kExact>>;

  template <class D, class V>
  HWY_INLINE void operator()(D d, V &out, V x1, V x2) const {
    out = Activation::WithAt(
        d, x1, [&](const auto &act) __attribute__((always_inline)) { return act.Value(d, x2); });
    if (HWY_UNLIKELY(!FastPathHolds(d, x1, x1, Activation::kTailBound, out))) {
      out = GatedExact<Activation>(d, x1, x2, out);
    }
  }
  // For a 16-bit output (RoundedOnce): the activation's evaluation, within RoundingWindow.
  template <class D, class V>
  HWY_INLINE auto RoundingWindow(D d, V x1, V /*x2*/) const {
    return Activation::ValueWindow(d, x1);
  }
  template <class D, class V>
  HWY_INLINE void ToRound(D d, V &out, V x1, V x2) const {
    Short<false>(d, out, x1, x2);
  }
  // For an F32 output in the relaxed mode (elementwise-inl.h's RelaxedF32), where the activation
  // has one: the same short evaluation with the same bits on every target, within K = 8.
  static constexpr bool kRelaxed = Activation::kRelaxed;
  template <class D, class V>
  HWY_INLINE void Relaxed(D d, V &out, V x1, V x2) const {
    Short<true>(d, out, x1, x2);
  }

 private:
  template <bool kSameBits, class D, class V>
  HWY_INLINE void Short(D d, V &out, V x1, V x2) const {
    out = Activation::template ValueShort<kSameBits>(d, x1, x2);
    if (HWY_UNLIKELY(!FastPathHolds(d, x1, x1, Activation::kTailBound, out))) {
      out = GatedExact<Activation>(d, x1, x2, out);
    }
  }
};

template <class Activation>
struct GatedBackward {
  static constexpr int kOutputs = 2, kInputs = 3;  // (grad1, grad2) <- (out_grad, x1, x2)
  // 16-bit outputs: this F32 path, each output within its ErrorBound (K = 6, as the F32 bound).
  static constexpr bool kErrorBounds = true;
  using Oracle = cpu_reference::GatedBackward<Activation::kExact, Activation::kExactDerivative>;

  template <class D, class V>
  HWY_INLINE void operator()(D d, V &grad1, V &grad2, V out_grad, V x1, V x2) const {
    Evaluate(d, grad1, grad2, static_cast<V *>(nullptr), static_cast<V *>(nullptr), out_grad, x1,
             x2);
  }
  template <class D, class V>
  HWY_INLINE void ToRound(D d, V &grad1, V &grad2, V &bound1, V &bound2, V out_grad, V x1,
                          V x2) const {
    Evaluate(d, grad1, grad2, &bound1, &bound2, out_grad, x1, x2);
  }
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
      GatedBackwardExact<Activation>(d, out_grad, x1, x2, grad1, grad2, static_cast<V *>(nullptr),
                                     static_cast<V *>(nullptr));
    }
  }

 private:
  // The bounds only where asked for (not null: the 16-bit path).
  template <class D, class V>
  HWY_INLINE void Evaluate(D d, V &grad1, V &grad2, V *bound1, V *bound2, V out_grad, V x1,
                           V x2) const {
    V g_lo;
    const V g = ProductPair(d, out_grad, x2, &g_lo);
    Activation::WithAt(
        d, x1, [&](const auto &act) __attribute__((always_inline)) {
          grad1 = act.Slope(d, g, &g_lo);
          grad2 = act.Value(d, out_grad);
          if (bound1 != nullptr) {
            const V c = act.Condition(d);
            *bound1 = ErrorBound<6>(d, hn::Mul(hn::Abs(g), act.SlopeTerms(d)), c);
            *bound2 = ErrorBound<6>(d, hn::Abs(grad2), c);
          }
        });
    if (HWY_UNLIKELY(!FastPathHolds(d, x1, x1, Activation::kTailBound, grad1, grad2))) {
      GatedBackwardExact<Activation>(d, out_grad, x1, x2, grad1, grad2, bound1, bound2);
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
  // The tail's clamp and its condition (TailBound).
  static constexpr float kTailClamp = -175.0f;
  template <class D, class V>
  static HWY_INLINE V TailCondition(D d, V /*x*/) {
    return hn::Zero(d);
  }
  static constexpr double (*kExact)(double) = cpu_reference::silu;
  static constexpr double (*kExactDerivative)(double) = cpu_reference::siluDerivative;
  // The 16-bit path's own evaluation (SiluValueShort: 5u, not SwiGlu's K = 4).
  static constexpr bool kRoundsOnce = true;
  template <class D, class V>
  static HWY_INLINE uint32_t ValueWindow(D, V) {
    return RoundingWindow(7);
  }
  // The relaxed F32 value (ValueShort<true>): 1.2x the strict rate in cache (AVX3); value and
  // derivative for the gradients (SiluRelaxed).
  static constexpr bool kRelaxed = true;
  template <class D, class V>
  static HWY_INLINE V Relaxed(D d, V x, V *derivative) {
    return SiluRelaxed(d, x, derivative);
  }
  template <bool kSameBits, class D, class V>
  static HWY_INLINE V ValueShort(D d, V x, V g) {
    return SiluValueShort<kSameBits>(d, x, g);
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
  // The tail's clamp and its condition (TailBound).
  static constexpr float kTailClamp = -18.7f;
  template <class D, class V>
  static HWY_INLINE V TailCondition(D d, V /*x*/) {
    return hn::Zero(d);
  }
  static constexpr double (*kExact)(double) = cpu_reference::geluErf;
  static constexpr double (*kExactDerivative)(double) = cpu_reference::geluErfDerivative;
  // The 16-bit path's own evaluation (GeluErfValueShort: K = 9, not GeluMul's 5).
  static constexpr bool kRoundsOnce = true;
  template <class D, class V>
  static HWY_INLINE uint32_t ValueWindow(D, V) {
    return RoundingWindow(9);
  }
  // The relaxed F32 value (ValueShort<true>): 1.3-1.4x the strict rate in cache (AVX3); value
  // and derivative for the gradients (GeluErfRelaxed).
  static constexpr bool kRelaxed = true;
  template <class D, class V>
  static HWY_INLINE V Relaxed(D d, V x, V *derivative) {
    return GeluErfRelaxed(d, x, derivative);
  }
  template <bool kSameBits, class D, class V>
  static HWY_INLINE V ValueShort(D d, V x, V g) {
    return GeluErfValueShort<kSameBits>(d, x, g);
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
  // The tail's clamp and its condition (TailBound).
  static constexpr float kTailClamp = -12.9f;
  template <class D, class V>
  static HWY_INLINE V TailCondition(D d, V x) {
    return hn::Abs(GeluTanhArgument(d, hn::Max(x, hn::Set(d, -13.0f))));
  }
  static constexpr double (*kExact)(double) = cpu_reference::geluTanh;
  static constexpr double (*kExactDerivative)(double) = cpu_reference::geluTanhDerivative;
  // The 16-bit path's own evaluation (GeluTanhValueShort: v as an exact pair, 5u) and a window
  // per lane: K = 9, wider in the tail, whose exact path rounds v (GeluTanhRoundingWindow).
  static constexpr bool kRoundsOnce = true;
  template <class D, class V>
  static HWY_INLINE auto ValueWindow(D d, V x) {
    return GeluTanhRoundingWindow(d, x);
  }
  static constexpr bool kRelaxed = true;
  template <class D, class V>
  static HWY_INLINE V Relaxed(D d, V x, V *derivative) {
    return GeluTanhRelaxed(d, x, derivative);
  }
  // The relaxed F32 value is g x s from the rounded v (GeluTanhRelaxed, as the strict exact
  // path): the short one with v as a pair measured no faster than the strict (0.9-1.0x).
  template <bool kSameBits, class D, class V>
  static HWY_INLINE V ValueShort(D d, V x, V g) {
    if constexpr (kSameBits) {
      return hn::Mul(g, GeluTanhRelaxed(d, x, static_cast<V *>(nullptr)));
    } else {
      return GeluTanhValueShort(d, x, g);
    }
  }
  template <class D, class V>
  HWY_INLINE V operator()(D d, V x, V *derivative, V *unscale) const {
    return GeluTanh(d, x, derivative, unscale);
  }
};

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // INFINIOP_CPU_GATED_INL_H_
