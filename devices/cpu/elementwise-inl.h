// SPDX-License-Identifier: Apache-2.0
// Per-target half of the cpu elementwise framework. A cpu functor is
//   template <class D, class V> void operator()(D d, V &out..., V in...) const
// on F32 vectors; this file runs it over a range of a Plan for each storage type.
#if defined(INFINIOP_CPU_ELEMENTWISE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef INFINIOP_CPU_ELEMENTWISE_INL_H_
#undef INFINIOP_CPU_ELEMENTWISE_INL_H_
#else
#define INFINIOP_CPU_ELEMENTWISE_INL_H_
#endif

#include <cstring>
#include <type_traits>
#include <utility>

#include "core/dtype.h"
#include "cpu/convert-inl.h"
#include "cpu/activation_table.h"
#include "cpu/parallel.h"
#include "elementwise/plan.h"
#include "elementwise/walk.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {

using elementwise::kMaxOperands;
using elementwise::Plan;

// Whether the functor rounds its 16-bit outputs once (RoundedOnce, below).
template <class Functor, class = void>
struct RoundsOnceTrait : std::false_type {};
template <class Functor>
struct RoundsOnceTrait<Functor, std::void_t<decltype(Functor::kRoundsOnce)>> : std::true_type {};

// Whether a functor's 16-bit outputs are final as its tables give them (kFinalFromTables: no
// lane is near a boundary, so no check).
template <class Functor, class = void>
struct FinalFromTablesTrait : std::false_type {};
template <class Functor>
struct FinalFromTablesTrait<Functor, std::void_t<decltype(Functor::kFinalFromTables)>>
    : std::bool_constant<Functor::kFinalFromTables> {};

// Vectors are sizeless on SVE: never array elements or class members (Highway's rule), so the
// row loops hold each operand's vectors as locals of WithVectors and address them by a constant
// index with NthOf.

// Calls body(v...) with kCount vector locals, and returns what it returns.
template <size_t kCount, class D, class Body, class... Vs>
HWY_INLINE decltype(auto) WithVectors(D d, const Body &body, Vs &...vs) {
  if constexpr (sizeof...(Vs) == kCount) {
    return body(vs...);
  } else {
    hn::Vec<D> v = hn::Zero(d);  // a dead store: every vector is written before it is read
    return WithVectors<kCount>(d, body, vs..., v);
  }
}

// The k-th of vs.
template <size_t k, class V, class... Vs>
HWY_INLINE V &NthOf(V &first, Vs &...rest) {
  if constexpr (k == 0) {
    return first;
  } else {
    return NthOf<k - 1>(rest...);
  }
}

// Two vectors of elements (the pair loops' halves) through the functor: v holds operand k's
// halves at 2k (even) and 2k + 1 (odd), outputs first. A RoundedOnce functor evaluates both
// before its one check for lanes next to a rounding boundary: with a branch after each half,
// BF16 SwiGlu ran 0.77x its rate without the check (16384 elements, 1 AVX3 thread), the two
// halves' latency chains no longer overlapping.
template <class Functor, class D, size_t... Out, size_t... In, class... Vs>
HWY_INLINE void ApplyTwo(const Functor &f, D d, std::index_sequence<Out...>,
                         std::index_sequence<In...>, Vs &...v) {
  constexpr size_t kOut = sizeof...(Out);
  if constexpr (FinalFromTablesTrait<Functor>::value) {
    f(d, NthOf<2 * Out>(v...)..., NthOf<2 * (kOut + In)>(v...)...);
    f(d, NthOf<2 * Out + 1>(v...)..., NthOf<2 * (kOut + In) + 1>(v...)...);
  } else if constexpr (RoundsOnceTrait<Functor>::value) {
    const auto near_even = f.Evaluate(d, NthOf<2 * Out>(v...)..., NthOf<2 * (kOut + In)>(v...)...);
    const auto near_odd =
        f.Evaluate(d, NthOf<2 * Out + 1>(v...)..., NthOf<2 * (kOut + In) + 1>(v...)...);
    if (HWY_UNLIKELY(!hn::AllFalse(d, hn::Or(near_even, near_odd)))) {
      if (!hn::AllFalse(d, near_even))
        f.FromOracle(d, near_even, NthOf<2 * Out>(v...)..., NthOf<2 * (kOut + In)>(v...)...);
      if (!hn::AllFalse(d, near_odd))
        f.FromOracle(d, near_odd, NthOf<2 * Out + 1>(v...)..., NthOf<2 * (kOut + In) + 1>(v...)...);
    }
  } else {
    f(d, NthOf<2 * Out>(v...)..., NthOf<2 * (kOut + In)>(v...)...);
    f(d, NthOf<2 * Out + 1>(v...)..., NthOf<2 * (kOut + In) + 1>(v...)...);
  }
}

