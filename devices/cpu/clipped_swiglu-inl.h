// SPDX-License-Identifier: Apache-2.0
// Per-target halves of ClippedSwiglu shared by its forward (clipped_swiglu.cc) and backward
// (clipped_swiglu_backward.cc): the gate's fast path (ClippedAt, from WithClippedAt) and exact
// path (ClippedGate, from WithClippedGate).
#if defined(INFINIOP_CPU_CLIPPED_SWIGLU_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef INFINIOP_CPU_CLIPPED_SWIGLU_INL_H_
#undef INFINIOP_CPU_CLIPPED_SWIGLU_INL_H_
#else
#define INFINIOP_CPU_CLIPPED_SWIGLU_INL_H_
#endif

#include "cpu/math-inl.h"
#include "hwy/highway.h"
#include "ops/clipped_swiglu.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {

// The clamped halves and the gate g = a sigmoid(z), z = alpha a, the exact path. Where z < -87
// (the tail: sigmoid's exp leaves F32's normal range) g = a e^z and its slope (1 + z) e^z are
// scaled by 2^128 and `unscale` is 2^-128 (math-inl.h's tail rule), with z clamped at -175 and a
// moved with it; where a is infinite and z = -inf, g and its slope are their limits, 0. The
// clamps are selects so that NaN passes through them. A view of the vectors that WithClippedGate
// holds (as math-inl.h's Sigmoid).
template <class V>
struct ClippedGate {
  // v times the gate: a far-left gate of a finite non-zero a may underflow to 0 even scaled
  // (huge alpha moves a to the tiny tail_a), yet it is not 0, so an infinite v gives the
  // infinity of sign(a) sign(v) (SEMANTICS.md), as cpu_reference's timesGate.
  template <class D>
  HWY_INLINE V TimesGate(D d, V v) const {
    const auto underflow =
        hn::And(hn::Eq(g, hn::Zero(d)), hn::And(hn::IsFinite(a), hn::Ne(a, hn::Zero(d))));
    return hn::IfThenElse(hn::And(underflow, hn::IsInf(v)),
                          hn::Mul(v, hn::CopySign(hn::Set(d, 1.0f), a)), hn::Mul(v, g));
  }
  // b_bias: the gate's multiplier (b in clamp_mode 1); slope: only where want_slope
  const V &a, &b, &b_bias, &g, &slope, &unscale;
};

// Calls body(const ClippedGate<V> &) with the exact path's gate of A and B (and its slope where
// want_slope); returns what body returns (as WithSigmoid).
template <class D, class V, class Body>
HWY_INLINE auto WithClippedGate(D d, const ClippedSwigluAttributes &at, V A, V B, bool want_slope,
                                const Body &body) {
  const V limit = hn::Set(d, at.limit), a_limit = hn::Set(d, at.a_limit);
  const V a = hn::IfThenElse(hn::Gt(A, a_limit), a_limit, A);
  const V b = hn::IfThenElse(hn::Gt(B, limit), limit,
                             hn::IfThenElse(hn::Lt(B, hn::Neg(limit)), hn::Neg(limit), B));
  const V b_bias = at.clamp_mode == 1 ? b : hn::Add(b, hn::Set(d, at.bias));
  const V z = at.alpha == 0.0f ? hn::Zero(d) : hn::Mul(hn::Set(d, at.alpha), a);
  const auto far_left = hn::Lt(z, hn::Set(d, -87.0f));
  const V a_clamped = hn::IfThenElse(far_left, hn::Set(d, at.far_left_a), a);
  const V z_clamped = hn::IfThenElse(far_left, hn::Set(d, -87.0f), z);
  return WithSigmoid(
      d, z_clamped, [&](const Sigmoid<V> &sigmoid) __attribute__((always_inline)) {
        const auto beyond = hn::Lt(z, hn::Set(d, -175.0f));
        const V z_tail = hn::IfThenElse(beyond, hn::Set(d, -175.0f), z);
        const V a_tail = hn::IfThenElse(beyond, hn::Set(d, at.tail_a), a);
        const V e_tail =
            ScaledExpOfMinus(d, hn::Min(hn::Neg(z_tail), hn::Set(d, 175.0f)), hn::Zero(d));
        // An infinite a: 0 where z < 0 (a finite one whose alpha a overflows keeps its tiny
        // non-zero gate), else a itself (sigmoid > 0).
        const auto infinite = hn::IsInf(a);
        const auto minus_inf = hn::And(infinite, hn::Lt(z, hn::Zero(d)));
        // Beside the slope's work, a s: one rounding more than the corrected quotient (math-inl.h).
        V gate = want_slope ? hn::Mul(a_clamped, sigmoid.s) : sigmoid.Times(d, a_clamped);
        gate = hn::IfThenElse(far_left, hn::Mul(a_tail, e_tail), gate);
        // the limits at an infinite a: a itself, or a zero of a's sign (approached from a's side)
        const V g = hn::IfThenElse(
            infinite, hn::IfThenElse(minus_inf, hn::CopySign(hn::Zero(d), a), a), gate);
        const V unscale = TailUnscale(d, hn::AndNot(infinite, far_left));
        V slope;
        if (want_slope) {  // g'(a) = s + z s (1 - s); z s (1 - s) vanishes beyond z = 40
          const V capped = hn::Min(z_clamped, hn::Set(d, 40.0f));
          slope = hn::IfThenElse(far_left, Fma(d, z_tail, e_tail, e_tail),
                                 Fma(d, capped, sigmoid.Slope(), sigmoid.s));
          slope = hn::IfThenElse(minus_inf, hn::Set(d, -0.0f), slope);  // (1 + z) e^z, from below
        }
        return body(ClippedGate<V>{a, b, b_bias, g, slope, unscale});
      });
}

