// SPDX-License-Identifier: Apache-2.0
// MoeInitRoutingV2's rows on the cpu device: token-major, so each x row is read from memory once
// and written to its K places while it is in L1 (a gather in sorted order would fetch it K
// times); large calls write with non-temporal stores, as the elementwise operators do. Then the
// capacity slots nobody filled are zeroed. Rows are copied as bytes: bit for bit.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/moe_init_routing.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cstring>

#include "cpu/convert-inl.h"
#include "cpu/parallel.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "ops/moe_init_routing.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace {

// n bytes from src to dst, streamed past the cache where `stream` (Stream needs dst aligned to
// the vector: the unaligned head and the tail go through memcpy).
HWY_INLINE void CopyBytes(uint8_t *HWY_RESTRICT dst, const uint8_t *HWY_RESTRICT src, size_t n,
                          bool stream) {
  if (!stream) {
    std::memcpy(dst, src, n);
    return;
  }
  const hn::ScalableTag<uint8_t> d;
  const size_t lanes = hn::Lanes(d);
  const size_t misalign = reinterpret_cast<uintptr_t>(dst) % lanes;
  const size_t head = std::min(n, misalign == 0 ? 0 : lanes - misalign);
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + lanes <= n; i += lanes) hn::Stream(hn::LoadU(d, src + i), d, dst + i);
  std::memcpy(dst + i, src + i, n - i);
}

// Row `row` of a view, as bytes.
HWY_INLINE uint8_t *RowBytes(const gather::RowView &view, const void *data, size_t row,
                             size_t size) {
  return const_cast<uint8_t *>(static_cast<const uint8_t *>(data)) +
         view.rowOffset(row) * static_cast<ptrdiff_t>(size);
}

// One row of `cols` elements of `size` bytes, any column strides (in elements); src NULL: zeros.
HWY_INLINE void MoveRow(uint8_t *dst, ptrdiff_t dst_step, const uint8_t *src, ptrdiff_t src_step,
                        size_t cols, size_t size, bool stream) {
  if (dst_step == 1 && (src_step == 1 || !src)) {
    if (src)
      CopyBytes(dst, src, cols * size, stream);
    else
      std::memset(dst, 0, cols * size);
    return;
  }
  const auto size_bytes = static_cast<ptrdiff_t>(size);
  for (size_t j = 0; j < cols; ++j) {
    uint8_t *out = dst + static_cast<ptrdiff_t>(j) * dst_step * size_bytes;
    if (src)
      std::memcpy(out, src + static_cast<ptrdiff_t>(j) * src_step * size_bytes, size);
    else
      std::memset(out, 0, size);
  }
}

}  // namespace

// Tokens [first, last): each x row to the rows of expanded_x its positions were sorted to.
void MoeInitTokens(const moe::InitPlan &p, const moe::InitData &data,
                   const moe::InitRouting &routing, bool stream, size_t first, size_t last) {
  const size_t size = p.element_size;
  stream = stream && kStreamingStores;  // else plain copies (convert-inl.h)
  for (size_t r = first; r < last; ++r) {
    const uint8_t *src = RowBytes(p.x, data.x, r, size);
    for (size_t k = 0; k < p.topk; ++k) {
      const int64_t d = routing.row_index[r * p.topk + k];
      if (d < 0 || static_cast<size_t>(d) >= p.expanded_x.rows) continue;  // dropped, inactive
      MoveRow(RowBytes(p.expanded_x, data.expanded_x, static_cast<size_t>(d), size),
              p.expanded_x.col_stride, src, p.x.col_stride, p.hidden, size, stream);
    }
  }
  if (stream) hwy::FlushStream();
}

// Experts [first, last): their capacity slots beyond the tokens they got, zeroed.
void MoeInitPadding(const moe::InitPlan &p, const moe::InitData &data,
                    const moe::InitRouting &routing, size_t first, size_t last) {
  for (size_t e = first; e < last; ++e)
    for (size_t slot = std::min<size_t>(routing.counts[e], p.capacity); slot < p.capacity; ++slot)
      MoveRow(RowBytes(p.expanded_x, data.expanded_x, e * p.capacity + slot, p.element_size),
              p.expanded_x.col_stride, nullptr, 0, p.hidden, p.element_size, false);
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace infiniop::cpu {
HWY_EXPORT(MoeInitTokens);
HWY_EXPORT(MoeInitPadding);

void moe_init_routing(const moe::InitPlan &plan, const moe::InitData &data,
                      const moe::InitRouting &routing) {
  if (plan.hidden == 0) return;  // no bytes to move (and x, expanded_x may be NULL)
  // The bytes the call moves: x read, expanded_x written.
  const size_t row_bytes = plan.hidden * plan.element_size;
  const bool stream = (plan.tokens + plan.expanded_x.rows) * row_bytes >= streamMinBytes();
  const auto tokens = &HWY_DYNAMIC_DISPATCH(MoeInitTokens);
  parallelRanges(plan.tokens, plan.topk * plan.hidden, [&](size_t first, size_t last) {
    tokens(plan, data, routing, stream, first, last);
  });
  if (plan.capacity == 0) return;
  const auto padding = &HWY_DYNAMIC_DISPATCH(MoeInitPadding);
  parallelRanges(plan.experts, plan.capacity * plan.hidden / 4 + 1,
                 [&](size_t first, size_t last) { padding(plan, data, routing, first, last); });
}
}  // namespace infiniop::cpu
#endif
