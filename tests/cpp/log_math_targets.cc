// SPDX-License-Identifier: Apache-2.0
// devices/cpu/math-inl.h's Log, Log1p, Softplus and SqrtSoftplus over arrays, compiled for every
// Highway target of the build (foreach_target, as the cpu device's kernels), for
// tests/cpp/log_math_test.cc and log_math_opencl_test.cc.
#include <algorithm>

#include "log_math.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "log_math_targets.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
//
#include "cpu/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop_test::log_math::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace cpu = infiniop::cpu::HWY_NAMESPACE;

template <Function kFunction, class D>
HWY_INLINE hn::Vec<D> Apply(D d, hn::Vec<D> v) {
  if constexpr (kFunction == Function::kLog) {
    return cpu::Log(d, v);
  } else if constexpr (kFunction == Function::kLog1p) {
    return cpu::Log1p(d, v);
  } else if constexpr (kFunction == Function::kSoftplus) {
    return cpu::Softplus(d, v);
  } else {
    return cpu::SqrtSoftplus(d, v);
  }
}

// Whole vectors, then the tail through a padded copy (the padding's lanes are 1).
template <Function kFunction>
void ApplyAll(const float *in, float *out, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes)
    hn::StoreU(Apply<kFunction>(d, hn::LoadU(d, in + i)), d, out + i);
  if (i == n) return;
  HWY_ALIGN float buffer[HWY_MAX_BYTES / sizeof(float)];
  std::fill(buffer, buffer + lanes, 1.0f);
  std::copy(in + i, in + n, buffer);
  hn::Store(Apply<kFunction>(d, hn::Load(d, buffer)), d, buffer);
  std::copy(buffer, buffer + (n - i), out + i);
}
void LogAll(const float *in, float *out, size_t n) {
  ApplyAll<Function::kLog>(in, out, n);
}
void Log1pAll(const float *in, float *out, size_t n) {
  ApplyAll<Function::kLog1p>(in, out, n);
}
void SoftplusAll(const float *in, float *out, size_t n) {
  ApplyAll<Function::kSoftplus>(in, out, n);
}
void SqrtSoftplusAll(const float *in, float *out, size_t n) {
  ApplyAll<Function::kSqrtSoftplus>(in, out, n);
}
const char *TargetRun() {
  return hwy::TargetName(HWY_TARGET);
}

}  // namespace infiniop_test::log_math::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <strings.h>

namespace infiniop_test::log_math {

HWY_EXPORT(LogAll);
HWY_EXPORT(Log1pAll);
HWY_EXPORT(SoftplusAll);
HWY_EXPORT(SqrtSoftplusAll);
HWY_EXPORT(TargetRun);

std::vector<int64_t> targets() {
  std::vector<int64_t> all;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) all.push_back(target);
  const char *cap = std::getenv("INFINIOP_CPU_ISA");
  if (!cap || !*cap) return all;
  // Highway numbers targets best first (a lower bit is a wider ISA): the cap and above.
  const auto named = std::find_if(all.begin(), all.end(), [cap](int64_t target) {
    return strcasecmp(cap, hwy::TargetName(target)) == 0;
  });
  return named == all.end() ? std::vector<int64_t>{} : std::vector<int64_t>(named, all.end());
}

const char *targetName(int64_t target) {
  return hwy::TargetName(target);
}

const char *evaluate(Function f, int64_t target, const float *in, float *out, size_t n) {
  hwy::SetSupportedTargetsForTest(target);
  switch (f) {
    case Function::kLog:
      HWY_DYNAMIC_DISPATCH(LogAll)(in, out, n);
      break;
    case Function::kLog1p:
      HWY_DYNAMIC_DISPATCH(Log1pAll)(in, out, n);
      break;
    case Function::kSoftplus:
      HWY_DYNAMIC_DISPATCH(SoftplusAll)(in, out, n);
      break;
    case Function::kSqrtSoftplus:
      HWY_DYNAMIC_DISPATCH(SqrtSoftplusAll)(in, out, n);
      break;
  }
  const char *ran = HWY_DYNAMIC_DISPATCH(TargetRun)();
  hwy::SetSupportedTargetsForTest(0);
  return ran;
}

}  // namespace infiniop_test::log_math
#endif  // HWY_ONCE