// The fast path, for a finite clamped a: the gate a sigmoid(z) as SiluAt's, each output's
// multiplier folded into its one corrected quotient (math-inl.h). ClippedGate stays the exact
// path of the special values (ExactLanes). A view of the clamped halves a and b, the gate's
// multiplier b_bias, z = alpha a, the gate's x (a moved where z < -87) and sigmoid(z), which
// WithClippedAt holds.
template <class V>
struct ClippedAt {
  template <class D>
  HWY_INLINE V Value(D d, V g) const {
    return sigmoid.ProductOver(d, g, x);
  }
  template <class D>
  HWY_INLINE V Slope(D d, V g, const V *g_lo) const {
    return sigmoid.SlopeTimes(d, SlopeFactor(d), g, g_lo);
  }
  // For ErrorBound: the gate's slope terms, and c: z = alpha a is rounded (u |z|), damped by the
  // sigmoid (Sigmoid::ArgumentCondition). In the tail (z < -87) these are the clamp's, far above
  // the tail's values: such lanes are near, and take the oracle.
  template <class D>
  HWY_INLINE V SlopeTerms(D d) const {
    return sigmoid.SlopeTerms(d, SlopeFactor(d));
  }
  template <class D>
  HWY_INLINE V Condition(D d) const {
    return sigmoid.ArgumentCondition(d, z, SlopeFactor(d));
  }
  template <class D>
  HWY_INLINE V SlopeFactor(D d) const {
    return hn::Clamp(z, hn::Set(d, -87.0f), hn::Set(d, 40.0f));
  }
  const V &a, &b, &b_bias, &z, &x;
  Sigmoid<V> sigmoid;  // a view itself
};

// The gate's multiplier b + bias, b = B clamped to [-limit, limit] (selects, not Min / Max, so
// that a NaN B reaches the results and the exact path), and *b where wanted. clamp_mode 1 adds
// no bias: b itself, so that a -0 b keeps its sign.
template <class D, class V>
HWY_INLINE V BiasedB(D d, const ClippedSwigluAttributes &at, V B, V *b = nullptr) {
  const V clamped =
      hn::IfThenElse(hn::Gt(B, hn::Set(d, at.limit)), hn::Set(d, at.limit),
                     hn::IfThenElse(hn::Lt(B, hn::Set(d, -at.limit)), hn::Set(d, -at.limit), B));
  if (b != nullptr) *b = clamped;
  return at.clamp_mode == 1 ? clamped : hn::Add(clamped, hn::Set(d, at.bias));
}

// Calls body(const ClippedAt<V> &) with the fast path's state of A and B; returns what body
// returns (as WithSigmoid).
template <class D, class V, class Body>
HWY_INLINE auto WithClippedAt(D d, const ClippedSwigluAttributes &at, V A, V B, const Body &body) {
  const V a = hn::IfThenElse(hn::Gt(A, hn::Set(d, at.a_limit)), hn::Set(d, at.a_limit), A);
  V b;
  const V b_bias = BiasedB(d, at, B, &b);
  // No test of alpha = 0 per vector (6 instructions): there z = +-0 for a finite a, whose sigmoid
  // and slope are 0's; an infinite a (0 a is NaN) takes the exact path, which keeps the case.
  const V z = hn::Mul(hn::Set(d, at.alpha), a);
  // where z < -87 (either sign of alpha) a moves to where z = -87, as in WithClippedGate
  const V x = hn::IfThenElse(hn::Lt(z, hn::Set(d, -87.0f)), hn::Set(d, at.far_left_a), a);
  const V v = hn::Max(z, hn::Set(d, -87.0f));
  return WithSigmoid(
      d, v, [&](const Sigmoid<V> &sigmoid) __attribute__((always_inline)) {
        return body(ClippedAt<V>{a, b, b_bias, z, x, sigmoid});
      });
}

// clamp_mode 1's clamp of the gate g = silu(A): v limit where g > limit (A > a_pass, decided
// exactly on the host), else v_gate = v g; clamp_mode 0 keeps v_gate. Such an A is positive, so
// its gate is never a scaled tail's. A select, so that a NaN A keeps v_gate's NaN.
template <class D, class V>
HWY_INLINE V GateClamped(D d, const ClippedSwigluAttributes &at, V A, V v, V v_gate) {
  if (at.clamp_mode != 1) return v_gate;
  return hn::IfThenElse(hn::Gt(A, hn::Set(d, at.a_pass)), hn::Mul(v, hn::Set(d, at.limit)), v_gate);
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // INFINIOP_CPU_CLIPPED_SWIGLU_INL_H_
