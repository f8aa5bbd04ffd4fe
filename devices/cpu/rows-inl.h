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

#include "cpu/convert-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using RowD = hn::ScalableTag<float>;
using RowV = hn::Vec<RowD>;

// Elements per tile: a multiple of every target's lane count.
constexpr size_t kTile = 512;

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

// a[j] + b[j] as F32, either row absent (nullptr) reading as zeros.
template <class T>
HWY_INLINE RowV LoadSum(const T *a, const T *b, size_t j) {
  const RowD d;
  if (a && b) return hn::Add(LoadF32(d, a + j), LoadF32(d, b + j));
  if (a) return LoadF32(d, a + j);
  if (b) return LoadF32(d, b + j);
  return hn::Zero(d);
}

// out[j] = s * in[j], rounded once to T.
template <class T>
HWY_INLINE void ScaleRow(const T *in, float s, T *out, size_t n) {
  const RowD d;
  const RowV scale = hn::Set(d, s);
  for (size_t j = 0; j < n; j += hn::Lanes(d))
    StoreF32(d, hn::Mul(LoadF32(d, in + j), scale), out + j);
}

// acc[j] = a[j] + b[j] (acc is F32).
template <class T>
HWY_INLINE void LoadRow(const T *a, const T *b, float *acc, size_t n) {
  const RowD d;
  for (size_t j = 0; j < n; j += hn::Lanes(d)) hn::Store(LoadSum(a, b, j), d, acc + j);
}

// acc[j] += s * (a[j] + b[j]): the row axpy into an F32 accumulator.
template <class T>
HWY_INLINE void AxpyRow(float s, const T *a, const T *b, float *acc, size_t n) {
  const RowD d;
  const RowV scale = hn::Set(d, s);
  for (size_t j = 0; j < n; j += hn::Lanes(d))
    hn::Store(hn::MulAdd(scale, LoadSum(a, b, j), hn::Load(d, acc + j)), d, acc + j);
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
HWY_INLINE RowV DotRow(const T *a, const T *b, const T *g, size_t n, RowV sum) {
  const RowD d;
  for (size_t j = 0; j < n; j += hn::Lanes(d))
    sum = hn::MulAdd(LoadSum(a, b, j), LoadF32(d, g + j), sum);
  return sum;
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // INFINIOP_CPU_ROWS_INL_H_
