// SPDX-License-Identifier: Apache-2.0
// ClippedSwigluQuant on the cpu device (docs/swiglu_quant.md): every value z in double as
// cpu_reference computes it (exact/clipped_swiglu.h's ClippedSwiglu, clamp_mode 0, times the
// smooth scale), its group's scale and its byte from exact/quant.h (ops/gated_quant_exact.h), a
// range of rows per thread. The bytes and scales are therefore the reference's on every target
// and thread count.
#include <algorithm>
#include <atomic>
#include <vector>

#include "cpu/parallel.h"
#include "exact/clipped_swiglu.h"
#include "ops/gated_quant.h"
#include "ops/gated_quant_exact.h"

namespace infiniop::cpu {

void clipped_swiglu_quant(const quant::GatedQuantPlan &p, const quant::GatedQuantData &d) {
  const exact::ClippedSwiglu gate{p.clipped};
  // Every thread's values, allocated before the threads start (an allocation that fails must
  // fail before anything is written).
  const size_t H = p.half, ranges = static_cast<size_t>(std::max(1, callThreads()));
  std::vector<double> z(std::max<size_t>(H, 1) * ranges);
  std::atomic<size_t> next{0};
  // About 40 operations a column (an exp, a division, the byte).
  parallelRanges(p.rows, 40 * H, [&](size_t first, size_t last) {
    const size_t k = next.fetch_add(1) % ranges;
    quant::exactGatedQuantRows(p, d, gate, first, last, z.data() + k * std::max<size_t>(H, 1));
  });
}

}  // namespace infiniop::cpu
