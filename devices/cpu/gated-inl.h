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

template <class Activation>
struct Gated {
  static constexpr int kOutputs = 1, kInputs = 2;  // out <- (x1, x2)

  template <class D, class V>
  HWY_INLINE void operator()(D d, V &out, V x1, V x2) const {
    const typename Activation::template At<V> act(d, x1);
    out = act.Value(d, x2);
    if (HWY_UNLIKELY(!FastPathHolds(d, x1, out))) {  // the exact path, for those lanes only
      const auto exact = ExactLanes(d, x1, out);
      out = hn::IfThenElse(exact, hn::Mul(Activation()(d, x1, static_cast<V *>(nullptr)), x2), out);
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
    // the special values' exact path, for those lanes only
    if (HWY_UNLIKELY(!FastPathHolds(d, x1, grad1, grad2))) {
      const auto exact = ExactLanes(d, x1, grad1, grad2);
      V derivative;
      const V activation = Activation()(d, x1, &derivative);
      grad1 = hn::IfThenElse(exact, hn::Mul(hn::Mul(out_grad, x2), derivative), grad1);
      grad2 = hn::IfThenElse(exact, hn::Mul(out_grad, activation), grad2);
    }
  }
};

struct SiluActivation {
  template <class V>
  using At = SiluAt<V>;
  template <class D, class V>
  HWY_INLINE V operator()(D d, V x, V *derivative) const {
    return Silu(d, x, derivative);
  }
};
struct GeluErfActivation {
  template <class V>
  using At = GeluErfAt<V>;
  template <class D, class V>
  HWY_INLINE V operator()(D d, V x, V *derivative) const {
    return GeluErf(d, x, derivative);
  }
};
struct GeluTanhActivation {
  template <class V>
  using At = GeluTanhAt<V>;
  template <class D, class V>
  HWY_INLINE V operator()(D d, V x, V *derivative) const {
    return GeluTanh(d, x, derivative);
  }
};

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // INFINIOP_CPU_GATED_INL_H_
