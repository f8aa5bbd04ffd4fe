// SPDX-License-Identifier: Apache-2.0
// Activations of 16-bit inputs (BF16 where kBf16, else F16) as tables: a 16-bit type has 65536
// values, so f(x) for every one of them, computed once in double from the reference formulas
// (cpu_reference/), turns the 16-bit paths' evaluation into one gather (table-inl.h). The tables
// are data, the same on every target, so the 16-bit outputs computed from them are the same bits
// everywhere; what each entry holds is argued where it is built, and
// tests/cpp/every_16bit_input_test.cc checks the outputs of every entry.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>

#include "core/dtype.h"

namespace infiniop::cpu {

// The tables of one activation for one 16-bit storage type, indexed by an input's bits: `value`
// f(x) and `derivative` f'(x) as factorTable's pairs (null where the functor needs none).
struct ActivationTables {
  const float *value = nullptr, *value_lo = nullptr;
  const float *derivative = nullptr, *derivative_lo = nullptr;
};

constexpr size_t kTableEntries = 65536;

// The input whose BF16 (kBf16) or F16 bits are `bits`, exactly.
template <bool kBf16>
float tableInput(uint32_t bits) {
  return kBf16 ? f32FromBf16(static_cast<uint16_t>(bits)) : f32FromF16(static_cast<uint16_t>(bits));
}

// A factor f(x) that a 16-bit path multiplies (by x2, dy or dy x2, each exact in F32) and rounds:
// `hi`, f(x) rounded to nearest F32, within half an F32 ulp of the double (the oracle's own
// value), so that the product is within 1u (u = 2^-24) of the oracle's; and `lo`, the double's
// remainder f(x) - hi rounded to F32, so that hi + lo is within 2^-48 |f(x)| of it, for the lanes
// whose product lies next to a rounding boundary (table-inl.h's DecideBeside; NaN where hi is
// below 2^-90, so that those lanes take the oracle). `hi` is NaN for
// the inputs whose lanes the oracle must take: a non-finite x (the limits are the oracle's to
// give), and an f(x) that F32 cannot hold to that precision (below its normal range, or a 0 of a
// non-zero x: the far-left tail, where the reference's own limits apply). f(0) = 0 stays: its
// products are exact zeros.
struct FactorTable {
  const float *hi, *lo;
};
// The hi entry of a factor f of a 16-bit input x, as above: f rounded to F32, or NaN.
inline float factorEntry(float x, double f) {
  const float rounded = static_cast<float>(f);
  const bool holds = std::fabs(rounded) >= 0x1p-126f && std::fabs(rounded) <= 3.4028235e38f;
  return std::isfinite(x) && (holds || (x == 0 && f == 0)) ? rounded : NAN;
}
template <double (*F)(double), bool kBf16>
FactorTable factorTable() {
  static const std::unique_ptr<float[]> table = [] {
    std::unique_ptr<float[]> t(new float[2 * kTableEntries]);
    for (uint32_t bits = 0; bits < kTableEntries; ++bits) {
      const float x = tableInput<kBf16>(bits);
      const double f = std::isfinite(x) ? F(x) : NAN;
      const float hi = factorEntry(x, f);
      t[bits] = hi;
      // From 2^-90 on, lo keeps its bits to 2^-60 |hi| even where subnormal, and is 0 only where
      // hi is the double itself (a non-zero remainder is at least 2^-142).
      t[kTableEntries + bits] =
          std::fabs(hi) >= 0x1p-90f ? static_cast<float>(f - static_cast<double>(hi)) : NAN;
    }
    return t;
  }();
  return {table.get(), table.get() + kTableEntries};
}

// An output that is f(x) alone (Gelu): the oracle's f(x) as the F32 that rounds to the same
// 16-bit value (roundToOddFloat, as elementwise-inl.h's oracle lanes), so that the store gives
// every output the exact value rounded once, with no boundary test: bits equal to the oracle's by
// construction, non-finite inputs included (a NaN is stored as the canonical NaN).
template <double (*F)(double), bool kBf16>
const float *roundedTable() {
  static const std::unique_ptr<float[]> table = [] {
    std::unique_ptr<float[]> t(new float[kTableEntries]);
    for (uint32_t bits = 0; bits < kTableEntries; ++bits)
      t[bits] = roundToOddFloat(F(tableInput<kBf16>(bits)));
    return t;
  }();
  return table.get();
}

}  // namespace infiniop::cpu
