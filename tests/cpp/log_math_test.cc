// SPDX-License-Identifier: Apache-2.0
// devices/cpu/math-inl.h's F32 Log and Log1p (issue 45's z-loss and sqrtsoftplus): within their
// proven bound of the double oracle over every F32 of the binades around their reductions'
// switches (log: [1/2, 4); log1p: [1/16, 1]), random samples of the whole domain and its edges,
// at every Highway target this machine runs, each target's bits equal to the best one's; the
// special values by bits; and the fixed samples' digest equal to the one an x86 build wrote, so
// that another architecture's targets (NEON, SVE under tests/emulated.cmake) are held to the same
// bits. The OpenCL port is log_math_opencl_test.cc.
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <limits>

#include "log_math.h"

namespace infiniop_test::log_math {
namespace {

// LogOfReduced's argument (math-inl.h): 0.5 ulp + 0.09 u |result|.
constexpr double kBoundUlp = 0.6;
// math-inl.h's Softplus (exp's 1 ulp through Log1p's condition <= 1, Log1p's 0.6, the sum's
// rounding) and SqrtSoftplus (half of that, and the root's 0.5).
constexpr double kSoftplusBoundUlp = 2.2;
constexpr double kSqrtSoftplusBoundUlp = 1.6;

// The digests of the fixed sets' outputs (every set but the dense ones), from an x86 build: the
// same on every target of every machine.
constexpr uint64_t kLogDigest = 0xF6CA420C6ED9F89Aull;
constexpr uint64_t kLog1pDigest = 0x991C9E257609221Bull;
constexpr uint64_t kSoftplusDigest = 0xB39765D0AF5B98C7ull;
constexpr uint64_t kSqrtSoftplusDigest = 0x3745608CDF222455ull;

// f over each set at every target: each target's bits equal to the first's (the best), the first's
// within kBoundUlp of the oracle.
void checkEverywhere(Function f, const std::vector<Inputs> &sets, uint64_t expected_digest,
                     double bound = kBoundUlp) {
  const std::vector<int64_t> all = targets();
  ASSERT_FALSE(all.empty()) << "INFINIOP_CPU_ISA names no target of this build";
  std::string names;
  for (int64_t target : all) names += std::string(names.empty() ? "" : ", ") + targetName(target);
  uint64_t fixed = digest({});
  for (const Inputs &set : sets) {
    const size_t n = set.values.size();
    std::vector<float> first(n), other(n);
    ASSERT_STREQ(evaluate(f, all[0], set.values.data(), first.data(), n), targetName(all[0]));
    for (size_t t = 1; t < all.size(); ++t) {
      ASSERT_STREQ(evaluate(f, all[t], set.values.data(), other.data(), n), targetName(all[t]))
          << "the target was not forced";
      size_t differ = 0, at = n;
      for (size_t i = 0; i < n; ++i)
        if (bitsOf(other[i]) != bitsOf(first[i]) && differ++ == 0) at = i;
      EXPECT_EQ(differ, 0u) << functionName(f) << ", " << set.name << ": " << targetName(all[t])
                            << " differs from " << targetName(all[0]) << " at " << differ
                            << " inputs, first " << set.values[at] << ": " << other[at] << " vs "
                            << first[at];
    }
    double max_ulp = 0;
    float worst = 0;
    for (size_t i = 0; i < n; ++i) {
      const double truth = exact(f, set.values[i]);
      double e = first[i] == truth ? 0 : ulpError(first[i], truth);  // infinities: equal
      if (flushedToZero(f, set.values[i])) e = first[i] == 0 ? 0 : INFINITY;
      if (!(e <= max_ulp)) max_ulp = e, worst = set.values[i];
    }
    EXPECT_LT(max_ulp, bound) << functionName(f) << ", " << set.name << ": at " << worst;
    std::printf("%s, %s: max %.4f ulp (at %a), %zu inputs, the same bits at %s\n", functionName(f),
                set.name.c_str(), max_ulp, static_cast<double>(worst), n, names.c_str());
    if (!set.dense) fixed = digest(first, fixed);
  }
  std::printf("%s: the fixed sets' digest is 0x%016" PRIX64 "\n", functionName(f), fixed);
  EXPECT_EQ(fixed, expected_digest) << functionName(f) << ": digest 0x" << std::hex << fixed;
}

TEST(LogMath, LogWithinBoundAndSameBitsOnEveryTarget) {
  checkEverywhere(Function::kLog, logInputs(), kLogDigest);
}

TEST(LogMath, Log1pWithinBoundAndSameBitsOnEveryTarget) {
  checkEverywhere(Function::kLog1p, log1pInputs(), kLog1pDigest);
}

TEST(LogMath, SoftplusWithinBoundAndSameBitsOnEveryTarget) {
  checkEverywhere(Function::kSoftplus, softplusInputs(), kSoftplusDigest, kSoftplusBoundUlp);
}

TEST(LogMath, SqrtSoftplusWithinBoundAndSameBitsOnEveryTarget) {
  checkEverywhere(Function::kSqrtSoftplus, softplusInputs(), kSqrtSoftplusDigest,
                  kSqrtSoftplusBoundUlp);
}

// Each special input's result by bits, at every target.
void checkBits(Function f, const std::vector<std::pair<uint32_t, uint32_t>> &cases) {
  std::vector<float> in;
  for (const auto &c : cases) in.push_back(fromBits(c.first));
  std::vector<float> out(in.size());
  const std::vector<int64_t> all = targets();
  ASSERT_FALSE(all.empty());
  for (int64_t target : all) {
    ASSERT_STREQ(evaluate(f, target, in.data(), out.data(), in.size()), targetName(target));
    for (size_t i = 0; i < cases.size(); ++i)
      EXPECT_EQ(bitsOf(out[i]), cases[i].second) << functionName(f) << " at " << targetName(target)
                                                 << " of bits 0x" << std::hex << cases[i].first;
  }
}

constexpr uint32_t kPlusInf = 0x7F800000, kMinusInf = 0xFF800000, kNan = 0x7FC00000;
constexpr uint32_t kLn2 = 0x3F317218;  // log(2) rounded to F32

TEST(LogMath, LogSpecialValues) {
  checkBits(Function::kLog, {{0x3F800000, 0},           // log(1) = +0
                             {0x40000000, kLn2},        // log(2)
                             {kPlusInf, kPlusInf},      // +inf
                             {0, kMinusInf},            // +0
                             {0x80000000, kMinusInf},   // -0
                             {0xBF800000, kNan},        // -1
                             {0x80000001, kNan},        // the negative subnormal
                             {kMinusInf, kNan},         // -inf
                             {kNan, kNan},              // NaN
                             {0x7F800001, kNan},        // a signalling NaN
                             {0xFFC12345, kNan},        // a negative NaN with a payload
                             {0x7F7FFFFF, 0x42B17218},  // log(FLT_MAX) = 88.72284
                             {1, 0xC2CE8ED0}});         // log(2^-149) = -103.27893
}

TEST(LogMath, Log1pSpecialValues) {
  checkBits(Function::kLog1p, {{0, 0},                      // +0
                               {0x80000000, 0x80000000},    // -0
                               {1, 1},                      // 2^-149
                               {0x32800000, 0x32800000},    // 2^-26: t itself
                               {0x3F800000, kLn2},          // log1p(1) = log(2)
                               {0x40000000, kLn2},          // 2: clamped at 1
                               {kPlusInf, kLn2},            // +inf: clamped at 1
                               {0xBE800000, 0xBE800000},    // -1/4: t itself
                               {kMinusInf, kMinusInf},      // -inf: t itself
                               {0x7FC00001, 0x7FC00001}});  // NaN: t itself
}

TEST(LogMath, SoftplusSpecialValues) {
  checkBits(Function::kSoftplus, {{0, kLn2},                   // +0: log(2)
                                  {0x80000000, kLn2},          // -0: log(2)
                                  {kPlusInf, kPlusInf},        // +inf
                                  {kMinusInf, 0},              // -inf: +0
                                  {0x42C80000, 0x42C80000},    // 100: x itself
                                  {0xC2C80000, 0},             // -100: below -87, 0
                                  {0x7F7FFFFF, 0x7F7FFFFF},    // FLT_MAX: itself
                                  {0xFF7FFFFF, 0},             // -FLT_MAX: 0
                                  {kNan, kNan},                // NaN: x itself
                                  {0xFFC12345, 0xFFC12345}});  // x itself, payload and all
}

TEST(LogMath, SqrtSoftplusSpecialValues) {
  checkBits(Function::kSqrtSoftplus, {{kPlusInf, kPlusInf},        // +inf
                                      {kMinusInf, 0},              // -inf: +0
                                      {0x42C80000, 0x41200000},    // 100: sqrt(100) = 10
                                      {0xC3480000, 0},             // -200: below -174, 0
                                      {0xFF7FFFFF, 0},             // -FLT_MAX: 0
                                      {kNan, kNan},                // NaN: x itself
                                      {0xFFC12345, 0xFFC12345}});  // x itself
}

}  // namespace
}  // namespace infiniop_test::log_math
