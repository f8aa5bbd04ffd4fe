// SPDX-License-Identifier: Apache-2.0
// infiniopCpuIsaName (which Highway target the cpu device dispatches to right now) and the
// INFINIOP_CPU_ISA cap on it.
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
#include <strings.h>

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "cpu/isa.h"

namespace infiniop::cpu {
HWY_EXPORT(TargetName);

namespace {

// Applies INFINIOP_CPU_ISA and returns "" or why the name is not valid. Highway numbers targets
// best first (a lower bit is a wider ISA), so capping at target T disables every bit below T's.
// hwy::DisableTargets is Highway's own switch for "the best target is undesirable"; it acts on
// libhwy's process-wide target set, which is also what the tests' target forcing goes through.
std::string applyIsaCap() {
  const char *requested = std::getenv("INFINIOP_CPU_ISA");
  if (!requested || !*requested) return "";
  std::string valid;
  for (int64_t targets = HWY_TARGETS; targets != 0; targets &= targets - 1) {
    const int64_t target = targets & -targets;
    const char *name = hwy::TargetName(target);
    if (strcasecmp(requested, name) == 0) {
      hwy::DisableTargets(target - 1);
      hwy::GetChosenTarget().Update(hwy::SupportedTargets());  // drop any cached choice
      return "";
    }
    valid += valid.empty() ? name : std::string(", ") + name;
  }
  return "INFINIOP_CPU_ISA=" + std::string(requested) +
         " names no target of this build; valid names (best first): " + valid +
         ", or unset for the best the processor supports";
}

// Read once, while the library loads: before any dispatch, and before a test program lists the
// targets it will force.
const std::string &isaCapError() {
  static const std::string error = applyIsaCap();
  return error;
}
[[maybe_unused]] const std::string &cap_applied_at_load = isaCapError();

}  // namespace

const char *isaName() {
  return HWY_DYNAMIC_DISPATCH(TargetName)();
}

infiniStatus_t checkIsaCap(const char *where) {
  const std::string &error = isaCapError();
  return error.empty() ? succeed() : fail(INFINI_STATUS_BAD_PARAM, where + (": " + error));
}

}  // namespace infiniop::cpu

extern "C" const char *infiniopCpuIsaName(void) {
  return infiniop::cpu::isaName();
}
#endif
