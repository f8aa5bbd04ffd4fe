// SPDX-License-Identifier: Apache-2.0
// MoeFinalizeRoutingV2's grad on the cpu device, on the gather framework's row primitives: a
// token-major pass writes every destination row that exactly one position reaches (the common
// case) and every grad_scales dot product, fetching each grad_y row from memory once for its K
// positions (the other K - 1 reads hit the cache); a destination-major pass over the index
// inversion then zero-fills unreached rows and sums duplicated ones in increasing position order.
// Every sum is in the fixed order of rows-inl.h (fused multiply-adds rounded once, grad_scales in
// kDotSlots slots), which is opencl's too: the same bits on every target, device and thread
// count.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/moe_finalize_routing_grad.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cstring>

#include "cpu/moe_finalize-inl.h"
#include "cpu/parallel.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace {

using gather::RowView;

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
  const bool streaming = kStreamingStores && moved_rows * p.hidden * sizeof(T) >= streamMinBytes();
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

}  // namespace

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
HWY_EXPORT(MoeGradTokens);
HWY_EXPORT(MoeGradDestinations);

void moe_finalize_routing_grad(const moe::GradPlan &plan, const moe::GradData &data) {
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
