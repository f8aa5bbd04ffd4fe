// SPDX-License-Identifier: Apache-2.0
// The GatedQuant operators' rows as the formulas read (docs/swiglu_quant.md): each row's values z
// in double (the gate's exact value times the smooth scale), then gated_quant_rows.h's scales
// and bytes. cpu_reference runs every kernel through it;
// the cpu device runs ClippedSwigluQuant through it, a range of rows per thread.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "ops/gated_quant.h"
#include "ops/gated_quant_rows.h"

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
  const ptrdiff_t xc = p.x.col_stride;
  for (size_t r = first; r < last; ++r) {
    const ptrdiff_t e = smoothRowOf(p, d.counts, r);
    if (e < 0) {  // past group_index's counts
      zeroRow(p, y, scale, r);
      continue;
    }
    // offsets, not pointers: an empty tensor's data may be NULL
    const ptrdiff_t xr = p.x.rowOffset(r);
    const ptrdiff_t mr = p.smooth ? p.smooth_scales.rowOffset(static_cast<size_t>(e)) : 0;
    for (size_t c = 0; c < p.half; ++c) {
      double a = 0;
      gate(a, toFloat(x[xr + static_cast<ptrdiff_t>(p.gateColumn(c)) * xc]),
           toFloat(x[xr + static_cast<ptrdiff_t>(p.multiplierColumn(c)) * xc]));
      z[c] = p.smooth ? a * smooth[mr + static_cast<ptrdiff_t>(c) * p.smooth_scales.col_stride] : a;
    }
    quantizeRow(p, z, y, scale, r);
  }
}

template <class Gate>
void exactGatedQuantRows(const GatedQuantPlan &p, const GatedQuantData &d, const Gate &gate,
                         size_t first, size_t last, double *z) {
  visitFloatStorage(
      p.dtype, [&](auto t) { exactGatedQuantRowsOf<decltype(t)>(p, d, gate, first, last, z); });
}

}  // namespace infiniop::quant
