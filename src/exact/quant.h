// SPDX-License-Identifier: Apache-2.0
// The quantized formats of the *Quant operators in double (docs/quantization.md): a value's byte
// (rounded once to nearest even, saturated) and a dynamic scale from its group's amax. The
// reference device runs these on its double values; the cpu and opencl devices on the lanes their
// own F32 value cannot decide (opencl in OpenCL C double, the same operations).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace infiniop::exact {

enum class QuantFormat : int {
  int8,      // INT8, symmetric: [-127, 127]
  fp8_e4m3,  // OCP FP8 E4M3 (e4m3fn): bias 7, max 448, NaN 0x7F, no infinities
};

inline double quantMax(QuantFormat format) {
  return format == QuantFormat::int8 ? 127.0 : 448.0;
}

// The byte of v (z / s, already divided) in `format`: rounded once to nearest even, saturated to
// [-qmax, qmax]; a NaN is 0 (INT8) or 0x7F (FP8, whatever its sign); -0 and values that round to
// 0 from below keep FP8's sign (0x80). No library call (this runs once per element on the exact
// paths): the roundings are one IEEE addition each, or integer operations on the bits.
inline uint8_t quantizeByte(double v, QuantFormat format) {
  if (format == QuantFormat::int8) {
    if (std::isnan(v)) return 0;
    const double c = v < -127.0 ? -127.0 : (v > 127.0 ? 127.0 : v);
    // Adding 1.5 2^52 leaves no fraction bit: the sum is c rounded to an integer, nearest even
    // (|c| < 2^51); subtracting it back is exact.
    const double q = (c + 0x1.8p52) - 0x1.8p52;
    return static_cast<uint8_t>(static_cast<int8_t>(q));
  }
  if (std::isnan(v)) return 0x7f;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  const double a = std::fabs(v);
  if (a >= 448.0) return sign | 0x7e;  // saturated: everything from 448 on rounds to 448 or above
  if (a < 0x1p-6) {  // the subnormals, multiples of 2^-9 (8 is 2^-6's code): a 2^9 < 8, rounded
    return sign | static_cast<uint8_t>((a * 0x1p9 + 0x1p52) - 0x1p52);  // as the INT8 one above
  }
  // a's bits kept to 3 mantissa bits, nearest even: just under half the dropped part's unit,
  // plus the lowest kept bit (a tie goes up where that bit is 1), added before the drop; a carry
  // moves into the exponent, as the code's next binade. Then E4M3's bias 7 for double's 1023.
  uint64_t bits;
  std::memcpy(&bits, &a, sizeof bits);
  const uint64_t rounded = bits + ((uint64_t{1} << 48) - 1) + ((bits >> 49) & 1);
  return sign | static_cast<uint8_t>((rounded >> 49) - ((1023 - 7) << 3));
}

// The F32 scale of a group whose exact amax (max |z|) is `amax` (a NaN propagates): amax / qmax
// rounded once to F32 (F32 format) or up to a power of two (UE8M0), at least 2^-126; +inf where
// it exceeds F32's range; a NaN amax gives the quiet NaN 0x7FC00000 (one pattern everywhere).
inline float dynamicScale(double amax, QuantFormat format, bool power_of_two) {
  if (std::isnan(amax)) {
    const uint32_t bits = 0x7fc00000u;
    float nan;
    std::memcpy(&nan, &bits, sizeof nan);
    return nan;
  }
  const double q = amax / quantMax(format);
  double s = q;
  if (power_of_two && q > 0 && std::isfinite(q)) {
    int e = 0;
    const double f = std::frexp(q, &e);  // q = f 2^e, f in [0.5, 1)
    s = std::ldexp(1.0, f == 0.5 ? e - 1 : e);
  }
  const float rounded = static_cast<float>(s);  // exact for a power of two in range
  return rounded < 0x1p-126f ? 0x1p-126f : rounded;
}

}  // namespace infiniop::exact
