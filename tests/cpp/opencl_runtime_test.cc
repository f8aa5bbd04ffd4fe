// The OpenCL runtime: device choice, the allocation table (views at offsets), copies, streams,
// and operators answering DEVICE_TYPE_NOT_SUPPORTED until their kernels exist.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "infiniop.h"

namespace {

std::string lastError() {
  return infiniopGetLastError();
}

// Every test starts from an OpenCL handle on device 0, or is skipped with the reason when the
// machine has no OpenCL platform (the library must still serve the CPU devices there).
class OpenclRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("INFINIOP_OPENCL_DEVICE");
    const infiniStatus_t status = infiniopCreateHandle(&handle_, INFINI_DEVICE_OPENCL, 0);
    if (status == INFINI_STATUS_DEVICE_NOT_FOUND &&
        lastError().find("no OpenCL platform") != std::string::npos)
      GTEST_SKIP() << lastError();
    ASSERT_EQ(status, INFINI_STATUS_SUCCESS) << lastError();
  }
  void TearDown() override {
    unsetenv("INFINIOP_OPENCL_DEVICE");
    if (handle_) EXPECT_EQ(infiniopDestroyHandle(handle_), INFINI_STATUS_SUCCESS);
  }

  void *malloc(size_t size) {
    void *ptr = nullptr;
    EXPECT_EQ(infiniopMalloc(handle_, &ptr, size), INFINI_STATUS_SUCCESS) << lastError();
    return ptr;
  }

  infiniopHandle_t handle_ = nullptr;
};

std::vector<uint8_t> pattern(size_t size, unsigned seed) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(i * 31 + seed);
  return bytes;
}

char *at(void *base, size_t offset) {
  return static_cast<char *>(base) + offset;
}

TEST_F(OpenclRuntime, CreateDestroyAndTooLargeIdListsDevices) {
  infiniopHandle_t other = nullptr;
  EXPECT_EQ(infiniopCreateHandle(&other, INFINI_DEVICE_OPENCL, 1000),
            INFINI_STATUS_DEVICE_NOT_FOUND);
  EXPECT_NE(lastError().find("no OpenCL device 1000"), std::string::npos) << lastError();
  EXPECT_NE(lastError().find("0: "), std::string::npos) << lastError();  // the listing
  EXPECT_EQ(infiniopCreateHandle(&other, INFINI_DEVICE_OPENCL, -1), INFINI_STATUS_DEVICE_NOT_FOUND);
  EXPECT_EQ(other, nullptr);
}

TEST_F(OpenclRuntime, EnvironmentOverridesDeviceId) {
  infiniopHandle_t other = nullptr;
  setenv("INFINIOP_OPENCL_DEVICE", "0", 1);
  ASSERT_EQ(infiniopCreateHandle(&other, INFINI_DEVICE_OPENCL, 1000), INFINI_STATUS_SUCCESS)
      << lastError();
  EXPECT_EQ(infiniopDestroyHandle(other), INFINI_STATUS_SUCCESS);
  other = nullptr;
  setenv("INFINIOP_OPENCL_DEVICE", "1000", 1);
  EXPECT_EQ(infiniopCreateHandle(&other, INFINI_DEVICE_OPENCL, 0), INFINI_STATUS_DEVICE_NOT_FOUND);
  EXPECT_NE(lastError().find("1000"), std::string::npos) << lastError();
  setenv("INFINIOP_OPENCL_DEVICE", "zero", 1);
  EXPECT_EQ(infiniopCreateHandle(&other, INFINI_DEVICE_OPENCL, 0), INFINI_STATUS_DEVICE_NOT_FOUND);
  EXPECT_NE(lastError().find("INFINIOP_OPENCL_DEVICE"), std::string::npos) << lastError();
  EXPECT_EQ(other, nullptr);
}

TEST_F(OpenclRuntime, RoundTripsAtOffsets) {
  constexpr size_t kSize = 1000;
  void *device = malloc(kSize);
  ASSERT_NE(device, nullptr);
  const std::vector<uint8_t> whole = pattern(kSize, 1);
  ASSERT_EQ(infiniopMemcpyHostToDevice(handle_, device, whole.data(), kSize, nullptr),
            INFINI_STATUS_SUCCESS)
      << lastError();
  // A view at an offset: write 100 bytes at 300, then read the whole allocation back.
  const std::vector<uint8_t> part = pattern(100, 7);
  ASSERT_EQ(infiniopMemcpyHostToDevice(handle_, at(device, 300), part.data(), 100, nullptr),
            INFINI_STATUS_SUCCESS)
      << lastError();
  std::vector<uint8_t> expected = whole;
  std::copy(part.begin(), part.end(), expected.begin() + 300);
  std::vector<uint8_t> back(kSize);
  ASSERT_EQ(infiniopMemcpyDeviceToHost(handle_, back.data(), device, kSize, nullptr),
            INFINI_STATUS_SUCCESS)
      << lastError();
  EXPECT_EQ(back, expected);
  // A read at an odd offset up to the last byte.
  std::vector<uint8_t> tail(kSize - 777);
  ASSERT_EQ(infiniopMemcpyDeviceToHost(handle_, tail.data(), at(device, 777), tail.size(), nullptr),
            INFINI_STATUS_SUCCESS)
      << lastError();
  EXPECT_EQ(tail, std::vector<uint8_t>(expected.begin() + 777, expected.end()));
  EXPECT_EQ(infiniopFree(handle_, device), INFINI_STATUS_SUCCESS);
}

