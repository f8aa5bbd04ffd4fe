// SPDX-License-Identifier: Apache-2.0
// MoeExpertCounts and MoeBiasUpdate as the formulas read (docs/moe_expert_counts.md,
// docs/moe_bias_update.md): plain loops, the mean compared in 128-bit integers (S vs E c, the
// rational comparison without dividing), independent of the host's sum. The oracle of the other
// devices, so nothing here is clever.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ops/moe_counts.h"

namespace infiniop::cpu_reference {
namespace {

int64_t loadInteger(const moe::RouterView &v, const void *data, size_t r, size_t c) {
  return v.dtype == INFINI_DTYPE_I64 ? static_cast<const int64_t *>(data)[v.offset(r, c)]
                                     : static_cast<const int32_t *>(data)[v.offset(r, c)];
}

}  // namespace

void moe_expert_counts(const moe::CountsPlan &p, const moe::CountsData &d) {
  std::vector<int64_t> counts(p.sequences * p.experts, 0);
  const auto E = static_cast<int64_t>(p.experts);
  for (size_t r = 0; r < p.expert_idx.rows; ++r)
    for (size_t c = 0; c < p.expert_idx.cols; ++c) {
      const int64_t e = loadInteger(p.expert_idx, d.expert_idx, r, c);
      // E: a finished row; row r is sequence r % B's.
      if (e != E) ++counts[(r % p.sequences) * p.experts + static_cast<size_t>(e)];
    }
  for (size_t b = 0; b < p.sequences; ++b)
    for (size_t e = 0; e < p.experts; ++e) {
      const ptrdiff_t at = p.counts.offset(b, e);
      const int64_t count = counts[b * p.experts + e];
      if (p.counts.dtype == INFINI_DTYPE_I64)
        static_cast<int64_t *>(d.counts)[at] = count;
      else
        static_cast<int32_t *>(d.counts)[at] = static_cast<int32_t>(count);
    }
}

void moe_bias_update(const moe::CountsPlan &p, const moe::CountsData &d) {
  __int128 total = 0;
  for (size_t e = 0; e < p.experts; ++e) total += loadInteger(p.counts, d.counts_in, 0, e);
  const auto E = static_cast<__int128>(p.experts);
  std::vector<float> updated(p.experts);
  std::vector<bool> changed(p.experts, false);
  for (size_t e = 0; e < p.experts; ++e) {
    // sign(S / E - c) = sign(S - E c).
    const __int128 difference = total - E * loadInteger(p.counts, d.counts_in, 0, e);
    if (difference == 0) continue;
    const float b = static_cast<const float *>(d.bias)[p.bias.offset(0, e)];
    float sum = difference > 0 ? b + p.update_rate : b - p.update_rate;
    if (std::isnan(sum)) {
      const uint32_t canonical = 0x7fc00000u;
      std::memcpy(&sum, &canonical, sizeof sum);
    }
    updated[e] = sum;
    changed[e] = true;
  }
  for (size_t e = 0; e < p.experts; ++e)
    if (changed[e]) static_cast<float *>(d.bias)[p.bias.offset(0, e)] = updated[e];
}

}  // namespace infiniop::cpu_reference
