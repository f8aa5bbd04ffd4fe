// SPDX-License-Identifier: Apache-2.0
// The devices of this build: the one file that knows which exist. Each device folder's CMake
// file (through cmake/InfiniopDevice.cmake) defines INFINIOP_WITH_<NAME> for this file only.
#include <string>

#include "core/device.h"
#include "core/error.h"
#include "infiniop/runtime.h"

namespace infiniop {

#if INFINIOP_WITH_CPU
namespace cpu {
const Device &device();
}
#endif
#if INFINIOP_WITH_OPENCL
namespace opencl {
const Device &device();
}
#endif
namespace cpu_reference {
const Device &device();
}

namespace {

// Every infiniDevice_t value, built or not, in enum order: the not-built ones name the option.
struct Entry {
  infiniDevice_t type;
  const char *name;
  const Device &(*device)();  // null: not built
  const char *option;         // the CMake option that left it out
};

constexpr Entry kEntries[] = {
#if INFINIOP_WITH_CPU
    {INFINI_DEVICE_CPU, "cpu", cpu::device, nullptr},
#else
    {INFINI_DEVICE_CPU, "cpu", nullptr, "-DINFINIOP_WITH_CPU=OFF"},
#endif
#if INFINIOP_WITH_OPENCL
    {INFINI_DEVICE_OPENCL, "opencl", opencl::device, nullptr},
#else
    {INFINI_DEVICE_OPENCL, "opencl", nullptr, "-DINFINIOP_WITH_OPENCL=OFF"},
#endif
    {INFINI_DEVICE_CPU_REFERENCE, "cpu_reference", cpu_reference::device, nullptr},
};
constexpr int kKnown = static_cast<int>(sizeof kEntries / sizeof kEntries[0]);

// Entry i is the entry of infiniDevice_t value i.
constexpr bool entriesInEnumOrder() {
  for (int i = 0; i < kKnown; ++i)
    if (kEntries[i].type != i) return false;
  return true;
}
static_assert(entriesInEnumOrder(), "kEntries: one entry per infiniDevice_t value, in enum order");

// Every infiniDevice_t value has its entry: a value missing from this switch is a compile error
// (-Wswitch, an error here), and each one listed must be below kKnown (with entriesInEnumOrder,
// its entry is kEntries[value]).
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch"
#define INFINIOP_HAS_ENTRY(type) \
  case type:                     \
    static_assert((type) < kKnown, #type " has no entry in kEntries");
[[maybe_unused]] constexpr void everyValueHasAnEntry(infiniDevice_t type) {
  switch (type) {
    INFINIOP_HAS_ENTRY(INFINI_DEVICE_CPU)
    INFINIOP_HAS_ENTRY(INFINI_DEVICE_OPENCL)
    INFINIOP_HAS_ENTRY(INFINI_DEVICE_CPU_REFERENCE)
    break;
  }
}
#undef INFINIOP_HAS_ENTRY
#pragma GCC diagnostic pop

struct Registry {
  const Device *devices[kKnown] = {};  // by infiniDevice_t value; null: not built
  const Device *built[kKnown] = {};
  int built_count = 0;
};

const Registry &registry() {
  static const Registry instance = [] {
    Registry r;
    for (int i = 0; i < kKnown; ++i)
      if (kEntries[i].device) {
        r.devices[i] = &kEntries[i].device();
        r.built[r.built_count++] = r.devices[i];
      }
    return r;
  }();
  return instance;
}

}  // namespace

const Device *findDevice(int type, std::string *why) {
  const Registry &r = registry();
  if (type >= 0 && type < kKnown && r.devices[type]) return r.devices[type];
  *why = "device type " + std::to_string(type) +
         (type >= 0 && type < kKnown
              ? std::string(" (") + kEntries[type].name + ") is not supported by this build (" +
                    kEntries[type].option + ")"
              : std::string(" (unknown) is not supported by this build"));
  return nullptr;
}

const Device *const *builtDevices(int *count) {
  *count = registry().built_count;
  return registry().built;
}

}  // namespace infiniop

#if !INFINIOP_WITH_CPU
extern "C" const char *infiniopCpuIsaName(void) {
  return "none (built without the cpu device)";
}
#endif