TEST_F(OpenclRuntime, AllocationsAreDistinctAndAligned) {
  void *a = malloc(10), *b = malloc(10), *zero = malloc(0);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(zero, nullptr);
  EXPECT_NE(a, b);
  EXPECT_NE(zero, a);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 4096, 0u);
  const std::vector<uint8_t> one = pattern(10, 1), two = pattern(10, 2);
  EXPECT_EQ(infiniopMemcpyHostToDevice(handle_, a, one.data(), 10, nullptr), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopMemcpyHostToDevice(handle_, b, two.data(), 10, nullptr), INFINI_STATUS_SUCCESS);
  std::vector<uint8_t> back(10);
  EXPECT_EQ(infiniopMemcpyDeviceToHost(handle_, back.data(), a, 10, nullptr),
            INFINI_STATUS_SUCCESS);
  EXPECT_EQ(back, one);
  EXPECT_EQ(infiniopFree(handle_, a), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopFree(handle_, zero), INFINI_STATUS_SUCCESS);
  // `b` stays allocated: destroying the handle releases it (ASan and the leak check see that).
}

TEST_F(OpenclRuntime, CopiesOutsideAnAllocationAreRejected) {
  void *device = malloc(100);
  std::vector<uint8_t> host(200);
  EXPECT_EQ(infiniopMemcpyHostToDevice(handle_, at(device, 90), host.data(), 20, nullptr),
            INFINI_STATUS_BAD_PARAM);
  EXPECT_NE(lastError().find("past the end"), std::string::npos) << lastError();
  EXPECT_EQ(infiniopMemcpyDeviceToHost(handle_, host.data(), device, 101, nullptr),
            INFINI_STATUS_BAD_PARAM);
  EXPECT_EQ(infiniopMemcpyDeviceToHost(handle_, host.data(), at(device, 100), 1, nullptr),
            INFINI_STATUS_BAD_PARAM);
  // Host memory is not device memory, nor is the gap after an allocation.
  EXPECT_EQ(infiniopMemcpyDeviceToHost(handle_, host.data(), host.data() + 100, 4, nullptr),
            INFINI_STATUS_BAD_PARAM);
  EXPECT_EQ(infiniopMemcpyHostToDevice(handle_, at(device, 200), host.data(), 1, nullptr),
            INFINI_STATUS_BAD_PARAM);
  EXPECT_EQ(infiniopMemcpyHostToDevice(handle_, nullptr, host.data(), 1, nullptr),
            INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopMemcpyHostToDevice(handle_, nullptr, nullptr, 0, nullptr),
            INFINI_STATUS_SUCCESS);
  // Exactly the last byte, and nothing at the end, are inside.
  EXPECT_EQ(infiniopMemcpyHostToDevice(handle_, at(device, 99), host.data(), 1, nullptr),
            INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopFree(handle_, device), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopMemcpyHostToDevice(handle_, device, host.data(), 1, nullptr),
            INFINI_STATUS_BAD_PARAM);  // after free
}

TEST_F(OpenclRuntime, FreeOnlyTakesAllocationBases) {
  void *device = malloc(64);
  std::vector<uint8_t> host(8);
  EXPECT_EQ(infiniopFree(handle_, host.data()), INFINI_STATUS_BAD_PARAM);  // never allocated
  EXPECT_NE(lastError(), "");
  EXPECT_EQ(infiniopFree(handle_, at(device, 8)), INFINI_STATUS_BAD_PARAM);  // interior
  EXPECT_EQ(infiniopFree(handle_, nullptr), INFINI_STATUS_SUCCESS);          // like free(NULL)
  EXPECT_EQ(infiniopFree(handle_, device), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopFree(handle_, device), INFINI_STATUS_BAD_PARAM);  // twice
  EXPECT_EQ(infiniopMalloc(handle_, nullptr, 4), INFINI_STATUS_NULL_POINTER);
  void *huge = nullptr;
  EXPECT_EQ(infiniopMalloc(handle_, &huge, SIZE_MAX), INFINI_STATUS_BAD_PARAM);
  EXPECT_EQ(huge, nullptr);
}

