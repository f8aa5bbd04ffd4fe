// SPDX-License-Identifier: Apache-2.0
// MoeFinalizeRoutingV2 and its grad on the cpu device, on the gather framework's row primitives.
// Forward: each token's output row is built tile by tile in an F32 accumulator from its x1, x2
// and K (expanded_x + bias) rows. Grad: a token-major pass writes every destination row that
// exactly one position reaches (the common case) and every grad_scales dot product, fetching each
// grad_y row from memory once for its K positions (the other K - 1 reads hit the cache); a
// destination-major pass over the index inversion then zero-fills unreached rows and sums
// duplicated ones in increasing position order. Every sum is in the fixed order of rows-inl.h
// (fused multiply-adds rounded once, grad_scales in kDotSlots slots), which is opencl's too:
// the same bits on every target, device and thread count.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/moe_finalize_routing.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "cpu/parallel.h"
#include "cpu/rows-inl.h"
#include "hwy/highway.h"
#include "ops/moe_finalize_routing.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace {

using gather::RowView;

HWY_INLINE float ScalarF32(const float *p) {
  return *p;
}
HWY_INLINE float ScalarF32(const hwy::bfloat16_t *p) {
  uint16_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return f32FromBf16(bits);
}
HWY_INLINE float ScalarF32(const hwy::float16_t *p) {
  uint16_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return f32FromF16(bits);
}
// A NaN stored is the canonical quiet NaN, as every vector store (convert-inl.h).
HWY_INLINE float CanonicalNaN(float v) {
  if (!std::isnan(v)) return v;
  const uint32_t bits = 0x7fc00000u;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}
HWY_INLINE void StoreScalar(float v, float *p) {
  *p = CanonicalNaN(v);
}
HWY_INLINE void StoreScalar(float v, hwy::bfloat16_t *p) {
  const uint16_t bits = bf16FromF32(CanonicalNaN(v));
  std::memcpy(p, &bits, sizeof(bits));
}
HWY_INLINE void StoreScalar(float v, hwy::float16_t *p) {
  const uint16_t bits = f16FromF32(CanonicalNaN(v));
  std::memcpy(p, &bits, sizeof(bits));
}

// Row `row` of a row view over `data` (nullptr when the view is absent).
template <class T>
HWY_INLINE T *RowOf(const RowView &view, const void *data, size_t row) {
  return view.present ? const_cast<T *>(static_cast<const T *>(data)) + view.rowOffset(row)
                      : nullptr;
}

// scales[r, k] (of T, or F32 where `f32`), or 1 where the plan has no scales: presence is the
// plan's (the descriptor given at creation), never the data pointer's, which is ignored (never
// read) for an absent tensor.
template <class T>
HWY_INLINE float ScaleOf(const gather::TableView &scales, bool f32, const void *data, size_t r,
                         size_t k) {
  if (!scales.present) return 1.0f;
  return f32 ? static_cast<const float *>(data)[scales.offset(r, k)]
             : ScalarF32(static_cast<const T *>(data) + scales.offset(r, k));
}

// Whether a row view's rows can be read in place (and so prefetched).
HWY_INLINE bool Contiguous(const RowView &view) {
  return view.col_stride == 1;
}

// The forward's tiles are short enough for the K rows it gathers per tile, its F32 accumulator
// and the rows being prefetched to share L1.
constexpr size_t kForwardTile = 1024;

