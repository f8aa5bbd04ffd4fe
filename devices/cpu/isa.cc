// infiniopCpuIsaName: which Highway target the cpu device dispatches to right now.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/isa.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "infiniop/runtime.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
const char *TargetName() {
  return hwy::TargetName(HWY_TARGET);
}
}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace infiniop::cpu {
HWY_EXPORT(TargetName);
static const char *isaName() {
  return HWY_DYNAMIC_DISPATCH(TargetName)();
}
}  // namespace infiniop::cpu

extern "C" const char *infiniopCpuIsaName(void) {
  return infiniop::cpu::isaName();
}
#endif
