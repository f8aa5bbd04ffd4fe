// SPDX-License-Identifier: Apache-2.0
// The F32 logarithms of devices/cpu/math-inl.h (Log, Log1p, and Softplus and SqrtSoftplus built on
// Log1p) and devices/opencl/kernels/math.cl (log_f32, log1p_f32, softplus_f32, sqrt_softplus_f32)
// under test: the inputs both tests evaluate, the cpu functions at a forced Highway target
// (log_math_targets.cc), and the ulp measure against the double oracle.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "exact/softplus.h"

namespace infiniop_test::log_math {

enum class Function { kLog, kLog1p, kSoftplus, kSqrtSoftplus };
inline const char *functionName(Function f) {
  switch (f) {
    case Function::kLog:
      return "Log";
    case Function::kLog1p:
      return "Log1p";
    case Function::kSoftplus:
      return "Softplus";
    case Function::kSqrtSoftplus:
      break;
  }
  return "SqrtSoftplus";
}

// The Highway targets the cpu functions run at: every target this build compiled that the
// processor runs, best first; under INFINIOP_CPU_ISA (the emulated runs' cap) only that target and
// those below it, as the library caps itself (devices/cpu/isa.cc).
std::vector<int64_t> targets();
const char *targetName(int64_t target);
// out[i] = f(in[i]) for i < n by the cpu code compiled for `target` (one of targets()), forced
// as tests/cpp/device_param.h forces the library's; returns the name of the target that ran.
const char *evaluate(Function f, int64_t target, const float *in, float *out, size_t n);

inline float fromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline uint32_t bitsOf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// Under an emulator (INFINIOP_TEST_EMULATED, tests/emulated.cmake) the dense sets keep every 97th
// F32 (an odd step meets every lane position); elsewhere every one.
inline uint32_t denseStep() {
  const char *emulated = std::getenv("INFINIOP_TEST_EMULATED");
  return emulated && *emulated ? 97 : 1;
}

// One named set of inputs; `dense` sets depend on denseStep(), the others are fixed everywhere
// (their outputs' digest is compared with x86's).
struct Inputs {
  std::string name;
  std::vector<float> values;
  bool dense;
};

// Every `step`-th F32 with bits in [lo, hi).
inline std::vector<float> bitRange(uint32_t lo, uint32_t hi, uint32_t step) {
  std::vector<float> values;
  values.reserve((hi - lo) / step + 1);
  for (uint64_t b = lo; b < hi; b += step) values.push_back(fromBits(static_cast<uint32_t>(b)));
  return values;
}
// `count` F32 with bits uniform in [lo, hi): so uniform in each binade and over the binades (a
// fixed generator, splitmix64, the same sequence on every machine).
inline std::vector<float> randomBits(uint32_t lo, uint32_t hi, size_t count, uint64_t seed) {
  std::vector<float> values(count);
  for (float &v : values) {
    uint64_t z = (seed += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    v = fromBits(lo + static_cast<uint32_t>(z % (hi - lo)));
  }
  return values;
}
inline uint32_t bitsOfPower(int e) {
  return bitsOf(std::ldexp(1.0f, e));
}

// Log's domain is every positive F32 (and +inf); the special inputs are checked by value apart.
inline std::vector<Inputs> logInputs() {
  const uint32_t step = denseStep();
  const float max = fromBits(0x7F7FFFFF);
  std::vector<Inputs> sets;
  sets.push_back({"every F32 in [1/2, 1)", bitRange(bitsOfPower(-1), bitsOfPower(0), step), true});
  sets.push_back({"every F32 in [1, 2)", bitRange(bitsOfPower(0), bitsOfPower(1), step), true});
  sets.push_back({"every F32 in [2, 4)", bitRange(bitsOfPower(1), bitsOfPower(2), step), true});
  sets.push_back(
      {"random in [1, 256)", randomBits(bitsOfPower(0), bitsOfPower(8), 1 << 18, 1), false});
  sets.push_back({"random positive", randomBits(1, 0x7F800000, 1 << 20, 2), false});
  sets.push_back({"edges",
                  {1.0f,
                   std::nextafter(1.0f, 2.0f),
                   std::nextafter(1.0f, 0.0f),
                   2.0f,
                   std::nextafter(2.0f, 0.0f),
                   std::nextafter(2.0f, 4.0f),
                   0.5f,
                   std::sqrt(2.0f),
                   std::nextafter(std::sqrt(2.0f), 0.0f),
                   std::nextafter(std::sqrt(2.0f), 2.0f),
                   fromBits(0x3F3504F3),
                   fromBits(0x3F3504F4),
                   fromBits(0x3F3504F2),
                   max,
                   std::nextafter(max, 0.0f),
                   fromBits(1),
                   fromBits(0x007FFFFF),
                   fromBits(0x00800000),
                   10.0f,
                   128.0f,
                   3.0f,
                   7.0f},
                  false});
  return sets;
}

// Log1p's domain is [0, 1].
inline std::vector<Inputs> log1pInputs() {
  const uint32_t step = denseStep();
  std::vector<Inputs> sets;
  std::vector<float> upper = bitRange(bitsOfPower(-4), bitsOfPower(0), step);
  upper.push_back(1.0f);
  sets.push_back({"every F32 in [1/16, 1]", upper, true});
  sets.push_back({"random in [2^-25, 1/16)",
                  randomBits(bitsOfPower(-25), bitsOfPower(-4), 1 << 20, 3), false});
  sets.push_back({"random in (0, 2^-25)", randomBits(1, bitsOfPower(-25), 1 << 16, 4), false});
  sets.push_back(
      {"edges",
       {0.0f, fromBits(1), fromBits(0x00800000), std::ldexp(1.0f, -25),
        std::nextafter(std::ldexp(1.0f, -25), 0.0f), std::nextafter(std::ldexp(1.0f, -25), 1.0f),
        std::ldexp(1.0f, -24), 0.5f, std::nextafter(0.5f, 0.0f), std::nextafter(0.5f, 1.0f), 1.0f,
        std::nextafter(1.0f, 0.0f), std::sqrt(2.0f) - 1.0f, 0.25f, 0.75f, 1e-3f},
       false});
  return sets;
}

// `values` with every other one negated (the signed sets of softplus).
inline std::vector<float> bothSigns(std::vector<float> values) {
  for (size_t i = 1; i < values.size(); i += 2) values[i] = -values[i];
  return values;
}
// Every F32 within `ulps` of each of `centers`.
inline std::vector<float> around(std::initializer_list<float> centers, uint32_t ulps) {
  std::vector<float> values;
  for (float c : centers) {
    float v = c;
    for (uint32_t i = 0; i < ulps; ++i) v = std::nextafter(v, -INFINITY);
    for (uint32_t i = 0; i <= 2 * ulps; ++i, v = std::nextafter(v, INFINITY)) values.push_back(v);
  }
  return values;
}

// Softplus's and SqrtSoftplus's domain is every F32, sampled (not every F32: the two Log tests
// already cost most of this program's time): a sparse grid of both signs over |x| in [2^-4, 2^8),
// random values of both signs over every magnitude up to 2^8 and beyond, and every F32 near the
// switches (|x| = 87, where the exp stops; x = -174, where the root's tail stops; |x| = ln 2, where
// Log1p's reduction switches at t = 1/2; x = -25 ln 2, where it returns t itself; 0).
inline std::vector<Inputs> softplusInputs() {
  const uint32_t step = 509 * denseStep();
  std::vector<Inputs> sets;
  sets.push_back({"every 509th F32 of |x| in [1/16, 256), both signs",
                  bothSigns(bitRange(bitsOfPower(-4), bitsOfPower(8), step)), true});
  sets.push_back({"random |x| in [2^-30, 256), both signs",
                  bothSigns(randomBits(bitsOfPower(-30), bitsOfPower(8), 1 << 17, 5)), false});
  sets.push_back({"random |x| up to FLT_MAX, both signs",
                  bothSigns(randomBits(1, 0x7F800000, 1 << 15, 6)), false});
  sets.push_back({"every F32 near the switches",
                  around({87.0f, -87.0f, -172.0f, 0.69314718f, -0.69314718f, -17.328680f, -174.0f,
                          -86.5f, -172.0f, 1.0f, -1.0f},
                         2048),
                  false});
  sets.push_back({"near 0", around({0.0f}, 4096), false});
  sets.push_back({"edges",
                  {0.0f,
                   -0.0f,
                   1.0f,
                   -1.0f,
                   20.0f,
                   -20.0f,
                   87.0f,
                   -87.0f,
                   88.0f,
                   -88.0f,
                   89.0f,
                   -89.0f,
                   100.0f,
                   -100.0f,
                   104.0f,
                   -104.0f,
                   173.9f,
                   -173.9f,
                   174.0f,
                   -174.0f,
                   1e6f,
                   -1e6f,
                   fromBits(0x7F7FFFFF),
                   fromBits(0xFF7FFFFF),
                   fromBits(1),
                   fromBits(0x80000001)},
                  false});
  return sets;
}

// The exact value in double: glibc's log, log1p, exp and sqrt are within 1 ulp of double, 2^-28
// of an F32 ulp, far below the bounds measured (softplus and its root from src/exact/softplus.h).
inline double exact(Function f, float v) {
  const double x = v;
  switch (f) {
    case Function::kLog:
      return std::log(x);
    case Function::kLog1p:
      return std::log1p(x);
    case Function::kSoftplus:
      return infiniop::exact::softplus(x);
    case Function::kSqrtSoftplus:
      break;
  }
  return infiniop::exact::sqrtSoftplus(x);
}
// Where the F32 function returns 0 by its definition although the value is not: Softplus below
// -87 (below 2^-125.5), SqrtSoftplus below -174 (below 2^-125.5). The tests check the 0 there.
inline bool flushedToZero(Function f, float v) {
  return (f == Function::kSoftplus && v < -87.0f) || (f == Function::kSqrtSoftplus && v < -174.0f);
}
// |got - truth| in ulps of F32 at truth (ulps of the binade truth lies in; 2^-149 below 2^-126).
inline double ulpError(float got, double truth) {
  if (truth == 0) return got == 0 ? 0 : INFINITY;
  int e;
  std::frexp(truth, &e);  // |truth| in [2^(e-1), 2^e): its F32 ulp is 2^(e-24)
  return std::fabs(static_cast<double>(got) - truth) / std::ldexp(1.0, std::max(e, -125) - 24);
}

// FNV-1a over the bits of `values`, continuing `hash`.
inline uint64_t digest(const std::vector<float> &values, uint64_t hash = 0xCBF29CE484222325ull) {
  for (float v : values) {
    const uint32_t bits = bitsOf(v);
    for (int byte = 0; byte < 4; ++byte) {
      hash ^= (bits >> (8 * byte)) & 0xFF;
      hash *= 0x100000001B3ull;
    }
  }
  return hash;
}

}  // namespace infiniop_test::log_math
