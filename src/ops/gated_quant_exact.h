// SPDX-License-Identifier: Apache-2.0
// The GatedQuant operators' rows as the formulas read (docs/swiglu_quant.md): each row's values z
// in double (the gate's exact value times the smooth scale), each group's scale from their amax
// and each byte z / s rounded once (exact/quant.h). cpu_reference runs every kernel through it;
// the cpu device runs ClippedSwigluQuant through it, a range of rows per thread.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "exact/quant.h"
#include "ops/gated_quant.h"

namespace infiniop::quant {

inline float loadFloat(const moe::RouterView &v, const void *data, size_t r, size_t c) {
  float value = 0;
  visitFloatStorage(v.dtype, [&](auto t) {
    value = toFloat(static_cast<const decltype(t) *>(data)[v.offset(r, c)]);
  });
  return value;
}

// Rows [first, last) of y and scale. gate(double &a, float gate_input, float multiplier) is the
// exact activation (exact/gated.h's Gated, exact/clipped_swiglu.h's ClippedSwiglu); z holds H
// doubles of the caller's.
template <class Gate>
void exactGatedQuantRows(const GatedQuantPlan &p, const GatedQuantData &d, const Gate &gate,
                         size_t first, size_t last, double *z) {
  auto *y = static_cast<uint8_t *>(d.y);
  auto *scale = static_cast<float *>(d.scale);
  const auto *smooth = static_cast<const float *>(d.smooth_scales);
  for (size_t r = first; r < last; ++r) {
    const ptrdiff_t e = smoothRowOf(p, d.counts, r);
    if (e < 0) {  // past group_index's counts
      for (size_t c = 0; c < p.half; ++c) y[p.y.offset(r, c)] = 0;
      if (p.dynamic)
        for (size_t g = 0; g < p.groups; ++g) scale[p.scale.offset(r, g)] = 0.0f;
      continue;
    }
    for (size_t c = 0; c < p.half; ++c) {
      double a = 0;
      gate(a, loadFloat(p.x, d.x, r, p.gateColumn(c)),
           loadFloat(p.x, d.x, r, p.multiplierColumn(c)));
      z[c] = p.smooth ? a * smooth[p.smooth_scales.offset(static_cast<size_t>(e), c)] : a;
    }
    for (size_t g = 0; g < p.groups; ++g) {
      const size_t begin = g * p.group_size, end = begin + p.group_size;
      float s = 0;
      if (p.dynamic) {
        double amax = 0;
        for (size_t c = begin; c < end; ++c)
          amax = std::isnan(z[c]) || std::isnan(amax) ? NAN : std::fmax(amax, std::fabs(z[c]));
        s = exact::dynamicScale(amax, p.format, p.power_of_two);
        scale[p.scale.offset(r, g)] = s;
      } else {
        s = scale[p.scale.offset(r, g)];
      }
      for (size_t c = begin; c < end; ++c)
        y[p.y.offset(r, c)] = exact::quantizeByte(z[c] / s, p.format);
    }
  }
}

}  // namespace infiniop::quant
