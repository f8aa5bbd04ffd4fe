// SPDX-License-Identifier: Apache-2.0
// Devices under test: cpu_reference, the cpu device once per Highway target this machine can
// run (forced with hwy::SetSupportedTargetsForTest, so SSE4 and AVX2 paths are covered on an
// AVX-512 machine), and opencl in builds with it (skipped, with the reason, where the machine has
// no OpenCL device).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#if INFINIOP_WITH_CPU
#include "hwy/targets.h"
#endif
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

// The process's one OpenCL handle, created on first use and destroyed after the last test (a
// gtest environment, device_param.cc): the library builds each kernel program once per handle,
// so sharing it saves a PoCL build per test. NULL when creation failed; *why says why and
// *skip whether that means "no OpenCL device here" (DEVICE_NOT_FOUND) rather than a failure.
infiniopHandle_t sharedOpenclHandle(std::string *why, bool *skip);

// 0 = cpu_reference; kOpencl = opencl; otherwise the cpu device restricted to this Highway target
// (Highway's target bits are positive).
using DeviceParam = int64_t;
constexpr DeviceParam kOpencl = -1;

inline bool isOpencl(DeviceParam p) {
  return p == kOpencl;
}
inline bool isCpu(DeviceParam p) {
  return p > 0;
}

// Under INFINIOP_CPU_ISA (the suite's capped runs, tests/CMakeLists.txt) only the cpu device at
// the capped target: the uncapped run forces every lower target already, and cpu_reference and
// opencl do not depend on the cap.
inline bool cappedRun() {
  const char *cap = std::getenv("INFINIOP_CPU_ISA");
  return cap && *cap;
}

// cpu_reference and every cpu target (best first).
inline std::vector<DeviceParam> cpuDeviceParams() {
#if INFINIOP_WITH_CPU
  if (cappedRun()) return {hwy::SupportedAndGeneratedTargets().front()};
  std::vector<DeviceParam> params = {0};
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) params.push_back(target);
  return params;
#else
  return {0};  // built without the cpu device
#endif
}

// cpu_reference, every cpu target, and opencl where the library is built with it.
inline std::vector<DeviceParam> allDeviceParams() {
  std::vector<DeviceParam> params = cpuDeviceParams();
#if INFINIOP_WITH_OPENCL
  if (!cappedRun()) params.push_back(kOpencl);
#endif
  return params;
}

inline std::string deviceParamName(DeviceParam p) {
  if (p == kOpencl) return "opencl";
#if INFINIOP_WITH_CPU
  if (p != 0) return std::string("cpu_") + hwy::TargetName(p);
#endif
  return "cpu_reference";
}

class DeviceTestBase : public ::testing::Test {
 protected:
  void selectDevice(DeviceParam p) {
    if (p == kOpencl) {
      selectDeviceType(INFINI_DEVICE_OPENCL);
      return;
    }
#if INFINIOP_WITH_CPU
    if (p != 0) {
      hwy::SetSupportedTargetsForTest(p);
      ASSERT_STREQ(infiniopCpuIsaName(), hwy::TargetName(p))
          << "target forcing did not reach the library";
    }
#endif
    selectDeviceType(p == 0 ? INFINI_DEVICE_CPU_REFERENCE : INFINI_DEVICE_CPU);
  }
  // A handle of the device (cpu at its best target): a fresh one for the CPU devices, the shared
  // one for opencl. Skips the test where no OpenCL device exists.
  void selectDeviceType(infiniDevice_t device) {
    if (device == INFINI_DEVICE_OPENCL) {
      std::string why;
      bool skip = false;
      shared_ = sharedOpenclHandle(&why, &skip);
      if (!shared_ && skip) GTEST_SKIP() << why;
      ASSERT_NE(shared_, nullptr) << why;
      return;
    }
    owned_ = std::make_unique<Handle>(device);
  }
  void restoreTargets() {
#if INFINIOP_WITH_CPU
    hwy::SetSupportedTargetsForTest(0);
#endif
  }
  infiniopHandle_t handle() const {
    return shared_ ? shared_ : owned_->get();
  }

 private:
  std::unique_ptr<Handle> owned_;
  infiniopHandle_t shared_ = nullptr;
};

class DeviceTest : public DeviceTestBase, public ::testing::WithParamInterface<DeviceParam> {
 protected:
  void SetUp() override { selectDevice(GetParam()); }
  void TearDown() override { restoreTargets(); }
};

}  // namespace infiniop_test