template <class T>
void ForwardTokens(const moe::ForwardPlan &p, const moe::ForwardData &data, size_t first,
                   size_t last) {
  const bool f32_scales = p.scales_dtype == INFINI_DTYPE_F32;
  HWY_ALIGN float acc[kForwardTile];
  HWY_ALIGN T x1_buffer[kForwardTile], x2_buffer[kForwardTile], out_buffer[kForwardTile];
  HWY_ALIGN T expanded_buffer[kGroupRows][kForwardTile], bias_buffer[kGroupRows][kForwardTile];
  HWY_ALIGN T zeros[kForwardTile];  // the expanded_x row of a dropped token
  std::memset(static_cast<void *>(zeros), 0, sizeof(zeros));
  // expanded_x row of position (r, k); nullptr for a dropped token.
  const auto expanded_row = [&](size_t r, size_t k) -> const T * {
    const int64_t index = p.row_index.at(data.row_index, r, k);
    return index >= 0 && static_cast<size_t>(index) < p.expanded_x.rows
               ? RowOf<T>(p.expanded_x, data.expanded_x, index)
               : nullptr;
  };
  const bool prefetch = Contiguous(p.expanded_x);
  // The bytes the call moves (devices/cpu/parallel.h): out written, x1/x2 and K expanded_x rows
  // read per token.
  const size_t moved_rows =
      p.out.rows * (1 + (p.x1.present ? 1 : 0) + (p.x2.present ? 1 : 0)) + p.out.rows * p.topk;
  const bool stream = moved_rows * p.hidden * sizeof(T) >= streamMinBytes();
  for (size_t r = first; r < last; ++r) {
    T *out = RowOf<T>(p.out, data.out, r);
    const T *x1 = RowOf<T>(p.x1, data.x1, r), *x2 = RowOf<T>(p.x2, data.x2, r);
    ForEachTile(
        p.hidden,
        [&](TileSpan t) {
          LoadRow(InputTile(x1, p.x1.col_stride, t, x1_buffer),
                  InputTile(x2, p.x2.col_stride, t, x2_buffer), acc, t.padded);
          T *tile = OutputTile(out, p.out.col_stride, t, out_buffer);
          const bool last_tile = t.start + kForwardTile >= p.hidden;
          for (size_t k0 = 0; k0 < p.topk || k0 == 0; k0 += kGroupRows) {
            const size_t rows = std::min(kGroupRows, p.topk - k0);
            float scale[kGroupRows];
            const T *expanded[kGroupRows], *bias[kGroupRows], *next[kGroupRows];
            for (size_t g = 0; g < rows; ++g) {
              const size_t k = k0 + g;
              const T *row = expanded_row(r, k);
              expanded[g] =
                  row ? InputTile(row, p.expanded_x.col_stride, t, expanded_buffer[g]) : zeros;
              bias[g] = p.bias.present
                            ? InputTile(RowOf<T>(p.bias, data.bias,
                                                 p.expert_index.at(data.expert_index, r, k)),
                                        p.bias.col_stride, t, bias_buffer[g])
                            : nullptr;
              scale[g] = ScaleOf<T>(p.scales, f32_scales, data.scales, r, k);
              // What this row slot reads next: the same row's next tile, or after the last tile
              // the next token's row k (a whole pass over the K rows ahead).
              next[g] = !prefetch      ? nullptr
                        : !last_tile   ? (row ? row + t.start + kForwardTile : nullptr)
                        : r + 1 < last ? expanded_row(r + 1, k)
                                       : nullptr;
            }
            const bool final_group = k0 + rows >= p.topk;
            AxpyRows(rows, scale, expanded, p.bias.present ? bias : nullptr, next, acc,
                     final_group ? tile : nullptr,
                     stream && tile != out_buffer && StreamAligned(tile), t.padded);
          }
          FlushTile(out, p.out.col_stride, t, tile);
        },
        kForwardTile);
  }
  hwy::FlushStream();
}

