// SPDX-License-Identifier: Apache-2.0
// MoeExpertCounts, MoeBiasUpdate and MoeExpertCapacity as the formulas read
// (docs/moe_expert_counts.md, docs/moe_bias_update.md, docs/moe_expert_capacity.md): plain loops,
// the mean compared in 128-bit integers (S vs E c, the rational comparison without dividing),
// independent of the host's sum; capacity by a stable sort of each expert's slots on the weights
// compared as values (not the devices' rank keys). The oracle of the other devices, so nothing
// here is clever.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "core/dtype.h"
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

void moe_expert_capacity(const moe::CountsPlan &p, const moe::CountsData &d) {
  const size_t k = p.expert_idx.cols, slots = p.expert_idx.rows * k, E = p.experts;
  std::vector<int64_t> expert(slots);
  std::vector<float> weight(slots, 0.0f);
  std::map<int64_t, std::vector<size_t>> of_expert;  // each expert's slots, in slot order
  for (size_t s = 0; s < slots; ++s) {
    expert[s] = loadInteger(p.expert_idx, d.expert_idx, s / k, s % k);
    if (d.weights)
      visitFloatStorage(p.weights.dtype, [&](auto t) {
        using T = decltype(t);
        weight[s] = toFloat(static_cast<const T *>(d.weights)[p.weights.offset(s / k, s % k)]);
      });
    if (expert[s] != static_cast<int64_t>(E)) of_expert[expert[s]].push_back(s);
  }
  // Probability: a NaN first, then larger values; equal values (-0 and +0 too) keep slot order.
  const auto ranks_before = [&](size_t a, size_t b) {
    const float x = weight[a], y = weight[b];
    return (std::isnan(x) && !std::isnan(y)) || x > y;
  };
  std::vector<bool> kept(slots, false);
  for (auto &entry : of_expert) {
    std::vector<size_t> &list = entry.second;
    if (p.policy == moe::DropPolicy::probability)
      std::stable_sort(list.begin(), list.end(), ranks_before);
    for (size_t i = 0; i < list.size() && i < p.capacity; ++i) kept[list[i]] = true;
  }
  const size_t weight_size = d.weights_out ? dtypeSize(p.weights_out.dtype) : 0;
  for (size_t s = 0; s < slots; ++s) {
    const size_t r = s / k, c = s % k;
    const int64_t value = kept[s] ? expert[s] : static_cast<int64_t>(E);
    const ptrdiff_t at = p.kept_idx.offset(r, c);
    if (p.kept_idx.dtype == INFINI_DTYPE_I64)
      static_cast<int64_t *>(d.kept_idx)[at] = value;
    else
      static_cast<int32_t *>(d.kept_idx)[at] = static_cast<int32_t>(value);
    if (!d.weights_out) continue;
    char *out = static_cast<char *>(d.weights_out) +
                p.weights_out.offset(r, c) * static_cast<ptrdiff_t>(weight_size);
    if (kept[s])  // the same bits
      std::memcpy(out,
                  static_cast<const char *>(d.weights) +
                      p.weights.offset(r, c) * static_cast<ptrdiff_t>(weight_size),
                  weight_size);
    else
      std::memset(out, 0, weight_size);  // +0
  }
}

}  // namespace infiniop::cpu_reference
