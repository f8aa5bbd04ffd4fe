// SPDX-License-Identifier: Apache-2.0
// SwiGluQuant and GeluMulQuant as the formulas read (docs/swiglu_quant.md): each row's values
// z = act(x1) x2 m in double (exact/gated.h's formula), each group's scale from their amax and
// each byte z / s rounded once (exact/quant.h). The oracle of the other devices.
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "exact/gated.h"
#include "exact/gelu.h"
#include "exact/quant.h"
#include "exact/sigmoid.h"
#include "ops/gated_quant.h"
#include "ops/gated_quant_rows.h"

namespace infiniop::cpu_reference {
namespace {

using quant::GatedQuantData;
using quant::GatedQuantPlan;

float loadFloat(const moe::RouterView &v, const void *data, size_t r, size_t c) {
  float value = 0;
  visitFloatStorage(v.dtype, [&](auto t) {
    value = toFloat(static_cast<const decltype(t) *>(data)[v.offset(r, c)]);
  });
  return value;
}

template <double (*Act)(double)>
void gatedQuant(const GatedQuantPlan &p, const GatedQuantData &d) {
  const exact::Gated<Act> gated;
  auto *y = static_cast<uint8_t *>(d.y);
  auto *scale = static_cast<float *>(d.scale);
  const auto *smooth = static_cast<const float *>(d.smooth_scales);
  std::vector<double> z(p.half);
  for (size_t r = 0; r < p.rows; ++r) {
    const ptrdiff_t e = quant::smoothRowOf(p, d.counts, r);
    if (e < 0) {  // past group_index's counts
      quant::zeroRow(p, y, scale, r);
      continue;
    }
    for (size_t c = 0; c < p.half; ++c) {
      double a = 0;
      gated(a, loadFloat(p.x, d.x, r, p.gateColumn(c)),
            loadFloat(p.x, d.x, r, p.multiplierColumn(c)));
      z[c] = p.smooth ? a * smooth[p.smooth_scales.offset(static_cast<size_t>(e), c)] : a;
    }
    quant::quantizeRow(p, z.data(), y, scale, r);
  }
}

}  // namespace

void swiglu_quant(const GatedQuantPlan &p, const GatedQuantData &d) {
  gatedQuant<exact::silu>(p, d);
}

void gelu_mul_quant(const GatedQuantPlan &p, const GatedQuantData &d) {
  if (p.activation == quant::GateActivation::gelu_tanh)
    gatedQuant<exact::geluTanh>(p, d);
  else
    gatedQuant<exact::geluErf>(p, d);
}

}  // namespace infiniop::cpu_reference
