// SPDX-License-Identifier: Apache-2.0
// Storage dtypes: sizes, names, and the scalar F16/BF16 <-> F32 conversions (round to nearest
// even, NaN kept quiet) that the reference device uses and the SIMD paths are tested against.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "infinicore.h"

namespace infiniop {

// The int behind an enum argument of the C API. C callers may pass any int, and loading an
// out-of-range value as a C++ enum is undefined, so validation reads the bytes instead.
template <class Enum>
int enumValue(const Enum &value) {
  static_assert(sizeof(Enum) == sizeof(int), "C enums are int-sized");
  int raw;
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

size_t dtypeSize(infiniDtype_t dtype);  // 0 for an unknown value
inline bool isKnownDtype(int raw) {
  return raw >= INFINI_DTYPE_BYTE && raw <= INFINI_DTYPE_BF16;
}
const char *dtypeName(infiniDtype_t dtype);
inline bool isFloatStorage(infiniDtype_t t) {
  return t == INFINI_DTYPE_F32 || t == INFINI_DTYPE_F16 || t == INFINI_DTYPE_BF16;
}

inline uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float f32FromBf16(uint16_t h) {
  return floatOf(uint32_t{h} << 16);
}

inline uint16_t bf16FromF32(float f) {
  const uint32_t u = bitsOf(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

inline float f32FromF16(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  float magnitude;
  if (exponent == 0x1f) {
    magnitude = floatOf(0x7f800000u | (mantissa << 13));
  } else if (exponent == 0) {
    magnitude = static_cast<float>(mantissa) * 0x1p-24f;  // subnormal (or zero), exact
  } else {
    magnitude = floatOf(((exponent + 112) << 23) | (mantissa << 13));
  }
  return floatOf(bitsOf(magnitude) | sign);
}

inline uint16_t f16FromF32(float f) {
  const uint32_t u = bitsOf(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00;   // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00;  // rounds to >= 65520: infinity
  if (a < 0x38800000u) {                       // below 2^-14: F16 subnormal or zero
    // Adding 0.5 makes the FPU round the value at 2^-24 granularity, nearest even.
    const float shifted = floatOf(a) + 0.5f;
    return sign | static_cast<uint16_t>(bitsOf(shifted) - bitsOf(0.5f));
  }
  const uint32_t odd = (a >> 13) & 1u;
  return sign | static_cast<uint16_t>((a - (112u << 23) + 0xfffu + odd) >> 13);
}

}  // namespace infiniop

namespace infiniop {

// Storage element types of the floating dtypes, for templates that load and store them.
struct F16 {
  uint16_t bits;
};
struct BF16 {
  uint16_t bits;
};
inline float toFloat(float v) {
  return v;
}
inline float toFloat(F16 v) {
  return f32FromF16(v.bits);
}
inline float toFloat(BF16 v) {
  return f32FromBf16(v.bits);
}
template <class T>
T fromFloat(float v);
template <>
inline float fromFloat<float>(float v) {
  return v;
}
template <>
inline F16 fromFloat<F16>(float v) {
  return F16{f16FromF32(v)};
}
template <>
inline BF16 fromFloat<BF16>(float v) {
  return BF16{bf16FromF32(v)};
}

// v rounded to F32 toward zero, with the last bit set where that was inexact ("round to odd"):
// F16 and BF16 have at least 13 fewer significant bits, so rounding this F32 to them to nearest
// even rounds v itself once (no double rounding), subnormals and overflow included.
inline float roundToOddFloat(double v) {
  const float nearest = static_cast<float>(v);
  if (!(std::fabs(v) < HUGE_VAL) || static_cast<double>(nearest) == v) return nearest;
  uint32_t bits = bitsOf(nearest);
  if (std::fabs(static_cast<double>(nearest)) > std::fabs(v)) --bits;  // was rounded away from 0
  return floatOf(bits | 1u);
}

// A float64 value rounded once to the storage type, to nearest even; a NaN as the canonical
// quiet NaN, positive, as every device stores it (docs/accuracy.md).
template <class T>
T fromDouble(double v) {
  if (std::isnan(v)) return fromFloat<T>(floatOf(0x7fc00000u));
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>(v);
  } else {
    return fromFloat<T>(roundToOddFloat(v));
  }
}

// Calls fn(T{}) with T the storage type of a floating dtype (F32, F16, BF16).
template <class Fn>
void visitFloatStorage(infiniDtype_t dtype, Fn &&fn) {
  switch (dtype) {
    case INFINI_DTYPE_F16:
      return fn(F16{});
    case INFINI_DTYPE_BF16:
      return fn(BF16{});
    default:
      return fn(float{});
  }
}

}  // namespace infiniop