// Runs the functor over `n` contiguous elements; base[k] is operand k, outputs first.
template <class Functor, class T, size_t... Out, size_t... In>
HWY_NOINLINE void ContiguousRow(const Functor &functor, size_t n, char *const *base,
                                std::index_sequence<Out...> out_seq,
                                std::index_sequence<In...> in_seq) {
  const Functor f = functor;  // a local: the stores cannot alias its attributes
  constexpr size_t kOut = sizeof...(Out), kIn = sizeof...(In);
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  T *out_ptr[kOut] = {reinterpret_cast<T *>(base[Out])...};
  const T *in_ptr[kIn] = {reinterpret_cast<const T *>(base[kOut + In])...};
  size_t i = 0;
  if constexpr (std::is_same_v<T, hwy::bfloat16_t>) {
    for (; i + 2 * lanes <= n; i += 2 * lanes) {
      WithVectors<2 * (kOut + kIn)>(
          d, [&](auto &...v) __attribute__((always_inline)) {
            (LoadPairF32(d, in_ptr[In] + i, NthOf<2 * (kOut + In)>(v...),
                         NthOf<2 * (kOut + In) + 1>(v...)),
             ...);
            ApplyTwo(f, d, out_seq, in_seq, v...);
            (StorePairF32(d, NthOf<2 * Out>(v...), NthOf<2 * Out + 1>(v...), out_ptr[Out] + i),
             ...);
          });
    }
  }
  for (; i + lanes <= n; i += lanes) {
    // v: operand k's vector at k, outputs first.
    WithVectors<kOut + kIn>(
        d, [&](auto &...v) __attribute__((always_inline)) {
          ((NthOf<kOut + In>(v...) = LoadF32(d, in_ptr[In] + i)), ...);
          f(d, v...);
          (StoreF32(d, NthOf<Out>(v...), out_ptr[Out] + i), ...);
        });
  }
  if (i == n) return;
  // Tail: one whole vector of zero-padded copies through this same loop (a call rather than a
  // further inlined copy of the functor: issue 26), then only the valid part copied back.
  constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);
  const size_t rest = n - i;
  HWY_ALIGN T in_tail[kIn][kMaxLanes] = {};
  HWY_ALIGN T out_tail[kOut][kMaxLanes];
  (std::memcpy(in_tail[In], in_ptr[In] + i, rest * sizeof(T)), ...);
  char *const tail_base[kOut + kIn] = {reinterpret_cast<char *>(out_tail[Out])...,
                                       reinterpret_cast<char *>(in_tail[In])...};
  ContiguousRow<Functor, T>(f, lanes, tail_base, out_seq, in_seq);
  (std::memcpy(out_ptr[Out] + i, out_tail[Out], rest * sizeof(T)), ...);
}

// ContiguousRow with non-temporal stores (streamOutputs): the outputs' lines are written
// whole, never read first. Stores must be aligned to a vector, so the row's head up to the
// first output's alignment and its tail take ContiguousRow; outputs that cannot all be aligned
// at once (different offsets modulo a vector) take it for the whole row. The loop moves two F32
// vectors per step: for F16/BF16 that is one whole vector of storage.
//
// Inputs are prefetched kPrefetchAhead elements ahead: with the outputs bypassing the cache, the
// hardware prefetchers alone left the loads waiting on memory (16M BF16 GeluBackward on one
// AVX-512 thread ran 2x slower streamed than stored, 21.8 against 11.5 ms; prefetched 9.1 ms).
// 512 elements (2 KiB of F32, 1 KiB of BF16) was the best of 256-2048 for both widths.
constexpr size_t kPrefetchAhead = 512;

