// SPDX-License-Identifier: Apache-2.0
// Per-target row primitives of the cpu gather framework: whole rows of F32/F16/BF16 storage
// scaled, accumulated into F32 and dotted with F32 accumulation. Rows are walked in tiles of
// kTile elements; a tile that is strided, or shorter than whole vectors, is first copied into a
// zero-padded contiguous buffer, so the primitives only ever see whole vectors. Every result is
// the same IEEE operations in the same order on every target (and on opencl): fused
// multiply-adds are Fma (ieee-inl.h, exact where the target has no fma), and the dot products
// sum in kDotSlots slots whatever the vector width (DotSlotsSum).
#if defined(INFINIOP_CPU_ROWS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef INFINIOP_CPU_ROWS_INL_H_
#undef INFINIOP_CPU_ROWS_INL_H_
#else
#define INFINIOP_CPU_ROWS_INL_H_
#endif

#include <cmath>
#include <cstring>
#include <type_traits>

#include "cpu/convert-inl.h"
#include "cpu/ieee-inl.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Elements per tile: a multiple of every target's step (two vectors) and of kDotSlots.
constexpr size_t kTile = 4096;

// The dot products' fixed blocking, the same on every target and on opencl
// (kernels/moe_finalize_routing.cl, SLOTS): element j's product accumulates into slot
// j % kDotSlots, each slot a chain of fused multiply-adds from +0 in increasing j; DotSlotsSum
// then adds the slots in a fixed pairwise tree. A target's step (two vectors) divides it, so the
// slots are whole vectors at every step; a tile (kTile) is whole blocks of it.
constexpr size_t kDotSlots = 64;
static_assert(kTile % kDotSlots == 0, "a tile starts at slot 0");

// Rows' vectors: at most kDotSlots / 2 lanes, so that a step (two vectors) is whole slots on
// every vector length: SVE's reach 64 F32 lanes (2048 bits), whose steps would span two blocks.
using RowD = hn::CappedTag<float, kDotSlots / 2>;
using RowV = hn::Vec<RowD>;

// Rows move two vectors per step: for F16/BF16 one full-width load viewed as 32-bit lanes
// splits into the even and odd elements with no shuffle (see LoadPairF32), and a store merges
// them back. F32 rows move as two plain vectors. F32 accumulators hold whatever order the
// loads give, and the stores undo it.
HWY_INLINE size_t StepOf() {
  return 2 * hn::Lanes(RowD());
}
static_assert(kDotSlots % (2 * hn::MaxLanes(RowD())) == 0, "a step is whole slots");

template <class T>
HWY_INLINE void LoadTwo(const T *p, RowV &v0, RowV &v1) {
  if constexpr (std::is_same_v<T, float>) {
    v0 = hn::LoadU(RowD(), p);
    v1 = hn::LoadU(RowD(), p + hn::Lanes(RowD()));
  } else {
    LoadPairF32(RowD(), p, v0, v1);
  }
}

template <class T>
HWY_INLINE void StoreTwo(RowV v0, RowV v1, T *p) {
  if constexpr (std::is_same_v<T, float>) {
    StoreF32(RowD(), v0, p);  // a NaN canonical, as every store (convert-inl.h)
    StoreF32(RowD(), v1, p + hn::Lanes(RowD()));
  } else {
    StorePairF32(RowD(), v0, v1, p);
  }
}

// StoreTwo with non-temporal stores, for large outputs that would otherwise be read into the
// cache before being overwritten. p must be aligned to a vector (StreamAligned); the writing
// thread calls hwy::FlushStream() before it finishes.
template <class T>
HWY_INLINE void StreamTwo(RowV v0, RowV v1, T *p) {
  if constexpr (std::is_same_v<T, float>) {
    StreamF32(RowD(), v0, p);
    StreamF32(RowD(), v1, p + hn::Lanes(RowD()));
  } else {
    StreamPairF32(RowD(), v0, v1, p);
  }
}

template <class T>
HWY_INLINE bool StreamAligned(const T *p) {
  return reinterpret_cast<uintptr_t>(p) % (hn::Lanes(RowD()) * sizeof(float)) == 0;
}

// Tile [start, start + count) of a row, `padded` = count rounded up to whole steps.
struct TileSpan {
  size_t start, count, padded;
};

template <class Body>
HWY_INLINE void ForEachTile(size_t n, const Body &body, size_t tile = kTile) {
  const size_t step = StepOf();
  for (size_t start = 0; start < n; start += tile) {
    const size_t count = n - start < tile ? n - start : tile;
    body(TileSpan{start, count, (count + step - 1) / step * step});
  }
}

