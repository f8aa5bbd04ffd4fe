// SPDX-License-Identifier: Apache-2.0
// MoeExpertCounts and MoeBiasUpdate on the cpu device (docs/moe_expert_counts.md,
// docs/moe_bias_update.md). Integer work, so plain C++: counting walks each row through a typed
// pointer into a histogram, one per OpenMP thread over a contiguous range of rows once there are
// kParallelThreshold elements, the histograms then added (integer sums: any order gives the same
// counts). The bias update compares each count with the host's exact sum through moe::meanSign.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/parallel.h"
#include "ops/moe_counts.h"

namespace infiniop::cpu {
namespace {

// Adds rows [begin, end) of expert_idx (element type Index) into hist: row r into the E + 1
// slots of sequence r % B (slot E takes the finished rows' marks).
template <class Index>
void countRows(const moe::RouterView &v, const Index *data, size_t begin, size_t end, size_t B,
               size_t slots, int64_t *all) {
  const size_t k = v.cols;
  const ptrdiff_t step = v.col_stride;
  for (size_t r = begin; r < end; ++r) {
    int64_t *hist = all + (r % B) * slots;
    const Index *row = data + v.rowOffset(r);
    if (step == 1) {
      for (size_t c = 0; c < k; ++c) ++hist[row[c]];
    } else {
      for (size_t c = 0; c < k; ++c) ++hist[row[static_cast<ptrdiff_t>(c) * step]];
    }
  }
}

template <class Index>
void countAll(const moe::CountsPlan &p, const Index *data, std::vector<int64_t> &total) {
  const size_t slots = p.experts + 1, rows = p.expert_idx.rows, B = p.sequences;
  const size_t elements = rows * p.expert_idx.cols, all = B * slots;
  const int threads =
      elements < kParallelThreshold ? 1 : std::min<int>(callThreads(), static_cast<int>(rows));
  if (threads <= 1) {
    countRows(p.expert_idx, data, 0, rows, B, slots, total.data());
    return;
  }
  std::vector<int64_t> hist(all * static_cast<size_t>(threads), 0);
#pragma omp parallel num_threads(threads)
  {
    const auto t = static_cast<size_t>(omp_get_thread_num());
    const auto n = static_cast<size_t>(omp_get_num_threads());
    countRows(p.expert_idx, data, rows * t / n, rows * (t + 1) / n, B, slots,
              hist.data() + t * all);
  }
  for (int t = 0; t < threads; ++t)
    for (size_t e = 0; e < all; ++e) total[e] += hist[static_cast<size_t>(t) * all + e];
}

template <class Count>
void storeCounts(const moe::CountsPlan &p, const std::vector<int64_t> &counts, Count *out) {
  for (size_t b = 0; b < p.sequences; ++b)
    for (size_t e = 0; e < p.experts; ++e)
      out[p.counts.offset(b, e)] = static_cast<Count>(counts[b * (p.experts + 1) + e]);
}

template <class Count>
void updateBias(const moe::CountsPlan &p, int64_t total, const Count *counts, float *bias) {
  const auto E = static_cast<int64_t>(p.experts);
  const float u = p.update_rate;
  for (size_t e = 0; e < p.experts; ++e) {
    const int sign =
        moe::meanSign(total, E, counts[static_cast<ptrdiff_t>(e) * p.counts.col_stride]);
    if (sign == 0) continue;  // the mean: untouched
    float &b = bias[static_cast<ptrdiff_t>(e) * p.bias.col_stride];
    const float updated = b + (sign > 0 ? u : -u);
    b = std::isnan(updated) ? std::numeric_limits<float>::quiet_NaN() : updated;
  }
}

}  // namespace

void moe_expert_counts(const moe::CountsPlan &p, const moe::CountsData &d) {
  std::vector<int64_t> counts(p.sequences * (p.experts + 1), 0);
  if (p.expert_idx.dtype == INFINI_DTYPE_I64)
    countAll(p, static_cast<const int64_t *>(d.expert_idx), counts);
  else
    countAll(p, static_cast<const int32_t *>(d.expert_idx), counts);
  if (p.counts.dtype == INFINI_DTYPE_I64)
    storeCounts(p, counts, static_cast<int64_t *>(d.counts));
  else
    storeCounts(p, counts, static_cast<int32_t *>(d.counts));
}

void moe_bias_update(const moe::CountsPlan &p, const moe::CountsData &d) {
  if (p.counts.dtype == INFINI_DTYPE_I64)
    updateBias(p, d.total, static_cast<const int64_t *>(d.counts_in), static_cast<float *>(d.bias));
  else
    updateBias(p, d.total, static_cast<const int32_t *>(d.counts_in), static_cast<float *>(d.bias));
}

}  // namespace infiniop::cpu
