// SPDX-License-Identifier: Apache-2.0
// The quantized formats as the *Quant tests' oracles decide them, in long double and independent
// of src/exact (gated_quant_test.cc, dequant_swiglu_quant_test.cc): INT8 and FP8 E4M3 bytes of
// v = z / s rounded once to nearest even, the dynamic scale amax / qmax rounded to F32 or up to a
// power of two, each flagging values within kTolerance of a rounding midpoint (float64 decides
// there, docs/quantization.md); and the byte-level views the tests compare.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "device_param.h"
#include "index_values.h"
#include "tensor_buffer.h"

namespace infiniop_test::quant_oracle {

using infiniop::bitsOf;
using infiniop::floatOf;

// The relative distance from a rounding midpoint (of the byte grid or of F32 for a scale) below
// which this oracle does not decide: 2^-56, 16 times its own error (a few long double ulps).
// 2^-40 would skip decidable elements: silu(28) is 7e-13 (relative) below 28, and amax / qmax
// lies within 2^-40 of an F32 midpoint in one group of 2^16. GATED_QUANT_DEBUG=1 prints each
// skipped element.
constexpr long double kTolerance = 0x1p-56L;

// A value of the oracle, in long double.
struct Value {
  long double v;
  // A far-left tail that float64 takes as 0 (docs/quantization.md): v is a tiny negative number,
  // so that an infinite multiplier gives the infinity of the right sign (as the reference's
  // timesNegativeTail), but over a zero scale it is float64's 0 / 0, NaN.
  bool zero_in_float64 = false;
};

inline Value times(Value a, long double b) {
  return {a.v * b, a.zero_in_float64 && std::isfinite(b)};
}
inline Value over(Value a, long double b) {
  if (a.zero_in_float64 && b == 0) return {NAN};
  return {a.v / b};
}

// u >= 0 in units of a rounding grid, rounded to nearest even. *ambiguous: within the tolerance
// of a midpoint (exactly on one too: float64's value decides there, docs/quantization.md).
inline long double roundUnits(long double u, bool *ambiguous) {
  const long double frac = u - std::floor(u);
  if (std::fabs(frac - 0.5L) <= kTolerance * (u > 1 ? u : 1)) *ambiguous = true;
  return std::nearbyint(u);  // the default rounding: nearest, ties to even
}

// Byte of v = z / s.
inline uint8_t int8Byte(Value v, bool *ambiguous) {
  if (std::isnan(v.v)) return 0;
  if (v.v >= 127) return 0x7f;  // 127 itself, or just below it: 127 either way
  if (v.v <= -127) return 0x81;
  const long double q = roundUnits(std::fabs(v.v), ambiguous);
  return static_cast<uint8_t>(static_cast<int8_t>(v.v < 0 ? -q : q));
}

// OCP E4M3 (e4m3fn): bias 7, 3 mantissa bits, subnormals k 2^-9, max 448 (0x7E), NaN 0x7F.
inline uint8_t fp8Byte(Value v, bool *ambiguous) {
  if (std::isnan(v.v)) return 0x7f;
  const uint8_t sign = std::signbit(v.v) ? 0x80 : 0;
  const long double a = std::fabs(v.v);
  if (a >= 448) return sign | 0x7e;  // saturated (448 itself, and from 464 up would round past)
  if (a < 0x1p-6L)                   // subnormal: k 2^-9, k = 8 is 2^-6's code
    return sign | static_cast<uint8_t>(roundUnits(a * 0x1p9L, ambiguous));
  int e = 0;
  std::frexp(a, &e);                           // a in [2^(e-1), 2^e)
  const long double u = std::ldexp(a, 4 - e);  // a / 2^(e-1-3): in [8, 16)
  const int k = static_cast<int>(roundUnits(u, ambiguous));
  return sign | static_cast<uint8_t>(((e - 1 + 7) << 3) + k - 8);  // k = 16 carries
}

// The dynamic scale of a group with exact amax (NaN propagated). *ambiguous: amax / qmax lies
// within the tolerance of an F32 midpoint (F32) or a power of two (UE8M0).
inline float scaleOf(Value amax, long double qmax, bool ue8m0, bool *ambiguous) {
  if (std::isnan(amax.v)) return floatOf(0x7fc00000u);
  const Value q = over(amax, qmax);
  if (std::isinf(q.v)) return INFINITY;
  const float smallest = 0x1p-126f;
  if (q.v == 0) return smallest;
  if (ue8m0) {
    int e = 0;
    const long double f = std::frexp(q.v, &e);  // q = f 2^e, f in [0.5, 1)
    // Exactly a power of two, or within the tolerance of one: float64 decides.
    if (f - 0.5L <= kTolerance || 1 - f <= kTolerance) *ambiguous = true;
    const int k = f == 0.5L ? e - 1 : e;
    if (k > 127) return INFINITY;
    if (k < -126) return smallest;
    return std::ldexp(1.0f, k);
  }
  if (q.v < 0x1p-126L) return smallest;  // every rounding of it is 2^-126 at most
  if (q.v >= 0x1p128L) return INFINITY;
  const int e = std::ilogb(q.v);
  const long double spacing = std::ldexp(1.0L, e - 23);
  const long double f = roundUnits(q.v / spacing, ambiguous) * spacing;
  return f >= 0x1p128L ? INFINITY : static_cast<float>(f);  // exact: on the F32 grid
}

inline uint8_t byteAt(TensorBuffer &b, size_t i) {
  return *reinterpret_cast<const uint8_t *>(b.at(i));
}

inline uint32_t scaleBits(TensorBuffer &b, size_t i) {
  return bitsOf(b.get(i));
}

// The storage bytes of b that no element of its view covers.
inline std::vector<size_t> gapBytes(TensorBuffer &b) {
  std::vector<bool> covered(b.storage().size(), false);
  for (size_t i = 0; i < b.numel(); ++i) {
    const size_t begin =
        static_cast<size_t>(reinterpret_cast<uint8_t *>(b.at(i)) - b.storageBytes());
    for (size_t k = 0; k < b.elementSize(); ++k) covered[begin + k] = true;
  }
  std::vector<size_t> gaps;
  for (size_t k = 0; k < covered.size(); ++k)
    if (!covered[k]) gaps.push_back(k);
  return gaps;
}

// The oracle's outputs of one call: y's bytes and the dynamic scales, with the elements it does
// not decide (skipped, counted).
struct Expected {
  std::vector<uint8_t> y;
  std::vector<float> scale;  // dynamic only
  std::vector<bool> y_skip, scale_skip;
  size_t skipped = 0;
};

inline Expected expectedOf(size_t rows, size_t H, size_t G) {
  Expected out;
  out.y.assign(rows * H, 0);
  out.y_skip.assign(rows * H, false);
  out.scale.assign(rows * G, 0.0f);
  out.scale_skip.assign(rows * G, false);
  return out;
}

// group_index's counts (none without it).
inline std::vector<int64_t> countsOf(TensorBuffer *group_index) {
  std::vector<int64_t> counts;
  if (group_index)
    for (size_t e = 0; e < group_index->numel(); ++e) counts.push_back(getInt(*group_index, e));
  return counts;
}

// The expert of row r: 0 without counts, -1 past their sum (bytes 0, dynamic scale 0).
inline ptrdiff_t expertOf(const std::vector<int64_t> &counts, size_t r) {
  if (counts.empty()) return 0;
  int64_t end = 0;
  for (size_t e = 0; e < counts.size(); ++e) {
    end += counts[e];
    if (static_cast<int64_t>(r) < end) return static_cast<ptrdiff_t>(e);
  }
  return -1;
}

// Row r's G groups (of gs columns) from its H values z: each dynamic scale from the group's amax
// (static: read from static_scale, G per row), then each byte z / s, into *out (rows of H and G).
inline void quantizeRow(const std::vector<Value> &z, size_t r, size_t G, size_t gs, bool dynamic,
                        bool ue8m0, bool fp8, TensorBuffer &static_scale, Expected *expected) {
  Expected &out = *expected;
  const size_t H = z.size();
  const long double qmax = fp8 ? 448 : 127;
  for (size_t g = 0; g < G; ++g) {
    float s = 0;
    bool scale_ambiguous = false;
    if (dynamic) {
      Value amax{0};
      for (size_t col = g * gs; col < (g + 1) * gs; ++col) {
        const long double m = std::fabs(z[col].v);
        if (std::isnan(m) || std::isnan(amax.v))
          amax = {NAN};
        else if (m > amax.v)
          amax = {m};
      }
      s = scaleOf(amax, qmax, ue8m0, &scale_ambiguous);
      out.scale[r * G + g] = s;
      if (scale_ambiguous) {
        out.scale_skip[r * G + g] = true;
        ++out.skipped;
      }
    } else {
      s = static_scale.get(r * G + g);
    }
    for (size_t col = g * gs; col < (g + 1) * gs; ++col) {
      const Value v = over(z[col], s);
      bool ambiguous = scale_ambiguous;  // the bytes follow an undecided scale
      out.y[r * H + col] = fp8 ? fp8Byte(v, &ambiguous) : int8Byte(v, &ambiguous);
      if (ambiguous) {
        if (std::getenv("GATED_QUANT_DEBUG"))
          std::printf("skip r=%zu c=%zu z=%.21Lg s=%.9g v=%.21Lg\n", r, col, z[col].v, s, v.v);
        out.y_skip[r * H + col] = true;
        ++out.skipped;
      }
    }
  }
}

// y's bytes and (dynamic) the scale's bits against the oracle's, where it decides; a static scale
// unchanged (static_scale: its bytes before the call); the storage gaps of y and a dynamic scale
// still poisoned (0xA5). inputs_of(i) describes y element i's inputs. Fatal failures: call
// through ASSERT_NO_FATAL_FAILURE.
inline void expectOracleBytes(const Expected &want, TensorBuffer &y, TensorBuffer &scale,
                              bool dynamic, const std::vector<uint8_t> &static_scale,
                              const std::function<std::string(size_t)> &inputs_of = {}) {
  const size_t n = y.numel(), ns = scale.numel();
  for (size_t i = 0; i < n; i += checkStride(n))
    if (!want.y_skip[i])
      ASSERT_EQ(int(byteAt(y, i)), int(want.y[i]))
          << "y element " << i << " of " << n << (inputs_of ? inputs_of(i) : std::string());
  if (dynamic) {
    for (size_t i = 0; i < ns; ++i)
      if (!want.scale_skip[i])
        ASSERT_EQ(scaleBits(scale, i), bitsOf(want.scale[i]))
            << "scale " << i << ": " << scale.get(i) << " want " << want.scale[i];
  } else {
    ASSERT_EQ(scale.storage(), static_scale) << "a static scale was written";
  }
  for (size_t k : gapBytes(y)) ASSERT_EQ(y.storage()[k], 0xA5) << "y gap byte " << k;
  if (dynamic)
    for (size_t k : gapBytes(scale)) ASSERT_EQ(scale.storage()[k], 0xA5) << "scale gap byte " << k;
}

}  // namespace infiniop_test::quant_oracle
