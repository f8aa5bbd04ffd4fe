// SPDX-License-Identifier: Apache-2.0
#include "device_param.h"

#include <mutex>

namespace infiniop_test {
namespace {

struct SharedOpencl {
  std::mutex mutex;
  bool tried = false;
  infiniopHandle_t handle = nullptr;
  infiniStatus_t status = INFINI_STATUS_SUCCESS;
  std::string error;
};

SharedOpencl &shared() {
  static SharedOpencl s;
  return s;
}

// Destroys the shared handle after the last test, before static destruction begins.
class SharedOpenclEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    SharedOpencl &s = shared();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.tried = false;  // --gtest_repeat: the next round creates it again
    if (s.handle) {
      EXPECT_EQ(infiniopDestroyHandle(s.handle), INFINI_STATUS_SUCCESS);
    }
    s.handle = nullptr;
  }
};

[[maybe_unused]] ::testing::Environment *const environment =
    ::testing::AddGlobalTestEnvironment(new SharedOpenclEnvironment);

}  // namespace

infiniopHandle_t sharedOpenclHandle(std::string *why, bool *skip) {
  SharedOpencl &s = shared();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.tried) {
    s.tried = true;
    s.status = infiniopCreateHandle(&s.handle, INFINI_DEVICE_OPENCL, 0);
    s.error = infiniopGetLastError();
    if (s.status != INFINI_STATUS_SUCCESS) s.handle = nullptr;
  }
  *why = "opencl: " + std::string(infiniStatusString(s.status)) + ": " + s.error;
  *skip = s.status == INFINI_STATUS_DEVICE_NOT_FOUND;
  return s.handle;
}

INSTANTIATE_TEST_SUITE_P(All, DeviceTest, ::testing::ValuesIn(allDeviceParams()),
                         [](const ::testing::TestParamInfo<DeviceParam> &info) {
                           return deviceParamName(info.param);
                         });
}  // namespace infiniop_test
