// SPDX-License-Identifier: Apache-2.0
// ClippedSwigluBackward on the cpu device (clipped_swiglu-inl.h's gate and its slope).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/clipped_swiglu_backward.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "cpu/clipped_gate_table.h"
#include "cpu/clipped_swiglu-inl.h"
#include "cpu/elementwise-inl.h"
#include "cpu/math-inl.h"
#include "cpu/parallel.h"
#include "cpu/table-inl.h"
#include "exact/clipped_swiglu.h"
#include "hwy/highway.h"
#include "ops/clipped_swiglu.h"
#include "kernels/list.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {

template <class D, class V>
HWY_NOINLINE void ClippedSwigluBackwardExact(D d, const ClippedSwigluAttributes &at, V dy, V A, V B,
                                             V a, V z, V &dA, V &dB) {
  const auto exact = ExactLanes(d, a, z, -87.0f, dA, dB);
  WithClippedGate(
      d, at, A, B, true, [&](const ClippedGate<V> &c) __attribute__((always_inline)) {
        // dy (b + bias) first, unless that alone overflows from finite factors (bias near FLT_MAX):
        // then dy slope first, which overflows only where dA does.
        const V b_bias_exact = c.b_bias;
        const V g_exact = hn::Mul(dy, b_bias_exact);
        const auto overflowed = hn::AndNot(hn::IsFinite(g_exact),
                                           hn::And(hn::IsFinite(dy), hn::IsFinite(b_bias_exact)));
        const V dA_exact = hn::IfThenElse(overflowed, hn::Mul(hn::Mul(dy, c.slope), b_bias_exact),
                                          hn::Mul(g_exact, c.slope));
        dA = hn::IfThenElse(exact, Unscale(dA_exact, c.unscale), dA);
        dB = hn::IfThenElse(exact,
                            Unscale(GateClamped(d, at, A, dy, c.TimesGate(d, dy)), c.unscale), dB);
      });
}

struct ClippedSwigluBackward : ClippedSwigluAttributes {
  static constexpr int kOutputs = 2, kInputs = 3;  // (dA, dB) <- (dy, A, B)
  static constexpr bool kPaired = true;
  // 16-bit outputs: this F32 path, each output within its ErrorBound (K = 6, as the F32 bound).
  static constexpr bool kErrorBounds = true;
  using Oracle = exact::ClippedSwigluBackward;

  template <class D, class V>
  HWY_INLINE void operator()(D d, V &dA, V &dB, V dy, V A, V B) const {
    Evaluate(d, dA, dB, static_cast<V *>(nullptr), static_cast<V *>(nullptr), dy, A, B);
  }
  template <class D, class V>
  HWY_INLINE void ToRound(D d, V &dA, V &dB, V &bound_a, V &bound_b, V dy, V A, V B) const {
    Evaluate(d, dA, dB, &bound_a, &bound_b, dy, A, B);
  }
  // Or, where this attribute set has tables (clipped_gate_table.h): dA = (dy s) g'(a) with s as
  // ClippedSwiglu's, within 3u of the oracle's value (the entry, s and dy s: a window of 8
  // steps), dB = dy G(A) within u (4 steps), each masked as Mask does. dA infinite or NaN (dy s
  // may overflow where the exact dA does not) and dB NaN take the oracle.
  static constexpr bool kTabled = true;
  template <class T>
  ActivationTables Tables() const {
    const ClippedGateTables t = clippedGateTables(*this, IsBf16<T>());
    return {t.gate, nullptr, t.slope, nullptr};
  }
  template <class D, class T, class V>
  HWY_INLINE auto ToRoundFromTables(D d, const ActivationTables &tables, const T *storage, V &dA,
                                    V &dB, V dy, V A, V B) const {
    dA = hn::Mul(hn::Mul(dy, BiasedB(d, *this, B)), Lookup(d, tables.derivative, A, storage));
    dB = hn::Mul(dy, Lookup(d, tables.value, A, storage));
    Mask(d, A, B, dA, dB);  // the masked lanes are exact zeros whatever their products were
    const auto near = hn::Or(TableBoundaryNear<kTableProductWindow + 4>(d, dA, storage),
                             TableBoundaryNear(d, dB, storage));
    return hn::Or(near, hn::Or(hn::Not(hn::Lt(hn::Abs(dA), hn::Set(d, HUGE_VALF))), hn::IsNaN(dB)));
  }
  // F32 outputs in the relaxed mode: the gate's slope s + z (e s) s and value x s as the exact
  // path's formulas (SiluRelaxed's), dy (b + bias) and dy times them rounded plainly; the same
  // bits on every target, K = 8.
  static constexpr bool kRelaxed = true;
  template <class D, class V>
  HWY_INLINE void Relaxed(D d, V &dA, V &dB, V dy, V A, V B) const {
    // fast's sigmoid's pairs unused: dropped
    WithClippedAt(
        d, *this, A, B, [&](const ClippedAt<V> &fast) __attribute__((always_inline)) {
          const Sigmoid<V> &sigmoid = fast.sigmoid;
          const V slope = Fma(d, fast.SlopeFactor(d), sigmoid.Slope(), sigmoid.s);
          dA = hn::Mul(hn::Mul(dy, fast.b_bias), slope);
          dB = GateClamped(d, *this, A, dy, hn::Mul(dy, hn::Mul(fast.x, sigmoid.s)));
          if (HWY_UNLIKELY(!FastPathHolds(d, fast.a, fast.z, -87.0f, dA, dB))) {
            ClippedSwigluBackwardExact(d, *this, dy, A, B, fast.a, fast.z, dA, dB);
          }
        });
    Mask(d, A, B, dA, dB);
  }

