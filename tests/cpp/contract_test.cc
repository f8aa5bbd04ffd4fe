// SPDX-License-Identifier: Apache-2.0
// The call contract's edges, on every device: data pointers aligned to their element size
// (BAD_PARAM otherwise, nothing written), data checks that run whenever the data exists (even
// when the call has nothing to compute), and extents that cannot overflow (tensor descriptors
// leave a factor 2 of headroom; an empty tensor's strides are never used).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "device_memory.h"
#include "device_param.h"

namespace infiniop_test {
namespace {

struct Tensors {
  ~Tensors() {
    for (auto t : owned) infiniopDestroyTensorDescriptor(t);
  }
  infiniopTensorDescriptor_t operator()(std::vector<size_t> shape, infiniDtype_t dtype,
                                        std::vector<ptrdiff_t> strides = {}) {
    infiniopTensorDescriptor_t t = nullptr;
    EXPECT_EQ(infiniopCreateTensorDescriptor(&t, shape.size(), shape.data(),
                                             strides.empty() ? nullptr : strides.data(), dtype),
              INFINI_STATUS_SUCCESS)
        << infiniopGetLastError();
    owned.push_back(t);
    return t;
  }
  std::vector<infiniopTensorDescriptor_t> owned;
};

void expectFailure(infiniStatus_t status, infiniStatus_t expected, const char *words) {
  EXPECT_EQ(status, expected);
  const std::string message = infiniopGetLastError();
  EXPECT_NE(message.find(words), std::string::npos) << message;
}

TEST_P(DeviceTest, MisalignedDataPointersAreBadParamAndWriteNothing) {
  Tensors tensor;
  infiniopSwiGluDescriptor_t op = nullptr;
  ASSERT_EQ(infiniopCreateSwiGluDescriptor(handle(), &op, tensor({4}, INFINI_DTYPE_F32),
                                           tensor({8}, INFINI_DTYPE_F32), -1),
            INFINI_STATUS_SUCCESS);
  std::vector<uint8_t> memory(4 * 64, 0x7f);
  const std::vector<uint8_t> before = memory;
  DeviceMirror device(handle());
  device.add(memory.data(), memory.size());
  uint8_t *y = memory.data(), *x = memory.data() + 64;
  for (size_t shift : {1, 2, 3}) {
    expectFailure(infiniopSwiGlu(op, nullptr, 0, device(y), device(x + shift), nullptr),
                  INFINI_STATUS_BAD_PARAM, "x pointer");
    expectFailure(infiniopSwiGlu(op, nullptr, 0, device(y + shift), device(x), nullptr),
                  INFINI_STATUS_BAD_PARAM, "not aligned to its 4-byte elements");
  }
  device.download();
  EXPECT_EQ(memory, before) << "a misaligned call wrote";
  // A view one element in is aligned: fine.
  EXPECT_EQ(infiniopSwiGlu(op, nullptr, 0, device(y + 4), device(x + 4), nullptr),
            INFINI_STATUS_SUCCESS)
      << infiniopGetLastError();
  EXPECT_EQ(infiniopDestroySwiGluDescriptor(op), INFINI_STATUS_SUCCESS);

  // BF16 tensors need 2-byte alignment only.
  ASSERT_EQ(infiniopCreateSwiGluDescriptor(handle(), &op, tensor({4}, INFINI_DTYPE_BF16),
                                           tensor({8}, INFINI_DTYPE_BF16), -1),
            INFINI_STATUS_SUCCESS);
  expectFailure(infiniopSwiGlu(op, nullptr, 0, device(y), device(x + 1), nullptr),
                INFINI_STATUS_BAD_PARAM, "2-byte elements");
  EXPECT_EQ(infiniopSwiGlu(op, nullptr, 0, device(y + 2), device(x + 6), nullptr),
            INFINI_STATUS_SUCCESS)
      << infiniopGetLastError();
  EXPECT_EQ(infiniopDestroySwiGluDescriptor(op), INFINI_STATUS_SUCCESS);
}

TEST_P(DeviceTest, MisalignedIndexPointersAreBadParam) {
  Tensors tensor;
  // ClippedSwiglu's INT64 group_index.
  infiniopClippedSwigluDescriptor_t clipped = nullptr;
  ASSERT_EQ(
      infiniopCreateClippedSwigluDescriptor(
          handle(), &clipped, tensor({2, 2}, INFINI_DTYPE_F32), tensor({2, 4}, INFINI_DTYPE_F32),
          tensor({1}, INFINI_DTYPE_I64), -1, 1.0f, 7.0f, 0.0f, false),
      INFINI_STATUS_SUCCESS);
  std::vector<uint8_t> memory(256, 0);
  const int64_t count = 2;
  std::memcpy(memory.data() + 132, &count, sizeof count);  // 4-byte aligned, not 8
  DeviceMirror device(handle());
  device.add(memory.data(), memory.size());
  uint8_t *y = memory.data(), *x = memory.data() + 64;
  expectFailure(
      infiniopClippedSwiglu(clipped, nullptr, 0, device(y), device(x), device(y + 132), nullptr),
      INFINI_STATUS_BAD_PARAM, "group_index pointer");
  EXPECT_EQ(infiniopDestroyClippedSwigluDescriptor(clipped), INFINI_STATUS_SUCCESS);

  // MoeFinalizeRoutingV2's INT32 expanded_row_idx (R = 2, K = 1, H = 4).
  infiniopMoeFinalizeRoutingV2Descriptor_t moe = nullptr;
  const auto rows = tensor({2, 4}, INFINI_DTYPE_F32);
  ASSERT_EQ(infiniopCreateMoeFinalizeRoutingV2Descriptor(handle(), &moe, rows, rows,
                                                         tensor({2}, INFINI_DTYPE_I32), nullptr,
                                                         nullptr, nullptr, nullptr, nullptr, 0),
            INFINI_STATUS_SUCCESS);
  expectFailure(infiniopMoeFinalizeRoutingV2(moe, nullptr, 0, device(y), device(x), device(y + 130),
                                             nullptr, nullptr, nullptr, nullptr, nullptr, nullptr),
                INFINI_STATUS_BAD_PARAM, "expanded_row_idx pointer");
  expectFailure(
      infiniopMoeFinalizeRoutingV2(moe, nullptr, 0, device(y + 2), device(x), device(y + 128),
                                   nullptr, nullptr, nullptr, nullptr, nullptr, nullptr),
      INFINI_STATUS_BAD_PARAM, "out pointer");
  EXPECT_EQ(infiniopDestroyMoeFinalizeRoutingV2Descriptor(moe), INFINI_STATUS_SUCCESS);
}

TEST_P(DeviceTest, ZeroSizeCallsStillCheckTheDataThatExists) {
  Tensors tensor;
  // ClippedSwiglu on an empty x with four group counts, one negative.
  infiniopClippedSwigluDescriptor_t clipped = nullptr;
  ASSERT_EQ(
      infiniopCreateClippedSwigluDescriptor(
          handle(), &clipped, tensor({0, 4}, INFINI_DTYPE_F32), tensor({0, 8}, INFINI_DTYPE_F32),
          tensor({4}, INFINI_DTYPE_I64), -1, 1.0f, 7.0f, 0.0f, false),
      INFINI_STATUS_SUCCESS);
  std::vector<int64_t> counts = {INT64_MIN, 2, 1, 2};
  DeviceMirror device(handle());
  device.addInput(counts.data(), counts.size() * sizeof(int64_t));
  expectFailure(
      infiniopClippedSwiglu(clipped, nullptr, 0, nullptr, nullptr, device(counts.data()), nullptr),
      INFINI_STATUS_BAD_PARAM, "group_index[0]");
  counts[0] = 0;
  device.upload();
  EXPECT_EQ(
      infiniopClippedSwiglu(clipped, nullptr, 0, nullptr, nullptr, device(counts.data()), nullptr),
      INFINI_STATUS_SUCCESS)
      << infiniopGetLastError();
  EXPECT_EQ(infiniopDestroyClippedSwigluDescriptor(clipped), INFINI_STATUS_SUCCESS);

  // The MoE pair with H = 0: no element to compute, but expanded_row_idx has R K values.
  std::vector<int32_t> index = {0, 7};  // 7 is outside [0, 2)
  device.addInput(index.data(), index.size() * sizeof(int32_t));
  const auto rows = tensor({2, 0}, INFINI_DTYPE_F32);
  infiniopMoeFinalizeRoutingV2Descriptor_t forward = nullptr;
  ASSERT_EQ(infiniopCreateMoeFinalizeRoutingV2Descriptor(handle(), &forward, rows, rows,
                                                         tensor({2}, INFINI_DTYPE_I32), nullptr,
                                                         nullptr, nullptr, nullptr, nullptr, 0),
            INFINI_STATUS_SUCCESS);
  expectFailure(
      infiniopMoeFinalizeRoutingV2(forward, nullptr, 0, nullptr, nullptr, device(index.data()),
                                   nullptr, nullptr, nullptr, nullptr, nullptr, nullptr),
      INFINI_STATUS_BAD_PARAM, "expanded_row_idx value 7");
  EXPECT_EQ(infiniopDestroyMoeFinalizeRoutingV2Descriptor(forward), INFINI_STATUS_SUCCESS);
  infiniopMoeFinalizeRoutingV2GradDescriptor_t grad = nullptr;
  ASSERT_EQ(infiniopCreateMoeFinalizeRoutingV2GradDescriptor(handle(), &grad, rows, nullptr, rows,
                                                             tensor({2}, INFINI_DTYPE_I32), nullptr,
                                                             nullptr, nullptr, nullptr, 0, 0, 0, 0),
            INFINI_STATUS_SUCCESS)
      << infiniopGetLastError();
  size_t workspace_size = 0;
  ASSERT_EQ(infiniopGetMoeFinalizeRoutingV2GradWorkspaceSize(grad, &workspace_size),
            INFINI_STATUS_SUCCESS);
  void *workspace = device.scratch(workspace_size);
  expectFailure(infiniopMoeFinalizeRoutingV2Grad(grad, workspace, workspace_size, nullptr, nullptr,
                                                 nullptr, device(index.data()), nullptr, nullptr,
                                                 nullptr, nullptr, nullptr),
                INFINI_STATUS_BAD_PARAM, "expanded_row_idx value 7");
  index[1] = 1;
  device.upload();
  EXPECT_EQ(infiniopMoeFinalizeRoutingV2Grad(grad, workspace, workspace_size, nullptr, nullptr,
                                             nullptr, device(index.data()), nullptr, nullptr,
                                             nullptr, nullptr, nullptr),
            INFINI_STATUS_SUCCESS)
      << infiniopGetLastError();
  EXPECT_EQ(infiniopDestroyMoeFinalizeRoutingV2GradDescriptor(grad), INFINI_STATUS_SUCCESS);
}

TEST_P(DeviceTest, EmptyTensorsWithHugeStridesAreHarmless) {
  // An empty tensor's strides address nothing and are not checked; the operators (the
  // interleaved split doubles strides) must not compute with them (UBSan would see it).
  Tensors tensor;
  const auto x = tensor({0, 8}, INFINI_DTYPE_F16, {PTRDIFF_MAX, PTRDIFF_MAX / 2});
  const auto y = tensor({0, 4}, INFINI_DTYPE_F16, {PTRDIFF_MIN, PTRDIFF_MAX});
  for (bool interleaved : {false, true}) {
    infiniopClippedSwigluDescriptor_t op = nullptr;
    ASSERT_EQ(infiniopCreateClippedSwigluDescriptor(handle(), &op, y, x, nullptr, -1, 1.0f, 7.0f,
                                                    0.0f, interleaved),
              INFINI_STATUS_SUCCESS)
        << infiniopGetLastError();
    EXPECT_EQ(infiniopClippedSwiglu(op, nullptr, 0, nullptr, nullptr, nullptr, nullptr),
              INFINI_STATUS_SUCCESS)
        << infiniopGetLastError();
    EXPECT_EQ(infiniopDestroyClippedSwigluDescriptor(op), INFINI_STATUS_SUCCESS);
  }
}

TEST(TensorExtents, LeaveHeadroomForDoubledStridesAndEndOffsets) {
  const auto create = [](std::vector<size_t> shape, std::vector<ptrdiff_t> strides,
                         infiniDtype_t dtype) {
    infiniopTensorDescriptor_t t = nullptr;
    const infiniStatus_t status = infiniopCreateTensorDescriptor(
        &t, shape.size(), shape.data(), strides.empty() ? nullptr : strides.data(), dtype);
    if (t) infiniopDestroyTensorDescriptor(t);
    return status;
  };
  // The fuzzer's case: an F16 extent of exactly PTRDIFF_MAX bytes, whose end overflowed.
  EXPECT_EQ(create({2}, {PTRDIFF_MAX / 2}, INFINI_DTYPE_F16), INFINI_STATUS_BAD_TENSOR_STRIDES);
  EXPECT_NE(std::string(infiniopGetLastError()).find("overflow"), std::string::npos);
  // A size-1 dim's stride alone.
  EXPECT_EQ(create({1, 2}, {PTRDIFF_MAX, 1}, INFINI_DTYPE_F32), INFINI_STATUS_BAD_TENSOR_STRIDES);
  // An F32 row whose doubled stride (an interleaved split) would pass 2^63 bytes.
  EXPECT_EQ(create({2, 2}, {1, ptrdiff_t{1} << 60}, INFINI_DTYPE_F32),
            INFINI_STATUS_BAD_TENSOR_STRIDES);
  EXPECT_EQ(create({size_t{1} << 60}, {}, INFINI_DTYPE_F32), INFINI_STATUS_BAD_TENSOR_SHAPE);
  // The largest accepted: 1 + reach, times 2 x the element size, still fits.
  const ptrdiff_t limit = PTRDIFF_MAX / 4 / 2;
  EXPECT_EQ(create({2}, {limit - 1}, INFINI_DTYPE_F32), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(create({2}, {limit}, INFINI_DTYPE_F32), INFINI_STATUS_BAD_TENSOR_STRIDES);
}

}  // namespace
}  // namespace infiniop_test
