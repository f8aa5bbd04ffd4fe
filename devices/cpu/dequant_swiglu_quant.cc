// SPDX-License-Identifier: Apache-2.0
// DequantSwigluQuant on the cpu device (docs/dequant_swiglu_quant.md): every value in double as
// the reference computes it, so every byte and scale bit is the reference's on every target and
// thread count. Rows are split over threads; in each row the dequantization
// d = ((x + bias_i) w) s_a + bias_f runs in Highway double lanes (IEEE mul and add, in the
// reference's order, no contraction: the build has -ffp-contract=off), from per-thread double
// copies of the row's weight scales and biases (exact: F32, F16, BF16 and INT32 all fit a double;
// x + bias_i is exact as the sum of two doubles below 2^32). silu(d1) d2 m and the quantization
// are the reference's scalar double functions (exact/dequant.h, ops/gated_quant_rows.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/dequant_swiglu_quant.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "cpu/parallel.h"
#include "exact/dequant.h"
#include "hwy/highway.h"
#include "ops/dequant_swiglu_quant.h"
#include "ops/gated_quant_rows.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// out[c] = ((x[c] + bias_i[c]) w[c]) s_a (+ bias_f[c] where bias_f), c < n, x contiguous.
void DequantRow(const int32_t *x, const double *bias_i, const double *w, double s_a,
                const double *bias_f, double *out, size_t n) {
  size_t c = 0;
#if HWY_HAVE_FLOAT64
  const hn::ScalableTag<double> dd;
  const hn::Rebind<int32_t, decltype(dd)> di;
  const size_t N = hn::Lanes(dd);
  const auto sa = hn::Set(dd, s_a);
  for (; c + N <= n; c += N) {
    auto v = hn::Add(hn::PromoteTo(dd, hn::LoadU(di, x + c)), hn::LoadU(dd, bias_i + c));
    v = hn::Mul(hn::Mul(v, hn::LoadU(dd, w + c)), sa);
    if (bias_f) v = hn::Add(v, hn::LoadU(dd, bias_f + c));
    hn::StoreU(v, dd, out + c);
  }
#endif
  for (; c < n; ++c) {
    double v = (static_cast<double>(x[c]) + bias_i[c]) * w[c];
    v = v * s_a;
    out[c] = bias_f ? v + bias_f[c] : v;
  }
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace infiniop::cpu {
HWY_EXPORT(DequantRow);

namespace {

using quant::DequantSwigluQuantData;
using quant::DequantSwigluQuantPlan;

// One thread's rows: x's row (contiguous), the current expert's weight scales and biases as
// doubles (1 and 0 where absent), the dequantized row and its H values.
struct Scratch {
  std::vector<int32_t> x;
  std::vector<double> w, bias_i, bias_f, d, z;
  ptrdiff_t expert = -1;  // whose rows w and the biases hold

  explicit Scratch(size_t H)
      : x(2 * H), w(2 * H, 1.0), bias_i(2 * H, 0.0), bias_f(2 * H, 0.0), d(2 * H), z(H) {}

  void loadExpert(const DequantSwigluQuantPlan &p, const DequantSwigluQuantData &data,
                  ptrdiff_t e) {
    if (e == expert) return;
    expert = e;
    const size_t n = 2 * p.half;
    if (data.weight_scale) {
      const auto *weight = static_cast<const float *>(data.weight_scale);
      for (size_t c = 0; c < n; ++c) w[c] = weight[p.weight_scale.offset(p.weightRow(e), c)];
    }
    if (!data.bias) return;
    const size_t row = p.biasRow(e);
    if (p.bias_int) {
      const auto *bias = static_cast<const int32_t *>(data.bias);
      for (size_t c = 0; c < n; ++c) bias_i[c] = bias[p.bias.offset(row, c)];
      return;
    }
    visitFloatStorage(p.bias.dtype, [&](auto t) {
      const auto *bias = static_cast<const decltype(t) *>(data.bias);
      for (size_t c = 0; c < n; ++c) bias_f[c] = toFloat(bias[p.bias.offset(row, c)]);
    });
  }
};

void rows(const DequantSwigluQuantPlan &p, const DequantSwigluQuantData &data, size_t first,
          size_t last) {
  auto *y = static_cast<uint8_t *>(data.y);
  auto *scale = static_cast<float *>(data.scale);
  const auto *x = static_cast<const int32_t *>(data.x);
  const auto *activation = static_cast<const float *>(data.activation_scale);
  const auto *smooth = static_cast<const float *>(data.smooth_scales);
  const size_t H = p.half, n = 2 * H;
  if (H == 0) {  // no values: x and y may be NULL, and no row pointer into them is formed
    quant::scaleOnlyRows(p, data.counts, scale, first, last);
    return;
  }
  const bool bias_f = data.bias && !p.bias_int;
  Scratch s(H);
  const auto dequant = HWY_DYNAMIC_DISPATCH(DequantRow);
  for (size_t r = first; r < last; ++r) {
    const ptrdiff_t e = quant::smoothRowOf(p, data.counts, r);
    if (e < 0) {  // past group_index's counts
      quant::zeroRow(p, y, scale, r);
      continue;
    }
    s.loadExpert(p, data, e);
    const int32_t *xr = x + p.x.rowOffset(r);
    if (p.x.col_stride != 1) {
      for (size_t c = 0; c < n; ++c) s.x[c] = x[p.x.offset(r, c)];
      xr = s.x.data();
    }
    const double s_a = activation ? activation[p.activation_scale.offset(r, 0)] : 1.0;
    dequant(xr, s.bias_i.data(), s.w.data(), s_a, bias_f ? s.bias_f.data() : nullptr, s.d.data(),
            n);
    for (size_t c = 0; c < H; ++c) {
      const double a = exact::siluGated(s.d[p.gateColumn(c)], s.d[p.multiplierColumn(c)]);
      s.z[c] = p.smooth ? a * smooth[p.smooth_scales.offset(static_cast<size_t>(e), c)] : a;
    }
    quant::quantizeRow(p, s.z.data(), y, scale, r);
  }
}

}  // namespace

void dequant_swiglu_quant(const DequantSwigluQuantPlan &p, const DequantSwigluQuantData &d) {
  // A row costs about 2H exps' worth of the reference's double work: worth threads early.
  parallelRanges(p.rows, 16 * p.half, [&](size_t first, size_t last) { rows(p, d, first, last); });
}

}  // namespace infiniop::cpu
#endif
