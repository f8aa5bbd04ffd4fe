// SPDX-License-Identifier: Apache-2.0
// The scalar F16/BF16 conversions are the oracle for every vector path: check them against
// the processor's own conversions (F16C, FCVT) and against round-to-nearest-even worked in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/dtype.h"
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace {

using infiniop::bitsOf;
using infiniop::floatOf;

// The processor's own F16 conversions: x86's F16C (where the processor has it), AArch64's FCVT
// (every AArch64 processor; GCC's __fp16 conversions compile to it).
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("f16c"))) uint16_t hardwareF16(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
__attribute__((target("f16c"))) float hardwareF32(uint16_t h) {
  return _cvtsh_ss(h);
}
bool hasF16c() {
  return __builtin_cpu_supports("f16c");
}
#elif defined(__aarch64__)
uint16_t hardwareF16(float f) {
  const __fp16 h = static_cast<__fp16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof(bits));
  return bits;
}
float hardwareF32(uint16_t bits) {
  __fp16 h;
  std::memcpy(&h, &bits, sizeof(h));
  return static_cast<float>(h);
}
bool hasF16c() {
  return true;
}
#else
uint16_t hardwareF16(float) {
  return 0;
}
float hardwareF32(uint16_t) {
  return 0.0f;
}
bool hasF16c() {
  return false;
}
#endif

TEST(Dtype, F16MatchesF16cOverFloatBitPatterns) {
  if (!hasF16c()) GTEST_SKIP() << "no hardware F16 conversion known here";
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

// fromDouble rounds a float64 once: the value just above a 16-bit midpoint rounds up, where
// rounding to F32 first would land on the midpoint and tie to the even value below.
TEST(Dtype, FromDoubleRoundsOnce) {
  EXPECT_EQ(infiniop::fromDouble<infiniop::BF16>(1.0 + 0x1p-8 + 0x1p-40).bits, 0x3f81);
  EXPECT_EQ(infiniop::fromDouble<infiniop::BF16>(-(1.0 + 0x1p-8 + 0x1p-40)).bits, 0xbf81);
  EXPECT_EQ(infiniop::fromDouble<infiniop::BF16>(1.0 + 0x1p-8).bits, 0x3f80);  // a tie: even
  EXPECT_EQ(infiniop::fromDouble<infiniop::F16>(1.0 + 0x1p-11 + 0x1p-40).bits, 0x3c01);
  EXPECT_EQ(infiniop::fromDouble<infiniop::F16>(1.0 + 0x1p-11).bits, 0x3c00);
  EXPECT_EQ(infiniop::fromDouble<infiniop::BF16>(1e300).bits, 0x7f80);    // overflow
  EXPECT_EQ(infiniop::fromDouble<infiniop::BF16>(-1e-300).bits, 0x8000);  // underflow, signed
  EXPECT_EQ(infiniop::fromDouble<infiniop::BF16>(-NAN).bits, 0x7fc0);     // canonical NaN
  EXPECT_EQ(infiniop::fromDouble<infiniop::F16>(65519.99).bits, 0x7bff);
  EXPECT_EQ(infiniop::fromDouble<infiniop::F16>(65520.0).bits, 0x7c00);
  // Random doubles over BF16's and F16's ranges, subnormals included: the result is the nearest
  // 16-bit value, ties to even (differences taken in long double, exactly).
  uint64_t state = 0x1234567;
  const auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull; };
  for (int i = 0; i < 200000; ++i) {
    const uint64_t r = next();
    const double d = std::ldexp(1.0 + static_cast<double>(r >> 11) * 0x1p-53,
                                static_cast<int>(next() % 300) - 150) *
                     ((r & 1) ? -1 : 1);
    const uint16_t b = infiniop::fromDouble<infiniop::BF16>(d).bits;
    const uint16_t h = infiniop::fromDouble<infiniop::F16>(d).bits;
    const auto check = [&](uint16_t got, float (*value)(uint16_t), uint16_t inf) {
      if ((got & 0x7fff) == inf) return;  // overflow: checked by the cases above
      const long double v = value(got), e = std::fabs(static_cast<long double>(d) - v);
      for (uint16_t n : {static_cast<uint16_t>(got + 1), static_cast<uint16_t>(got - 1)}) {
        if ((n & 0x7fff) >= inf || ((n ^ got) & 0x8000)) continue;
        const long double en = std::fabs(static_cast<long double>(d) - value(n));
        ASSERT_TRUE(e < en || (e == en && (got & 1) == 0)) << std::hexfloat << d << " " << got;
      }
    };
    check(b, infiniop::f32FromBf16, 0x7f80);
    check(h, infiniop::f32FromF16, 0x7c00);
  }
}

}  // namespace
