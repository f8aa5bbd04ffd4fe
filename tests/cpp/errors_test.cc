// SPDX-License-Identifier: Apache-2.0
// GeluBackward bad arguments: every status it can return, with a message, and the output
// buffer untouched afterwards (read back from device memory), on cpu, cpu_reference and opencl.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "device_memory.h"
#include "device_param.h"
#include "tensor_buffer.h"

namespace infiniop_test {
namespace {

class GeluBackwardErrors : public DeviceTestBase,
                           public ::testing::WithParamInterface<infiniDevice_t> {
 protected:
  void SetUp() override { selectDeviceType(GetParam()); }

  infiniopTensorDescriptor_t tensor(std::vector<size_t> shape,
                                    infiniDtype_t dtype = INFINI_DTYPE_F32,
                                    std::vector<ptrdiff_t> strides = {}) {
    infiniopTensorDescriptor_t desc = nullptr;
    EXPECT_EQ(infiniopCreateTensorDescriptor(&desc, shape.size(), shape.data(),
                                             strides.empty() ? nullptr : strides.data(), dtype),
              INFINI_STATUS_SUCCESS);
    owned_.push_back(desc);
    return desc;
  }
  ~GeluBackwardErrors() override {
    for (auto d : owned_) infiniopDestroyTensorDescriptor(d);
  }

  void expectCreateFails(infiniStatus_t expected, infiniopTensorDescriptor_t out,
                         infiniopTensorDescriptor_t in, infiniopTensorDescriptor_t grad) {
    infiniopGeluBackwardDescriptor_t op =
        reinterpret_cast<infiniopGeluBackwardDescriptor_t>(&owned_);
    const auto before = op;
    EXPECT_EQ(infiniopCreateGeluBackwardDescriptor(handle(), &op, out, in, grad), expected);
    EXPECT_NE(std::string(infiniopGetLastError()), "");
    EXPECT_EQ(op, before) << "descriptor pointer written on failure";
  }

  std::vector<infiniopTensorDescriptor_t> owned_;
};

TEST_P(GeluBackwardErrors, CreateValidatesEverything) {
  auto t = tensor({4, 6});
  expectCreateFails(INFINI_STATUS_BAD_TENSOR_SHAPE, t, tensor({4, 5}), t);
  EXPECT_NE(std::string(infiniopGetLastError()).find("[4,5]"), std::string::npos)
      << infiniopGetLastError();
  expectCreateFails(INFINI_STATUS_BAD_TENSOR_SHAPE, t, t, tensor({6, 4}));
  expectCreateFails(INFINI_STATUS_BAD_TENSOR_SHAPE, t, t, tensor({4, 6, 1}));
  expectCreateFails(INFINI_STATUS_BAD_TENSOR_DTYPE, t, tensor({4, 6}, INFINI_DTYPE_F16), t);
  expectCreateFails(INFINI_STATUS_BAD_TENSOR_DTYPE, tensor({4, 6}, INFINI_DTYPE_I32),
                    tensor({4, 6}, INFINI_DTYPE_I32), tensor({4, 6}, INFINI_DTYPE_I32));
  expectCreateFails(INFINI_STATUS_BAD_TENSOR_DTYPE, tensor({4, 6}, INFINI_DTYPE_F64),
                    tensor({4, 6}, INFINI_DTYPE_F64), tensor({4, 6}, INFINI_DTYPE_F64));
  // Outputs may not broadcast or otherwise overlap themselves.
  expectCreateFails(INFINI_STATUS_BAD_TENSOR_STRIDES, tensor({4, 6}, INFINI_DTYPE_F32, {0, 1}), t,
                    t);
  expectCreateFails(INFINI_STATUS_BAD_TENSOR_STRIDES, tensor({4, 6}, INFINI_DTYPE_F32, {3, 1}), t,
                    t);
  expectCreateFails(INFINI_STATUS_NULL_POINTER, nullptr, t, t);
  expectCreateFails(INFINI_STATUS_NULL_POINTER, t, nullptr, t);
  expectCreateFails(INFINI_STATUS_NULL_POINTER, t, t, nullptr);
  EXPECT_EQ(infiniopCreateGeluBackwardDescriptor(handle(), nullptr, t, t, t),
            INFINI_STATUS_NULL_POINTER);
  infiniopGeluBackwardDescriptor_t op = nullptr;
  EXPECT_EQ(infiniopCreateGeluBackwardDescriptor(nullptr, &op, t, t, t),
            INFINI_STATUS_NULL_POINTER);
  EXPECT_NE(std::string(infiniopGetLastError()), "");
}

TEST_P(GeluBackwardErrors, CalculateLeavesOutputUntouchedOnError) {
  const size_t n = 64;
  auto desc = tensor({n});
  infiniopGeluBackwardDescriptor_t op = nullptr;
  ASSERT_EQ(infiniopCreateGeluBackwardDescriptor(handle(), &op, desc, desc, desc),
            INFINI_STATUS_SUCCESS);
  // One allocation holds all three, so shifted pointers overlap the neighbouring tensor.
  std::vector<float> memory(3 * n, 0.25f);
  float *out = memory.data(), *in = memory.data() + n, *grad = memory.data() + 2 * n;
  const std::vector<float> before = memory;
  DeviceMirror device(handle());
  device.add(memory.data(), memory.size() * sizeof(float));
  const auto expectFails = [&](infiniStatus_t expected, void *o, const void *i, const void *g) {
    EXPECT_EQ(infiniopGeluBackward(op, nullptr, 0, device(o), device(i), device(g), nullptr),
              expected);
    EXPECT_NE(std::string(infiniopGetLastError()), "");
    device.download();
    EXPECT_EQ(0, std::memcmp(memory.data(), before.data(), memory.size() * sizeof(float)));
  };
  expectFails(INFINI_STATUS_NULL_POINTER, nullptr, in, grad);
  expectFails(INFINI_STATUS_NULL_POINTER, out, nullptr, grad);
  expectFails(INFINI_STATUS_NULL_POINTER, out, in, nullptr);
  // Partial overlap of the output with an input (shifted by one element) is refused ...
  expectFails(INFINI_STATUS_BAD_TENSOR_STRIDES, in + 1, in, grad);
  expectFails(INFINI_STATUS_BAD_TENSOR_STRIDES, grad - 1, in, grad);
  // ... but exact aliasing (in-place) is fine.
  EXPECT_EQ(infiniopGeluBackward(op, nullptr, 0, device(in), device(in), device(grad), nullptr),
            INFINI_STATUS_SUCCESS);
  EXPECT_STREQ(infiniopGetLastError(), "");
  device.download();
  for (size_t i = 0; i < n; ++i) EXPECT_NE(in[i], 0.25f) << "in-place result missing at " << i;
  EXPECT_EQ(
      infiniopGeluBackward(nullptr, nullptr, 0, device(out), device(in), device(grad), nullptr),
      INFINI_STATUS_NULL_POINTER);
  size_t size = 0;
  EXPECT_EQ(infiniopGetGeluBackwardWorkspaceSize(nullptr, &size), INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopGetGeluBackwardWorkspaceSize(op, nullptr), INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopDestroyGeluBackwardDescriptor(op), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopDestroyGeluBackwardDescriptor(nullptr), INFINI_STATUS_NULL_POINTER);
  EXPECT_NE(std::string(infiniopGetLastError()), "");
}

TEST_P(GeluBackwardErrors, DifferentLayoutAtTheSameAddressIsNotInPlace) {
  auto contiguous = tensor({4, 4});
  auto transposed = tensor({4, 4}, INFINI_DTYPE_F32, {1, 4});
  infiniopGeluBackwardDescriptor_t op = nullptr;
  ASSERT_EQ(infiniopCreateGeluBackwardDescriptor(handle(), &op, contiguous, transposed, contiguous),
            INFINI_STATUS_SUCCESS);
  std::vector<float> a(16, 1.0f), g(16, 1.0f);
  const std::vector<float> before = a;
  DeviceMirror device(handle());
  device.add(a.data(), a.size() * sizeof(float));
  device.add(g.data(), g.size() * sizeof(float));
  EXPECT_EQ(infiniopGeluBackward(op, nullptr, 0, device(a.data()), device(a.data()),
                                 device(g.data()), nullptr),
            INFINI_STATUS_BAD_TENSOR_STRIDES);
  device.download();
  EXPECT_EQ(a, before);
  infiniopDestroyGeluBackwardDescriptor(op);
}

TEST_P(GeluBackwardErrors, ZeroSizeAcceptsNullPointers) {
  auto empty = tensor({0, 7});
  infiniopGeluBackwardDescriptor_t op = nullptr;
  ASSERT_EQ(infiniopCreateGeluBackwardDescriptor(handle(), &op, empty, empty, empty),
            INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopGeluBackward(op, nullptr, 0, nullptr, nullptr, nullptr, nullptr),
            INFINI_STATUS_SUCCESS);
  infiniopDestroyGeluBackwardDescriptor(op);
}

TEST_P(GeluBackwardErrors, DescriptorOutlivesTensorDescriptors) {
  infiniopTensorDescriptor_t t = nullptr;
  const size_t shape[] = {5};
  ASSERT_EQ(infiniopCreateTensorDescriptor(&t, 1, shape, nullptr, INFINI_DTYPE_F32),
            INFINI_STATUS_SUCCESS);
  infiniopGeluBackwardDescriptor_t op = nullptr;
  ASSERT_EQ(infiniopCreateGeluBackwardDescriptor(handle(), &op, t, t, t), INFINI_STATUS_SUCCESS);
  infiniopDestroyTensorDescriptor(t);
  float x[5] = {-2, -1, 0, 1, 2}, g[5] = {1, 1, 1, 1, 1}, out[5] = {NAN, NAN, NAN, NAN, NAN};
  DeviceMirror device(handle());
  device.add(out, sizeof out);
  device.add(x, sizeof x);
  device.add(g, sizeof g);
  EXPECT_EQ(infiniopGeluBackward(op, nullptr, 0, device(out), device(x), device(g), nullptr),
            INFINI_STATUS_SUCCESS);
  device.download();
  EXPECT_FLOAT_EQ(out[2], 0.5f);
  infiniopDestroyGeluBackwardDescriptor(op);
}

INSTANTIATE_TEST_SUITE_P(Devices, GeluBackwardErrors, ::testing::ValuesIn(builtDeviceTypes()),
                         [](const ::testing::TestParamInfo<infiniDevice_t> &info) {
                           return std::string(deviceInfo(info.param).name);
                         });

}  // namespace
}  // namespace infiniop_test
