// Per-target row primitives of the cpu gather framework: whole rows of F32/F16/BF16 storage
// scaled, accumulated into F32 and dotted with F32 accumulation. Rows are walked in tiles of
// kTile elements; a tile that is strided, or shorter than whole vectors, is first copied into a
// zero-padded contiguous buffer, so the primitives only ever see whole vectors.
#if defined(INFINIOP_CPU_ROWS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef INFINIOP_CPU_ROWS_INL_H_
#undef INFINIOP_CPU_ROWS_INL_H_
#else
#define INFINIOP_CPU_ROWS_INL_H_
#endif

#include <cstring>
#include <type_traits>

#include "cpu/convert-inl.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using RowD = hn::ScalableTag<float>;
using RowV = hn::Vec<RowD>;

// Elements per tile: a multiple of every target's lane count.
constexpr size_t kTile = 4096;

// Tile [start, start + count) of a row, `padded` = count rounded up to whole vectors.
struct TileSpan {
  size_t start, count, padded;
};

template <class Body>
HWY_INLINE void ForEachTile(size_t n, const Body &body) {
  const size_t lanes = hn::Lanes(RowD());
  for (size_t start = 0; start < n; start += kTile) {
    const size_t count = n - start < kTile ? n - start : kTile;
    body(TileSpan{start, count, (count + lanes - 1) / lanes * lanes});
  }
}

// The tile of an input row (nullptr stays nullptr: an absent row reads as zeros): the row itself
// when it can be read as whole vectors, else a zero-padded copy in `buffer` (kTile elements).
template <class T>
HWY_INLINE const T *InputTile(const T *row, ptrdiff_t stride, TileSpan t, T *buffer) {
  if (!row) return nullptr;
  if (stride == 1 && t.count == t.padded) return row + t.start;
  for (size_t j = 0; j < t.count; ++j)
    buffer[j] = row[static_cast<ptrdiff_t>(t.start + j) * stride];
  std::memset(static_cast<void *>(buffer + t.count), 0, (t.padded - t.count) * sizeof(T));
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
// once per combination of present rows instead of testing for them at every vector.
template <class T, class Body>
HWY_INLINE void WithPresent(const T *a, const T *b, const Body &body) {
  if (a && b) return body(std::true_type(), std::true_type());
  if (a) return body(std::true_type(), std::false_type());
  if (b) return body(std::false_type(), std::true_type());
  body(std::false_type(), std::false_type());
}

// a[j] + b[j] as F32, an absent row reading as zeros.
template <size_t kA, size_t kB, class T>
HWY_INLINE RowV LoadSum(const T *a, const T *b, size_t j) {
  const RowD d;
  if constexpr (kA && kB) return hn::Add(LoadF32(d, a + j), LoadF32(d, b + j));
  if constexpr (kA && !kB) return LoadF32(d, a + j);
  if constexpr (!kA && kB) return LoadF32(d, b + j);
  return hn::Zero(d);
}

// Gathered rows are short streams at random addresses, which the hardware prefetchers pick up
// late: each row loop also prefetches the row that comes next (nullptr: none), at the same
// offset, so its lines are on the way while this row is processed.
template <class T>
HWY_INLINE void PrefetchAt(const T *next, size_t j) {
  if (next) hwy::Prefetch(next + j);
}

// out[j] = s * in[j], rounded once to T.
template <class T>
HWY_INLINE void ScaleRow(const T *in, float s, T *out, size_t n, const T *next = nullptr) {
  const RowD d;
  const RowV scale = hn::Set(d, s);
  for (size_t j = 0; j < n; j += hn::Lanes(d)) {
    PrefetchAt(next, j);
    StoreF32(d, hn::Mul(LoadF32(d, in + j), scale), out + j);
  }
}

// acc[j] = a[j] + b[j] (acc is F32).
template <class T>
HWY_INLINE void LoadRow(const T *a, const T *b, float *acc, size_t n) {
  const RowD d;
  WithPresent(a, b, [&](auto has_a, auto has_b) {
    for (size_t j = 0; j < n; j += hn::Lanes(d))
      hn::Store(LoadSum<has_a(), has_b()>(a, b, j), d, acc + j);
  });
}

// acc[j] += s * (a[j] + b[j]): the row axpy into an F32 accumulator.
template <class T>
HWY_INLINE void AxpyRow(float s, const T *a, const T *b, float *acc, size_t n,
                        const T *next = nullptr) {
  const RowD d;
  const RowV scale = hn::Set(d, s);
  WithPresent(a, b, [&](auto has_a, auto has_b) {
    for (size_t j = 0; j < n; j += hn::Lanes(d)) {
      PrefetchAt(next, j);
      const RowV sum = LoadSum<has_a(), has_b()>(a, b, j);
      hn::Store(hn::MulAdd(scale, sum, hn::Load(d, acc + j)), d, acc + j);
    }
  });
}

// out[j] = acc[j], rounded once to T.
template <class T>
HWY_INLINE void StoreRow(const float *acc, T *out, size_t n) {
  const RowD d;
  for (size_t j = 0; j < n; j += hn::Lanes(d)) StoreF32(d, hn::Load(d, acc + j), out + j);
}

// sum += (a[j] + b[j]) * g[j], lane-wise: the row dot product with F32 accumulation (the caller
// reduces the lanes once per row, so the order depends only on the target, never on threads).
template <class T>
HWY_INLINE RowV DotRow(const T *a, const T *b, const T *g, size_t n, RowV sum,
                       const T *next = nullptr) {
  const RowD d;
  WithPresent(a, b, [&](auto has_a, auto has_b) {
    for (size_t j = 0; j < n; j += hn::Lanes(d)) {
      PrefetchAt(next, j);
      sum = hn::MulAdd(LoadSum<has_a(), has_b()>(a, b, j), LoadF32(d, g + j), sum);
    }
  });
  return sum;
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // INFINIOP_CPU_ROWS_INL_H_
