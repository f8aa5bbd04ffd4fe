// SPDX-License-Identifier: Apache-2.0
#include "device_param.h"

#include <map>
#include <mutex>

namespace infiniop_test {
namespace {

struct Shared {
  infiniopHandle_t handle = nullptr;
  infiniStatus_t status = INFINI_STATUS_SUCCESS;
  std::string error;
};
struct SharedHandles {
  std::mutex mutex;
  std::map<infiniDevice_t, Shared> by_device;  // tried ones
};

SharedHandles &shared() {
  static SharedHandles s;
  return s;
}

// Destroys the shared handles after the last test, before static destruction begins.
class SharedHandlesEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    SharedHandles &s = shared();
    std::lock_guard<std::mutex> lock(s.mutex);
    for (auto &entry : s.by_device)
      if (entry.second.handle)
        EXPECT_EQ(infiniopDestroyHandle(entry.second.handle), INFINI_STATUS_SUCCESS);
    s.by_device.clear();  // --gtest_repeat: the next round creates them again
  }
};

[[maybe_unused]] ::testing::Environment *const environment =
    ::testing::AddGlobalTestEnvironment(new SharedHandlesEnvironment);

}  // namespace

std::vector<infiniDevice_t> builtDeviceTypes() {
  int count = 0;
  EXPECT_EQ(infiniopGetDeviceTypes(nullptr, 0, &count), INFINI_STATUS_SUCCESS);
  std::vector<infiniDevice_t> devices(static_cast<size_t>(count));
  EXPECT_EQ(infiniopGetDeviceTypes(devices.data(), count, &count), INFINI_STATUS_SUCCESS);
  return devices;
}

bool isBuilt(infiniDevice_t device) {
  infiniopDeviceInfo_t info{};
  return infiniopGetDeviceInfo(device, &info) == INFINI_STATUS_SUCCESS;
}

infiniopDeviceInfo_t deviceInfo(infiniDevice_t device) {
  infiniopDeviceInfo_t info{};
  EXPECT_EQ(infiniopGetDeviceInfo(device, &info), INFINI_STATUS_SUCCESS) << infiniopGetLastError();
  if (!info.name) info.name = "unbuilt";
  return info;
}

infiniopHandle_t sharedHandle(infiniDevice_t device, std::string *why, bool *skip) {
  SharedHandles &s = shared();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto found = s.by_device.find(device);
  if (found == s.by_device.end()) {
    Shared made;
    made.status = infiniopCreateHandle(&made.handle, device, 0);
    made.error = infiniopGetLastError();
    if (made.status != INFINI_STATUS_SUCCESS) made.handle = nullptr;
    found = s.by_device.emplace(device, made).first;
  }
  const Shared &h = found->second;
  *why =
      deviceInfo(device).name + std::string(": ") + infiniStatusString(h.status) + ": " + h.error;
  *skip = h.status == INFINI_STATUS_DEVICE_NOT_FOUND;
  return h.handle;
}

INSTANTIATE_TEST_SUITE_P(All, DeviceTest, ::testing::ValuesIn(allDeviceParams()),
                         [](const ::testing::TestParamInfo<DeviceParam> &info) {
                           return deviceParamName(info.param);
                         });
}  // namespace infiniop_test