// The tile of an input row (nullptr stays nullptr: an absent row reads as zeros): the row itself
// when it can be read as whole steps, else a copy in `buffer` (a tile long) padded with +0, or
// with -0 where `negative_zero_pad` (the grad_y tile of a dot product: see ScaleRowAndDot). When
// the tile has padding, every input row of it is such a copy.
template <class T>
HWY_INLINE const T *InputTile(const T *row, ptrdiff_t stride, TileSpan t, T *buffer,
                              bool negative_zero_pad = false) {
  if (!row) return nullptr;
  if (stride == 1 && t.count == t.padded) return row + t.start;
  for (size_t j = 0; j < t.count; ++j)
    buffer[j] = row[static_cast<ptrdiff_t>(t.start + j) * stride];
  std::memset(static_cast<void *>(buffer + t.count), 0, (t.padded - t.count) * sizeof(T));
  if (negative_zero_pad) {
    using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>;
    const Bits negative_zero = Bits{1} << (8 * sizeof(T) - 1);  // the sign bit alone
    for (size_t j = t.count; j < t.padded; ++j)
      std::memcpy(static_cast<void *>(buffer + j), &negative_zero, sizeof(T));
  }
  return buffer;
}

// Where to write a tile of an output row; FlushTile copies a buffered one into the row.
template <class T>
HWY_INLINE T *OutputTile(T *row, ptrdiff_t stride, TileSpan t, T *buffer) {
  return stride == 1 && t.count == t.padded ? row + t.start : buffer;
}
template <class T>
HWY_INLINE void FlushTile(T *row, ptrdiff_t stride, TileSpan t, const T *tile) {
  if (tile == row + t.start) return;
  for (size_t j = 0; j < t.count; ++j) row[static_cast<ptrdiff_t>(t.start + j) * stride] = tile[j];
}

// Calls body(bool_constant<a != nullptr>, bool_constant<b != nullptr>): row loops are compiled
// once per combination of present rows instead of testing for them at every step.
template <class T, class Body>
HWY_INLINE void WithPresent(const T *a, const T *b, const Body &body) {
  if (a && b) return body(std::true_type(), std::true_type());
  if (a) return body(std::true_type(), std::false_type());
  if (b) return body(std::false_type(), std::true_type());
  body(std::false_type(), std::false_type());
}

// a[j..] + b[j..] as two F32 vectors, an absent row reading as zeros.
template <bool kA, bool kB, class T>
HWY_INLINE void LoadSum(const T *a, const T *b, size_t j, RowV &v0, RowV &v1) {
  v0 = v1 = hn::Zero(RowD());
  if constexpr (kA) LoadTwo(a + j, v0, v1);
  if constexpr (kB) {
    RowV b0, b1;
    LoadTwo(b + j, b0, b1);
    v0 = kA ? hn::Add(v0, b0) : b0;
    v1 = kA ? hn::Add(v1, b1) : b1;
  }
}

// Gathered rows are short streams at random addresses, which the hardware prefetchers pick up
// late: each row loop also prefetches the row that comes next (nullptr: none), at the same
// offset, so its lines are on the way while this row is processed.
template <class T>
HWY_INLINE void PrefetchAt(const T *next, size_t j) {
  if (next) hwy::Prefetch(next + j);
}

// acc[j] = a[j] + b[j] (acc is F32).
template <class T>
HWY_INLINE void LoadRow(const T *a, const T *b, float *acc, size_t n) {
  const size_t lanes = hn::Lanes(RowD());
  WithPresent(a, b, [&](auto has_a, auto has_b) {
    for (size_t j = 0; j < n; j += 2 * lanes) {
      RowV v0, v1;
      LoadSum<has_a(), has_b()>(a, b, j, v0, v1);
      hn::Store(v0, RowD(), acc + j);
      hn::Store(v1, RowD(), acc + j + lanes);
    }
  });
}

// acc[j] += s * (a[j] + b[j]): the row axpy into an F32 accumulator.
template <class T>
HWY_INLINE void AxpyRow(float s, const T *a, const T *b, float *acc, size_t n,
                        const T *next = nullptr) {
  const RowD d;
  const size_t lanes = hn::Lanes(d);
  const RowV scale = hn::Set(d, s);
  WithPresent(a, b, [&](auto has_a, auto has_b) {
    for (size_t j = 0; j < n; j += 2 * lanes) {
      PrefetchAt(next, j);
      RowV v0, v1;
      LoadSum<has_a(), has_b()>(a, b, j, v0, v1);
      hn::Store(Fma(d, scale, v0, hn::Load(d, acc + j)), d, acc + j);
      hn::Store(Fma(d, scale, v1, hn::Load(d, acc + j + lanes)), d, acc + j + lanes);
    }
  });
}

