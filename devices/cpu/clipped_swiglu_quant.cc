// SPDX-License-Identifier: Apache-2.0
// ClippedSwigluQuant on the cpu device (docs/swiglu_quant.md). 16-bit x whose attribute set has a
// gate table (clipped_gate_table.h) takes gated_quant.cc's F32 pipeline (the gate table's F32
// value, its proven window and near test, the reference's double where near). The rest comes
// here: every value z in double as cpu_reference computes it (exact/clipped_swiglu.h's
// ClippedSwiglu, clamp_mode 0, times the smooth scale), its group's scale and its byte from
// exact/quant.h (ops/gated_quant_exact.h), a range of rows per thread. The bytes and scales are
// therefore the reference's on every target and thread count. A 16-bit x of many elements (an
// attribute set beyond the gate tables') first tabulates the gate g(A) = a sigmoid(alpha a) of
// every 16-bit A, the reference's own double (exact::Clipped); each value is then the same double
// operations on it, (b + bias) g, with no exponential per element.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "cpu/activation_table.h"
#include "cpu/clipped_gate_table.h"
#include "cpu/parallel.h"
#include "exact/clipped_swiglu.h"
#include "ops/gated_quant.h"
#include "ops/gated_quant_exact.h"

namespace infiniop::cpu {
namespace {

// The table costs one gate per 16-bit pattern: worth it from about as many values.
constexpr size_t kTableMinValues = kTableEntries;

// exact::ClippedSwiglu (clamp_mode 0) with the gate read from the table: the same clamps and the
// same timesGate on the same doubles.
struct TabulatedClippedSwiglu {
  ClippedSwigluAttributes at;
  const double *gate;  // by A's 16-bit pattern
  bool bf16;
  void operator()(double &y, float A, float B) const {
    // A is a 16-bit value, so its bits come back exactly (a NaN's may not, and any NaN gives NaN)
    const uint32_t bits = bf16 ? bitsOf(A) >> 16 : f16FromF32(A);
    y = exact::clippedFromGate(at, A, B, gate[bits]);
  }
};

// Rows of the plan, z (H doubles) per thread allocated before the threads start (an allocation
// that fails must fail before anything is written).
template <class Gate>
void rows(const quant::GatedQuantPlan &p, const quant::GatedQuantData &d, const Gate &gate) {
  const size_t H = std::max<size_t>(p.half, 1),
               ranges = static_cast<size_t>(std::max(1, callThreads()));
  std::vector<double> z(H * ranges);
  std::atomic<size_t> next{0};
  // About 40 operations a column (an exp, a division, the byte).
  parallelRanges(p.rows, 40 * p.half, [&](size_t first, size_t last) {
    const size_t k = next.fetch_add(1) % ranges;
    quant::exactGatedQuantRows(p, d, gate, first, last, z.data() + k * H);
  });
}

}  // namespace

void clipped_swiglu_quant(const quant::GatedQuantPlan &p, const quant::GatedQuantData &d) {
  const bool bf16 = p.dtype == INFINI_DTYPE_BF16;
  if (bf16 || p.dtype == INFINI_DTYPE_F16) {
    const ClippedGateTables tables = clippedGateTables(p.clipped, bf16);
    if (tables.gate != nullptr) return clippedSwigluQuantTabled(p, d, tables);
  }
  if ((!bf16 && p.dtype != INFINI_DTYPE_F16) || p.rows * p.half < kTableMinValues)
    return rows(p, d, exact::ClippedSwiglu{p.clipped});
  std::vector<double> gate(kTableEntries);
  parallelRanges(kTableEntries, 40, [&](size_t first, size_t last) {
    for (size_t bits = first; bits < last; ++bits) {
      const float A = bf16 ? tableInput<true>(static_cast<uint32_t>(bits))
                           : tableInput<false>(static_cast<uint32_t>(bits));
      gate[bits] = exact::Clipped(p.clipped, A, 0.0f).g;
    }
  });
  rows(p, d, TabulatedClippedSwiglu{p.clipped, gate.data(), bf16});
}

}  // namespace infiniop::cpu
