// SPDX-License-Identifier: Apache-2.0
// The OpenCL runtime: device choice, the allocation table (views at offsets), copies, streams,
// and operators on device memory: views inside one allocation, pointers that are not device
// memory of the handle, streams. (The operators' results are the conformance suite's business,
// infiniop-tests, which runs every operator test on opencl too.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
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

// ---------------------------------------------------------------- operators on device memory
// GeluBackward of n F32 elements on `handle` (pointers of that handle), on `stream`; the message
// of a failure in *error.
infiniStatus_t geluBackward(infiniopHandle_t handle, size_t n, void *out, const void *in,
                            const void *grad, void *stream, std::string *error = nullptr) {
  const size_t shape[] = {n};
  infiniopTensorDescriptor_t t = nullptr;
  EXPECT_EQ(infiniopCreateTensorDescriptor(&t, 1, shape, nullptr, INFINI_DTYPE_F32),
            INFINI_STATUS_SUCCESS);
  infiniopGeluBackwardDescriptor_t op = nullptr;
  infiniStatus_t status = infiniopCreateGeluBackwardDescriptor(handle, &op, t, t, t);
  if (error) *error = lastError();
  EXPECT_EQ(infiniopDestroyTensorDescriptor(t), INFINI_STATUS_SUCCESS);
  if (status != INFINI_STATUS_SUCCESS) return status;
  status = infiniopGeluBackward(op, nullptr, 0, out, in, grad, stream);
  if (error) *error = lastError();
  EXPECT_EQ(infiniopDestroyGeluBackwardDescriptor(op), INFINI_STATUS_SUCCESS);
  return status;
}

std::vector<float> values(size_t n, unsigned seed, float range) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = range * (static_cast<float>((i * 2654435761u + seed * 40503u) % 2001u) / 1000.0f - 1);
  return v;
}

// The same on cpu_reference, from host memory: what the opencl results are compared with.
std::vector<float> reference(const std::vector<float> &in, const std::vector<float> &grad) {
  infiniopHandle_t ref = nullptr;
  EXPECT_EQ(infiniopCreateHandle(&ref, INFINI_DEVICE_CPU_REFERENCE, 0), INFINI_STATUS_SUCCESS);
  std::vector<float> out(in.size(), NAN);
  EXPECT_EQ(geluBackward(ref, in.size(), out.data(), in.data(), grad.data(), nullptr),
            INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopDestroyHandle(ref), INFINI_STATUS_SUCCESS);
  return out;
}

// The conformance suite holds the accuracy contract; here only "the right elements, computed".
void expectClose(const std::vector<float> &got, const std::vector<float> &want,
                 const std::vector<float> &grad) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 * (std::fabs(want[i]) + std::fabs(grad[i])) + 1e-30)
        << "element " << i;
}

float *floats(void *base, size_t offset) {
  return static_cast<float *>(base) + offset;
}