// Rows AxpyRows combines per pass: their sums stay in registers across the pass.
constexpr size_t kGroupRows = 8;

// acc[j] += sum over k < rows of s[k] * (x[k][j] + y[k][j]) (y nullptr: no y rows), written to
// `out` (rounded once to T; `stream`: with StreamTwo, out aligned) instead of acc when out is not
// nullptr. Row group k also prefetches next[k] (entries may be nullptr). The axpy of up to
// kGroupRows rows with one accumulator load and store per step, rather than one per row.
template <class T>
HWY_INLINE void AxpyRows(size_t rows, const float *s, const T *const *x, const T *const *y,
                         const T *const *next, float *acc, T *out, bool stream, size_t n) {
  const RowD d;
  const size_t lanes = hn::Lanes(d);
  const auto loop = [&](auto has_y, auto streamed) {
    for (size_t j = 0; j < n; j += 2 * lanes) {
      RowV sum0 = hn::Load(d, acc + j), sum1 = hn::Load(d, acc + j + lanes);
      for (size_t k = 0; k < rows; ++k) {
        PrefetchAt(next[k], j);
        if constexpr (sizeof(T) == sizeof(float)) PrefetchAt(next[k], j + lanes);
        RowV v0, v1;
        LoadSum<true, has_y()>(x[k], has_y() ? y[k] : nullptr, j, v0, v1);
        const RowV scale = hn::Set(d, s[k]);
        sum0 = Fma(d, scale, v0, sum0);
        sum1 = Fma(d, scale, v1, sum1);
      }
      if (!out) {
        hn::Store(sum0, d, acc + j);
        hn::Store(sum1, d, acc + j + lanes);
      } else if constexpr (streamed()) {
        StreamTwo(sum0, sum1, out + j);
      } else {
        StoreTwo(sum0, sum1, out + j);
      }
    }
  };
  const bool streamed = out && stream;
  if (y && streamed) return loop(std::true_type(), std::true_type());
  if (y) return loop(std::true_type(), std::false_type());
  if (streamed) return loop(std::false_type(), std::true_type());
  loop(std::false_type(), std::false_type());
}

// out[j] = acc[j], rounded once to T.
template <class T>
HWY_INLINE void StoreRow(const float *acc, T *out, size_t n) {
  const RowD d;
  const size_t lanes = hn::Lanes(d);
  for (size_t j = 0; j < n; j += 2 * lanes)
    StoreTwo(hn::Load(d, acc + j), hn::Load(d, acc + j + lanes), out + j);
}

// The dot product of ScaleRowAndDot's slots (rows of T): the slots in element order, then
// slot i + 32 added into slot i for i < 32, then i + 16 for i < 16, ..., then slot 1 into slot 0.
// Plain F32 additions, as opencl's sum_slots. A NaN sum is returned as the quiet NaN 0x7fc00000:
// which of several NaNs an addition or fma passes on follows the instruction's operand order,
// which the compiler picks.
template <class T>
HWY_INLINE float DotSlotsSum(const float *slots) {
  const RowD d;
  const size_t lanes = hn::Lanes(d), step = 2 * lanes;
  HWY_ALIGN float sum[kDotSlots];
  // The same additions, as whole vectors while a level is at least one vector wide. The levels
  // that add whole steps to whole steps come first, in the slots' layout (the same in every
  // step); then the step left is put in element order.
  const float *from = slots;
  size_t live = kDotSlots;
  for (; live / 2 >= step; live /= 2, from = sum)
    for (size_t i = 0; i < live / 2; i += lanes)
      hn::Store(hn::Add(hn::Load(d, from + i), hn::Load(d, from + i + live / 2)), d, sum + i);
  if constexpr (std::is_same_v<T, float>) {
    if (from != sum) std::memcpy(sum, from, live * sizeof(float));
  } else {
    // The pair layout: a step's even elements, then its odd ones.
    for (size_t j = 0; j < live; j += step)
      StorePairF32(d, hn::Load(d, from + j), hn::Load(d, from + j + lanes), sum + j);
  }
  for (; live / 2 >= lanes; live /= 2)
    for (size_t i = 0; i < live / 2; i += lanes)
      hn::Store(hn::Add(hn::Load(d, sum + i), hn::Load(d, sum + i + live / 2)), d, sum + i);
  for (; live > 1; live /= 2)
    for (size_t i = 0; i < live / 2; ++i) sum[i] += sum[i + live / 2];
  if (std::isnan(sum[0])) {
    const uint32_t quiet_nan = 0x7fc00000u;
    std::memcpy(&sum[0], &quiet_nan, sizeof(float));
  }
  return sum[0];
}

