// SPDX-License-Identifier: Apache-2.0
// The framework's copy (staging buffers) on the cpu device: exact for F32, F16 and BF16.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/copy.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "cpu/elementwise-inl.h"
#include "cpu/parallel.h"
#include "hwy/highway.h"
#include "kernels/list.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
struct Copy {
  static constexpr int kOutputs = 1, kInputs = 1;

  template <class D, class V>
  HWY_INLINE void operator()(D /*d*/, V &out, V in) const {
    out = in;
  }
};
}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

INFINIOP_CPU_ELEMENTWISE_RANGE(copy, Copy);

#if HWY_ONCE
INFINIOP_CPU_ELEMENTWISE_DISPATCH(copy)
#endif