// Three views at odd element offsets inside one allocation (inputs, output, and gaps between
// them): the output lands where it should, nothing else changes; then in place, at an offset.
TEST_F(OpenclRuntime, OperatorOnViewsInsideOneAllocation) {
  constexpr size_t n = 37, in_at = 3, grad_at = in_at + n + 5, out_at = grad_at + n + 2,
                   total = out_at + n + 4;
  const std::vector<float> in = values(n, 1, 4.0f), grad = values(n, 2, 2.0f);
  std::vector<float> image(total, 12345.0f);
  std::copy(in.begin(), in.end(), image.begin() + in_at);
  std::copy(grad.begin(), grad.end(), image.begin() + grad_at);
  std::fill(image.begin() + out_at, image.begin() + out_at + n, NAN);
  void *device = malloc(total * sizeof(float));
  ASSERT_NE(device, nullptr);
  ASSERT_EQ(
      infiniopMemcpyHostToDevice(handle_, device, image.data(), total * sizeof(float), nullptr),
      INFINI_STATUS_SUCCESS);
  std::string error;
  ASSERT_EQ(geluBackward(handle_, n, floats(device, out_at), floats(device, in_at),
                         floats(device, grad_at), nullptr, &error),
            INFINI_STATUS_SUCCESS)
      << error;
  std::vector<float> back(total);
  ASSERT_EQ(
      infiniopMemcpyDeviceToHost(handle_, back.data(), device, total * sizeof(float), nullptr),
      INFINI_STATUS_SUCCESS);
  const std::vector<float> want = reference(in, grad);
  expectClose(std::vector<float>(back.begin() + out_at, back.begin() + out_at + n), want, grad);
  for (size_t i = 0; i < total; ++i)
    if (i < out_at || i >= out_at + n) EXPECT_EQ(0, std::memcmp(&back[i], &image[i], 4)) << i;
  // In place: the output is the input view itself.
  ASSERT_EQ(geluBackward(handle_, n, floats(device, in_at), floats(device, in_at),
                         floats(device, grad_at), nullptr, &error),
            INFINI_STATUS_SUCCESS)
      << error;
  std::vector<float> again(total);
  ASSERT_EQ(
      infiniopMemcpyDeviceToHost(handle_, again.data(), device, total * sizeof(float), nullptr),
      INFINI_STATUS_SUCCESS);
  expectClose(std::vector<float>(again.begin() + in_at, again.begin() + in_at + n), want, grad);
  for (size_t i = 0; i < total; ++i)
    if (i < in_at || i >= in_at + n) EXPECT_EQ(0, std::memcmp(&again[i], &back[i], 4)) << i;
  EXPECT_EQ(infiniopFree(handle_, device), INFINI_STATUS_SUCCESS);
}

// Pointers that are not device memory of this handle, or views running past their allocation:
// BAD_PARAM with a message, and no element written anywhere.
TEST_F(OpenclRuntime, OperatorRejectsPointersNotFromInfiniopMalloc) {
  constexpr size_t n = 64;
  const std::vector<float> in = values(n, 3, 4.0f), grad = values(n, 4, 2.0f);
  std::vector<float> image(3 * n, NAN);
  std::copy(in.begin(), in.end(), image.begin());
  std::copy(grad.begin(), grad.end(), image.begin() + n);
  void *device = malloc(image.size() * sizeof(float));
  ASSERT_NE(device, nullptr);
  ASSERT_EQ(infiniopMemcpyHostToDevice(handle_, device, image.data(), image.size() * sizeof(float),
                                       nullptr),
            INFINI_STATUS_SUCCESS);
  float *d_in = floats(device, 0), *d_grad = floats(device, n), *d_out = floats(device, 2 * n);
  std::vector<float> host_out(n, 7.0f), host_in = in, host_grad = grad;
  const std::vector<float> host_out_before = host_out;
  infiniopHandle_t other = nullptr;
  ASSERT_EQ(infiniopCreateHandle(&other, INFINI_DEVICE_OPENCL, 0), INFINI_STATUS_SUCCESS);
  void *foreign = nullptr;  // device memory, of another handle
  ASSERT_EQ(infiniopMalloc(other, &foreign, n * sizeof(float)), INFINI_STATUS_SUCCESS);
  const struct {
    const char *what;
    void *out;
    const void *in, *grad;
  } cases[] = {
      {"host output", host_out.data(), d_in, d_grad},
      {"host input", d_out, host_in.data(), d_grad},
      {"host grad_output", d_out, d_in, host_grad.data()},
      {"output of another handle", foreign, d_in, d_grad},
      {"input of another handle", d_out, foreign, d_grad},
      {"output one element past the allocation", floats(device, 2 * n + 1), d_in, d_grad},
      {"input past the end", d_out, floats(device, 3 * n), d_grad},
  };
  for (const auto &c : cases) {
    SCOPED_TRACE(c.what);
    std::string error;
    EXPECT_EQ(geluBackward(handle_, n, c.out, c.in, c.grad, nullptr, &error),
              INFINI_STATUS_BAD_PARAM);
    EXPECT_NE(error.find("GeluBackward"), std::string::npos) << error;
    std::vector<float> back(image.size());
    ASSERT_EQ(infiniopMemcpyDeviceToHost(handle_, back.data(), device, back.size() * sizeof(float),
                                         nullptr),
              INFINI_STATUS_SUCCESS);
    EXPECT_EQ(0, std::memcmp(back.data(), image.data(), back.size() * sizeof(float)))
        << "device memory written";
    EXPECT_EQ(host_out, host_out_before);
    EXPECT_EQ(host_in, in);
  }
  EXPECT_EQ(infiniopDestroyHandle(other), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopFree(handle_, device), INFINI_STATUS_SUCCESS);
}