TEST_F(OpenclRuntime, PointersOfAnotherHandleAreUnknown) {
  infiniopHandle_t other = nullptr;
  ASSERT_EQ(infiniopCreateHandle(&other, INFINI_DEVICE_OPENCL, 0), INFINI_STATUS_SUCCESS);
  void *device = malloc(16);
  void *stream = nullptr;
  ASSERT_EQ(infiniopStreamCreate(handle_, &stream), INFINI_STATUS_SUCCESS);
  std::vector<uint8_t> host(16);
  EXPECT_EQ(infiniopMemcpyDeviceToHost(other, host.data(), device, 16, nullptr),
            INFINI_STATUS_BAD_PARAM);
  EXPECT_EQ(infiniopFree(other, device), INFINI_STATUS_BAD_PARAM);
  EXPECT_EQ(infiniopStreamSynchronize(other, stream), INFINI_STATUS_BAD_PARAM);
  EXPECT_EQ(infiniopStreamDestroy(other, stream), INFINI_STATUS_BAD_PARAM);
  EXPECT_EQ(infiniopDestroyHandle(other), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopStreamDestroy(handle_, stream), INFINI_STATUS_SUCCESS);
}

TEST_F(OpenclRuntime, TwoStreams) {
  void *s1 = nullptr, *s2 = nullptr;
  ASSERT_EQ(infiniopStreamCreate(handle_, &s1), INFINI_STATUS_SUCCESS) << lastError();
  ASSERT_EQ(infiniopStreamCreate(handle_, &s2), INFINI_STATUS_SUCCESS) << lastError();
  EXPECT_NE(s1, s2);
  constexpr size_t kSize = 4096;
  void *device = malloc(2 * kSize);
  const std::vector<uint8_t> one = pattern(kSize, 3), two = pattern(kSize, 5);
  EXPECT_EQ(infiniopMemcpyHostToDevice(handle_, device, one.data(), kSize, s1),
            INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopMemcpyHostToDevice(handle_, at(device, kSize), two.data(), kSize, s2),
            INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopStreamSynchronize(handle_, s1), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopStreamSynchronize(handle_, s2), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopStreamSynchronize(handle_, nullptr), INFINI_STATUS_SUCCESS);
  std::vector<uint8_t> back(kSize);
  EXPECT_EQ(infiniopMemcpyDeviceToHost(handle_, back.data(), at(device, kSize), kSize, s1),
            INFINI_STATUS_SUCCESS);
  EXPECT_EQ(back, two);
  EXPECT_EQ(infiniopMemcpyDeviceToHost(handle_, back.data(), device, kSize, s2),
            INFINI_STATUS_SUCCESS);
  EXPECT_EQ(back, one);
  EXPECT_EQ(infiniopStreamDestroy(handle_, s1), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopStreamDestroy(handle_, s1), INFINI_STATUS_BAD_PARAM);  // twice
  EXPECT_EQ(infiniopStreamSynchronize(handle_, s1), INFINI_STATUS_BAD_PARAM);
  EXPECT_EQ(infiniopStreamDestroy(handle_, nullptr), INFINI_STATUS_NULL_POINTER);
  std::vector<uint8_t> not_a_stream(8);
  EXPECT_EQ(infiniopStreamSynchronize(handle_, not_a_stream.data()), INFINI_STATUS_BAD_PARAM);
  EXPECT_EQ(infiniopMemcpyHostToDevice(handle_, device, one.data(), 1, not_a_stream.data()),
            INFINI_STATUS_BAD_PARAM);
  // s2 and `device` stay: destroying the handle finishes and releases them.
}

TEST_F(OpenclRuntime, OperatorsAreNotSupportedYet) {
  const size_t shape[] = {4, 8};
  const size_t rows[] = {4};
  infiniopTensorDescriptor_t t = nullptr, idx = nullptr;
  ASSERT_EQ(infiniopCreateTensorDescriptor(&t, 2, shape, nullptr, INFINI_DTYPE_F32),
            INFINI_STATUS_SUCCESS);
  ASSERT_EQ(infiniopCreateTensorDescriptor(&idx, 1, rows, nullptr, INFINI_DTYPE_I32),
            INFINI_STATUS_SUCCESS);
  infiniopGeluBackwardDescriptor_t gelu = nullptr;
  EXPECT_EQ(infiniopCreateGeluBackwardDescriptor(handle_, &gelu, t, t, t),
            INFINI_STATUS_DEVICE_TYPE_NOT_SUPPORTED);
  EXPECT_NE(lastError().find("opencl"), std::string::npos) << lastError();
  EXPECT_EQ(gelu, nullptr);
  infiniopMoeFinalizeRoutingV2Descriptor_t moe = nullptr;
  EXPECT_EQ(infiniopCreateMoeFinalizeRoutingV2Descriptor(handle_, &moe, t, t, idx, nullptr, nullptr,
                                                         nullptr, nullptr, nullptr, 0),
            INFINI_STATUS_DEVICE_TYPE_NOT_SUPPORTED)
      << lastError();
  EXPECT_EQ(moe, nullptr);
  EXPECT_EQ(infiniopDestroyTensorDescriptor(t), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopDestroyTensorDescriptor(idx), INFINI_STATUS_SUCCESS);
}

}  // namespace
