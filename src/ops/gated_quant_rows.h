// SPDX-License-Identifier: Apache-2.0
// One row of a quantized gated activation from its exact values, in double (docs/swiglu_quant.md):
// the reference devices' SwiGluQuant, GeluMulQuant and DequantSwigluQuant, and the cpu device's
// DequantSwigluQuant, which computes its values as the reference does.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "exact/quant.h"
#include "ops/gated_quant.h"

namespace infiniop::quant {

// Row r past group_index's counts: its bytes 0 and (dynamic) its scales 0.
inline void zeroRow(const GatedQuantPlan &p, uint8_t *y, float *scale, size_t r) {
  for (size_t c = 0; c < p.half; ++c) y[p.y.offset(r, c)] = 0;
  if (p.dynamic)
    for (size_t g = 0; g < p.groups; ++g) scale[p.scale.offset(r, g)] = 0.0f;
}

// Row r from its H values z: each group's scale (dynamic: exact/quant.h's from the group's amax,
// a NaN propagating; static: read), then each byte z / s rounded once.
inline void quantizeRow(const GatedQuantPlan &p, const double *z, uint8_t *y, float *scale,
                        size_t r) {
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

}  // namespace infiniop::quant