template <class Functor, class T, size_t... Out, size_t... In>
HWY_INLINE void StreamingRow(const Functor &functor, size_t n, char *const *base,
                             std::index_sequence<Out...> out_seq,
                             std::index_sequence<In...> in_seq) {
  const Functor f = functor;  // a local: the stores cannot alias its attributes
  constexpr size_t kOut = sizeof...(Out), kIn = sizeof...(In);
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const size_t step = 2 * lanes;
  const size_t vector_bytes = lanes * sizeof(float);
  const uintptr_t first = reinterpret_cast<uintptr_t>(base[0]);
  const size_t head = (vector_bytes - first % vector_bytes) % vector_bytes / sizeof(T);
  bool congruent = first % sizeof(T) == 0;
  for (size_t k = 1; k < kOut; ++k)
    congruent &= (reinterpret_cast<uintptr_t>(base[k]) - first) % vector_bytes == 0;
  if (!congruent || head + step > n) return ContiguousRow<Functor, T>(f, n, base, out_seq, in_seq);
  ContiguousRow<Functor, T>(f, head, base, out_seq, in_seq);
  T *out_ptr[kOut] = {reinterpret_cast<T *>(base[Out]) + head...};
  const T *in_ptr[kIn] = {reinterpret_cast<const T *>(base[kOut + In]) + head...};
  // BF16 moves as pairs, whose split and merge are cheaper than its conversions in element
  // order; F16 (F16C converts whole vectors) and F32 in element order. One lane has no pairs to
  // combine: SCALAR's 16-bit types move as pairs too.
  constexpr bool kPairs =
      std::is_same_v<T, hwy::bfloat16_t> || (HWY_TARGET == HWY_SCALAR && !std::is_same_v<T, float>);
  size_t i = 0;
  const size_t body = (n - head) / step * step;
  for (; i < body; i += step) {
    (hwy::Prefetch(in_ptr[In] + i + kPrefetchAhead), ...);
    if constexpr (std::is_same_v<T, float>)
      (hwy::Prefetch(in_ptr[In] + i + lanes + kPrefetchAhead), ...);
    // v: operand k's halves at 2k and 2k + 1, outputs first (ApplyTwo).
    WithVectors<2 * (kOut + kIn)>(
        d, [&](auto &...v) __attribute__((always_inline)) {
          if constexpr (kPairs) {
            (LoadPairF32(d, in_ptr[In] + i, NthOf<2 * (kOut + In)>(v...),
                         NthOf<2 * (kOut + In) + 1>(v...)),
             ...);
          } else {
            ((NthOf<2 * (kOut + In)>(v...) = LoadF32(d, in_ptr[In] + i),
              NthOf<2 * (kOut + In) + 1>(v...) = LoadF32(d, in_ptr[In] + i + lanes)),
             ...);
          }
          ApplyTwo(f, d, out_seq, in_seq, v...);
          if constexpr (std::is_same_v<T, float>) {
            ((StreamF32(d, NthOf<2 * Out>(v...), out_ptr[Out] + i),
              StreamF32(d, NthOf<2 * Out + 1>(v...), out_ptr[Out] + i + lanes)),
             ...);
          } else if constexpr (kPairs) {
            (StreamPairF32(d, NthOf<2 * Out>(v...), NthOf<2 * Out + 1>(v...), out_ptr[Out] + i),
             ...);
          } else {
            (StreamTwoF32(d, NthOf<2 * Out>(v...), NthOf<2 * Out + 1>(v...), out_ptr[Out] + i),
             ...);
          }
        });
  }
  char *rest[kOut + kIn];
  for (size_t k = 0; k < kOut + kIn; ++k) rest[k] = base[k] + (head + body) * sizeof(T);
  ContiguousRow<Functor, T>(f, n - head - body, rest, out_seq, in_seq);
}

// A row with some non-unit inner stride: gather tiles of the strided operands into contiguous
// buffers, run the contiguous row on them, scatter the strided outputs back.
template <class Functor, class T, class OutSeq, class InSeq>
HWY_NOINLINE void StridedRow(const Functor &functor, size_t n, char *const *base,
                             const ptrdiff_t *strides, int num_operands, int num_outputs) {
  const Functor f = functor;  // a local: the stores cannot alias its attributes
  constexpr size_t kTile = 256;
  HWY_ALIGN T tile[kMaxOperands][kTile];
  char *tile_base[kMaxOperands];
  for (size_t start = 0; start < n; start += kTile) {
    const size_t count = n - start < kTile ? n - start : kTile;
    for (int k = 0; k < num_operands; ++k) {
      const T *src =
          reinterpret_cast<const T *>(base[k]) + static_cast<ptrdiff_t>(start) * strides[k];
      if (strides[k] == 1) {
        tile_base[k] = const_cast<char *>(reinterpret_cast<const char *>(src));
        continue;
      }
      tile_base[k] = reinterpret_cast<char *>(tile[k]);
      if (k < num_outputs) continue;  // outputs are only written
      for (size_t j = 0; j < count; ++j) tile[k][j] = src[static_cast<ptrdiff_t>(j) * strides[k]];
    }
    ContiguousRow<Functor, T>(f, count, tile_base, OutSeq(), InSeq());
    for (int k = 0; k < num_outputs; ++k) {
      if (strides[k] == 1) continue;
      T *dst = reinterpret_cast<T *>(base[k]) + static_cast<ptrdiff_t>(start) * strides[k];
      for (size_t j = 0; j < count; ++j) dst[static_cast<ptrdiff_t>(j) * strides[k]] = tile[k][j];
    }
  }
}