// Positions of tokens [first, last): grad_scales, and the destination rows they alone reach.
template <class T>
void GradTokens(const moe::GradPlan &p, const moe::GradData &data, const gather::Inverse &inverse,
                size_t first, size_t last) {
  HWY_ALIGN T grad_y_buffer[kTile], expanded_buffer[kTile], bias_buffer[kTile], out_buffer[kTile];
  HWY_ALIGN float slots[kDotSlots];  // a grad_scales dot product between tiles (ScaleRowAndDot)
  const bool f32_scales = p.scales_dtype == INFINI_DTYPE_F32;
  void *grad_scales = p.grad_scales.present ? data.grad_scales : nullptr;
  const RowView &out_view = p.grad_expanded_x;
  // The rows position (r, k) touches: its grad_expanded_x row if it alone reaches it, its
  // expanded_x row if it reaches one.
  struct Rows {
    T *out;
    const T *expanded;
  };
  const auto rows_of = [&](size_t r, size_t k) {
    const int64_t index = p.row_index.at(data.row_index, r, k);
    if (index < 0 || static_cast<size_t>(index) >= out_view.rows) return Rows{nullptr, nullptr};
    const bool sole = inverse.count(static_cast<size_t>(index)) == 1;
    return Rows{sole ? RowOf<T>(out_view, data.grad_expanded_x, index) : nullptr,
                RowOf<T>(p.expanded_x, data.expanded_x, index)};
  };
  // The bytes the call moves (devices/cpu/parallel.h): grad_expanded_x written, grad_y read, and
  // expanded_x read for grad_scales' dot products.
  const size_t moved_rows = out_view.rows * (grad_scales ? 2 : 1) + p.grad_y.rows;
  const bool streaming = moved_rows * p.hidden * sizeof(T) >= streamMinBytes();
  // A streamed row is never read: prefetching it would fetch the lines streaming avoids.
  const bool prefetch_out = Contiguous(out_view) && !streaming,
             prefetch_expanded = Contiguous(p.expanded_x);
  Rows next = first < last && p.topk > 0 ? rows_of(first, 0) : Rows{nullptr, nullptr};
  for (size_t r = first; r < last; ++r) {
    const T *grad_y = RowOf<T>(p.grad_y, data.grad_y, r);
    for (size_t k = 0; k < p.topk; ++k) {
      const Rows rows = next;
      next = k + 1 < p.topk ? rows_of(r, k + 1)
             : r + 1 < last ? rows_of(r + 1, 0)
                            : Rows{nullptr, nullptr};
      if (!rows.out && !grad_scales) continue;
      const T *bias = p.bias.present
                          ? RowOf<T>(p.bias, data.bias, p.expert_index.at(data.expert_index, r, k))
                          : nullptr;
      const float scale = ScaleOf<T>(p.scales, f32_scales, data.scales, r, k);
      float sum = 0.0f;  // with no tile (H = 0), the empty sum
      ForEachTile(
          p.hidden, [&](TileSpan t) __attribute__((always_inline)) {
            const T *g = InputTile(grad_y, p.grad_y.col_stride, t, grad_y_buffer, true);
            T *tile = rows.out ? OutputTile(rows.out, out_view.col_stride, t, out_buffer) : nullptr;
            const bool stream = streaming && tile && tile != out_buffer && StreamAligned(tile);
            sum = ScaleRowAndDot(
                g, scale, tile, stream,
                InputTile(rows.expanded, p.expanded_x.col_stride, t, expanded_buffer),
                InputTile(bias, p.bias.col_stride, t, bias_buffer), t.padded,
                grad_scales ? slots : nullptr, t.start == 0, t.start + t.count == p.hidden,
                prefetch_out && next.out ? next.out + t.start : nullptr,
                prefetch_expanded && next.expanded ? next.expanded + t.start : nullptr);
            if (tile) FlushTile(rows.out, out_view.col_stride, t, tile);
          });
      if (grad_scales) {
        const ptrdiff_t at = p.grad_scales.offset(r, k);
        if (f32_scales)
          static_cast<float *>(grad_scales)[at] = sum;
        else
          StoreScalar(sum, static_cast<T *>(grad_scales) + at);
      }
    }
  }
  hwy::FlushStream();
}

