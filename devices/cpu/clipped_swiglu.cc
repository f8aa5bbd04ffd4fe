// SPDX-License-Identifier: Apache-2.0
// ClippedSwiglu and ClippedSwigluBackward on the cpu device, one Highway body for every target.
// The interleaved split reaches the functor as two operands like any other; the framework
// deinterleaves them (PairedRow).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/clipped_swiglu.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "cpu/elementwise-inl.h"
#include "cpu/math-inl.h"
#include "cpu/parallel.h"
#include "hwy/highway.h"
#include "ops/clipped_swiglu.h"
#include "ops/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {

// The clamped halves and the gate g = a sigmoid(z), z = alpha a. Where z < -87 (sigmoid's exp
// is clamped there) a is moved to where z = -87, so g stays a tiny number of a's sign
// (|g| < 87/|alpha| 1.7e-38) instead of growing with |a|; where a is infinite and z = -inf, g
// and its slope are their limits, 0. The clamps are selects so that NaN passes through them.
template <class V>
struct ClippedGate {
  template <class D>
  HWY_INLINE ClippedGate(D d, const ClippedSwigluAttributes &at, V A, V B, bool want_slope) {
    const V limit = hn::Set(d, at.limit);
    a = hn::IfThenElse(hn::Gt(A, limit), limit, A);
    b = hn::IfThenElse(hn::Gt(B, limit), limit,
                       hn::IfThenElse(hn::Lt(B, hn::Neg(limit)), hn::Neg(limit), B));
    const V z = at.alpha == 0.0f ? hn::Zero(d) : hn::Mul(hn::Set(d, at.alpha), a);
    const auto far_left = hn::Lt(z, hn::Set(d, -87.0f));
    const V a_clamped =
        hn::IfThenElse(far_left, hn::Set(d, at.alpha == 0.0f ? 0.0f : -87.0f / at.alpha), a);
    const V z_clamped = hn::IfThenElse(far_left, hn::Set(d, -87.0f), z);
    const Sigmoid<V> sigmoid(d, z_clamped);
    // An infinite a: 0 where z < 0 (a finite one whose alpha a overflows keeps its tiny
    // non-zero gate), else a itself (sigmoid > 0).
    const auto infinite = hn::IsInf(a);
    const auto minus_inf = hn::And(infinite, hn::Lt(z, hn::Zero(d)));
    // Beside the slope's work, a s: one rounding more than the corrected quotient (math-inl.h).
    const V gate = want_slope ? hn::Mul(a_clamped, sigmoid.s) : sigmoid.Times(d, a_clamped);
    g = hn::IfThenElse(infinite, hn::IfThenZeroElse(minus_inf, a), gate);
    if (want_slope) {  // g'(a) = s + z s (1 - s); z s (1 - s) vanishes beyond z = 40
      const V capped = hn::Min(z_clamped, hn::Set(d, 40.0f));
      slope = hn::IfThenZeroElse(minus_inf, hn::MulAdd(capped, sigmoid.Slope(), sigmoid.s));
    }
  }
  V a, b, g, slope;
};

// The fast path, for a finite clamped a: the gate a sigmoid(z) as SiluAt's, each output's
// multiplier folded into its one corrected quotient (math-inl.h). ClippedGate stays the exact
// path of the special values (ExactLanes).
template <class V>
struct ClippedAt {
  template <class D>
  HWY_INLINE ClippedAt(D d, const ClippedSwigluAttributes &at, V A, V B)
      : a(hn::IfThenElse(hn::Gt(A, hn::Set(d, at.limit)), hn::Set(d, at.limit), A)),
        // selects, not Min / Max, so that a NaN B reaches the results (and the exact path)
        b(hn::IfThenElse(
            hn::Gt(B, hn::Set(d, at.limit)), hn::Set(d, at.limit),
            hn::IfThenElse(hn::Lt(B, hn::Set(d, -at.limit)), hn::Set(d, -at.limit), B))),
        b_bias(hn::Add(b, hn::Set(d, at.bias))),
        z(at.alpha == 0.0f ? hn::Zero(d) : hn::Mul(hn::Set(d, at.alpha), a)),
        // where z < -87 (either sign of alpha) a moves to where z = -87, as in ClippedGate
        x(hn::IfThenElse(hn::Lt(z, hn::Set(d, -87.0f)),
                         hn::Set(d, at.alpha == 0.0f ? 0.0f : -87.0f / at.alpha), a)),
        sigmoid(d, hn::Max(z, hn::Set(d, -87.0f))) {}
  template <class D>
  HWY_INLINE V Value(D d, V g) const {
    return sigmoid.ProductOver(d, g, x);
  }
  template <class D>
  HWY_INLINE V Slope(D d, V g, const V *g_lo) const {
    return sigmoid.SlopeTimes(d, hn::Clamp(z, hn::Set(d, -87.0f), hn::Set(d, 40.0f)), g, g_lo);
  }
  V a, b, b_bias, z, x;
  Sigmoid<V> sigmoid;
};

