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

#include "cpu/math-inl.h"
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
  return hn::IfThenElse(exact, Unscale(hn::Mul(value, x2), unscale), out);
}

template <class Activation, class D, class V>
HWY_NOINLINE void GatedBackwardExact(D d, V out_grad, V x1, V x2, V &grad1, V &grad2) {
  const auto exact = ExactLanes(d, x1, x1, Activation::kTailBound, grad1, grad2);
  V derivative, unscale;
  const V activation = Activation()(d, x1, &derivative, &unscale);
  grad1 =
      hn::IfThenElse(exact, Unscale(hn::Mul(hn::Mul(out_grad, x2), derivative), unscale), grad1);
  grad2 = hn::IfThenElse(exact, Unscale(hn::Mul(out_grad, activation), unscale), grad2);
}

template <class Activation>
struct Gated {
  static constexpr int kOutputs = 1, kInputs = 2;  // out <- (x1, x2)

  template <class D, class V>
  HWY_INLINE void operator()(D d, V &out, V x1, V x2) const {
    const typename Activation::template At<V> act(d, x1);
    out = act.Value(d, x2);
    if (HWY_UNLIKELY(!FastPathHolds(d, x1, x1, Activation::kTailBound, out))) {
      out = GatedExact<Activation>(d, x1, x2, out);
    }
  }
};

template <class Activation>
struct GatedBackward {
  static constexpr int kOutputs = 2, kInputs = 3;  // (grad1, grad2) <- (out_grad, x1, x2)

  template <class D, class V>
  HWY_INLINE void operator()(D d, V &grad1, V &grad2, V out_grad, V x1, V x2) const {
    const typename Activation::template At<V> act(d, x1);
    V g_lo;
    const V g = ProductPair(d, out_grad, x2, &g_lo);
    grad1 = act.Slope(d, g, &g_lo);
    grad2 = act.Value(d, out_grad);
    if (HWY_UNLIKELY(!FastPathHolds(d, x1, x1, Activation::kTailBound, grad1, grad2))) {
      GatedBackwardExact<Activation>(d, out_grad, x1, x2, grad1, grad2);
    }
  }
};

// An activation: its fast path (At), its exact path (operator(), math-inl.h) and the input below
// which its tail takes the exact path.
struct SiluActivation {
  template <class V>
  using At = SiluAt<V>;
  static constexpr float kTailBound = kSiluTailBound;
  template <class D, class V>
  HWY_INLINE V operator()(D d, V x, V *derivative, V *unscale) const {
    return Silu(d, x, derivative, unscale);
  }
};
struct GeluErfActivation {
  template <class V>
  using At = GeluErfAt<V>;
  static constexpr float kTailBound = kGeluErfTailBound;
  template <class D, class V>
  HWY_INLINE V operator()(D d, V x, V *derivative, V *unscale) const {
    return GeluErf(d, x, derivative, unscale);
  }
};
struct GeluTanhActivation {
  template <class V>
  using At = GeluTanhAt<V>;
  static constexpr float kTailBound = kGeluTanhTailBound;
  template <class D, class V>
  HWY_INLINE V operator()(D d, V x, V *derivative, V *unscale) const {
    return GeluTanh(d, x, derivative, unscale);
  }
};

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // INFINIOP_CPU_GATED_INL_H_
