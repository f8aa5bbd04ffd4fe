// SPDX-License-Identifier: Apache-2.0
#include "core/handle.h"

#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace infiniop {

infiniStatus_t checkHandle(const char *where, infiniopHandle_t handle) {
  return checkObject(where, "handle", handle, ObjectHeader::handleKind());
}

}  // namespace infiniop

using infiniop::fail;

extern "C" infiniStatus_t infiniopCreateHandle(infiniopHandle_t *handle, infiniDevice_t device,
                                               int device_id) {
  constexpr const char *kWhere = "infiniopCreateHandle";
  return infiniop::guarded(kWhere, [&] {
    if (!handle) return fail(INFINI_STATUS_NULL_POINTER, "infiniopCreateHandle: handle is NULL");
    std::string why;
    const infiniop::Device *found = infiniop::findDevice(infiniop::enumValue(device), &why);
    if (!found)
      return fail(INFINI_STATUS_DEVICE_TYPE_NOT_SUPPORTED, std::string(kWhere) + ": " + why);
    // The state is complete before the handle exists: no half-made handle to release.
    std::unique_ptr<infiniop::DeviceState> state;
    INFINIOP_CHECK(found->open(kWhere, device_id, &state));
    *handle = new InfiniopHandle(found, device_id, std::move(state));
    return infiniop::succeed();
  });
}

extern "C" infiniStatus_t infiniopDestroyHandle(infiniopHandle_t handle) {
  return infiniop::guarded("infiniopDestroyHandle", [&] {
    INFINIOP_CHECK(infiniop::checkHandle("infiniopDestroyHandle", handle));
    delete handle;  // with its state: memory and streams belong to the handle
    return infiniop::succeed();
  });
}

extern "C" infiniStatus_t infiniopSetHandleFpmathMode(infiniopHandle_t handle,
                                                      infiniopFpmathMode_t mode) {
  constexpr const char *kWhere = "infiniopSetHandleFpmathMode";
  return infiniop::guarded(kWhere, [&] {
    INFINIOP_CHECK(infiniop::checkHandle(kWhere, handle));
    const int value = static_cast<int>(mode);
    if (value != INFINIOP_FPMATH_STRICT && value != INFINIOP_FPMATH_RELAXED)
      return fail(INFINI_STATUS_BAD_PARAM,
                  std::string(kWhere) + ": mode " + std::to_string(value) +
                      " is neither INFINIOP_FPMATH_STRICT (0) nor INFINIOP_FPMATH_RELAXED (1)");
    handle->fpmath_mode.store(value);
    return infiniop::succeed();
  });
}

extern "C" infiniStatus_t infiniopGetHandleFpmathMode(infiniopHandle_t handle,
                                                      infiniopFpmathMode_t *mode) {
  constexpr const char *kWhere = "infiniopGetHandleFpmathMode";
  return infiniop::guarded(kWhere, [&] {
    INFINIOP_CHECK(infiniop::checkHandle(kWhere, handle));
    if (!mode) return fail(INFINI_STATUS_NULL_POINTER, std::string(kWhere) + ": mode is NULL");
    *mode = static_cast<infiniopFpmathMode_t>(handle->fpmath_mode.load());
    return infiniop::succeed();
  });
}

extern "C" infiniStatus_t infiniopGetDeviceTypes(infiniDevice_t *devices, int capacity,
                                                 int *count) {
  constexpr const char *kWhere = "infiniopGetDeviceTypes";
  return infiniop::guarded(kWhere, [&] {
    if (!count) return fail(INFINI_STATUS_NULL_POINTER, std::string(kWhere) + ": count is NULL");
    if (capacity < 0)
      return fail(INFINI_STATUS_BAD_PARAM,
                  std::string(kWhere) + ": capacity " + std::to_string(capacity) + " < 0");
    if (capacity > 0 && !devices)
      return fail(
          INFINI_STATUS_NULL_POINTER,
          std::string(kWhere) + ": devices is NULL but capacity is " + std::to_string(capacity));
    int built = 0;
    const infiniop::Device *const *list = infiniop::builtDevices(&built);
    for (int i = 0; i < built && i < capacity; ++i) devices[i] = list[i]->type;
    *count = built;
    return infiniop::succeed();
  });
}

extern "C" infiniStatus_t infiniopGetDeviceInfo(infiniDevice_t device, infiniopDeviceInfo_t *info) {
  constexpr const char *kWhere = "infiniopGetDeviceInfo";
  return infiniop::guarded(kWhere, [&] {
    if (!info) return fail(INFINI_STATUS_NULL_POINTER, std::string(kWhere) + ": info is NULL");
    std::string why;
    const infiniop::Device *found = infiniop::findDevice(infiniop::enumValue(device), &why);
    if (!found)
      return fail(INFINI_STATUS_DEVICE_TYPE_NOT_SUPPORTED, std::string(kWhere) + ": " + why);
    info->name = found->name;
    info->count = found->count();
    info->host_memory = found->host_memory ? 1 : 0;
    return infiniop::succeed();
  });
}
