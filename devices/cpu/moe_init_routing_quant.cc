// SPDX-License-Identifier: Apache-2.0
// MoeInitRoutingQuantV2's rows on the cpu device: token-major as MoeInitRoutingV2's copy (each x
// row read once, split over threads by token), each value quantized in double by the reference's
// operations in the same order (exact/quant.h), so every byte and scale is cpu_reference's on any
// thread count. Where the row's bytes do not depend on the expert (static, or one smooth row)
// they are computed once per token and copied to its K places.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "cpu/parallel.h"
#include "exact/quant.h"
#include "ops/moe_init_routing.h"

namespace infiniop::cpu {
namespace {

using Quant = moe::InitPlan::Quant;

template <class T>
const T *elementAt(const gather::RowView &view, const void *data, size_t row, size_t j) {
  return static_cast<const T *>(data) + view.rowOffset(row) +
         static_cast<ptrdiff_t>(j) * view.col_stride;
}

uint8_t *byteAt(const gather::RowView &view, void *data, size_t row, size_t j) {
  return static_cast<uint8_t *>(data) + view.rowOffset(row) +
         static_cast<ptrdiff_t>(j) * view.col_stride;
}

// Token r's values as F32, widened to double (exact).
void loadRow(const moe::InitPlan &p, const void *x, size_t r, double *v) {
  visitFloatStorage(p.quant.dtype, [&](auto t) {
    using T = decltype(t);
    for (size_t c = 0; c < p.hidden; ++c) v[c] = toFloat(*elementAt<T>(p.x, x, r, c));
  });
}

// One expanded row's bytes from its token's values v: static y = v scale + offset; dynamic
// z = v m (smooth row `smooth_row`, or m = 1), s from the exact amax, y = z / s. Returns s (the
// dynamic scale; 1 where static).
float quantizeRow(const moe::InitPlan &p, const moe::InitData &data, const double *v,
                  size_t smooth_row, double *z, uint8_t *bytes) {
  const Quant &q = p.quant;
  const size_t H = p.hidden;
  if (!q.dynamic) {
    const double scale = static_cast<const float *>(data.scale)[0];
    const double offset = static_cast<const float *>(data.offset)[0];
    for (size_t c = 0; c < H; ++c) bytes[c] = exact::quantizeByte(v[c] * scale + offset, q.format);
    return 1.0f;
  }
  const auto *smooth = static_cast<const float *>(data.scale);
  if (q.smooth_rows == 0)
    std::copy(v, v + H, z);
  else
    for (size_t c = 0; c < H; ++c) z[c] = v[c] * smooth[q.smooth.offset(smooth_row, c)];
  double amax = 0;
  for (size_t c = 0; c < H; ++c)
    amax = std::isnan(z[c]) || std::isnan(amax) ? NAN : std::fmax(amax, std::fabs(z[c]));
  const float s = exact::dynamicScale(amax, q.format, false);
  for (size_t c = 0; c < H; ++c) bytes[c] = exact::quantizeByte(z[c] / s, q.format);
  return s;
}

void storeRow(const moe::InitPlan &p, const moe::InitData &data, size_t row, const uint8_t *bytes,
              float s) {
  if (p.expanded_x.col_stride == 1)
    std::memcpy(byteAt(p.expanded_x, data.expanded_x, row, 0), bytes, p.hidden);
  else
    for (size_t c = 0; c < p.hidden; ++c) *byteAt(p.expanded_x, data.expanded_x, row, c) = bytes[c];
  if (p.quant.dynamic)
    static_cast<float *>(data.dynamic_scale)[p.quant.dynamic_scale.rowOffset(row)] = s;
}

// Tokens [first, last): each token's quantized row to the rows its positions were sorted to.
void quantTokens(const moe::InitPlan &p, const moe::InitData &data, const moe::InitRouting &routing,
                 size_t first, size_t last) {
  const size_t H = p.hidden;
  std::vector<double> v(H), z(H);
  std::vector<uint8_t> bytes(H);
  const bool per_expert = p.quant.dynamic && p.quant.smooth_rows > 1;
  for (size_t r = first; r < last; ++r) {
    bool loaded = false, quantized = false;
    float s = 0;
    for (size_t k = 0; k < p.topk; ++k) {
      const size_t position = r * p.topk + k;
      const int64_t d = routing.row_index[position];
      if (d < 0 || static_cast<size_t>(d) >= p.expanded_x.rows) continue;  // dropped, inactive
      if (!loaded) loadRow(p, data.x, r, v.data());
      loaded = true;
      if (per_expert || !quantized)
        s = quantizeRow(p, data, v.data(), per_expert ? routing.experts[position] : 0, z.data(),
                        bytes.data());
      quantized = true;
      storeRow(p, data, static_cast<size_t>(d), bytes.data(), s);
    }
  }
}

// Experts [first, last): their capacity slots beyond the tokens they got, zero with scale 0.
void quantPadding(const moe::InitPlan &p, const moe::InitData &data,
                  const moe::InitRouting &routing, size_t first, size_t last) {
  const std::vector<uint8_t> zeros(p.hidden, 0);
  for (size_t e = first; e < last; ++e)
    for (size_t slot = std::min<size_t>(routing.counts[e], p.capacity); slot < p.capacity; ++slot)
      storeRow(p, data, e * p.capacity + slot, zeros.data(), 0.0f);
}

}  // namespace

void moe_init_routing_quant(const moe::InitPlan &plan, const moe::InitData &data,
                            const moe::InitRouting &routing) {
  // A quantized element costs a few dozen cycles: weight the split by it.
  parallelRanges(plan.tokens, 16 * plan.topk * plan.hidden + 1,
                 [&](size_t first, size_t last) { quantTokens(plan, data, routing, first, last); });
  if (plan.capacity == 0) return;
  parallelRanges(plan.experts, plan.capacity * plan.hidden / 4 + 1, [&](size_t first, size_t last) {
    quantPadding(plan, data, routing, first, last);
  });
}

}  // namespace infiniop::cpu