// Copies and the operator queued on a stream, then infiniopStreamSynchronize: afterwards a read
// on the default queue sees the result (large enough to take a while).
TEST_F(OpenclRuntime, OperatorOnAStreamThenSynchronize) {
  constexpr size_t n = size_t{1} << 20;
  const std::vector<float> in = values(n, 5, 6.0f), grad = values(n, 6, 2.0f);
  const std::vector<float> poison(n, NAN);
  void *stream = nullptr;
  ASSERT_EQ(infiniopStreamCreate(handle_, &stream), INFINI_STATUS_SUCCESS) << lastError();
  void *device = malloc(3 * n * sizeof(float));
  ASSERT_NE(device, nullptr);
  const size_t bytes = n * sizeof(float);
  EXPECT_EQ(infiniopMemcpyHostToDevice(handle_, floats(device, 0), in.data(), bytes, stream),
            INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopMemcpyHostToDevice(handle_, floats(device, n), grad.data(), bytes, stream),
            INFINI_STATUS_SUCCESS);
  EXPECT_EQ(
      infiniopMemcpyHostToDevice(handle_, floats(device, 2 * n), poison.data(), bytes, stream),
      INFINI_STATUS_SUCCESS);
  std::string error;
  ASSERT_EQ(geluBackward(handle_, n, floats(device, 2 * n), floats(device, 0), floats(device, n),
                         stream, &error),
            INFINI_STATUS_SUCCESS)
      << error;
  ASSERT_EQ(infiniopStreamSynchronize(handle_, stream), INFINI_STATUS_SUCCESS) << lastError();
  std::vector<float> out(n);
  ASSERT_EQ(infiniopMemcpyDeviceToHost(handle_, out.data(), floats(device, 2 * n), bytes, nullptr),
            INFINI_STATUS_SUCCESS);
  expectClose(out, reference(in, grad), grad);
  EXPECT_EQ(infiniopStreamDestroy(handle_, stream), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopFree(handle_, device), INFINI_STATUS_SUCCESS);
}

// Two streams, each with its own buffers and operator call, synchronized in turn.
TEST_F(OpenclRuntime, OperatorsOnTwoStreams) {
  constexpr size_t n = 100000;
  const size_t bytes = n * sizeof(float);
  void *streams[2] = {nullptr, nullptr};
  void *device[2] = {nullptr, nullptr};
  std::vector<float> in[2], grad[2], out[2];
  for (int k = 0; k < 2; ++k) {
    ASSERT_EQ(infiniopStreamCreate(handle_, &streams[k]), INFINI_STATUS_SUCCESS) << lastError();
    device[k] = malloc(3 * bytes);
    ASSERT_NE(device[k], nullptr);
    in[k] = values(n, 7 + k, 5.0f);
    grad[k] = values(n, 9 + k, 3.0f);
    out[k].assign(n, NAN);
  }
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(
        infiniopMemcpyHostToDevice(handle_, floats(device[k], 0), in[k].data(), bytes, streams[k]),
        INFINI_STATUS_SUCCESS);
    EXPECT_EQ(infiniopMemcpyHostToDevice(handle_, floats(device[k], n), grad[k].data(), bytes,
                                         streams[k]),
              INFINI_STATUS_SUCCESS);
    std::string error;
    EXPECT_EQ(geluBackward(handle_, n, floats(device[k], 2 * n), floats(device[k], 0),
                           floats(device[k], n), streams[k], &error),
              INFINI_STATUS_SUCCESS)
        << error;
  }
  for (int k : {1, 0}) {
    ASSERT_EQ(infiniopStreamSynchronize(handle_, streams[k]), INFINI_STATUS_SUCCESS);
    ASSERT_EQ(infiniopMemcpyDeviceToHost(handle_, out[k].data(), floats(device[k], 2 * n), bytes,
                                         nullptr),
              INFINI_STATUS_SUCCESS);
    SCOPED_TRACE("stream " + std::to_string(k));
    expectClose(out[k], reference(in[k], grad[k]), grad[k]);
  }
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(infiniopStreamDestroy(handle_, streams[k]), INFINI_STATUS_SUCCESS);
    EXPECT_EQ(infiniopFree(handle_, device[k]), INFINI_STATUS_SUCCESS);
  }
}

