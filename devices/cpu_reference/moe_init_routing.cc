// SPDX-License-Identifier: Apache-2.0
// MoeInitRoutingV2's rows, as the formula reads: each element copied byte for byte to where the
// host's sort sends its token, then the capacity slots nobody filled set to zero. And
// MoeInitRoutingQuantV2's: each expanded row quantized from its token's values in double
// (exact/quant.h), the oracle of the other devices.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "exact/quant.h"
#include "ops/moe_init_routing.h"

namespace infiniop::cpu_reference {
namespace {

char *elementAt(const gather::RowView &view, const void *data, size_t row, size_t j,
                size_t element_size) {
  const ptrdiff_t offset = view.rowOffset(row) + static_cast<ptrdiff_t>(j) * view.col_stride;
  return const_cast<char *>(static_cast<const char *>(data)) +
         offset * static_cast<ptrdiff_t>(element_size);
}

}  // namespace

void moe_init_routing(const moe::InitPlan &p, const moe::InitData &data,
                      const moe::InitRouting &routing) {
  const size_t size = p.element_size;
  for (size_t r = 0; r < p.tokens; ++r)
    for (size_t k = 0; k < p.topk; ++k) {
      const int64_t d = routing.row_index[r * p.topk + k];
      if (d < 0 || static_cast<size_t>(d) >= p.expanded_x.rows) continue;  // dropped, inactive
      for (size_t j = 0; j < p.hidden; ++j)
        std::memcpy(elementAt(p.expanded_x, data.expanded_x, d, j, size),
                    elementAt(p.x, data.x, r, j, size), size);
    }
  if (p.capacity == 0) return;
  for (size_t e = 0; e < p.experts; ++e)
    for (size_t slot = std::min<size_t>(routing.counts[e], p.capacity); slot < p.capacity; ++slot)
      for (size_t j = 0; j < p.hidden; ++j)
        std::memset(elementAt(p.expanded_x, data.expanded_x, e * p.capacity + slot, j, size), 0,
                    size);
}

void moe_init_routing_quant(const moe::InitPlan &p, const moe::InitData &data,
                            const moe::InitRouting &routing) {
  const moe::InitPlan::Quant &q = p.quant;
  auto *scales = static_cast<float *>(data.dynamic_scale);
  const auto *smooth = static_cast<const float *>(data.scale);
  std::vector<double> z(p.hidden);
  for (size_t r = 0; r < p.tokens; ++r)
    for (size_t k = 0; k < p.topk; ++k) {
      const size_t position = r * p.topk + k;
      const int64_t d = routing.row_index[position];
      if (d < 0 || static_cast<size_t>(d) >= p.expanded_x.rows) continue;  // dropped, inactive
      const auto row = static_cast<size_t>(d);
      const size_t smooth_row = q.smooth_rows > 1 ? routing.experts[position] : 0;
      for (size_t c = 0; c < p.hidden; ++c) {
        float v = 0;
        visitFloatStorage(q.dtype, [&](auto t) {
          v = toFloat(*reinterpret_cast<const decltype(t) *>(
              elementAt(p.x, data.x, r, c, sizeof(decltype(t)))));
        });
        if (!q.dynamic)  // v scale exact in double, the sum rounded once
          z[c] = double{v} * static_cast<const float *>(data.scale)[0] +
                 static_cast<const float *>(data.offset)[0];
        else
          z[c] = q.smooth_rows == 0 ? v : double{v} * smooth[q.smooth.offset(smooth_row, c)];
      }
      double s = 1;
      if (q.dynamic) {
        double amax = 0;
        for (size_t c = 0; c < p.hidden; ++c)
          amax = std::isnan(z[c]) || std::isnan(amax) ? NAN : std::fmax(amax, std::fabs(z[c]));
        const float scale = exact::dynamicScale(amax, q.format, false);
        scales[q.dynamic_scale.rowOffset(row)] = scale;
        s = scale;
      }
      for (size_t c = 0; c < p.hidden; ++c)
        *elementAt(p.expanded_x, data.expanded_x, row, c, 1) =
            static_cast<char>(exact::quantizeByte(q.dynamic ? z[c] / s : z[c], q.format));
    }
  if (p.capacity == 0) return;
  for (size_t e = 0; e < p.experts; ++e)
    for (size_t slot = std::min<size_t>(routing.counts[e], p.capacity); slot < p.capacity; ++slot) {
      const size_t row = e * p.capacity + slot;
      for (size_t j = 0; j < p.hidden; ++j)
        *elementAt(p.expanded_x, data.expanded_x, row, j, 1) = 0;
      if (q.dynamic) scales[q.dynamic_scale.rowOffset(row)] = 0.0f;
    }
}

}  // namespace infiniop::cpu_reference
