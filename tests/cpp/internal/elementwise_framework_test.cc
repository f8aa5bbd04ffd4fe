// SPDX-License-Identifier: Apache-2.0
// The elementwise framework below the C API: plan folding, and operands that are the two halves
// of one tensor along a dim (what SwiGLU-style operators need), run through the reference loop
// on a test device (core/device.h) whose kernel table holds this file's functors.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "core/handle.h"
#include "cpu_reference/elementwise.h"
#include "elementwise/descriptor.h"
#include "host/host_device.h"
#include "host/kernel_table.h"
#include "infiniop.h"

namespace {

namespace ew = infiniop::elementwise;

// out = first - 2 * second (one input tensor split in halves).
struct HalvesDifference {
  static constexpr int kOutputs = 1, kInputs = 2;
  void operator()(double &out, float first, float second) const { out = first - 2.0f * second; }
};
// first, second = in, -in (one output tensor split in halves).
struct SplitOutput {
  static constexpr int kOutputs = 2, kInputs = 1;
  void operator()(double &first, double &second, float in) const {
    first = in;
    second = -in;
  }
};
INFINIOP_REFERENCE_KERNEL(differenceKernel, HalvesDifference)
INFINIOP_REFERENCE_KERNEL(splitOutputKernel, SplitOutput)

// The test device runs the two functors under two ids and has no other kernel.
constexpr infiniop::KernelId kDifference = infiniop::KernelId::swiglu;
constexpr infiniop::KernelId kSplitOutput = infiniop::KernelId::swiglu_backward;
template <infiniop::family::Elementwise::HostKernel *kernel>
constexpr infiniop::RunnerFactory kEntry =
    &infiniop::host::runnerOf<infiniop::family::Elementwise, kernel>;
const infiniop::RunnerFactory *testKernels() {
  static const auto table = [] {
    std::array<infiniop::RunnerFactory, infiniop::kKernelCount> t{};
    t[static_cast<int>(kDifference)] = kEntry<differenceKernel>;
    t[static_cast<int>(kSplitOutput)] = kEntry<splitOutputKernel>;
    return t;
  }();
  return table.data();
}
const infiniop::Device &testDevice() {
  static const infiniop::host::HostDevice device(INFINI_DEVICE_CPU_REFERENCE, "test",
                                                 testKernels());
  return device;
}

class Framework : public ::testing::Test {
 protected:
  void SetUp() override {
    std::unique_ptr<infiniop::DeviceState> state;
    ASSERT_EQ(testDevice().open("test", 0, &state), INFINI_STATUS_SUCCESS);
    handle_ = new InfiniopHandle(&testDevice(), 0, std::move(state));
  }
  void TearDown() override {
    for (auto t : tensors_) infiniopDestroyTensorDescriptor(t);
    infiniopDestroyHandle(handle_);
  }
  infiniopTensorDescriptor_t tensor(std::vector<size_t> shape,
                                    std::vector<ptrdiff_t> strides = {}) {
    infiniopTensorDescriptor_t t = nullptr;
    EXPECT_EQ(infiniopCreateTensorDescriptor(&t, shape.size(), shape.data(),
                                             strides.empty() ? nullptr : strides.data(),
                                             INFINI_DTYPE_F32),
              INFINI_STATUS_SUCCESS);
    tensors_.push_back(t);
    return t;
  }
  infiniopHandle_t handle_ = nullptr;
  std::vector<infiniopTensorDescriptor_t> tensors_;
};

size_t flatIndex(const std::vector<size_t> &shape, const std::vector<size_t> &coord) {
  size_t i = 0;
  for (size_t d = 0; d < shape.size(); ++d) i = i * shape[d] + coord[d];
  return i;
}

TEST_F(Framework, InputHalvesAlongEveryDim) {
  const std::vector<size_t> full = {4, 6, 8};
  std::vector<float> x(4 * 6 * 8);
  std::iota(x.begin(), x.end(), 0.0f);
  for (int dim = 0; dim < 3; ++dim) {
    std::vector<size_t> half = full;
    half[dim] /= 2;
    ew::Descriptor *desc = nullptr;
    ASSERT_EQ(ew::Descriptor::create(handle_, "Test", kDifference, {{"y", tensor(half)}},
                                     {{"x", tensor(full), dim}}, &desc),
              INFINI_STATUS_SUCCESS);
    EXPECT_EQ(desc->plan().numel, x.size() / 2);
    std::vector<float> y(x.size() / 2, NAN);
    ASSERT_EQ(desc->calculate(nullptr, 0, {y.data()}, {x.data()}, nullptr), INFINI_STATUS_SUCCESS);
    for (size_t a = 0; a < half[0]; ++a)
      for (size_t b = 0; b < half[1]; ++b)
        for (size_t c = 0; c < half[2]; ++c) {
          std::vector<size_t> first = {a, b, c}, second = first;
          second[dim] += half[dim];
          const float expected = x[flatIndex(full, first)] - 2.0f * x[flatIndex(full, second)];
          ASSERT_EQ(y[flatIndex(half, {a, b, c})], expected) << "dim " << dim;
        }
    infiniop::destroyDescriptor("Test", desc);
  }
}

TEST_F(Framework, OutputHalvesOfATransposedTensor) {
  // Output [6, 4] stored column-major, split along dim 0: halves [3, 4] at offsets 0 and 3.
  ew::Descriptor *desc = nullptr;
  ASSERT_EQ(
      ew::Descriptor::create(handle_, "Test", kSplitOutput, {{"y", tensor({6, 4}, {1, 6}), 0}},
                             {{"x", tensor({3, 4})}}, &desc),
      INFINI_STATUS_SUCCESS);
  std::vector<float> x(12), y(24, NAN);
  std::iota(x.begin(), x.end(), 1.0f);
  ASSERT_EQ(desc->calculate(nullptr, 0, {y.data()}, {x.data()}, nullptr), INFINI_STATUS_SUCCESS);
  for (size_t r = 0; r < 3; ++r)
    for (size_t c = 0; c < 4; ++c) {
      EXPECT_EQ(y[r + 6 * c], x[r * 4 + c]);
      EXPECT_EQ(y[r + 3 + 6 * c], -x[r * 4 + c]);
    }
  infiniop::destroyDescriptor("Test", desc);
}

TEST_F(Framework, OddSplitAndMismatchedHalfShapeAreShapeErrors) {
  ew::Descriptor *desc = nullptr;
  EXPECT_EQ(ew::Descriptor::create(handle_, "Test", kDifference, {{"y", tensor({4, 3})}},
                                   {{"x", tensor({4, 7}), 1}}, &desc),
            INFINI_STATUS_BAD_TENSOR_SHAPE);
  EXPECT_NE(std::string(infiniopGetLastError()).find("even"), std::string::npos);
  EXPECT_EQ(ew::Descriptor::create(handle_, "Test", kDifference, {{"y", tensor({4, 4})}},
                                   {{"x", tensor({4, 6}), 1}}, &desc),
            INFINI_STATUS_BAD_TENSOR_SHAPE);
  EXPECT_EQ(desc, nullptr);
}

TEST_F(Framework, PlanFoldsDims) {
  ew::Descriptor *desc = nullptr;
  // Contiguous rank 4 folds to one row.
  auto t = tensor({2, 3, 4, 5});
  ASSERT_EQ(
      ew::Descriptor::create(handle_, "Test", kDifference, {{"y", t}}, {{"a", t}, {"b", t}}, &desc),
      INFINI_STATUS_SUCCESS);
  EXPECT_EQ(desc->plan().ndim, 1);
  EXPECT_TRUE(desc->plan().inner_contiguous);
  infiniop::destroyDescriptor("Test", desc);
  // All operands transposed the same way: still one contiguous row.
  auto tt = tensor({5, 4}, {1, 5});
  ASSERT_EQ(ew::Descriptor::create(handle_, "Test", kDifference, {{"y", tt}},
                                   {{"a", tt}, {"b", tt}}, &desc),
            INFINI_STATUS_SUCCESS);
  EXPECT_EQ(desc->plan().ndim, 1);
  EXPECT_EQ(desc->plan().shape[0], 20u);
  infiniop::destroyDescriptor("Test", desc);
  // Split along the last dim: rows of half length, contiguous inside.
  ASSERT_EQ(ew::Descriptor::create(handle_, "Test", kDifference, {{"y", tensor({3, 4})}},
                                   {{"x", tensor({3, 8}), 1}}, &desc),
            INFINI_STATUS_SUCCESS);
  EXPECT_EQ(desc->plan().ndim, 2);
  EXPECT_EQ(desc->plan().rowLength(), 4u);
  EXPECT_TRUE(desc->plan().inner_contiguous);
  EXPECT_EQ(desc->plan().offset[2], 4);  // second half starts 4 elements in
  infiniop::destroyDescriptor("Test", desc);
  // A broadcast input keeps its dim separate.
  ASSERT_EQ(ew::Descriptor::create(handle_, "Test", kDifference, {{"y", tensor({3, 4})}},
                                   {{"a", tensor({3, 4}, {0, 1})}, {"b", tensor({3, 4})}}, &desc),
            INFINI_STATUS_SUCCESS);
  EXPECT_EQ(desc->plan().ndim, 2);
  infiniop::destroyDescriptor("Test", desc);
}

}  // namespace