// A handle builds each program once: with $INFINIOP_OPENCL_CACHE_DIR set (docs/devices.md) every
// build from source also writes the binary there, so emptying the directory after the first
// call and finding it still empty after a second descriptor and call on the same handle shows
// the program was not built again. A dtype not used yet does write one (the observation works).
TEST_F(OpenclRuntime, ProgramsAreBuiltOncePerHandle) {
  namespace fs = std::filesystem;
  char pattern[] = "/tmp/infiniop-opencl-cache-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const fs::path dir = pattern;
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      unsetenv("INFINIOP_OPENCL_CACHE_DIR");
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  } cleanup{dir};
  setenv("INFINIOP_OPENCL_CACHE_DIR", dir.c_str(), 1);
  const auto files = [&] {
    return static_cast<size_t>(
        std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
  };
  constexpr size_t n = 256;
  void *device = malloc(3 * n * sizeof(float));
  ASSERT_NE(device, nullptr);
  const std::vector<float> zeros(3 * n, 0.0f);
  ASSERT_EQ(infiniopMemcpyHostToDevice(handle_, device, zeros.data(), zeros.size() * sizeof(float),
                                       nullptr),
            INFINI_STATUS_SUCCESS);
  const auto run = [&](infiniDtype_t dtype) {
    const size_t shape[] = {n};
    infiniopTensorDescriptor_t t = nullptr;
    EXPECT_EQ(infiniopCreateTensorDescriptor(&t, 1, shape, nullptr, dtype), INFINI_STATUS_SUCCESS);
    infiniopGeluBackwardDescriptor_t op = nullptr;
    EXPECT_EQ(infiniopCreateGeluBackwardDescriptor(handle_, &op, t, t, t), INFINI_STATUS_SUCCESS)
        << lastError();
    EXPECT_EQ(infiniopDestroyTensorDescriptor(t), INFINI_STATUS_SUCCESS);
    if (!op) return;
    EXPECT_EQ(infiniopGeluBackward(op, nullptr, 0, floats(device, 2 * n), floats(device, 0),
                                   floats(device, n), nullptr),
              INFINI_STATUS_SUCCESS)
        << lastError();
    EXPECT_EQ(infiniopStreamSynchronize(handle_, nullptr), INFINI_STATUS_SUCCESS);
    EXPECT_EQ(infiniopDestroyGeluBackwardDescriptor(op), INFINI_STATUS_SUCCESS);
  };
  run(INFINI_DTYPE_F32);
  ASSERT_GE(files(), 1u) << "the first build stored no binary in " << dir;
  for (const auto &entry : fs::directory_iterator(dir)) fs::remove(entry.path());
  run(INFINI_DTYPE_F32);
  EXPECT_EQ(files(), 0u) << "the same program was built again on the same handle";
  run(INFINI_DTYPE_F16);
  EXPECT_GE(files(), 1u) << "a new program stored no binary";
  EXPECT_EQ(infiniopFree(handle_, device), INFINI_STATUS_SUCCESS);
}

}  // namespace