// Operand vectors of a paired row (PairedRow): element e of an operand alone, or of a pair from
// its first (its second with it; kSecond: the pair's second is an operand of this call).
template <bool kSecond, class T, class D, class V>
HWY_INLINE void LoadOperand(D d, Plan::Role role, const char *base, size_t e, V &v, V &second) {
  const T *p = reinterpret_cast<const T *>(base);
  if (role == Plan::kAlone) v = LoadF32(d, p + e);
  if (kSecond && role == Plan::kPairFirst) LoadPairF32(d, p + 2 * e, v, second);
}
template <bool kSecond, class T, class D, class V>
HWY_INLINE void StoreOperand(D d, Plan::Role role, V v, V second, char *base, size_t e) {
  T *p = reinterpret_cast<T *>(base);
  if (role == Plan::kAlone) StoreF32(d, v, p + e);
  if (kSecond && role == Plan::kPairFirst) StorePairF32(d, v, second, p + 2 * e);
}

// A row in which every operand has stride 1 except interleaved pairs (Plan::kPairFirst, then
// kPairSecond), which take turns in one stride-1 run: each pair moves with one vector load or
// store of twice the width, deinterleaved in registers.
template <class Functor, class T, size_t... Out, size_t... In>
HWY_NOINLINE void PairedRow(const Functor &functor, size_t n, char *const *base,
                            const Plan::Role *roles, std::index_sequence<Out...>,
                            std::index_sequence<In...>) {
  const Functor f = functor;  // a local: the stores cannot alias its attributes
  constexpr size_t kOut = sizeof...(Out), kAll = kOut + sizeof...(In);
  Plan::Role role[kAll];  // nor these bytes
  for (size_t k = 0; k < kAll; ++k) role[k] = roles[k];
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    // v: operand k's vector at k (a pair's second loaded and stored with its first).
    WithVectors<kAll>(
        d, [&](auto &...v) __attribute__((always_inline)) {
          (LoadOperand<kOut + In + 1 < kAll, T>(
               d, role[kOut + In], base[kOut + In], i, NthOf<kOut + In>(v...),
               NthOf<(kOut + In + 1 < kAll ? kOut + In + 1 : 0)>(v...)),
           ...);
          f(d, v...);
          (StoreOperand<Out + 1 < kOut, T>(d, role[Out], NthOf<Out>(v...),
                                           NthOf<(Out + 1 < kOut ? Out + 1 : 0)>(v...), base[Out],
                                           i),
           ...);
        });
  }
  if (i == n) return;
  char *rest[kAll];
  ptrdiff_t strides[kAll];
  for (size_t k = 0; k < kAll; ++k) {
    strides[k] = role[k] == Plan::kAlone ? 1 : 2;
    rest[k] = base[k] + static_cast<ptrdiff_t>(i) * strides[k] * static_cast<ptrdiff_t>(sizeof(T));
  }
  StridedRow<Functor, T, std::index_sequence<Out...>, std::index_sequence<In...>>(
      f, n - i, rest, strides, static_cast<int>(kAll), static_cast<int>(kOut));
}

// Prefetches every cache line of [p + ahead, p + ahead + bytes).
HWY_INLINE void PrefetchLines(const void *p, size_t ahead, size_t bytes) {
  constexpr size_t kLine = 64;
  for (size_t b = 0; b < bytes; b += kLine) hwy::Prefetch(static_cast<const char *>(p) + ahead + b);
}

#if HWY_TARGET != HWY_SCALAR
// StoreOperand for StreamingPairedRow's two halves (v, second: the first, from element e; v1,
// second1: the second, from e + lanes), with non-temporal stores.
template <bool kSecond, class T, class D, class V>
HWY_INLINE void StreamOperand(D d, Plan::Role role, V v, V second, V v1, V second1, char *base,
                              size_t e, size_t lanes) {
  T *p = reinterpret_cast<T *>(base);
  if (role == Plan::kAlone) StreamTwoF32(d, v, v1, p + e);
  if (kSecond && role == Plan::kPairFirst) {
    StreamPairF32(d, v, second, p + 2 * e);
    StreamPairF32(d, v1, second1, p + 2 * (e + lanes));
  }
}

