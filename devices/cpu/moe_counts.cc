// SPDX-License-Identifier: Apache-2.0
// MoeExpertCounts, MoeBiasUpdate and MoeExpertCapacity on the cpu device
// (docs/moe_expert_counts.md, docs/moe_bias_update.md, docs/moe_expert_capacity.md). Integer work,
// so plain C++: counting walks each row through a typed pointer into a histogram, one per OpenMP
// thread over a contiguous range of rows once there are kParallelThreshold elements, the
// histograms then added (integer sums: any order gives the same counts). The bias update compares
// each count with the host's exact sum through moe::meanSign. Capacity: the position policy
// counts each expert's slots in slot order; the probability policy buckets the slots by expert (a
// counting sort: each bucket in slot order), then keeps the first C of each bucket under the
// total order (rank key descending, slot ascending) by nth_element, experts over OpenMP threads:
// a total order, so any algorithm keeps the same slots.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dtype.h"
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

// Calls f(s, element pointer) for every slot of a view in slot order, one row offset per row
// (rowOffset's divisions once a row, not once a slot).
template <class T, class F>
void forSlots(const moe::RouterView &v, T *data, F &&f) {
  for (size_t r = 0, s = 0; r < v.rows; ++r) {
    T *row = data + v.rowOffset(r);
    for (size_t c = 0; c < v.cols; ++c, ++s) f(s, row + static_cast<ptrdiff_t>(c) * v.col_stride);
  }
}

std::vector<size_t> expertsOf(const moe::CountsPlan &p, const void *data) {
  std::vector<size_t> expert(p.expert_idx.rows * p.expert_idx.cols);
  const auto load = [&](auto *typed) {
    forSlots(p.expert_idx, typed,
             [&](size_t s, const auto *e) { expert[s] = static_cast<size_t>(*e); });
  };
  if (p.expert_idx.dtype == INFINI_DTYPE_I64)
    load(static_cast<const int64_t *>(data));
  else
    load(static_cast<const int32_t *>(data));
  return expert;
}

// kept[s] for every slot (the plan's policy).
std::vector<char> keptSlots(const moe::CountsPlan &p, const moe::CountsData &d,
                            const std::vector<size_t> &expert) {
  const size_t slots = expert.size(), E = p.experts;
  std::vector<char> kept(slots, 0);
  if (p.policy == moe::DropPolicy::position) {
    std::vector<size_t> taken(E + 1, 0);
    for (size_t s = 0; s < slots; ++s) kept[s] = expert[s] != E && taken[expert[s]]++ < p.capacity;
    return kept;
  }
  // Buckets: order[start[e] .. start[e + 1]) holds expert e's slots in slot order.
  std::vector<size_t> start(E + 2, 0), order(slots);
  for (size_t s = 0; s < slots; ++s) ++start[expert[s] + 1];
  for (size_t e = 0; e <= E; ++e) start[e + 1] += start[e];
  std::vector<size_t> fill(start.begin(), start.end() - 1);
  for (size_t s = 0; s < slots; ++s) order[fill[expert[s]]++] = s;
  std::vector<uint32_t> key(slots);
  visitFloatStorage(p.weights.dtype, [&](auto t) {
    using T = decltype(t);
    forSlots(p.weights, static_cast<const T *>(d.weights),
             [&](size_t s, const T *w) { key[s] = moe::capacityKey(toFloat(*w)); });
  });
  const auto before = [&](size_t a, size_t b) {
    return key[a] != key[b] ? key[a] > key[b] : a < b;
  };
  parallelRanges(E, slots / E + 1, [&](size_t first, size_t last) {
    for (size_t e = first; e < last; ++e) {
      size_t *begin = order.data() + start[e];
      const size_t count = start[e + 1] - start[e], take = std::min(count, p.capacity);
      if (take < count) std::nth_element(begin, begin + take, begin + count, before);
      for (size_t i = 0; i < take; ++i) kept[begin[i]] = 1;
    }
  });
  return kept;
}

// out[s] = value(s) where kept, else `dropped` (E for the indices, +0 for the weights).
template <class T, class Value>
void writeKept(const moe::RouterView &v, T *out, const std::vector<char> &kept, Value &&value,
               T dropped) {
  forSlots(v, out, [&](size_t s, T *o) { *o = kept[s] ? value(s) : dropped; });
}

// The weights' bits (4 or 2 bytes each), read before any output is written.
template <class T>
std::vector<T> weightBits(const moe::CountsPlan &p, const void *weights) {
  std::vector<T> bits(p.weights.rows * p.weights.cols);
  forSlots(p.weights, static_cast<const T *>(weights), [&](size_t s, const T *w) { bits[s] = *w; });
  return bits;
}

}  // namespace

void moe_expert_capacity(const moe::CountsPlan &p, const moe::CountsData &d) {
  // Every allocation comes before the first store, so that a failed one (INTERNAL_ERROR) leaves
  // the outputs unwritten.
  const std::vector<size_t> expert = expertsOf(p, d.expert_idx);
  const std::vector<char> kept = keptSlots(p, d, expert);
  const bool wide = d.weights_out && dtypeSize(p.weights_out.dtype) == 4;
  const std::vector<uint32_t> bits32 =
      wide ? weightBits<uint32_t>(p, d.weights) : std::vector<uint32_t>();
  const std::vector<uint16_t> bits16 =
      d.weights_out && !wide ? weightBits<uint16_t>(p, d.weights) : std::vector<uint16_t>();
  const auto E = static_cast<int64_t>(p.experts);
  const auto indices = [&](auto *out) {
    using T = std::remove_pointer_t<decltype(out)>;
    writeKept(
        p.kept_idx, out, kept, [&](size_t s) { return static_cast<T>(expert[s]); },
        static_cast<T>(E));
  };
  if (p.kept_idx.dtype == INFINI_DTYPE_I64)
    indices(static_cast<int64_t *>(d.kept_idx));
  else
    indices(static_cast<int32_t *>(d.kept_idx));
  if (!d.weights_out) return;
  // The weights' own bits where kept.
  if (wide)
    writeKept(
        p.weights_out, static_cast<uint32_t *>(d.weights_out), kept,
        [&](size_t s) { return bits32[s]; }, uint32_t{0});
  else
    writeKept(
        p.weights_out, static_cast<uint16_t *>(d.weights_out), kept,
        [&](size_t s) { return bits16[s]; }, uint16_t{0});
}

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