 private:
  // The clamped halves' gradients are exact zeros (and so are their bounds, where asked for).
  template <class D, class V>
  HWY_INLINE void Mask(D d, V A, V B, V &dA, V &dB, V *bound_a = nullptr,
                       V *bound_b = nullptr) const {
    const V limit = hn::Set(d, this->limit);
    const auto unclamped_a = hn::Le(A, hn::Set(d, a_pass));  // A <= limit; silu(A) <= limit
    const auto inside = hn::And(hn::Ge(B, hn::Neg(limit)), hn::Le(B, limit));
    dA = hn::IfThenElseZero(unclamped_a, dA);
    dB = hn::IfThenElseZero(inside, dB);
    if (bound_a != nullptr) {
      *bound_a = hn::IfThenElseZero(unclamped_a, *bound_a);
      *bound_b = hn::IfThenElseZero(inside, *bound_b);
    }
  }

  // The bounds only where asked for (not null: the 16-bit path).
  template <class D, class V>
  HWY_INLINE void Evaluate(D d, V &dA, V &dB, V *bound_a, V *bound_b, V dy, V A, V B) const {
    WithClippedAt(
        d, *this, A, B, [&](const ClippedAt<V> &fast) __attribute__((always_inline)) {
          // dy (b + bias) from b + bias as a pair: its rounding would count in full where b is
          // small. (clamp_mode 1: b exactly.)
          V b_bias_lo = hn::Zero(d), g_lo;
          const V b_bias =
              clamp_mode == 1 ? fast.b_bias : SumPair(fast.b, hn::Set(d, bias), &b_bias_lo);
          const V g = ProductPair(d, dy, b_bias, &g_lo);
          g_lo = Fma(d, dy, b_bias_lo, g_lo);
          dA = fast.Slope(d, g, &g_lo);
          dB = GateClamped(d, *this, A, dy, fast.Value(d, dy));
          if (HWY_UNLIKELY(!FastPathHolds(d, fast.a, fast.z, -87.0f, dA, dB))) {
            ClippedSwigluBackwardExact(d, *this, dy, A, B, fast.a, fast.z, dA, dB);
          }
          if (bound_a != nullptr) {
            const V c = fast.Condition(d);
            *bound_a = ErrorBound<6>(d, hn::Mul(hn::Abs(g), fast.SlopeTerms(d)), c);
            *bound_b =
                ErrorBound<6>(d, hn::Abs(GateClamped(d, *this, A, dy, fast.Value(d, dy))), c);
          }
        });
    Mask(d, A, B, dA, dB, bound_a, bound_b);
  }
};

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

INFINIOP_CPU_ELEMENTWISE_RANGE(clipped_swiglu_backward, ClippedSwigluBackward);

#if HWY_ONCE
INFINIOP_CPU_ELEMENTWISE_DISPATCH(clipped_swiglu_backward)
#endif
