// SPDX-License-Identifier: Apache-2.0
// GeluMul and GeluMulBackward conformance, erf and tanh: every device (cpu on every Highway
// target, opencl) against long-double formulas over dtypes, ranks, layouts and sizes; bad
// arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "accuracy.h"
#include "device_memory.h"
#include "device_param.h"
#include "gelu_truth.h"
#include "tensor_buffer.h"

namespace infiniop_test {
namespace {

// The message of the last failed create or calculate (destroying the descriptors afterwards
// succeeds, which clears infiniopGetLastError()).
std::string last_create_error, last_error;

// `approximate` travels as an int and is cast only in the call: an out-of-range value stored
// in an enum-typed variable would be undefined behaviour here before the library sees it.
infiniStatus_t runForward(infiniopHandle_t h, TensorBuffer &out, TensorBuffer &input,
                          int approximate) {
  auto od = out.descriptor(), id = input.descriptor();
  infiniopGeluMulDescriptor_t op = nullptr;
  infiniStatus_t s = infiniopCreateGeluMulDescriptor(
      h, &op, od, id, static_cast<infiniopGeluApproximate_t>(approximate));
  last_create_error = last_error = infiniopGetLastError();
  infiniopDestroyTensorDescriptor(od);
  infiniopDestroyTensorDescriptor(id);
  if (s != INFINI_STATUS_SUCCESS) return s;
  DeviceMirror device(h);
  device.add(out);
  device.add(input);
  s = infiniopGeluMul(op, nullptr, 0, device(out), device(input), nullptr);
  last_error = infiniopGetLastError();
  device.download();
  infiniopDestroyGeluMulDescriptor(op);
  return s;
}

infiniStatus_t runBackward(infiniopHandle_t h, TensorBuffer &input_grad, TensorBuffer &out_grad,
                           TensorBuffer &input, int approximate) {
  auto gd = input_grad.descriptor(), od = out_grad.descriptor(), id = input.descriptor();
  infiniopGeluMulBackwardDescriptor_t op = nullptr;
  infiniStatus_t s = infiniopCreateGeluMulBackwardDescriptor(
      h, &op, gd, od, id, static_cast<infiniopGeluApproximate_t>(approximate));
  last_create_error = last_error = infiniopGetLastError();
  infiniopDestroyTensorDescriptor(gd);
  infiniopDestroyTensorDescriptor(od);
  infiniopDestroyTensorDescriptor(id);
  if (s != INFINI_STATUS_SUCCESS) return s;
  DeviceMirror device(h);  // input_grad may be input (in place)
  device.add(input_grad);
  device.add(out_grad);
  device.add(input);
  s = infiniopGeluMulBackward(op, nullptr, 0, device(input_grad), device(out_grad), device(input),
                              nullptr);
  last_error = infiniopGetLastError();
  device.download();
  infiniopDestroyGeluMulBackwardDescriptor(op);
  return s;
}

enum class Layout { kContiguous, kColumnMajor, kPadded, kInPlace };
const char *layoutName(Layout l) {
  static const char *names[] = {"Contiguous", "ColumnMajor", "Padded", "InPlace"};
  return names[static_cast<int>(l)];
}
std::vector<ptrdiff_t> stridesFor(Layout layout, const std::vector<size_t> &shape) {
  if (layout == Layout::kColumnMajor) return columnMajorStrides(shape);
  if (layout == Layout::kPadded) return paddedStrides(shape);
  return {};
}

float specialOr(size_t i, float value) {
  static const float specials[] = {INFINITY, -INFINITY, NAN,    1e4f,   -1e4f, 1e-40f,
                                   -1e-40f,  0.0f,      -25.0f, -14.0f, 21.0f, -0.7518f};
  if (i % 17 != 16) return value;
  return specials[(i / 17) % (sizeof(specials) / sizeof(specials[0]))];
}

using Param = std::tuple<DeviceParam, infiniDtype_t, Layout, infiniopGeluApproximate_t>;

class GeluMulCases : public DeviceTestBase, public ::testing::WithParamInterface<Param> {
 protected:
  void SetUp() override { selectDevice(std::get<0>(GetParam())); }
  void TearDown() override { restoreTargets(); }
};

TEST_P(GeluMulCases, MatchesFormula) {
  const infiniDtype_t dtype = std::get<1>(GetParam());
  const Layout layout = std::get<2>(GetParam());
  const infiniopGeluApproximate_t approximate = std::get<3>(GetParam());
  const std::vector<std::vector<size_t>> halves = {
      {1}, {17}, {3, 8}, {3, 33}, {2, 1, 3, 5}, {2, 3, 4, 65}, {12, 2900}};  // last: all threads
  for (const auto &half : halves) {
    std::vector<size_t> full = half;
    full.back() *= 2;
    const size_t n = half.back();
    SCOPED_TRACE("half shape rank " + std::to_string(half.size()) + " last " + std::to_string(n));
    TensorBuffer input(full, stridesFor(layout, full), dtype);
    TensorBuffer out(half, stridesFor(layout == Layout::kInPlace ? Layout::kPadded : layout, half),
                     dtype);
    TensorBuffer out_grad(half, dtype);
    TensorBuffer grad(full, stridesFor(layout, full), dtype);
    input.fill([&](size_t i) { return specialOr(i, signedValue(5, i, 10.0f)); });
    out_grad.fill([&](size_t i) { return i % 29 == 28 ? -INFINITY : signedValue(6, i, 4.0f); });
    const size_t m = out.numel();
    std::vector<float> x1(m), x2(m), dy(m);
    for (size_t i = 0; i < m; ++i) {
      const size_t row = i / n, col = i % n;
      x1[i] = input.get(row * 2 * n + col);
      x2[i] = input.get(row * 2 * n + n + col);
      dy[i] = out_grad.get(i);
    }
    int failures = 0;
    const auto check = [&](const char *what, size_t i, float got, long double truth, double tol) {
      const std::string problem = compareToTruth(dtype, got, truth, tol);
      if (!problem.empty() && failures++ < 5)
        ADD_FAILURE() << what << " element " << i << " x1=" << x1[i] << " x2=" << x2[i]
                      << " dy=" << dy[i] << " got=" << got << ": " << problem;
    };
    if (layout != Layout::kInPlace) {
      out.poison();
      ASSERT_EQ(runForward(handle(), out, input, approximate), INFINI_STATUS_SUCCESS) << last_error;
      for (size_t i = 0; i < m; i += checkStride(m)) {
        const GeluTruth t = geluTruth(approximate, x1[i]);
        check("out", i, out.get(i), timesTail(x2[i], t.value, x1[i]),
              allowedError(f32_bound_u::gelu_mul, dtype, x2[i],
                           std::fabs(static_cast<double>(t.value)), t.condition, onePlusAbs(x1[i]),
                           static_cast<double>(t.value * x2[i])));
      }
    }
    TensorBuffer &target = layout == Layout::kInPlace ? input : grad;
    if (layout != Layout::kInPlace) grad.poison();
    ASSERT_EQ(runBackward(handle(), target, out_grad, input, approximate), INFINI_STATUS_SUCCESS)
        << last_error;
    for (size_t i = 0; i < m; i += checkStride(m)) {
      const GeluTruth t = geluTruth(approximate, x1[i]);
      const size_t row = i / n, col = i % n;
      const long double scale1 = static_cast<long double>(dy[i]) * x2[i];
      check("grad1", i, target.get(row * 2 * n + col), timesTail(scale1, t.derivative, x1[i]),
            allowedError(f32_bound_u::gelu_mul_backward, dtype, static_cast<double>(scale1),
                         t.derivative_terms, t.condition, t.derivative_floor,
                         static_cast<double>(scale1 * t.derivative)));
      check("grad2", i, target.get(row * 2 * n + n + col), timesTail(dy[i], t.value, x1[i]),
            allowedError(f32_bound_u::gelu_mul_backward, dtype, dy[i],
                         std::fabs(static_cast<double>(t.value)), t.condition, onePlusAbs(x1[i]),
                         static_cast<double>(dy[i] * t.value)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, GeluMulCases,
    ::testing::Combine(::testing::ValuesIn(allDeviceParams()), ::testing::ValuesIn(kFloatDtypes),
                       ::testing::Values(Layout::kContiguous, Layout::kColumnMajor, Layout::kPadded,
                                         Layout::kInPlace),
                       ::testing::Values(INFINIOP_GELU_APPROXIMATE_NONE,
                                         INFINIOP_GELU_APPROXIMATE_TANH)),
    [](const ::testing::TestParamInfo<Param> &info) {
      return deviceParamName(std::get<0>(info.param)) + "_" +
             infiniop::dtypeName(std::get<1>(info.param)) + "_" +
             layoutName(std::get<2>(info.param)) +
             (std::get<3>(info.param) == INFINIOP_GELU_APPROXIMATE_TANH ? "_Tanh" : "_Erf");
    });

// Exact where exact is representable, on every target (docs/accuracy.md): gelu(x) = x wherever
// Phi(x) or sigmoid(v) rounds to 1, so gelu_tanh(20) * 10.875 = 217.5 is 218 in BF16 (the AVX2 and
// SSE4 kernels' 0.99999994 gave 217); gelu'(0) = 1/2 for the tanh form.
TEST_P(DeviceTest, GeluMulExactWhereRepresentable) {
  const float x1[] = {20, 20, 9, 1e4f}, x2[] = {10.875f, -3, 0.5f, 2};
  const size_t n = sizeof(x1) / sizeof(x1[0]);
  for (int approximate : {INFINIOP_GELU_APPROXIMATE_NONE, INFINIOP_GELU_APPROXIMATE_TANH}) {
    for (infiniDtype_t dtype : kFloatDtypes) {
      SCOPED_TRACE(std::string(infiniop::dtypeName(dtype)) + " approximate " +
                   std::to_string(approximate));
      TensorBuffer x({n, 2}, dtype), y({n, 1}, dtype), expected({n, 1}, dtype);
      x.fill([&](size_t i) { return i % 2 ? x2[i / 2] : x1[i / 2]; });
      expected.fill([&](size_t i) { return x1[i] * x2[i]; });  // exact in F32, rounded once
      y.poison();
      ASSERT_EQ(runForward(handle(), y, x, approximate), INFINI_STATUS_SUCCESS);
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(y.get(i), expected.get(i)) << "x1=" << x1[i];
    }
  }
  TensorBuffer x({1, 2}, INFINI_DTYPE_F32), dy({1, 1}, INFINI_DTYPE_F32),
      dx({1, 2}, INFINI_DTYPE_F32);
  x.fill([](size_t i) { return i ? 3.0f : 0.0f; });
  dy.fill([](size_t) { return 1.0f; });
  dx.poison();
  ASSERT_EQ(runBackward(handle(), dx, dy, x, INFINIOP_GELU_APPROXIMATE_TANH),
            INFINI_STATUS_SUCCESS);
  EXPECT_EQ(dx.get(0), 1.5f);  // x2 gelu'(0) = 3 / 2
  EXPECT_EQ(dx.get(1), 0.0f);
}

TEST_P(DeviceTest, GeluMulBadArguments) {
  TensorBuffer input({4, 6}, INFINI_DTYPE_F32), out({4, 3}, INFINI_DTYPE_F32);
  TensorBuffer odd({4, 5}, INFINI_DTYPE_F32), wrong({4, 6}, INFINI_DTYPE_F32);
  TensorBuffer out16({4, 3}, INFINI_DTYPE_BF16), scalar(std::vector<size_t>{}, INFINI_DTYPE_F32);
  out.fill([](size_t) { return 3.0f; });
  const std::vector<uint8_t> before = out.storage();
  const auto expect = [&](infiniStatus_t status, TensorBuffer &o, TensorBuffer &in,
                          int approximate) {
    EXPECT_EQ(runForward(handle(), o, in, approximate), status);
    EXPECT_NE(last_create_error, "");
    EXPECT_EQ(out.storage(), before);
  };
  expect(INFINI_STATUS_BAD_PARAM, out, input, 2);
  expect(INFINI_STATUS_BAD_PARAM, out, input, -1);
  expect(INFINI_STATUS_BAD_TENSOR_SHAPE, out, odd, 0);
  expect(INFINI_STATUS_BAD_TENSOR_SHAPE, wrong, input, 0);
  expect(INFINI_STATUS_BAD_TENSOR_SHAPE, out, scalar, 0);
  expect(INFINI_STATUS_BAD_TENSOR_DTYPE, out16, input, 1);
  TensorBuffer grad({4, 6}, INFINI_DTYPE_F32), out_grad({4, 3}, INFINI_DTYPE_F32);
  EXPECT_EQ(runBackward(handle(), grad, out_grad, input, 5), INFINI_STATUS_BAD_PARAM);
  EXPECT_EQ(runBackward(handle(), out, out_grad, input, INFINIOP_GELU_APPROXIMATE_NONE),
            INFINI_STATUS_BAD_TENSOR_SHAPE);
  EXPECT_EQ(runBackward(handle(), grad, out16, input, INFINIOP_GELU_APPROXIMATE_NONE),
            INFINI_STATUS_BAD_TENSOR_DTYPE);
  EXPECT_EQ(infiniopDestroyGeluMulDescriptor(nullptr), INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopDestroyGeluMulBackwardDescriptor(nullptr), INFINI_STATUS_NULL_POINTER);
}

}  // namespace
}  // namespace infiniop_test
