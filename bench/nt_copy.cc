// SPDX-License-Identifier: Apache-2.0
#include "nt_copy.h"

#if INFINIOP_BENCH_HWY
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "nt_copy.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace bench::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void NtCopy(char *dst, const char *src, size_t n) {
  const hn::ScalableTag<uint8_t> d;
  const size_t lanes = hn::Lanes(d);
  // Stream needs dst aligned to the vector; src may be anywhere (LoadU).
  const size_t misalign = reinterpret_cast<uintptr_t>(dst) % lanes;
  const size_t head = std::min(n, misalign == 0 ? 0 : lanes - misalign);
  std::memcpy(dst, src, head);
  size_t i = head;
  auto *out = reinterpret_cast<uint8_t *>(dst);
  const auto *in = reinterpret_cast<const uint8_t *>(src);
  // Four vectors a step: at AVX2 that is one 128-byte pair of lines per iteration.
  for (; i + 4 * lanes <= n; i += 4 * lanes) {
    const auto v0 = hn::LoadU(d, in + i), v1 = hn::LoadU(d, in + i + lanes);
    const auto v2 = hn::LoadU(d, in + i + 2 * lanes), v3 = hn::LoadU(d, in + i + 3 * lanes);
    hn::Stream(v0, d, out + i);
    hn::Stream(v1, d, out + i + lanes);
    hn::Stream(v2, d, out + i + 2 * lanes);
    hn::Stream(v3, d, out + i + 3 * lanes);
  }
  for (; i + lanes <= n; i += lanes) hn::Stream(hn::LoadU(d, in + i), d, out + i);
  std::memcpy(dst + i, src + i, n - i);
  hwy::FlushStream();
}

const char *TargetName() {
  return hwy::TargetName(HWY_TARGET);
}

}  // namespace bench::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace bench {
// Through the process's libhwy, which the library shares: INFINIOP_CPU_ISA caps this too.
HWY_EXPORT(NtCopy);
HWY_EXPORT(TargetName);

void ntCopy(char *dst, const char *src, size_t n) {
  HWY_DYNAMIC_DISPATCH(NtCopy)(dst, src, n);
}
const char *ntCopyTarget() {
  return HWY_DYNAMIC_DISPATCH(TargetName)();
}
}  // namespace bench
#endif

#else  // built without Highway (no cpu device and no hwy package): no streaming copy

#include <cstdlib>

namespace bench {
void ntCopy(char *, const char *, size_t) {
  std::abort();
}
const char *ntCopyTarget() {
  return nullptr;
}
}  // namespace bench
#endif
