// SPDX-License-Identifier: Apache-2.0
// The scalar F16/BF16 conversions are the oracle for every vector path: check them against
// the processor's F16C instructions and against round-to-nearest-even worked in double.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>

#include "core/dtype.h"

namespace {

using infiniop::bitsOf;
using infiniop::floatOf;

__attribute__((target("f16c"))) uint16_t hardwareF16(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
__attribute__((target("f16c"))) float hardwareF32(uint16_t h) {
  return _cvtsh_ss(h);
}

bool hasF16c() {
  return __builtin_cpu_supports("f16c");
}

TEST(Dtype, F16MatchesF16cOverFloatBitPatterns) {
  if (!hasF16c()) GTEST_SKIP() << "processor lacks F16C";
  // Every 97th pattern of all 2^32 float bit patterns, plus each boundary region exhaustively.
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 97) {
    const float f = floatOf(static_cast<uint32_t>(u));
    const uint16_t expected = hardwareF16(f), got = infiniop::f16FromF32(f);
    if (std::isnan(f)) {
      ASSERT_EQ(got & 0x7c00, 0x7c00);
      ASSERT_NE(got & 0x03ff, 0);
    } else {
      ASSERT_EQ(got, expected) << std::hex << u;
    }
  }
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float expected = hardwareF32(static_cast<uint16_t>(h)),
                got = infiniop::f32FromF16(static_cast<uint16_t>(h));
    if (std::isnan(expected))
      ASSERT_TRUE(std::isnan(got));
    else
      ASSERT_EQ(bitsOf(got), bitsOf(expected)) << std::hex << h;
  }
}

TEST(Dtype, Bf16RoundsToNearestEven) {
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 89) {
    const float f = floatOf(static_cast<uint32_t>(u));
    const uint16_t got = infiniop::bf16FromF32(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(infiniop::f32FromBf16(got)));
      continue;
    }
    // Candidates: truncation and the next value away from zero; pick the nearer, ties to even.
    const uint16_t low = static_cast<uint16_t>(u >> 16), high = static_cast<uint16_t>(low + 1);
    // The value past the largest finite BF16 counts as 2^128, where rounding to infinity starts.
    const auto value = [](uint16_t b) {
      return (b & 0x7fff) == 0x7f80 ? std::copysign(0x1p128, (b & 0x8000) ? -1.0 : 1.0)
                                    : double(infiniop::f32FromBf16(b));
    };
    const double d_low = std::fabs(double(f) - value(low));
    const double d_high = std::fabs(double(f) - value(high));
    const uint16_t expected = d_low < d_high ? low : d_high < d_low ? high : (low & 1 ? high : low);
    if ((low & 0x7fff) == 0x7f80) continue;  // infinity itself
    ASSERT_EQ(got, expected) << std::hex << u;
  }
}

}  // namespace
