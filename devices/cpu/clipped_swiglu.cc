// SPDX-License-Identifier: Apache-2.0
// ClippedSwiglu on the cpu device, one Highway body for every target. The interleaved split
// reaches the functor as two operands like any other; the framework deinterleaves them
// (PairedRow). The backward is clipped_swiglu_backward.cc.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/clipped_swiglu.cc"
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

// The exact paths, out of line (as gated-inl.h's): the lanes ExactLanes names take ClippedGate.
template <class D, class V>
HWY_NOINLINE V ClippedSwigluExact(D d, const ClippedSwigluAttributes &at, V A, V B, V a, V z, V y) {
  const auto exact = ExactLanes(d, a, z, -87.0f, y);
  return WithClippedGate(
      d, at, A, B, false, [&](const ClippedGate<V> &c) __attribute__((always_inline)) {
        const V y_exact = GateClamped(d, at, A, c.b, c.TimesGate(d, c.b_bias));
        return hn::IfThenElse(exact, Unscale(y_exact, c.unscale), y);
      });
}

struct ClippedSwiglu : ClippedSwigluAttributes {
  static constexpr int kOutputs = 1, kInputs = 2;  // y <- (A, B)
  static constexpr bool kPaired = true;            // the interleaved split (PairedRow)
  // 16-bit outputs: this F32 path within its ErrorBound (K = 4, as the F32 bound).
  static constexpr bool kErrorBounds = true;
  using Oracle = exact::ClippedSwiglu;

  template <class D, class V>
  HWY_INLINE void operator()(D d, V &y, V A, V B) const {
    Evaluate(d, y, static_cast<V *>(nullptr), A, B);
  }
  template <class D, class V>
  HWY_INLINE void ToRound(D d, V &y, V &bound, V A, V B) const {
    Evaluate(d, y, &bound, A, B);
  }
  // Or, where this attribute set has tables (clipped_gate_table.h): y = G(A) s, s = b + bias
  // rounded (b itself for clamp_mode 1), within 2u of the oracle's value (the entry and the sum,
  // each half an ulp): a window of 6 steps (table-inl.h).
  static constexpr bool kTabled = true;
  template <class T>
  ActivationTables Tables() const {
    const ClippedGateTables t = clippedGateTables(*this, IsBf16<T>());
    return {t.gate, nullptr, nullptr, nullptr};
  }
  template <class D, class T, class V>
  HWY_INLINE auto ToRoundFromTables(D d, const ActivationTables &tables, const T *storage, V &y,
                                    V A, V B) const {
    y = hn::Mul(Lookup(d, tables.value, A, storage), BiasedB(d, *this, B));
    return hn::Or(TableBoundaryNear<kTableProductWindow + 2>(d, y, storage), hn::IsNaN(y));
  }
  // An F32 output in the relaxed mode (elementwise-inl.h's RelaxedF32): (b + bias) x / (1 + e)
  // as SiluValueShort's one quotient, the same bits on every target, within K = 8 (e 2u, 1 + e,
  // the product and the quotient u each; times 1 + c as the strict bound).
  static constexpr bool kRelaxed = true;
  template <class D, class V>
  HWY_INLINE void Relaxed(D d, V &y, V A, V B) const {
    // fast's sigmoid unused: the compiler drops it
    WithClippedAt(
        d, *this, A, B, [&](const ClippedAt<V> &fast) __attribute__((always_inline)) {
          const V v = hn::Clamp(fast.z, hn::Set(d, -87.0f), hn::Set(d, 60.0f));
          y = GateClamped(d, *this, A, fast.b, OverOnePlusExp(d, hn::Mul(fast.b_bias, fast.x), v));
          if (HWY_UNLIKELY(!FastPathHolds(d, fast.a, fast.z, -87.0f, y))) {
            y = ClippedSwigluExact(d, *this, A, B, fast.a, fast.z, y);
          }
        });
  }

 private:
  // The bound only where asked for (not null: the 16-bit path).
  template <class D, class V>
  HWY_INLINE void Evaluate(D d, V &y, V *bound, V A, V B) const {
    WithClippedAt(
        d, *this, A, B, [&](const ClippedAt<V> &fast) __attribute__((always_inline)) {
          y = GateClamped(d, *this, A, fast.b, fast.Value(d, fast.b_bias));
          if (bound != nullptr) *bound = ErrorBound<4>(d, hn::Abs(y), fast.Condition(d));
          if (HWY_UNLIKELY(!FastPathHolds(d, fast.a, fast.z, -87.0f, y))) {
            y = ClippedSwigluExact(d, *this, A, B, fast.a, fast.z, y);
          }
        });
  }
};

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

INFINIOP_CPU_ELEMENTWISE_RANGE(clipped_swiglu, ClippedSwiglu);

#if HWY_ONCE
INFINIOP_CPU_ELEMENTWISE_DISPATCH(clipped_swiglu)
#endif
