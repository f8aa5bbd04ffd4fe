// SPDX-License-Identifier: Apache-2.0
// One row of a quantized gated activation from its exact values, in double (docs/swiglu_quant.md):
// the reference device's GatedQuant and DequantSwigluQuant, and the cpu device's
// ClippedSwigluQuant and DequantSwigluQuant, which compute their values as the reference does.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "exact/quant.h"
#include "ops/gated_quant.h"

namespace infiniop::quant {

// Row r past group_index's counts: its bytes 0 and (dynamic) its scales 0.
inline void zeroRow(const GatedQuantPlan &p, uint8_t *y, float *scale, size_t r) {
  // offsets, not pointers: an empty tensor's data may be NULL; each row's found once
  const ptrdiff_t yr = p.y.rowOffset(r), sr = p.scale.rowOffset(r);
  for (size_t c = 0; c < p.half; ++c) y[yr + static_cast<ptrdiff_t>(c) * p.y.col_stride] = 0;
  if (p.dynamic)
    for (size_t g = 0; g < p.groups; ++g)
      scale[sr + static_cast<ptrdiff_t>(g) * p.scale.col_stride] = 0.0f;
}

// Row r from its H values z: each group's scale (dynamic: exact/quant.h's from the group's amax,
// a NaN propagating; static: read), then each byte z / s rounded once.
inline void quantizeRow(const GatedQuantPlan &p, const double *z, uint8_t *y, float *scale,
                        size_t r) {
  const ptrdiff_t yr = p.y.rowOffset(r), sr = p.scale.rowOffset(r);
  const ptrdiff_t yc = p.y.col_stride, sc = p.scale.col_stride;
  for (size_t g = 0; g < p.groups; ++g) {
    const size_t begin = g * p.group_size, end = begin + p.group_size;
    float s = 0;
    if (p.dynamic) {
      double amax = 0;
      for (size_t c = begin; c < end; ++c)
        amax = std::isnan(z[c]) || std::isnan(amax) ? NAN : std::fmax(amax, std::fabs(z[c]));
      s = exact::dynamicScale(amax, p.format, p.power_of_two);
      scale[sr + static_cast<ptrdiff_t>(g) * sc] = s;
    } else {
      s = scale[sr + static_cast<ptrdiff_t>(g) * sc];
    }
    for (size_t c = begin; c < end; ++c)
      y[yr + static_cast<ptrdiff_t>(c) * yc] = exact::quantizeByte(z[c] / s, p.format);
  }
}

// Rows [first, last) of a call with no values (H = 0, so x and y may be NULL): only the scales,
// as quantizeRow and zeroRow write them (dynamic: an empty group's).
inline void scaleOnlyRows(const GatedQuantPlan &p, const int64_t *counts, float *scale,
                          size_t first, size_t last) {
  for (size_t r = first; r < last; ++r)
    if (smoothRowOf(p, counts, r) < 0)
      zeroRow(p, nullptr, scale, r);
    else
      quantizeRow(p, nullptr, nullptr, scale, r);
}

}  // namespace infiniop::quant