// PairedRow with non-temporal stores (streamOutputs), as StreamingRow does ContiguousRow: two
// vectors of elements per step, so that every output (alone or a pair) writes whole vectors. The
// head up to where every output is aligned at once, and the tail, take PairedRow.
template <class Functor, class T, size_t... Out, size_t... In>
HWY_INLINE void StreamingPairedRow(const Functor &functor, size_t n, char *const *base,
                                   const Plan::Role *roles, std::index_sequence<Out...> out_seq,
                                   std::index_sequence<In...> in_seq) {
  const Functor f = functor;  // a local: the stores cannot alias its attributes
  constexpr size_t kOut = sizeof...(Out), kAll = kOut + sizeof...(In);
  Plan::Role role[kAll];  // nor these bytes
  for (size_t k = 0; k < kAll; ++k) role[k] = roles[k];
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const size_t vector_bytes = lanes * sizeof(float);
  // Element stride of operand k: 2 in a pair, 1 alone.
  const auto width = [&](size_t k) -> size_t { return role[k] == Plan::kAlone ? 1 : 2; };
  const auto aligned_at = [&](size_t i) {
    for (size_t k = 0; k < kOut; ++k)  // a pair is stored from its first
      if (role[k] != Plan::kPairSecond &&
          (reinterpret_cast<uintptr_t>(base[k]) + i * width(k) * sizeof(T)) % vector_bytes != 0)
        return false;
    return true;
  };
  size_t head = 0;
  while (head < vector_bytes && !aligned_at(head)) ++head;
  if (head == vector_bytes || head + 2 * lanes > n)
    return PairedRow<Functor, T>(f, n, base, role, out_seq, in_seq);
  PairedRow<Functor, T>(f, head, base, role, out_seq, in_seq);
  const size_t body = (n - head) / (2 * lanes) * (2 * lanes);
  for (size_t i = head; i < head + body; i += 2 * lanes) {
    for (size_t k = kOut; k < kAll; ++k) {
      if (role[k] != Plan::kPairSecond)
        PrefetchLines(base[k] + i * width(k) * sizeof(T), kPrefetchAhead * width(k) * sizeof(T),
                      2 * lanes * width(k) * sizeof(T));
    }
    // v: operand k's vector of the first half at k, of the second at kAll + k (PairedRow).
    WithVectors<2 * kAll>(
        d, [&](auto &...v) __attribute__((always_inline)) {
          ((LoadOperand<kOut + In + 1 < kAll, T>(d, role[kOut + In], base[kOut + In], i,
                                                 NthOf<kOut + In>(v...),
                                                 NthOf<kOut + In + 1>(v...)),
            LoadOperand<kOut + In + 1 < kAll, T>(d, role[kOut + In], base[kOut + In], i + lanes,
                                                 NthOf<kAll + kOut + In>(v...),
                                                 NthOf<(kAll + kOut + In + 1) % (2 * kAll)>(v...))),
           ...);
          f(d, NthOf<Out>(v...)..., NthOf<kOut + In>(v...)...);
          f(d, NthOf<kAll + Out>(v...)..., NthOf<kAll + kOut + In>(v...)...);
          (StreamOperand<Out + 1 < kOut, T>(d, role[Out], NthOf<Out>(v...), NthOf<Out + 1>(v...),
                                            NthOf<kAll + Out>(v...), NthOf<kAll + Out + 1>(v...),
                                            base[Out], i, lanes),
           ...);
        });
  }
  char *rest[kAll];
  for (size_t k = 0; k < kAll; ++k) rest[k] = base[k] + (head + body) * width(k) * sizeof(T);
  PairedRow<Functor, T>(f, n - head - body, rest, role, out_seq, in_seq);
}
#endif

// Whether the functor declares kPaired (its operands may come as interleaved pairs).
template <class Functor, class = void>
struct PairedTrait : std::false_type {};
template <class Functor>
struct PairedTrait<Functor, std::void_t<decltype(Functor::kPaired)>>
    : std::bool_constant<Functor::kPaired> {};
template <class Functor>
constexpr bool IsPaired() {
  return PairedTrait<Functor>::value;
}

// Correctly rounded 16-bit outputs (Ziv's strategy; docs/accuracy.md). A functor may declare
//   using Oracle = <its cpu_reference functor, which computes in double; void: none>;
// and one of two evaluations for 16-bit storage T. Where its activation of a 16-bit input comes
// from tables (activation_table.h, table-inl.h):
//   static constexpr bool kTabled = true;
//   template <class T> static ActivationTables Tables();  // for storage T, built at first use
//   M ToRoundFromTables(D, const ActivationTables &, const T *, V &out..., V in...) const;
// which sets the outputs and returns the lanes the oracle must take (its own boundary test), or
// also declares kFinalFromTables where its outputs are final as the tables give them. Otherwise
// (ClippedSwiglu, whose activation depends on its attributes):
//   static constexpr bool kErrorBounds = true;
//   void ToRound(D, V &out..., V &bound..., V in...) const;  // each output's bound, in u = 2^-24
// whose 16-bit bits do not depend on ToRound's evaluation, only on its bound holding.
// Then each F16/BF16 output that may round otherwise than its exact value is taken from the
// oracle instead, rounded once from its double (every output of the lane, one oracle call): every
// 16-bit output is the exact value rounded to nearest even, the same on every target, device and
// on cpu_reference. Elsewhere the F32 value already rounds as the exact value does.
template <class Functor, class = void>
struct OracleTrait {
  using type = void;
};
template <class Functor>
struct OracleTrait<Functor, std::void_t<typename Functor::Oracle>> {
  using type = typename Functor::Oracle;
};
template <class Functor>
using OracleOf = typename OracleTrait<Functor>::type;

