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
  const char *name;
  const Device *device;
  const char *option;
};

struct Registry {
  Entry entries[3];  // by infiniDevice_t value
  const Device *built[3] = {};
  int built_count = 0;
};

const Registry &registry() {
  static const Registry instance = [] {
    Registry r;
    r.entries[INFINI_DEVICE_CPU] = {
      "cpu",
#if INFINIOP_WITH_CPU
      &cpu::device(),
      nullptr
    };
#else
      nullptr,
      "-DINFINIOP_WITH_CPU=OFF"
    };
#endif
    r.entries[INFINI_DEVICE_OPENCL] = {
      "opencl",
#if INFINIOP_WITH_OPENCL
      &opencl::device(),
      nullptr
    };
#else
      nullptr,
      "-DINFINIOP_WITH_OPENCL=OFF"
    };
#endif
    r.entries[INFINI_DEVICE_CPU_REFERENCE] = {"cpu_reference", &cpu_reference::device(), nullptr};
    for (const Entry &e : r.entries)
      if (e.device) r.built[r.built_count++] = e.device;
    return r;
  }();
  return instance;
}

}  // namespace

const Device *findDevice(int type, std::string *why) {
  const Registry &r = registry();
  constexpr int kKnown = static_cast<int>(sizeof r.entries / sizeof r.entries[0]);
  if (type >= 0 && type < kKnown && r.entries[type].device) return r.entries[type].device;
  *why = "device type " + std::to_string(type) +
         (type >= 0 && type < kKnown
              ? std::string(" (") + r.entries[type].name + ") is not supported by this build (" +
                    r.entries[type].option + ")"
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
