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

// Rows [first, last) of y and scale, x's storage type T. gate(double &a, float gate_input, float
// multiplier) is the exact activation (exact/gated.h's Gated, exact/clipped_swiglu.h's
// ClippedSwiglu); z holds H doubles of the caller's. Each row's offsets are found once.
template <class T, class Gate>
void exactGatedQuantRowsOf(const GatedQuantPlan &p, const GatedQuantData &d, const Gate &gate,
                           size_t first, size_t last, double *z) {
  const auto *x = static_cast<const T *>(d.x);
  auto *y = static_cast<uint8_t *>(d.y);
  auto *scale = static_cast<float *>(d.scale);
  const auto *smooth = static_cast<const float *>(d.smooth_scales);
  const ptrdiff_t xc = p.x.col_stride, yc = p.y.col_stride, sc = p.scale.col_stride;
  for (size_t r = first; r < last; ++r) {
    const ptrdiff_t e = smoothRowOf(p, d.counts, r);
    // offsets, not pointers: an empty tensor's data may be NULL
    const ptrdiff_t yr = p.y.rowOffset(r), sr = p.scale.rowOffset(r);
    if (e < 0) {  // past group_index's counts
      for (size_t c = 0; c < p.half; ++c) y[yr + static_cast<ptrdiff_t>(c) * yc] = 0;
      if (p.dynamic)
        for (size_t g = 0; g < p.groups; ++g) scale[sr + static_cast<ptrdiff_t>(g) * sc] = 0.0f;
      continue;
    }
    const ptrdiff_t xr = p.x.rowOffset(r);
    const ptrdiff_t mr = p.smooth ? p.smooth_scales.rowOffset(static_cast<size_t>(e)) : 0;
    for (size_t c = 0; c < p.half; ++c) {
      double a = 0;
      gate(a, toFloat(x[xr + static_cast<ptrdiff_t>(p.gateColumn(c)) * xc]),
           toFloat(x[xr + static_cast<ptrdiff_t>(p.multiplierColumn(c)) * xc]));
      z[c] = p.smooth ? a * smooth[mr + static_cast<ptrdiff_t>(c) * p.smooth_scales.col_stride] : a;
    }
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
}

template <class Gate>
void exactGatedQuantRows(const GatedQuantPlan &p, const GatedQuantData &d, const Gate &gate,
                         size_t first, size_t last, double *z) {
  visitFloatStorage(
      p.dtype, [&](auto t) { exactGatedQuantRowsOf<decltype(t)>(p, d, gate, first, last, z); });
}

}  // namespace infiniop::quant
