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
// 0 from below keep FP8's sign (0x80).
inline uint8_t quantizeByte(double v, QuantFormat format) {
  if (format == QuantFormat::int8) {
    if (std::isnan(v)) return 0;
    const double q = std::nearbyint(std::fmin(std::fmax(v, -127.0), 127.0));
    return static_cast<uint8_t>(static_cast<int8_t>(q));
  }
  if (std::isnan(v)) return 0x7f;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  const double a = std::fabs(v);
  if (a >= 448.0) return sign | 0x7e;  // saturated: everything from 448 on rounds to 448 or above
  if (a < 0x1p-6) {                    // the subnormals, multiples of 2^-9 (8 is 2^-6's code)
    return sign | static_cast<uint8_t>(std::nearbyint(a * 0x1p9));
  }
  int e = 0;
  const double f = std::frexp(a, &e);                         // a = f 2^e, f in [0.5, 1)
  const double k = std::nearbyint((2.0 * f - 1.0) * 8.0);     // the 3 mantissa bits, exact scaling
  const int code = ((e - 1 + 7) << 3) + static_cast<int>(k);  // k = 8 carries into the exponent
  return sign | static_cast<uint8_t>(code);
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