// out[j] = s * g[j] (rounded once to T; out may be nullptr: not written; `stream`: with
// StreamTwo, out aligned), and where `slots` is not nullptr, (a[j] + b[j]) * g[j] accumulated
// into slots: the grad's scaled row copy and its row dot product with F32 accumulation, fused so
// that g is loaded once. The slots start from +0 on the `first_tile`, else from what the
// previous tile of the row left in `slots` (kDotSlots floats, aligned); after the `last_tile`
// the dot product (DotSlotsSum) is returned, else the slots are left in `slots` (and 0 is
// returned): slot j % kDotSlots at index j % kDotSlots for F32 rows, in the pair layout of
// LoadPairF32 for F16/BF16 rows (each step's even elements, then its odd ones). A tile starts
// at slot 0 (kTile is whole blocks). The padding of a tile's last step adds (+0) * (-0) = -0
// (a, b padded with +0, or absent; g padded with -0 by InputTile), which leaves every slot as
// it is, -0 included, so the slots hold exactly the chains over the row's elements. Prefetches
// next_out/next_a.
// One variant of ScaleRowAndDot's loop (kWrite 0: no out, 1: StoreTwo, 2: StreamTwo; the rows
// present), out of line: one small function per variant rather than all of them inlined into
// the caller, which made one function too large to compile in reasonable time under ASan+UBSan.
// A call per tile costs nothing beside a tile's work.
template <int kWrite, bool kAccumulate, bool kA, bool kB, class T>
HWY_NOINLINE float ScaleRowAndDotLoop(const T *g, float s, T *out, const T *a, const T *b, size_t n,
                                      float *slots, bool first_tile, bool last_tile,
                                      const T *next_out, const T *next_a) {
  const RowD d;
  const size_t lanes = hn::Lanes(d);
  const RowV scale = hn::Set(d, s);
  // The step at j: the scaled copy of [j, j + 2 lanes), and its products added into (acc0,
  // acc1), the slots of j % kDotSlots.
  const auto step = [&](size_t j, RowV & acc0, RowV & acc1) __attribute__((always_inline)) {
    PrefetchAt(next_out, j);
    PrefetchAt(next_a, j);
    RowV g0, g1;
    LoadTwo(g + j, g0, g1);
    if constexpr (kWrite == 1) StoreTwo(hn::Mul(g0, scale), hn::Mul(g1, scale), out + j);
    if constexpr (kWrite == 2) StreamTwo(hn::Mul(g0, scale), hn::Mul(g1, scale), out + j);
    if constexpr (kAccumulate) {
      RowV v0, v1;
      LoadSum<kA, kB>(a, b, j, v0, v1);
      acc0 = Fma(d, v0, g0, acc0);
      acc1 = Fma(d, v1, g1, acc1);
    }
  };
  constexpr size_t kVectors = kDotSlots / hn::MaxLanes(RowD());  // the slots' vectors
  HWY_ALIGN float sums[kDotSlots];
  if constexpr (!kAccumulate) {
    RowV unused = hn::Zero(d);
    for (size_t j = 0; j < n; j += 2 * lanes) step(j, unused, unused);
    return 0.0f;
  } else if constexpr (kVectors == 4 || kVectors == 8) {
    // The slots in registers, named (vectors may not be array elements): s0..s3 on AVX3,
    // s0..s7 on AVX2, s<i> holding slots [i lanes, (i + 1) lanes).
    RowV s0, s1, s2, s3, s4, s5, s6, s7;
    if (first_tile) {
      s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = hn::Zero(d);
    } else {
      s0 = hn::Load(d, slots), s1 = hn::Load(d, slots + lanes);
      s2 = hn::Load(d, slots + 2 * lanes), s3 = hn::Load(d, slots + 3 * lanes);
      s4 = s5 = s6 = s7 = hn::Zero(d);
      if constexpr (kVectors == 8) {
        s4 = hn::Load(d, slots + 4 * lanes), s5 = hn::Load(d, slots + 5 * lanes);
        s6 = hn::Load(d, slots + 6 * lanes), s7 = hn::Load(d, slots + 7 * lanes);
      }
    }
    // The steps of the block of kDotSlots elements from j that start before `end`.
    const auto block = [&](size_t j, size_t end) __attribute__((always_inline)) {
      const size_t st = 2 * lanes;
      step(j, s0, s1);
      if (j + st < end) step(j + st, s2, s3);
      if constexpr (kVectors == 8) {
        if (j + 2 * st < end) step(j + 2 * st, s4, s5);
        if (j + 3 * st < end) step(j + 3 * st, s6, s7);
      }
    };
    size_t j = 0;
    for (; j + kDotSlots <= n; j += kDotSlots) block(j, j + kDotSlots);
    if (j < n) block(j, n);
    float *to = last_tile ? sums : slots;
    hn::Store(s0, d, to), hn::Store(s1, d, to + lanes);
    hn::Store(s2, d, to + 2 * lanes), hn::Store(s3, d, to + 3 * lanes);
    if constexpr (kVectors == 8) {
      hn::Store(s4, d, to + 4 * lanes), hn::Store(s5, d, to + 5 * lanes);
      hn::Store(s6, d, to + 6 * lanes), hn::Store(s7, d, to + 7 * lanes);
    }
  } else {
    // Narrower targets (SSE4, SSSE3, SCALAR: their Fma goes through memory anyway): the
    // slots in memory.
    if (first_tile) {
      for (size_t i = 0; i < kDotSlots; i += lanes) hn::Store(hn::Zero(d), d, sums + i);
    } else {
      std::memcpy(sums, slots, sizeof(sums));
    }
    for (size_t j = 0; j < n; j += 2 * lanes) {
      float *slot = sums + j % kDotSlots;
      RowV acc0 = hn::Load(d, slot), acc1 = hn::Load(d, slot + lanes);
      step(j, acc0, acc1);
      hn::Store(acc0, d, slot), hn::Store(acc1, d, slot + lanes);
    }
    if (!last_tile) std::memcpy(slots, sums, sizeof(sums));
  }
  return last_tile ? DotSlotsSum<T>(sums) : 0.0f;
}