// Destination rows [first, last) that no position or several positions reach: zeros, or the sum
// of their sources in increasing position order.
template <class T>
void GradDestinations(const moe::GradPlan &p, const moe::GradData &data,
                      const gather::Inverse &inverse, size_t first, size_t last) {
  const bool f32_scales = p.scales_dtype == INFINI_DTYPE_F32;
  HWY_ALIGN float acc[kTile];
  HWY_ALIGN T grad_y_buffer[kTile], out_buffer[kTile];
  const RowView &out_view = p.grad_expanded_x;
  for (size_t d = first; d < last; ++d) {
    const size_t count = inverse.count(d);
    if (count == 1) continue;
    T *out = RowOf<T>(out_view, data.grad_expanded_x, d);
    const int32_t *sources = inverse.sources + inverse.first[d];
    ForEachTile(p.hidden, [&](TileSpan t) {
      std::memset(acc, 0, t.padded * sizeof(float));
      for (size_t s = 0; s < count; ++s) {
        const size_t position = static_cast<size_t>(sources[s]);
        const size_t r = position / p.topk, k = position % p.topk;
        const float scale = ScaleOf<T>(p.scales, f32_scales, data.scales, r, k);
        AxpyRow(
            scale,
            InputTile(RowOf<T>(p.grad_y, data.grad_y, r), p.grad_y.col_stride, t, grad_y_buffer),
            static_cast<const T *>(nullptr), acc, t.padded);
      }
      T *tile = OutputTile(out, out_view.col_stride, t, out_buffer);
      StoreRow(acc, tile, t.padded);
      FlushTile(out, out_view.col_stride, t, tile);
    });
  }
}

// Calls fn(T{}) with the Highway storage type of the dtype.
template <class Fn>
HWY_INLINE void VisitStorage(infiniDtype_t dtype, const Fn &fn) {
  if (dtype == INFINI_DTYPE_BF16) return fn(hwy::bfloat16_t{});
  if (dtype == INFINI_DTYPE_F16) return fn(hwy::float16_t{});
  return fn(float{});
}

}  // namespace

void MoeForwardTokens(const moe::ForwardPlan &p, const moe::ForwardData &data, size_t first,
                      size_t last) {
  VisitStorage(p.dtype, [&](auto t) { ForwardTokens<decltype(t)>(p, data, first, last); });
}
void MoeGradTokens(const moe::GradPlan &p, const moe::GradData &data,
                   const gather::Inverse &inverse, size_t first, size_t last) {
  VisitStorage(p.dtype, [&](auto t) { GradTokens<decltype(t)>(p, data, inverse, first, last); });
}
void MoeGradDestinations(const moe::GradPlan &p, const moe::GradData &data,
                         const gather::Inverse &inverse, size_t first, size_t last) {
  VisitStorage(p.dtype,
               [&](auto t) { GradDestinations<decltype(t)>(p, data, inverse, first, last); });
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace infiniop::cpu {
HWY_EXPORT(MoeForwardTokens);
HWY_EXPORT(MoeGradTokens);
HWY_EXPORT(MoeGradDestinations);

void moeFinalizeRouting(const moe::ForwardPlan &plan, const moe::ForwardData &data) {
  const auto tokens = &HWY_DYNAMIC_DISPATCH(MoeForwardTokens);
  parallelRanges(plan.tokens, (plan.topk + 1) * plan.hidden,
                 [&](size_t first, size_t last) { tokens(plan, data, first, last); });
}

void moeFinalizeRoutingGrad(const moe::GradPlan &plan, const moe::GradData &data) {
  const gather::Inverse inverse = gather::invertIndex(plan.row_index, data.row_index,
                                                      plan.grad_expanded_x.rows, data.workspace);
  const auto tokens = &HWY_DYNAMIC_DISPATCH(MoeGradTokens);
  parallelRanges(plan.tokens, plan.topk * plan.hidden,
                 [&](size_t first, size_t last) { tokens(plan, data, inverse, first, last); });
  // Every row with a count other than one: untouched (zero-filled here) or duplicated.
  const auto destinations = &HWY_DYNAMIC_DISPATCH(MoeGradDestinations);
  parallelRanges(
      inverse.rows, inverse.has_duplicates ? plan.hidden * 2 : plan.hidden / 4 + 1,
      [&](size_t first, size_t last) { destinations(plan, data, inverse, first, last); });
}
}  // namespace infiniop::cpu
#endif
