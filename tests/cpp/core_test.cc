// SPDX-License-Identifier: Apache-2.0
// Core ABI: status strings, last error, tensor descriptors, handles, runtime functions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <thread>
#include <string>
#include <vector>

#include "device_param.h"
#include "infiniop.h"

namespace {

TEST(Status, NamesAndValuesMatchTheAbi) {
  EXPECT_EQ(INFINI_STATUS_BAD_TENSOR_DTYPE, 10);
  EXPECT_EQ(INFINI_STATUS_INSUFFICIENT_WORKSPACE, 13);
  EXPECT_EQ(INFINI_DTYPE_BF16, 19);
  EXPECT_EQ(INFINI_DEVICE_CPU_REFERENCE, 2);
  EXPECT_STREQ(infiniStatusString(INFINI_STATUS_SUCCESS), "INFINI_STATUS_SUCCESS");
  EXPECT_STREQ(infiniStatusString(INFINI_STATUS_BAD_PARAM), "INFINI_STATUS_BAD_PARAM");
  EXPECT_STREQ(infiniStatusString(INFINI_STATUS_INSUFFICIENT_WORKSPACE),
               "INFINI_STATUS_INSUFFICIENT_WORKSPACE");
  EXPECT_STREQ(infiniStatusString(static_cast<infiniStatus_t>(9)), "INFINI_STATUS_UNKNOWN");
  EXPECT_STREQ(infiniStatusString(static_cast<infiniStatus_t>(1000)), "INFINI_STATUS_UNKNOWN");
}

TEST(Version, RuntimeMatchesTheHeaders) {
  int major = -1, minor = -1, patch = -1;
  ASSERT_EQ(infiniopGetVersion(&major, &minor, &patch), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(major, INFINIOP_VERSION_MAJOR);
  EXPECT_EQ(minor, INFINIOP_VERSION_MINOR);
  EXPECT_EQ(patch, INFINIOP_VERSION_PATCH);
  EXPECT_STREQ(infiniopGetLastError(), "");
  // Any NULL is refused with its name, and nothing is written.
  const char *names[] = {"major", "minor", "patch"};
  for (int missing = 0; missing < 3; ++missing) {
    int out[3] = {-1, -1, -1};
    int *args[3] = {&out[0], &out[1], &out[2]};
    args[missing] = nullptr;
    EXPECT_EQ(infiniopGetVersion(args[0], args[1], args[2]), INFINI_STATUS_NULL_POINTER);
    EXPECT_EQ(std::string(infiniopGetLastError()),
              std::string("infiniopGetVersion: ") + names[missing] + " is NULL");
    EXPECT_EQ(out[0] + out[1] + out[2], -3);
  }
}

TEST(LastError, SetOnFailureClearedOnSuccess) {
  infiniopTensorDescriptor_t desc = nullptr;
  EXPECT_EQ(infiniopCreateTensorDescriptor(&desc, 1, nullptr, nullptr, INFINI_DTYPE_F32),
            INFINI_STATUS_NULL_POINTER);
  EXPECT_NE(std::string(infiniopGetLastError()), "");
  const size_t shape[] = {3};
  ASSERT_EQ(infiniopCreateTensorDescriptor(&desc, 1, shape, nullptr, INFINI_DTYPE_F32),
            INFINI_STATUS_SUCCESS);
  EXPECT_STREQ(infiniopGetLastError(), "");
  EXPECT_EQ(infiniopDestroyTensorDescriptor(desc), INFINI_STATUS_SUCCESS);
}

TEST(LastError, IsThreadLocal) {
  EXPECT_EQ(infiniopDestroyHandle(nullptr), INFINI_STATUS_NULL_POINTER);
  std::string other;
  std::thread([&] { other = infiniopGetLastError(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_NE(std::string(infiniopGetLastError()), "");
}

infiniStatus_t createTensor(std::vector<size_t> shape, std::vector<ptrdiff_t> strides,
                            infiniDtype_t dtype = INFINI_DTYPE_F32) {
  infiniopTensorDescriptor_t desc = nullptr;
  const infiniStatus_t status = infiniopCreateTensorDescriptor(
      &desc, shape.size(), shape.data(), strides.empty() ? nullptr : strides.data(), dtype);
  if (status == INFINI_STATUS_SUCCESS) {
    EXPECT_EQ(infiniopDestroyTensorDescriptor(desc), INFINI_STATUS_SUCCESS);
  } else {
    EXPECT_NE(std::string(infiniopGetLastError()), "");
  }
  return status;
}

TEST(TensorDescriptor, AcceptsRanksZeroToSixteen) {
  EXPECT_EQ(createTensor({}, {}), INFINI_STATUS_SUCCESS);
  for (size_t rank = 1; rank <= INFINIOP_MAX_NDIM; ++rank)
    EXPECT_EQ(createTensor(std::vector<size_t>(rank, 2), {}), INFINI_STATUS_SUCCESS) << rank;
  EXPECT_EQ(createTensor(std::vector<size_t>(INFINIOP_MAX_NDIM + 1, 1), {}),
            INFINI_STATUS_BAD_TENSOR_SHAPE);
}

TEST(TensorDescriptor, ZeroSizeDims) {
  EXPECT_EQ(createTensor({0}, {}), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(createTensor({4, 0, 5}, {}), INFINI_STATUS_SUCCESS);
  // With a zero dim no element exists, so even huge strides address nothing.
  EXPECT_EQ(createTensor({0, SIZE_MAX / 2}, {PTRDIFF_MAX, 1}), INFINI_STATUS_SUCCESS);
}

TEST(TensorDescriptor, RejectsElementCountOverflow) {
  EXPECT_EQ(createTensor({SIZE_MAX / 2, 3}, {}), INFINI_STATUS_BAD_TENSOR_SHAPE);
  EXPECT_EQ(createTensor({size_t{1} << 40, size_t{1} << 30}, {}), INFINI_STATUS_BAD_TENSOR_SHAPE);
  EXPECT_EQ(createTensor({size_t{1} << 61}, {}), INFINI_STATUS_BAD_TENSOR_SHAPE);  // bytes overflow
}

TEST(TensorDescriptor, RejectsOffsetOverflow) {
  EXPECT_EQ(createTensor({3, 4}, {PTRDIFF_MAX / 2, 1}), INFINI_STATUS_BAD_TENSOR_STRIDES);
  EXPECT_EQ(createTensor({3, 4}, {-(PTRDIFF_MAX / 2), 1}), INFINI_STATUS_BAD_TENSOR_STRIDES);
  EXPECT_EQ(createTensor({3, 4}, {PTRDIFF_MIN, 1}), INFINI_STATUS_BAD_TENSOR_STRIDES);
}

TEST(TensorDescriptor, AcceptsBroadcastAndNegativeStrides) {
  EXPECT_EQ(createTensor({3, 4}, {0, 1}), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(createTensor({3, 4}, {-4, -1}), INFINI_STATUS_SUCCESS);
}

TEST(TensorDescriptor, RejectsUnknownDtypeAndNulls) {
  EXPECT_EQ(createTensor({3}, {}, static_cast<infiniDtype_t>(0)), INFINI_STATUS_BAD_TENSOR_DTYPE);
  EXPECT_EQ(createTensor({3}, {}, static_cast<infiniDtype_t>(42)), INFINI_STATUS_BAD_TENSOR_DTYPE);
  const size_t shape[] = {3};
  EXPECT_EQ(infiniopCreateTensorDescriptor(nullptr, 1, shape, nullptr, INFINI_DTYPE_F32),
            INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopDestroyTensorDescriptor(nullptr), INFINI_STATUS_NULL_POINTER);
}

// The host device every build has: cpu, or cpu_reference in a build without it.
const infiniDevice_t kHostDevice =
    infiniop_test::isBuilt(INFINI_DEVICE_CPU) ? INFINI_DEVICE_CPU : INFINI_DEVICE_CPU_REFERENCE;

// The device list comes from the library: every built device once, in infiniDevice_t order,
// cpu_reference always; each described by infiniopGetDeviceInfo.
TEST(Devices, ListAndInfo) {
  int count = -1;
  ASSERT_EQ(infiniopGetDeviceTypes(nullptr, 0, &count), INFINI_STATUS_SUCCESS);
  ASSERT_GE(count, 1);
  // The poison is no device yet lies inside the enum's value range (0..3): UBSan's enum check
  // rejects loading any other value.
  const infiniDevice_t poison = static_cast<infiniDevice_t>(3);
  std::vector<infiniDevice_t> types(static_cast<size_t>(count) + 1, poison);
  int again = -1;
  ASSERT_EQ(infiniopGetDeviceTypes(types.data(), count, &again), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(again, count);
  EXPECT_EQ(types[static_cast<size_t>(count)], poison);  // untouched
  EXPECT_EQ(types.back(), poison);
  EXPECT_NE(std::find(types.begin(), types.end(), INFINI_DEVICE_CPU_REFERENCE), types.end());
  for (int i = 1; i < count; ++i) EXPECT_LT(types[i - 1], types[i]);
  // A short array gets the first `capacity`, and the whole count.
  infiniDevice_t first = poison;
  ASSERT_EQ(infiniopGetDeviceTypes(&first, 1, &again), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(first, types[0]);
  EXPECT_EQ(again, count);
  EXPECT_EQ(infiniopGetDeviceTypes(nullptr, 0, nullptr), INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopGetDeviceTypes(nullptr, 2, &again), INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopGetDeviceTypes(types.data(), -1, &again), INFINI_STATUS_BAD_PARAM);
  EXPECT_NE(std::string(infiniopGetLastError()), "");

  for (int i = 0; i < count; ++i) {
    infiniopDeviceInfo_t info{nullptr, -1, -1};
    ASSERT_EQ(infiniopGetDeviceInfo(types[i], &info), INFINI_STATUS_SUCCESS);
    ASSERT_NE(info.name, nullptr);
    EXPECT_GE(info.count, 0);
    const std::string name = info.name;
    EXPECT_FALSE(name.empty());
    EXPECT_TRUE(info.host_memory == 0 || info.host_memory == 1);
    if (types[i] == INFINI_DEVICE_CPU_REFERENCE || types[i] == INFINI_DEVICE_CPU) {
      EXPECT_EQ(name, types[i] == INFINI_DEVICE_CPU ? "cpu" : "cpu_reference");
      EXPECT_EQ(info.count, 1);
      EXPECT_EQ(info.host_memory, 1);
    }
    if (types[i] == INFINI_DEVICE_OPENCL) {
      EXPECT_EQ(name, "opencl");
      EXPECT_EQ(info.host_memory, 0);
    }
  }
  infiniopDeviceInfo_t info{};
  EXPECT_EQ(infiniopGetDeviceInfo(static_cast<infiniDevice_t>(7), &info),
            INFINI_STATUS_DEVICE_TYPE_NOT_SUPPORTED);
  EXPECT_NE(std::string(infiniopGetLastError()).find("device type 7"), std::string::npos);
  EXPECT_EQ(infiniopGetDeviceInfo(INFINI_DEVICE_CPU_REFERENCE, nullptr),
            INFINI_STATUS_NULL_POINTER);
}

TEST(Handle, CpuDevicesAndErrors) {
  infiniopHandle_t handle = nullptr;
  if (!infiniop_test::isBuilt(INFINI_DEVICE_CPU)) {
    EXPECT_EQ(infiniopCreateHandle(&handle, INFINI_DEVICE_CPU, 0),
              INFINI_STATUS_DEVICE_TYPE_NOT_SUPPORTED);
    EXPECT_NE(std::string(infiniopGetLastError()).find("INFINIOP_WITH_CPU"), std::string::npos);
  }
  for (infiniDevice_t device : {kHostDevice, INFINI_DEVICE_CPU_REFERENCE}) {
    ASSERT_EQ(infiniopCreateHandle(&handle, device, 0), INFINI_STATUS_SUCCESS);
    EXPECT_EQ(infiniopDestroyHandle(handle), INFINI_STATUS_SUCCESS);
    EXPECT_EQ(infiniopCreateHandle(&handle, device, 1), INFINI_STATUS_DEVICE_NOT_FOUND);
    EXPECT_NE(std::string(infiniopGetLastError()), "");
  }
  if (!infiniop_test::isBuilt(
          INFINI_DEVICE_OPENCL)) {  // built with it, opencl_runtime_test.cc covers it
    EXPECT_EQ(infiniopCreateHandle(&handle, INFINI_DEVICE_OPENCL, 0),
              INFINI_STATUS_DEVICE_TYPE_NOT_SUPPORTED);
    EXPECT_NE(std::string(infiniopGetLastError()).find("INFINIOP_WITH_OPENCL"), std::string::npos);
  }
  EXPECT_EQ(infiniopCreateHandle(&handle, static_cast<infiniDevice_t>(7), 0),
            INFINI_STATUS_DEVICE_TYPE_NOT_SUPPORTED);
  EXPECT_EQ(infiniopCreateHandle(nullptr, kHostDevice, 0), INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopDestroyHandle(nullptr), INFINI_STATUS_NULL_POINTER);
}

// The handle's fpmath mode: strict until set, each value kept, errors for a null handle or
// pointer. (A value outside the enum, BAD_PARAM, is tested from Python: passing one here would be
// undefined behaviour that UBSan reports.)
TEST(Handle, FpmathMode) {
  infiniopHandle_t handle = nullptr;
  ASSERT_EQ(infiniopCreateHandle(&handle, kHostDevice, 0), INFINI_STATUS_SUCCESS);
  infiniopFpmathMode_t mode = INFINIOP_FPMATH_RELAXED;
  ASSERT_EQ(infiniopGetHandleFpmathMode(handle, &mode), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(mode, INFINIOP_FPMATH_STRICT);
  for (infiniopFpmathMode_t set : {INFINIOP_FPMATH_RELAXED, INFINIOP_FPMATH_STRICT}) {
    ASSERT_EQ(infiniopSetHandleFpmathMode(handle, set), INFINI_STATUS_SUCCESS);
    ASSERT_EQ(infiniopGetHandleFpmathMode(handle, &mode), INFINI_STATUS_SUCCESS);
    EXPECT_EQ(mode, set);
  }
  EXPECT_EQ(INFINIOP_FPMATH_STRICT, 0);  // the ABI's values
  EXPECT_EQ(INFINIOP_FPMATH_RELAXED, 1);
  EXPECT_EQ(infiniopGetHandleFpmathMode(handle, nullptr), INFINI_STATUS_NULL_POINTER);
  EXPECT_NE(std::string(infiniopGetLastError()).find("mode is NULL"), std::string::npos);
  EXPECT_EQ(infiniopSetHandleFpmathMode(nullptr, INFINIOP_FPMATH_RELAXED),
            INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopGetHandleFpmathMode(nullptr, &mode), INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopDestroyHandle(handle), INFINI_STATUS_SUCCESS);
}

TEST(Runtime, MallocCopyFreeStreams) {
  infiniopHandle_t handle = nullptr;
  ASSERT_EQ(infiniopCreateHandle(&handle, kHostDevice, 0), INFINI_STATUS_SUCCESS);
  void *device = nullptr;
  ASSERT_EQ(infiniopMalloc(handle, &device, 100), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(device) % 64, 0u);
  std::vector<uint8_t> src(100), dst(100, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7);
  void *stream = nullptr;
  ASSERT_EQ(infiniopStreamCreate(handle, &stream), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopMemcpyHostToDevice(handle, device, src.data(), 100, stream),
            INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopStreamSynchronize(handle, stream), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopMemcpyDeviceToHost(handle, dst.data(), device, 100, nullptr),
            INFINI_STATUS_SUCCESS);
  EXPECT_EQ(src, dst);
  EXPECT_EQ(infiniopStreamDestroy(handle, stream), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopStreamDestroy(handle, stream), INFINI_STATUS_BAD_PARAM);  // twice
  EXPECT_EQ(infiniopStreamSynchronize(handle, &src), INFINI_STATUS_BAD_PARAM);
  EXPECT_EQ(infiniopMemcpyHostToDevice(handle, nullptr, src.data(), 1, nullptr),
            INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopMemcpyHostToDevice(handle, nullptr, nullptr, 0, nullptr),
            INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopFree(handle, device), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopFree(handle, device), INFINI_STATUS_BAD_PARAM);      // double free
  EXPECT_EQ(infiniopFree(handle, src.data()), INFINI_STATUS_BAD_PARAM);  // never allocated
  EXPECT_NE(std::string(infiniopGetLastError()), "");
  EXPECT_EQ(infiniopMalloc(handle, nullptr, 4), INFINI_STATUS_NULL_POINTER);
  void *zero = nullptr;
  EXPECT_EQ(infiniopMalloc(handle, &zero, 0), INFINI_STATUS_SUCCESS);
  EXPECT_NE(zero, nullptr);
  // Leaving `zero` allocated: destroying the handle releases it (ASan checks that).
  EXPECT_EQ(infiniopDestroyHandle(handle), INFINI_STATUS_SUCCESS);
}

}  // namespace
