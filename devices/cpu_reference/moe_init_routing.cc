// SPDX-License-Identifier: Apache-2.0
// MoeInitRoutingV2's rows, as the formula reads: each element copied byte for byte to where the
// host's sort sends its token, then the capacity slots nobody filled set to zero.
#include <algorithm>
#include <cstring>

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

}  // namespace infiniop::cpu_reference
