// Devices under test: cpu_reference, and the cpu device once per Highway target this machine can
// run (forced with hwy::SetSupportedTargetsForTest, so SSE4 and AVX2 paths are covered on an
// AVX-512 machine).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hwy/targets.h"
#include "infiniop.h"

namespace infiniop_test {

constexpr infiniDtype_t kFloatDtypes[] = {INFINI_DTYPE_F32, INFINI_DTYPE_F16, INFINI_DTYPE_BF16};

class Handle {
 public:
  explicit Handle(infiniDevice_t device) {
    EXPECT_EQ(infiniopCreateHandle(&handle_, device, 0), INFINI_STATUS_SUCCESS);
  }
  ~Handle() {
    if (handle_) infiniopDestroyHandle(handle_);
  }
  Handle(const Handle &) = delete;
  Handle &operator=(const Handle &) = delete;
  infiniopHandle_t get() const { return handle_; }

 private:
  infiniopHandle_t handle_ = nullptr;
};

// 0 = cpu_reference; otherwise the cpu device restricted to this Highway target.
using DeviceParam = int64_t;

inline std::vector<DeviceParam> allDeviceParams() {
  std::vector<DeviceParam> params = {0};
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) params.push_back(target);
  return params;
}

inline std::string deviceParamName(DeviceParam p) {
  return p == 0 ? std::string("cpu_reference") : std::string("cpu_") + hwy::TargetName(p);
}

class DeviceTestBase : public ::testing::Test {
 protected:
  void selectDevice(DeviceParam p) {
    if (p != 0) {
      hwy::SetSupportedTargetsForTest(p);
      ASSERT_STREQ(infiniopCpuIsaName(), hwy::TargetName(p))
          << "target forcing did not reach the library";
    }
    handle_ = std::make_unique<Handle>(p == 0 ? INFINI_DEVICE_CPU_REFERENCE : INFINI_DEVICE_CPU);
  }
  void restoreTargets() { hwy::SetSupportedTargetsForTest(0); }
  infiniopHandle_t handle() const { return handle_->get(); }

 private:
  std::unique_ptr<Handle> handle_;
};

class DeviceTest : public DeviceTestBase, public ::testing::WithParamInterface<DeviceParam> {
 protected:
  void SetUp() override { selectDevice(GetParam()); }
  void TearDown() override { restoreTargets(); }
};

}  // namespace infiniop_test