// out[j] = s * g[j] (rounded once to T; out may be nullptr: not written; `stream`: with
// StreamTwo, out aligned), and where `slots` is not nullptr, (a[j] + b[j]) * g[j] accumulated
// into slots: the grad's scaled row copy and its row dot product with F32 accumulation, fused so
// that g is loaded once. The slots start from +0 on the `first_tile`, else from what the
// previous tile of the row left in `slots` (kDotSlots floats, aligned); after the `last_tile`
// the dot product (DotSlotsSum) is returned, else the slots are left in `slots` (and 0 is
// returned): slot j % kDotSlots at index j % kDotSlots for F32 rows, in the pair layout of
// LoadPairF32 for F16/BF16 rows (each step's even elements, then its odd ones). A tile starts
// at slot 0 (kTile is whole blocks). The padding of a tile's last step adds (+0) * (-0) = -0
// (a, b padded with +0, or absent; g padded with -0 by InputTile), which leaves every slot as
// it is, -0 included, so the slots hold exactly the chains over the row's elements. Prefetches
// next_out/next_a.
template <class T>
HWY_INLINE float ScaleRowAndDot(const T *g, float s, T *out, bool stream, const T *a, const T *b,
                                size_t n, float *slots, bool first_tile, bool last_tile,
                                const T *next_out, const T *next_a) {
  if (!slots) {  // the scaled copy alone (out not nullptr)
    return stream ? ScaleRowAndDotLoop<2, false, false, false>(g, s, out, a, b, n, slots, false,
                                                               false, next_out, next_a)
                  : ScaleRowAndDotLoop<1, false, false, false>(g, s, out, a, b, n, slots, false,
                                                               false, next_out, next_a);
  }
  const int write = !out ? 0 : stream ? 2 : 1;
  float dot = 0.0f;
  WithPresent(a, b, [&](auto has_a, auto has_b) {
    const auto loop = [&](auto kWrite) {
      dot = ScaleRowAndDotLoop<kWrite(), true, has_a(), has_b()>(
          g, s, out, a, b, n, slots, first_tile, last_tile, next_out, next_a);
    };
    if (write == 0) return loop(std::integral_constant<int, 0>());
    if (write == 1) return loop(std::integral_constant<int, 1>());
    loop(std::integral_constant<int, 2>());
  });
  return dot;
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // INFINIOP_CPU_ROWS_INL_H_
