// SPDX-License-Identifier: Apache-2.0
// DequantSwigluQuant as the formula reads (docs/dequant_swiglu_quant.md): each accumulator
// dequantized in double (exact/dequant.h), each row's values z = silu(d1) d2 m (or d1 silu(d2) m)
// in double, then SwiGluQuant's groups, scales and bytes (ops/gated_quant_rows.h). The oracle of
// the other devices.
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "exact/dequant.h"
#include "ops/dequant_swiglu_quant.h"
#include "ops/gated_quant_rows.h"

namespace infiniop::cpu_reference {
namespace {

using quant::DequantSwigluQuantData;
using quant::DequantSwigluQuantPlan;

// Bias element (r, c) as the dequantization adds it: an INT32 to the accumulator, a float after
// the scales.
struct BiasValue {
  int32_t integer = 0;
  double real = 0;
};

BiasValue biasAt(const DequantSwigluQuantPlan &p, const void *bias, size_t row, size_t c) {
  BiasValue b;
  const ptrdiff_t at = p.bias.offset(row, c);
  if (p.bias_int) {
    b.integer = static_cast<const int32_t *>(bias)[at];
  } else {
    visitFloatStorage(p.bias.dtype, [&](auto t) {
      b.real = toFloat(static_cast<const decltype(t) *>(bias)[at]);
    });
  }
  return b;
}

}  // namespace

void dequant_swiglu_quant(const DequantSwigluQuantPlan &p, const DequantSwigluQuantData &d) {
  auto *y = static_cast<uint8_t *>(d.y);
  auto *scale = static_cast<float *>(d.scale);
  const auto *x = static_cast<const int32_t *>(d.x);
  const auto *weight = static_cast<const float *>(d.weight_scale);
  const auto *activation = static_cast<const float *>(d.activation_scale);
  const auto *smooth = static_cast<const float *>(d.smooth_scales);
  const bool bias_f = p.bias.present && !p.bias_int;
  std::vector<double> dq(2 * p.half), z(p.half);
  for (size_t r = 0; r < p.rows; ++r) {
    const ptrdiff_t e = quant::smoothRowOf(p, d.counts, r);
    if (e < 0) {  // past group_index's counts
      quant::zeroRow(p, y, scale, r);
      continue;
    }
    const float s_a = activation ? activation[p.activation_scale.offset(r, 0)] : 1.0f;
    for (size_t c = 0; c < 2 * p.half; ++c) {
      const BiasValue b = p.bias.present ? biasAt(p, d.bias, p.biasRow(e), c) : BiasValue{};
      const float w = weight ? weight[p.weight_scale.offset(p.weightRow(e), c)] : 1.0f;
      dq[c] = exact::dequantValue(x[p.x.offset(r, c)], b.integer, w, s_a, bias_f, b.real);
    }
    for (size_t c = 0; c < p.half; ++c) {
      const double a = exact::siluGated(dq[p.gateColumn(c)], dq[p.multiplierColumn(c)]);
      z[c] = p.smooth ? a * smooth[p.smooth_scales.offset(static_cast<size_t>(e), c)] : a;
    }
    quant::quantizeRow(p, z.data(), y, scale, r);
  }
}

}  // namespace infiniop::cpu_reference