template <class Functor, class = void>
struct TabledTrait : std::false_type {};
template <class Functor>
struct TabledTrait<Functor, std::void_t<decltype(Functor::kTabled)>>
    : std::bool_constant<Functor::kTabled> {};

// Whether a tabled functor decides its near lanes from the tables' pairs (kDecides: Resolve).
template <class Functor, class = void>
struct DecidesTrait : std::false_type {};
template <class Functor>
struct DecidesTrait<Functor, std::void_t<decltype(Functor::kDecides)>>
    : std::bool_constant<Functor::kDecides> {};

template <class Functor, class = void>
struct ErrorBoundsTrait : std::false_type {};
template <class Functor>
struct ErrorBoundsTrait<Functor, std::void_t<decltype(Functor::kErrorBounds)>> : std::true_type {};

// The oracle's outputs for lane `lane` of the inputs.
template <class Oracle, size_t kOut, size_t N, size_t... Out, size_t... Operand>
void OracleAt(const Oracle &oracle, double (&exact)[kOut],
              const float (&inputs)[N][HWY_MAX_BYTES / sizeof(float)], size_t lane,
              std::index_sequence<Out...>, std::index_sequence<Operand...>) {
  oracle(exact[Out]..., inputs[Operand][lane]...);
}

// The outputs with their `near` lanes replaced by the oracle's values for the lane's inputs, each
// as the F32 that rounds to the same 16-bit value (roundToOddFloat). Out of line: a vector has
// such a lane about once in 200 (BF16) or 50 (F16).
template <class Oracle, size_t kOut, class D, class M, class V, class... In>
HWY_NOINLINE void RoundedFromOracle(D d, const Oracle &oracle, M near, V *const (&out)[kOut],
                                    In... in) {
  constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);
  const hn::RebindToUnsigned<D> du;
  HWY_ALIGN float value[kOut][kMaxLanes];
  HWY_ALIGN float inputs[sizeof...(In)][kMaxLanes];
  HWY_ALIGN uint32_t flag[kMaxLanes];
  size_t k = 0;
  (hn::Store(in, d, inputs[k++]), ...);
  for (size_t o = 0; o < kOut; ++o) hn::Store(*out[o], d, value[o]);
  hn::Store(hn::BitCast(du, hn::VecFromMask(d, near)), du, flag);
  for (size_t lane = 0; lane < hn::Lanes(d); ++lane) {
    if (flag[lane] == 0) continue;
    double exact[kOut];
    OracleAt(oracle, exact, inputs, lane, std::make_index_sequence<kOut>(),
             std::make_index_sequence<sizeof...(In)>());
    for (size_t o = 0; o < kOut; ++o) value[o][lane] = roundToOddFloat(exact[o]);
  }
  for (size_t o = 0; o < kOut; ++o) *out[o] = hn::Load(d, value[o]);
}

// A functor whose 16-bit (T) outputs are correctly rounded, as above. Its operands arrive as
// outputs then inputs, as the functor's; Evaluate and FromOracle take the same.
template <class Functor, class T, bool kUseTables = TabledTrait<Functor>::value>
struct RoundedOnce {
  static constexpr int kOutputs = Functor::kOutputs, kInputs = Functor::kInputs;
  static constexpr bool kPaired = IsPaired<Functor>(), kRoundsOnce = true;
  static constexpr bool kFinalFromTables = FinalFromTablesTrait<Functor>::value;
  Functor f;
  OracleOf<Functor> oracle;
  ActivationTables tables;  // kUseTables: the functor's, for T

  // The functor's evaluation to round, and the lanes that may round otherwise than exact.
  template <class D, class... Operands>
  HWY_INLINE auto Evaluate(D d, Operands &...operands) const {
    return EvaluateSplit(d, std::make_index_sequence<kOutputs>(),
                         std::make_index_sequence<kInputs>(), operands...);
  }
  template <class D, class M, class... Operands>
  HWY_INLINE void FromOracle(D d, M near, Operands &...operands) const {
    FromOracleSplit(d, near, std::make_index_sequence<kOutputs>(),
                    std::make_index_sequence<kInputs>(), operands...);
  }
  template <class D, class... Operands>
  HWY_INLINE void operator()(D d, Operands &...operands) const {
    const auto near = Evaluate(d, operands...);
    if constexpr (!kFinalFromTables) {
      if (HWY_UNLIKELY(!hn::AllFalse(d, near))) FromOracle(d, near, operands...);
    }
  }

