// SPDX-License-Identifier: Apache-2.0
// The router operators' selection on the cpu device (scalar: no target dependence): the top k of
// F32 keys in the spec's total order (key descending, NaN above +inf, equal keys lower index
// first; +0 and -0 equal), and the rows' scalar I/O, which rounds to nearest even and writes every
// NaN as the canonical quiet NaN (docs/accuracy.md), so it is the same bits as opencl's.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
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

// The first k of the candidates (increasing indices, `count` of them; NULL: 0..count-1) in
// selection order into top[0..k). Small k: one pass keeping the k best in order (most keys fail
// the first comparison); larger k: std::partial_sort. The order is total, so both give the same.
inline void TopK(const float *key, const size_t *candidates, size_t count, size_t k, size_t *top,
                 std::vector<size_t> &scratch) {
  const auto at = [&](size_t c) { return candidates ? candidates[c] : c; };
  const auto before = [&](size_t i, size_t j) { return Before(key[i], i, key[j], j); };
  if (k <= 32) {
    size_t n = 0;
    for (size_t c = 0; c < count; ++c) {
      const size_t j = at(c);
      if (n == k && !before(j, top[k - 1])) continue;
      size_t slot = n < k ? n++ : k - 1;
      for (; slot > 0 && before(j, top[slot - 1]); --slot) top[slot] = top[slot - 1];
      top[slot] = j;
    }
    return;
  }
  scratch.resize(count);
  for (size_t c = 0; c < count; ++c) scratch[c] = at(c);
  std::partial_sort(scratch.begin(), scratch.begin() + static_cast<ptrdiff_t>(k), scratch.end(),
                    before);
  std::copy(scratch.begin(), scratch.begin() + static_cast<ptrdiff_t>(k), top);
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

inline int64_t LoadIndex(const moe::RouterView &v, const void *data, size_t r, size_t c) {
  return v.dtype == INFINI_DTYPE_I64 ? static_cast<const int64_t *>(data)[v.offset(r, c)]
                                     : static_cast<const int32_t *>(data)[v.offset(r, c)];
}
inline void StoreIndex(const moe::RouterView &v, void *data, size_t r, size_t c, int64_t value) {
  if (v.dtype == INFINI_DTYPE_I64)
    static_cast<int64_t *>(data)[v.offset(r, c)] = value;
  else
    static_cast<int32_t *>(data)[v.offset(r, c)] = static_cast<int32_t>(value);
}

inline bool Finished(const moe::RouterPlan &p, const void *finished, size_t r) {
  return finished && static_cast<const char *>(finished)[p.finished.rowOffset(r)] != 0;
}

}  // namespace infiniop::cpu::gating
