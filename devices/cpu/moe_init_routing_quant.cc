// SPDX-License-Identifier: Apache-2.0
// MoeInitRoutingQuantV2's rows on the cpu device: token-major as MoeInitRoutingV2's copy (each x
// row read once, split over threads by token), each value quantized in double by the reference's
// operations in the same order (exact/quant.h), so every byte and scale is cpu_reference's on any
// thread count. Where the row's bytes do not depend on the expert (static, or one smooth row)
// they are computed once per token and copied to its K places. INT8 rows run in Highway vectors
// of double: the same IEEE multiplications, additions and divisions, max of |z| (exact in any
// order, NaN tracked apart), round to nearest even and the clamp, so the same bits; FP8's
// encoding (exact/quant.h's frexp form) stays scalar.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/moe_init_routing_quant.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>
#include <cstring>
#include <atomic>
#include <vector>

#include "core/dtype.h"
#include "cpu/parallel.h"
#include "exact/quant.h"
#include "hwy/highway.h"
#include "ops/moe_init_routing.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One INT8 row of H values v (double, contiguous) into `bytes`: static (m NULL, dynamic false)
// t = v scale + offset; dynamic z = v m (m contiguous F32, or NULL: 1) kept in z, s =
// dynamicScale(amax), t = z / s. Returns s (1 where static). exact/quant.h's quantizeByte on
// every t: NaN 0, else clamped to [-127, 127] and rounded to nearest even.
float MoeQuantRowInt8(const double *v, const float *m, size_t H, bool dynamic, double scale,
                      double offset, double *z, uint8_t *bytes) {
  const hn::ScalableTag<double> d;
  const hn::Rebind<float, decltype(d)> df;
  const hn::Rebind<int32_t, decltype(d)> di32;
  const hn::Rebind<int8_t, decltype(d)> di8;
  const size_t N = hn::Lanes(d);
  const auto lo = hn::Set(d, -127.0), hi = hn::Set(d, 127.0);
  const auto store = [&](size_t c, decltype(lo) t) {
    const auto rounded = hn::IfThenElseZero(hn::Eq(t, t), hn::Round(hn::Min(hn::Max(t, lo), hi)));
    hn::StoreU(hn::DemoteTo(di8, hn::DemoteTo(di32, rounded)), di8,
               reinterpret_cast<int8_t *>(bytes + c));
  };
  const auto format = exact::QuantFormat::int8;
  size_t c = 0;
  if (!dynamic) {
    const auto vs = hn::Set(d, scale), vo = hn::Set(d, offset);
    for (; c + N <= H; c += N) store(c, hn::Add(hn::Mul(hn::LoadU(d, v + c), vs), vo));
    for (; c < H; ++c) bytes[c] = exact::quantizeByte(v[c] * scale + offset, format);
    return 1.0f;
  }
  auto amax = hn::Zero(d);
  auto nan = hn::FirstN(d, 0);
  for (; c + N <= H; c += N) {
    auto zc = hn::LoadU(d, v + c);
    if (m) zc = hn::Mul(zc, hn::PromoteTo(d, hn::LoadU(df, m + c)));
    hn::StoreU(zc, d, z + c);
    nan = hn::Or(nan, hn::Not(hn::Eq(zc, zc)));  // Ne is ordered: false on NaN
    amax = hn::Max(amax, hn::Abs(zc));
  }
  double a = hn::AllFalse(d, nan) ? hn::GetLane(hn::MaxOfLanes(d, amax)) : NAN;
  for (; c < H; ++c) {
    z[c] = m ? v[c] * m[c] : v[c];
    a = std::isnan(z[c]) || std::isnan(a) ? NAN : std::fmax(a, std::fabs(z[c]));
  }
  const float s = exact::dynamicScale(a, format, false);
  const auto vs = hn::Set(d, static_cast<double>(s));
  for (c = 0; c + N <= H; c += N) store(c, hn::Div(hn::LoadU(d, z + c), vs));
  for (; c < H; ++c) bytes[c] = exact::quantizeByte(z[c] / s, format);
  return s;
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace infiniop::cpu {
HWY_EXPORT(MoeQuantRowInt8);
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
  // INT8 with a contiguous smooth row (or none): the vector path, the same bits.
  if (q.format == exact::QuantFormat::int8 && (q.smooth_rows == 0 || q.smooth.col_stride == 1)) {
    const float *m = q.dynamic && q.smooth_rows > 0
                         ? static_cast<const float *>(data.scale) + q.smooth.offset(smooth_row, 0)
                         : nullptr;
    const double scale = q.dynamic ? 1.0 : static_cast<const float *>(data.scale)[0];
    const double offset = q.dynamic ? 0.0 : static_cast<const float *>(data.offset)[0];
    return HWY_DYNAMIC_DISPATCH(MoeQuantRowInt8)(v, m, H, q.dynamic, scale, offset, z, bytes);
  }
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
  if (p.hidden == 0) {
    // no bytes to store (and expanded_x may be NULL): no pointer into it
  } else if (p.expanded_x.col_stride == 1) {
    std::memcpy(byteAt(p.expanded_x, data.expanded_x, row, 0), bytes, p.hidden);
  } else {
    for (size_t c = 0; c < p.hidden; ++c) *byteAt(p.expanded_x, data.expanded_x, row, c) = bytes[c];
  }
  if (p.quant.dynamic)
    static_cast<float *>(data.dynamic_scale)[p.quant.dynamic_scale.rowOffset(row)] = s;
}

// Tokens [first, last): each token's quantized row to the rows its positions were sorted to.
// v, z (H doubles each) and bytes (H): scratch of the caller's.
void quantTokens(const moe::InitPlan &p, const moe::InitData &data, const moe::InitRouting &routing,
                 size_t first, size_t last, double *v, double *z, uint8_t *bytes) {
  const bool per_expert = p.quant.dynamic && p.quant.smooth_rows > 1;
  for (size_t r = first; r < last; ++r) {
    bool loaded = false, quantized = false;
    float s = 0;
    for (size_t k = 0; k < p.topk; ++k) {
      const size_t position = r * p.topk + k;
      const int64_t d = routing.row_index[position];
      if (d < 0 || static_cast<size_t>(d) >= p.expanded_x.rows) continue;  // dropped, inactive
      if (!loaded) loadRow(p, data.x, r, v);
      loaded = true;
      if (per_expert || !quantized)
        s = quantizeRow(p, data, v, per_expert ? routing.experts[position] : 0, z, bytes);
      quantized = true;
      storeRow(p, data, static_cast<size_t>(d), bytes, s);
    }
  }
}

// Experts [first, last): their capacity slots beyond the tokens they got, zero with scale 0.
// zeros: H zero bytes.
void quantPadding(const moe::InitPlan &p, const moe::InitData &data,
                  const moe::InitRouting &routing, size_t first, size_t last,
                  const uint8_t *zeros) {
  for (size_t e = first; e < last; ++e)
    for (size_t slot = std::min<size_t>(routing.counts[e], p.capacity); slot < p.capacity; ++slot)
      storeRow(p, data, e * p.capacity + slot, zeros, 0.0f);
}

}  // namespace

void moe_init_routing_quant(const moe::InitPlan &plan, const moe::InitData &data,
                            const moe::InitRouting &routing) {
  // Every thread's scratch, allocated before anything is written (a failed allocation then
  // fails the call with its outputs untouched).
  const size_t H = plan.hidden, ranges = static_cast<size_t>(std::max(1, callThreads()));
  std::vector<double> values(2 * H * ranges);
  std::vector<uint8_t> bytes(H * (ranges + 1));  // the last H: the padding's zeros
  std::atomic<size_t> next{0};
  // A quantized element costs a few dozen cycles: weight the split by it.
  parallelRanges(plan.tokens, 16 * plan.topk * H + 1, [&](size_t first, size_t last) {
    const size_t k = next.fetch_add(1) % ranges;
    quantTokens(plan, data, routing, first, last, values.data() + 2 * H * k,
                values.data() + 2 * H * k + H, bytes.data() + H * k);
  });
  if (plan.capacity == 0) return;
  const uint8_t *zeros = bytes.data() + H * ranges;
  parallelRanges(plan.experts, plan.capacity * H / 4 + 1, [&](size_t first, size_t last) {
    quantPadding(plan, data, routing, first, last, zeros);
  });
}

}  // namespace infiniop::cpu
#endif