 private:
  // operands: the outputs, then the inputs (NthOf, as the row loops).
  template <class D, size_t... Out, size_t... In, class... Operands>
  HWY_INLINE auto EvaluateSplit(D d, std::index_sequence<Out...>, std::index_sequence<In...>,
                                Operands &...operands) const {
    constexpr const T *kStorage = nullptr;
    if constexpr (kUseTables) {
      return f.ToRoundFromTables(d, tables, kStorage, NthOf<Out>(operands...)...,
                                 NthOf<kOutputs + In>(operands...)...);
    } else {
      static_assert(ErrorBoundsTrait<Functor>::value, "a 16-bit path: tables or error bounds");
      return WithVectors<kOutputs>(
          d, [&](auto &...bound) __attribute__((always_inline)) {
            f.ToRound(d, NthOf<Out>(operands...)..., bound...,
                      NthOf<kOutputs + In>(operands...)...);
            auto near = hn::FirstN(d, 0);  // none
            ((near = hn::Or(
                  near, NearRoundingBoundaryWithin(d, NthOf<Out>(operands...), bound, kStorage))),
             ...);
            return near;
          });
    }
  }
  template <class D, class M, size_t... Out, size_t... In, class... Operands>
  HWY_INLINE void FromOracleSplit(D d, M near, std::index_sequence<Out...>,
                                  std::index_sequence<In...>, Operands &...operands) const {
    // Through copies: the operands' own addresses never escape, so that the row loop keeps them
    // in registers rather than in memory for this rare call (8 stores and loads per step of BF16
    // SwigluBackward at AVX2).
    WithVectors<kOutputs + kInputs>(
        d, [&](auto &...copy) __attribute__((always_inline)) {
          ((copy = operands), ...);
          SettleOutOfLine(*this, d, near, copy...);
          ((NthOf<Out>(operands...) = NthOf<Out>(copy...)), ...);
        });
  }

 public:
  // The near lanes settled: those that the tables' pairs decide (a tabled functor's Resolve:
  // table-inl.h's DecideBeside), then the oracle for the rest.
  template <class D, class M, class... Operands>
  void Settle(D d, M near, Operands &...operands) const {
    SettleSplit(d, near, std::make_index_sequence<kOutputs>(), std::make_index_sequence<kInputs>(),
                operands...);
  }

 private:
  template <class D, class M, size_t... Out, size_t... In, class... Operands>
  HWY_INLINE void SettleSplit(D d, M near, std::index_sequence<Out...>, std::index_sequence<In...>,
                              Operands &...operands) const {
    constexpr const T *kStorage = nullptr;
    auto open = near;
    if constexpr (kUseTables && DecidesTrait<Functor>::value) {
      open = f.Resolve(d, tables, kStorage, NthOf<Out>(operands...)...,
                       NthOf<kOutputs + In>(operands...)...);
    }
    if (hn::AllFalse(d, open)) return;
    hn::Vec<D> *const out[kOutputs] = {&NthOf<Out>(operands...)...};  // pointers, not vectors
    RoundedFromOracle(d, oracle, open, out, NthOf<kOutputs + In>(operands...)...);
  }
};

// RoundedOnce::Settle out of line: a vector has a near lane about once in 200 (BF16) or 50
// (F16); the row loops keep only the call.
template <class Rounded, class D, class M, class... Operands>
HWY_NOINLINE void SettleOutOfLine(const Rounded &rounded, D d, M near, Operands &...operands) {
  rounded.Settle(d, near, operands...);
}

template <class Functor, class T>
HWY_INLINE void RangeTyped(const Plan &plan, const Functor &f, char *const *operands, size_t begin,
                           size_t end) {
  using OutSeq = std::make_index_sequence<Functor::kOutputs>;
  using InSeq = std::make_index_sequence<Functor::kInputs>;
  // Two outputs in contiguous rows (the split backwards: grad1 and grad2 in the halves of one
  // row) stay ordinary stores: streamed, both ran 1.0-1.6x slower than stored at 16M on an AMD
  // EPYC (AVX2; 1 and 2 threads, any row length), where a single output gains 1.2-1.3x.
  if constexpr (Functor::kOutputs == 1) {
    if (kStreamingStores && plan.inner_contiguous && streamOutputs(plan)) {
      elementwise::walkRows(plan, operands, begin, end,
                            [&](char *const *base, size_t count) HWY_ATTR {
                              StreamingRow<Functor, T>(f, count, base, OutSeq(), InSeq());
                            });
      hwy::FlushStream();
      return;
    }
  }
  if (plan.inner_contiguous) {
    elementwise::walkRows(plan, operands, begin, end,
                          [&](char *const *base, size_t count) HWY_ATTR {
                            ContiguousRow<Functor, T>(f, count, base, OutSeq(), InSeq());
                          });
    return;
  }
  // Interleaved pairs only reach the functors that split a row in two (kPaired); any other
  // plan with pairs would take the strided rows below, correct and slower.
  if constexpr (IsPaired<Functor>()) {
#if HWY_TARGET != HWY_SCALAR
    if (kStreamingStores && plan.inner_paired && streamOutputs(plan)) {
      elementwise::walkRows(
          plan, operands, begin, end, [&](char *const *base, size_t count) HWY_ATTR {
            StreamingPairedRow<Functor, T>(f, count, base, plan.role, OutSeq(), InSeq());
          });
      hwy::FlushStream();
      return;
    }
#endif
    if (plan.inner_paired) {
      elementwise::walkRows(plan, operands, begin, end,
                            [&](char *const *base, size_t count) HWY_ATTR {
                              PairedRow<Functor, T>(f, count, base, plan.role, OutSeq(), InSeq());
                            });
      return;
    }
  }
  ptrdiff_t inner_strides[kMaxOperands];
  for (int k = 0; k < plan.numOperands(); ++k) inner_strides[k] = plan.strides[k][plan.ndim - 1];
  elementwise::walkRows(plan, operands, begin, end, [&](char *const *base, size_t count) HWY_ATTR {
    StridedRow<Functor, T, OutSeq, InSeq>(f, count, base, inner_strides, plan.numOperands(),
                                          plan.num_outputs);
  });
}

