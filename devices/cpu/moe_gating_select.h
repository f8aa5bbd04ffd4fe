// SPDX-License-Identifier: Apache-2.0
// The router operators' selection on the cpu device (scalar: no target dependence): the top k of
// F32 keys in the spec's total order (key descending, NaN above +inf, equal keys lower index
// first; +0 and -0 equal), and the rows' scalar I/O, which rounds to nearest even and writes every
// NaN as the canonical quiet NaN (docs/accuracy.md), so it is the same bits as opencl's.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "ops/moe_gating.h"

namespace infiniop::cpu::gating {

// Whether expert i (key a) is selected before expert j (key b).
inline bool Before(float a, size_t i, float b, size_t j) {
  const bool a_nan = std::isnan(a), b_nan = std::isnan(b);
  if (a_nan || b_nan) return a_nan && (!b_nan || i < j);
  return a > b || (a == b && i < j);
}

// A key's place in the selection order as an unsigned integer, larger first: NaN highest, then
// +inf ... +0 = -0 ... -inf (both zeros map to 2^31).
inline uint32_t OrderOf(float key) {
  uint32_t bits;
  std::memcpy(&bits, &key, sizeof bits);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return 0xffffffffu;
  return bits >> 31 ? 0x80000000u - magnitude : 0x80000000u + magnitude;
}
// Expert j's rank: its key's order, then the lower index first. Distinct for distinct j < 2^32,
// so one integer comparison decides the total order.
inline uint64_t RankOf(float key, size_t j) {
  return uint64_t{OrderOf(key)} << 32 | (0xffffffffu - static_cast<uint32_t>(j));
}

// The first k of the candidates (increasing indices, `count` of them; NULL: 0..count-1) in
// selection order into top[0..k), by std::partial_sort in `sort` (room for `count`) with the
// comparator: the large-k path. Small k takes moe_gating.cc's one pass over RankOf (most keys
// fail its first comparison); the order is total, so both give the same.
inline void TopK(const float *key, const size_t *candidates, size_t count, size_t k, size_t *top,
                 size_t *sort) {
  const auto before = [&](size_t i, size_t j) { return Before(key[i], i, key[j], j); };
  for (size_t c = 0; c < count; ++c) sort[c] = candidates ? candidates[c] : c;
  std::partial_sort(sort, sort + k, sort + count, before);
  std::copy(sort, sort + k, top);
}

// Row r of a float view (F32/F16/BF16) as F32: `cols` elements from column 0.
inline void LoadRow(const moe::RouterView &v, const void *data, size_t r, float *out) {
  visitFloatStorage(v.dtype, [&](auto t) {
    using T = decltype(t);
    const T *row = static_cast<const T *>(data) + v.rowOffset(r);
    for (size_t c = 0; c < v.cols; ++c)
      out[c] = toFloat(row[static_cast<ptrdiff_t>(c) * v.col_stride]);
  });
}

inline float Canonical(float v) {
  return std::isnan(v) ? floatOf(0x7fc00000u) : v;
}
// Row r of a float view from F32 values: `cols` elements, each rounded once to nearest even.
inline void StoreRow(const moe::RouterView &v, void *data, size_t r, const float *values) {
  visitFloatStorage(v.dtype, [&](auto t) {
    using T = decltype(t);
    T *row = static_cast<T *>(data) + v.rowOffset(r);
    for (size_t c = 0; c < v.cols; ++c)
      row[static_cast<ptrdiff_t>(c) * v.col_stride] = fromFloat<T>(Canonical(values[c]));
  });
}

// Row r of an index view (I32/I64): `count` elements from column 0, out[c] or value(c). The row's
// offset once per row (RouterView::offset divides per element).
inline void LoadIndexRow(const moe::RouterView &v, const void *data, size_t r, size_t count,
                         size_t *out) {
  const ptrdiff_t row = v.rowOffset(r);
  for (size_t c = 0; c < count; ++c) {
    const ptrdiff_t at = row + static_cast<ptrdiff_t>(c) * v.col_stride;
    out[c] =
        static_cast<size_t>(v.dtype == INFINI_DTYPE_I64 ? static_cast<const int64_t *>(data)[at]
                                                        : static_cast<const int32_t *>(data)[at]);
  }
}
template <class F>
inline void StoreIndexRow(const moe::RouterView &v, void *data, size_t r, size_t count,
                          const F &value) {
  const ptrdiff_t row = v.rowOffset(r);
  for (size_t c = 0; c < count; ++c) {
    const ptrdiff_t at = row + static_cast<ptrdiff_t>(c) * v.col_stride;
    if (v.dtype == INFINI_DTYPE_I64)
      static_cast<int64_t *>(data)[at] = static_cast<int64_t>(value(c));
    else
      static_cast<int32_t *>(data)[at] = static_cast<int32_t>(value(c));
  }
}

// One range of rows' scratch: rows of E floats, the k-wide values, the group scores and the
// selection's index arrays.
struct Scratch {
  float *x, *probs, *buffer, *y, *g, *scores;
  size_t *top, *groups, *candidates, *sort;
};
// Scratch for every range a call may run, allocated before any row is written (an allocation
// failure then leaves the outputs untouched, and none happens inside the OpenMP region); each
// range takes the next block.
class ScratchPool {
 public:
  ScratchPool(const moe::RouterPlan &p, size_t blocks)
      : p_(p), floats_(blocks * FloatsPer(p)), indices_(blocks * IndicesPer(p)), blocks_(blocks) {}
  Scratch Take() {
    const size_t b = next_.fetch_add(1) % blocks_;
    float *f = floats_.data() + b * FloatsPer(p_);
    size_t *i = indices_.data() + b * IndicesPer(p_);
    const size_t E = p_.experts, k = p_.k;
    return {f,
            f + E,
            f + 2 * E,
            f + 3 * E,
            f + 3 * E + k,
            f + 3 * E + 2 * k,
            i,
            i + k,
            i + k + p_.k_group,
            i + k + p_.k_group + E};
  }

 private:
  static size_t FloatsPer(const moe::RouterPlan &p) {
    return 3 * p.experts + 2 * p.k + p.group_count;
  }
  static size_t IndicesPer(const moe::RouterPlan &p) { return p.k + p.k_group + 2 * p.experts; }
  const moe::RouterPlan &p_;
  std::vector<float> floats_;
  std::vector<size_t> indices_;
  size_t blocks_;
  std::atomic<size_t> next_{0};
};

inline bool Finished(const moe::RouterPlan &p, const void *finished, size_t r) {
  return finished && static_cast<const char *>(finished)[p.finished.rowOffset(r)] != 0;
}

}  // namespace infiniop::cpu::gating