struct ClippedSwiglu : ClippedSwigluAttributes {
  static constexpr int kOutputs = 1, kInputs = 2;  // y <- (A, B)

  template <class D, class V>
  HWY_INLINE void operator()(D d, V &y, V A, V B) const {
    const ClippedAt<V> fast(d, *this, A, B);
    y = fast.Value(d, fast.b_bias);
    if (HWY_UNLIKELY(!FastPathHolds(d, fast.a, y))) {  // the exact path, for those lanes only
      const auto exact = ExactLanes(d, fast.a, y);
      const ClippedGate<V> c(d, *this, A, B, false);
      y = hn::IfThenElse(exact, hn::Mul(c.g, hn::Add(c.b, hn::Set(d, bias))), y);
    }
  }
};

struct ClippedSwigluBackward : ClippedSwigluAttributes {
  static constexpr int kOutputs = 2, kInputs = 3;  // (dA, dB) <- (dy, A, B)

  template <class D, class V>
  HWY_INLINE void operator()(D d, V &dA, V &dB, V dy, V A, V B) const {
    const ClippedAt<V> fast(d, *this, A, B);
    // dy (b + bias) from b + bias as a pair: its rounding would count in full where b is small.
    V b_bias_lo, g_lo;
    const V b_bias = SumPair(fast.b, hn::Set(d, bias), &b_bias_lo);
    const V g = ProductPair(d, dy, b_bias, &g_lo);
    g_lo = hn::MulAdd(dy, b_bias_lo, g_lo);
    dA = fast.Slope(d, g, &g_lo);
    dB = fast.Value(d, dy);
    if (HWY_UNLIKELY(!FastPathHolds(d, fast.a, dA, dB))) {  // the exact path, for those lanes only
      const auto exact = ExactLanes(d, fast.a, dA, dB);
      const ClippedGate<V> c(d, *this, A, B, true);
      // dy (b + bias) first, unless that alone overflows from finite factors (bias near
      // FLT_MAX): then dy slope first, which overflows only where dA does.
      const V b_bias_exact = hn::Add(c.b, hn::Set(d, bias));
      const V g_exact = hn::Mul(dy, b_bias_exact);
      const auto overflowed =
          hn::AndNot(hn::IsFinite(g_exact), hn::And(hn::IsFinite(dy), hn::IsFinite(b_bias_exact)));
      const V dA_exact = hn::IfThenElse(overflowed, hn::Mul(hn::Mul(dy, c.slope), b_bias_exact),
                                        hn::Mul(g_exact, c.slope));
      dA = hn::IfThenElse(exact, dA_exact, dA);
      // A far-left gate of a finite non-zero a may underflow to 0 (|a_clamped s| < 2^-149 when
      // alpha is huge); times an infinite dy its limit is an infinity of a's sign times dy's.
      const auto gate_underflow =
          hn::And(hn::Eq(c.g, hn::Zero(d)), hn::And(hn::IsFinite(c.a), hn::Ne(c.a, hn::Zero(d))));
      const V dB_exact =
          hn::IfThenElse(hn::And(gate_underflow, hn::IsInf(dy)),
                         hn::Mul(dy, hn::CopySign(hn::Set(d, 1.0f), c.a)), hn::Mul(dy, c.g));
      dB = hn::IfThenElse(exact, dB_exact, dB);
    }
    const V limit = hn::Set(d, this->limit);
    dA = hn::IfThenElseZero(hn::Le(A, limit), dA);
    const auto inside = hn::And(hn::Ge(B, hn::Neg(limit)), hn::Le(B, limit));
    dB = hn::IfThenElseZero(inside, dB);
  }
};

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

INFINIOP_CPU_ELEMENTWISE_RANGE(clipped_swiglu, ClippedSwiglu);
INFINIOP_CPU_ELEMENTWISE_RANGE(clipped_swiglu_backward, ClippedSwigluBackward);

#if HWY_ONCE
INFINIOP_CPU_ELEMENTWISE_DISPATCH(clipped_swiglu)
INFINIOP_CPU_ELEMENTWISE_DISPATCH(clipped_swiglu_backward)
#endif