// RangeTyped for 16-bit storage: through RoundedOnce where the functor has an oracle.
template <class Functor, class T>
HWY_INLINE void RangeTyped16(const Plan &plan, const Functor &f, const void *attributes,
                             char *const *operands, size_t begin, size_t end) {
  using Oracle = OracleOf<Functor>;
  if constexpr (std::is_void_v<Oracle>) {
    RangeTyped<Functor, T>(plan, f, operands, begin, end);
  } else {
    static_assert(std::is_empty_v<Oracle> || sizeof(Oracle) == sizeof(Functor),
                  "an oracle is made from the functor's attributes");
    Oracle oracle{};
    if constexpr (!std::is_empty_v<Oracle>) std::memcpy(&oracle, attributes, sizeof(Oracle));
    if constexpr (TabledTrait<Functor>::value) {
      const ActivationTables tables = f.template Tables<T>();
      // Tables that depend on attributes may be missing (clipped_gate_table.h): the bounds then.
      if constexpr (ErrorBoundsTrait<Functor>::value) {
        if (tables.value == nullptr && tables.derivative == nullptr) {
          const RoundedOnce<Functor, T, false> rounded{f, oracle, {}};
          return RangeTyped<RoundedOnce<Functor, T, false>, T>(plan, rounded, operands, begin, end);
        }
      }
      const RoundedOnce<Functor, T> rounded{f, oracle, tables};
      RangeTyped<RoundedOnce<Functor, T>, T>(plan, rounded, operands, begin, end);
    } else {
      const RoundedOnce<Functor, T> rounded{f, oracle, {}};
      RangeTyped<RoundedOnce<Functor, T>, T>(plan, rounded, operands, begin, end);
    }
  }
}

// The relaxed mode of F32 outputs (Plan::relaxed, infiniopFpmathMode_t): a functor that declares
// kRelaxed true runs `void Relaxed(D, V &out..., V in...) const` there, a cheaper evaluation with
// its own bound (docs/accuracy.md) and the same bits on every target; others ignore the mode.
template <class Functor, class = void>
struct RelaxedTrait : std::false_type {};
template <class Functor>
struct RelaxedTrait<Functor, std::void_t<decltype(Functor::kRelaxed)>>
    : std::bool_constant<Functor::kRelaxed> {};

template <class Functor>
struct RelaxedF32 {
  static constexpr int kOutputs = Functor::kOutputs, kInputs = Functor::kInputs;
  static constexpr bool kPaired = IsPaired<Functor>();
  Functor f;
  template <class D, class... Operands>
  HWY_INLINE void operator()(D d, Operands &...operands) const {
    f.Relaxed(d, operands...);
  }
};

// Runs elements [begin, end) of the plan: the per-target body behind every cpu kernel.
template <class Functor>
HWY_INLINE void ElementwiseRange(const Plan &plan, const void *attributes, char *const *operands,
                                 size_t begin, size_t end) {
  Functor f{};
  if constexpr (!std::is_empty_v<Functor>) std::memcpy(&f, attributes, sizeof(Functor));
  switch (plan.dtype) {
    case INFINI_DTYPE_F16:
      return RangeTyped16<Functor, hwy::float16_t>(plan, f, attributes, operands, begin, end);
    case INFINI_DTYPE_BF16:
      return RangeTyped16<Functor, hwy::bfloat16_t>(plan, f, attributes, operands, begin, end);
    default:
      if constexpr (RelaxedTrait<Functor>::value) {
        if (plan.relaxed)
          return RangeTyped<RelaxedF32<Functor>, float>(plan, RelaxedF32<Functor>{f}, operands,
                                                        begin, end);
      }
      return RangeTyped<Functor, float>(plan, f, operands, begin, end);
  }
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // INFINIOP_CPU_ELEMENTWISE_INL_H_
