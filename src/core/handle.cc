// SPDX-License-Identifier: Apache-2.0
#include "core/handle.h"

#include <cstdlib>
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#if INFINIOP_WITH_CPU
#include "cpu/isa.h"
#endif
#if INFINIOP_WITH_OPENCL
#include "opencl/runtime.h"
#endif

namespace infiniop {

const char *deviceName(infiniDevice_t device) {
  switch (device) {
    case INFINI_DEVICE_CPU:
      return "cpu";
    case INFINI_DEVICE_OPENCL:
      return "opencl";
    case INFINI_DEVICE_CPU_REFERENCE:
      return "cpu_reference";
  }
  return "unknown";
}

infiniStatus_t checkHandle(const char *where, infiniopHandle_t handle) {
  return checkObject(where, "handle", handle, ObjectHeader::handleKind(), "a handle");
}

}  // namespace infiniop

using infiniop::fail;

extern "C" infiniStatus_t infiniopCreateHandle(infiniopHandle_t *handle, infiniDevice_t device,
                                               int device_id) {
  return infiniop::guarded("infiniopCreateHandle", [&] {
    if (!handle) return fail(INFINI_STATUS_NULL_POINTER, "infiniopCreateHandle: handle is NULL");
    const int raw = infiniop::enumValue(device);
#if INFINIOP_WITH_OPENCL
    if (raw == INFINI_DEVICE_OPENCL) {
      // The OpenCL state is complete before the handle exists: no half-made handle to release.
      infiniop::opencl::State *state = nullptr;
      INFINIOP_CHECK(infiniop::opencl::createState(device_id, &state));
      try {
        *handle = new InfiniopHandle(device, device_id, state);
      } catch (...) {
        infiniop::opencl::destroyState(state);
        throw;
      }
      return infiniop::succeed();
    }
#endif
    if (raw != INFINI_DEVICE_CPU && raw != INFINI_DEVICE_CPU_REFERENCE)
      return fail(INFINI_STATUS_DEVICE_TYPE_NOT_SUPPORTED,
                  "infiniopCreateHandle: device type " + std::to_string(raw) + " (" +
                      (raw == INFINI_DEVICE_OPENCL ? "opencl" : "unknown") +
                      ") is not supported by this build");
    if (device_id != 0)
      return fail(INFINI_STATUS_DEVICE_NOT_FOUND,
                  std::string("infiniopCreateHandle: ") + infiniop::deviceName(device) +
                      " has only device 0, not " + std::to_string(device_id));
#if INFINIOP_WITH_CPU
    if (raw == INFINI_DEVICE_CPU)
      INFINIOP_CHECK(infiniop::cpu::checkIsaCap("infiniopCreateHandle"));
#else
    if (raw == INFINI_DEVICE_CPU)
      return fail(INFINI_STATUS_DEVICE_TYPE_NOT_SUPPORTED,
                  "infiniopCreateHandle: device type cpu is not supported by this build "
                  "(-DINFINIOP_WITH_CPU=OFF)");
#endif
    *handle = new InfiniopHandle(device, device_id, nullptr);
    return infiniop::succeed();
  });
}

extern "C" infiniStatus_t infiniopDestroyHandle(infiniopHandle_t handle) {
  INFINIOP_CHECK(infiniop::checkHandle("infiniopDestroyHandle", handle));
  // Memory and streams belong to the handle, as buffers belong to an OpenCL context.
#if INFINIOP_WITH_OPENCL
  infiniop::opencl::destroyState(handle->opencl);
#endif
  for (void *p : handle->allocations) std::free(p);
  for (void *s : handle->streams) delete static_cast<char *>(s);
  delete handle;
  return infiniop::succeed();
}
