// SPDX-License-Identifier: Apache-2.0
// MoeFinalizeRoutingV2 on the cpu device, on the gather framework's row primitives: each token's
// output row is built tile by tile in an F32 accumulator from its x1, x2 and K (expanded_x +
// bias) rows, every sum in the fixed order of rows-inl.h (fused multiply-adds rounded once),
// which is opencl's too: the same bits on every target, device and thread count. The grad is in
// moe_finalize_routing_grad.cc.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/moe_finalize_routing.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cstring>

#include "cpu/moe_finalize-inl.h"
#include "cpu/parallel.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace {

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
  const bool stream = kStreamingStores && moved_rows * p.hidden * sizeof(T) >= streamMinBytes();
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

}  // namespace

void MoeForwardTokens(const moe::ForwardPlan &p, const moe::ForwardData &data, size_t first,
                      size_t last) {
  VisitStorage(p.dtype, [&](auto t) { ForwardTokens<decltype(t)>(p, data, first, last); });
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace infiniop::cpu {
HWY_EXPORT(MoeForwardTokens);

void moe_finalize_routing(const moe::ForwardPlan &plan, const moe::ForwardData &data) {
  const auto tokens = &HWY_DYNAMIC_DISPATCH(MoeForwardTokens);
  parallelRanges(plan.tokens, (plan.topk + 1) * plan.hidden,
                 [&](size_t first, size_t last) { tokens(plan, data, first, last); });
}

// MoeInitRoutingV2Grad: the forward with weight 1 (its plan has no scales).
void moe_init_routing_grad(const moe::ForwardPlan &plan, const moe::ForwardData &data) {
  moe_finalize_routing(plan, data);
}
}  // namespace infiniop::cpu
#endif
