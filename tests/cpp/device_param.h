// SPDX-License-Identifier: Apache-2.0
// Devices under test: every device the library was built with (it says which), the cpu device
// once per Highway target this machine can run (forced with hwy::SetSupportedTargetsForTest, so
// SSE4 and AVX2 paths are covered on an AVX-512 machine); a device the machine lacks (no OpenCL
// driver) is skipped with the reason.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#if INFINIOP_TEST_FORCES_TARGETS  // tests/CMakeLists.txt: linked with the library's Highway
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

// The devices this library was built with, from the library itself (infiniopGetDeviceTypes and
// infiniopGetDeviceInfo): the suite keeps no list of its own.
std::vector<infiniDevice_t> builtDeviceTypes();
bool isBuilt(infiniDevice_t device);
infiniopDeviceInfo_t deviceInfo(infiniDevice_t device);  // of a built device

// The process's one handle of a device whose pointers are not host memory (opencl), created on
// first use and destroyed after the last test (a gtest environment, device_param.cc): such a
// device builds each kernel program once per handle, so sharing it saves a build per test. NULL
// when creation failed; *why says why and *skip whether that means "no such device here"
// (DEVICE_NOT_FOUND) rather than a failure.
infiniopHandle_t sharedHandle(infiniDevice_t device, std::string *why, bool *skip);

// p > 0: the cpu device restricted to Highway target p (Highway's target bits are positive);
// p <= 0: device type -p at its best (cpu_reference -2, opencl -1).
using DeviceParam = int64_t;
inline DeviceParam deviceParam(infiniDevice_t device) {
  return -static_cast<DeviceParam>(device);
}
inline infiniDevice_t deviceOf(DeviceParam p) {
  return p > 0 ? INFINI_DEVICE_CPU : static_cast<infiniDevice_t>(-p);
}
inline bool isCpu(DeviceParam p) {
  return deviceOf(p) == INFINI_DEVICE_CPU;
}
// A device whose memory is not the host's: the tests that stage every buffer through copies
// keep to fewer dtypes there.
inline bool isDeviceMemory(DeviceParam p) {
  return !deviceInfo(deviceOf(p)).host_memory;
}

// Under INFINIOP_CPU_ISA (the suite's capped runs, tests/CMakeLists.txt) only the cpu device at
// the capped target: the uncapped run forces every lower target already, and the other devices
// do not depend on the cap.
inline bool cappedRun() {
  const char *cap = std::getenv("INFINIOP_CPU_ISA");
  return cap && *cap;
}

// The elements an oracle checks of an output of n: every one, or under an emulator
// (INFINIOP_TEST_EMULATED, set by tests/emulated.cmake) about 4096 of an output above that, every
// stride-th element for an odd stride: the oracles compute in long double, which on AArch64 is
// software floating point, emulated in turn, and checking every element of the large layout
// sweeps took 6 minutes per emulated processor. The library still computes every element (the
// thread split, every tail), and an odd stride meets every lane position of every vector width.
inline size_t checkStride(size_t n) {
  static const bool emulated = [] {
    const char *value = std::getenv("INFINIOP_TEST_EMULATED");
    return value && *value;
  }();
  return emulated && n > 4096 ? (n / 4096) | 1 : 1;
}

// Every built device; the cpu device once per Highway target this machine runs (best first).
inline std::vector<DeviceParam> allDeviceParams() {
  std::vector<DeviceParam> params;
  for (infiniDevice_t device : builtDeviceTypes()) {
    if (device != INFINI_DEVICE_CPU) {
      if (!cappedRun()) params.push_back(deviceParam(device));
      continue;
    }
#if INFINIOP_TEST_FORCES_TARGETS
    if (cappedRun()) {
      params.push_back(hwy::SupportedAndGeneratedTargets().front());
      continue;
    }
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) params.push_back(target);
#else
    params.push_back(deviceParam(device));
#endif
  }
  return params;
}

inline std::string deviceParamName(DeviceParam p) {
#if INFINIOP_TEST_FORCES_TARGETS
  if (p > 0) return std::string("cpu_") + hwy::TargetName(p);
#endif
  return deviceInfo(deviceOf(p)).name;
}

class DeviceTestBase : public ::testing::Test {
 protected:
  void selectDevice(DeviceParam p) {
#if INFINIOP_TEST_FORCES_TARGETS
    if (p > 0) {
      hwy::SetSupportedTargetsForTest(p);
      ASSERT_STREQ(infiniopCpuIsaName(), hwy::TargetName(p))
          << "target forcing did not reach the library";
    }
#endif
    selectDeviceType(deviceOf(p));
  }
  // A handle of the device (cpu at its best target): a fresh one for a host-memory device, the
  // shared one otherwise. Skips the test where the machine has no such device.
  void selectDeviceType(infiniDevice_t device) {
    if (!deviceInfo(device).host_memory) {
      std::string why;
      bool skip = false;
      shared_ = sharedHandle(device, &why, &skip);
      if (!shared_ && skip) GTEST_SKIP() << why;
      ASSERT_NE(shared_, nullptr) << why;
      return;
    }
    owned_ = std::make_unique<Handle>(device);
  }
  void restoreTargets() {
#if INFINIOP_TEST_FORCES_TARGETS
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
