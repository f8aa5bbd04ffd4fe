// SPDX-License-Identifier: Apache-2.0
// SwiGlu and SwiGluBackward conformance: the worked example of swiglu_backward.md, and every
// device (cpu on every Highway target, opencl) against a long-double formula over dtypes, every
// split dim, layouts and sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "accuracy.h"
#include "core/dtype.h"
#include "device_memory.h"
#include "device_param.h"
#include "silu_truth.h"
#include "tensor_buffer.h"

namespace infiniop_test {
namespace {

// The message of the last failed create, and of the last failed create or calculate (destroying
// the descriptors afterwards succeeds, which clears infiniopGetLastError()).
std::string last_create_error, last_error;

infiniStatus_t runForward(infiniopHandle_t h, TensorBuffer &y, TensorBuffer &x, int dim) {
  auto yd = y.descriptor(), xd = x.descriptor();
  infiniopSwiGluDescriptor_t op = nullptr;
  infiniStatus_t s = infiniopCreateSwiGluDescriptor(h, &op, yd, xd, dim);
  last_create_error = last_error = infiniopGetLastError();
  infiniopDestroyTensorDescriptor(yd);
  infiniopDestroyTensorDescriptor(xd);
  if (s != INFINI_STATUS_SUCCESS) return s;
  DeviceMirror device(h);
  device.add(y);
  device.add(x);
  s = infiniopSwiGlu(op, nullptr, 0, device(y), device(x), nullptr);
  last_error = infiniopGetLastError();
  device.download();
  infiniopDestroySwiGluDescriptor(op);
  return s;
}

infiniStatus_t runBackward(infiniopHandle_t h, TensorBuffer &x_grad, void *x_grad_data,
                           TensorBuffer &y_grad, TensorBuffer &x, int dim) {
  auto gd = x_grad.descriptor(), yd = y_grad.descriptor(), xd = x.descriptor();
  infiniopSwiGluBackwardDescriptor_t op = nullptr;
  infiniStatus_t s = infiniopCreateSwiGluBackwardDescriptor(h, &op, gd, yd, xd, dim);
  last_create_error = last_error = infiniopGetLastError();
  infiniopDestroyTensorDescriptor(gd);
  infiniopDestroyTensorDescriptor(yd);
  infiniopDestroyTensorDescriptor(xd);
  if (s != INFINI_STATUS_SUCCESS) return s;
  DeviceMirror device(h);  // x_grad_data may lie in x (in place, or overlapping)
  device.add(x_grad);
  device.add(y_grad);
  device.add(x);
  s = infiniopSwiGluBackward(op, nullptr, 0, device(x_grad_data), device(y_grad), device(x),
                             nullptr);
  last_error = infiniopGetLastError();
  device.download();
  infiniopDestroySwiGluBackwardDescriptor(op);
  return s;
}

// ---------------------------------------------------------------- worked example
TEST_P(DeviceTest, SwiGluBackwardWorkedExample) {
  // swiglu_backward.md: its `x` is y_grad [2,2,4], its `y` is x [2,2,8], its `z` is x_grad.
  const float y_grad[] = {-0.35485336f, 1.0130054f,  -0.5638384f,  -0.37232915f,
                          -0.23552416f, 0.24328443f, -0.9097736f,  0.6532926f,
                          -0.15482557f, 1.8653425f,  -0.53066266f, -0.35669518f,
                          -1.2501936f,  -0.4813922f, -0.46782213f, -0.42938662f};
  const float x[] = {
      -1.3679188f,  -1.0441184f, -0.22074082f, 0.03593443f, 1.4115285f,  1.282259f,   0.84023f,
      1.771059f,    1.5002724f,  1.0429292f,   -1.9602783f, -1.8251027f, -1.8176465f, 0.10162846f,
      0.67142487f,  1.8118083f,  0.27373865f,  -0.8571074f, -1.0940319f, -1.4199644f, -1.031699f,
      -0.22957233f, 1.9406945f,  -0.85718286f, 1.2837671f,  -1.7143688f, 1.460285f,   -0.1948799f,
      -1.9476911f,  1.8731744f,  -1.798051f,   -1.9383575f};
  const float expected[] = {0.0092f,  0.0762f,  -0.1846f, -0.3418f, 0.0986f,  -0.2754f, 0.0552f,
                            -0.0068f, 0.4453f,  0.0232f,  0.0542f,  -0.0942f, -0.2891f, 0.1865f,
                            0.2197f,  -0.1650f, 0.1016f,  -0.0510f, -0.0466f, -0.0087f, -0.0242f,
                            -0.4766f, 0.1455f,  0.0986f,  2.4375f,  0.0620f,  0.8711f,  0.3359f,
                            -1.2500f, 0.1260f,  -0.5547f, 0.0378f};
  TensorBuffer dy({2, 2, 4}, INFINI_DTYPE_F32), xb({2, 2, 8}, INFINI_DTYPE_F32),
      dx({2, 2, 8}, INFINI_DTYPE_F32);
  dy.fill([&](size_t i) { return y_grad[i]; });
  xb.fill([&](size_t i) { return x[i]; });
  dx.poison();
  ASSERT_EQ(runBackward(handle(), dx, dx.data(), dy, xb, -1), INFINI_STATUS_SUCCESS);
  // The printed values carry bf16 intermediate rounding (SEMANTICS.md): 2e-2 relative, plus
  // half the printed resolution.
  for (size_t i = 0; i < 32; ++i)
    EXPECT_NEAR(dx.get(i), expected[i], 2e-2 * std::fabs(expected[i]) + 5e-4) << "element " << i;
}

// Exact where exact is representable, on every target (docs/accuracy.md): silu(x) = x wherever
// sigmoid(x) rounds to 1 (x > 17.33), so F32 gives x1 x2, and silu'(0) = 1/2. F16/BF16 are the
// exact value rounded once ("Correctly rounded 16-bit results"): silu(20) 10.875 is 217.5 less
// 4.5e-7, 217 in BF16, where rounding F32's 217.5 would tie to 218.
TEST_P(DeviceTest, SwiGluExactWhereRepresentable) {
  const float x1[] = {0, 17.5f, 20, 50, 88}, x2[] = {3, 3, 10.875f, -2, 1};
  const size_t n = sizeof(x1) / sizeof(x1[0]);
  for (infiniDtype_t dtype : kFloatDtypes) {
    SCOPED_TRACE(infiniop::dtypeName(dtype));
    TensorBuffer x({n, 2}, dtype), y({n, 1}, dtype), expected({n, 1}, dtype);
    x.fill([&](size_t i) { return i % 2 ? x2[i / 2] : x1[i / 2]; });
    expected.fill([&](size_t i) {  // x1 x2 in F32 (exact); F16/BF16 the exact value, rounded once
      if (dtype == INFINI_DTYPE_F32) return x1[i] * x2[i];
      const double x = x1[i];
      return infiniop::roundToOddFloat(x * x2[i] / (1.0 + std::exp(-x)));
    });
    y.poison();
    ASSERT_EQ(runForward(handle(), y, x, -1), INFINI_STATUS_SUCCESS) << last_error;
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(y.get(i), expected.get(i)) << "x1=" << x1[i];
    // Backward with y_grad = 1: x_grad1 = x2 silu'(x1) (x2 / 2 at 0, x2 beyond 40), x_grad2 =
    // silu(x1).
    TensorBuffer dy({n, 1}, dtype), dx({n, 2}, dtype);
    dy.fill([](size_t) { return 1.0f; });
    dx.poison();
    ASSERT_EQ(runBackward(handle(), dx, dx.data(), dy, x, -1), INFINI_STATUS_SUCCESS) << last_error;
    EXPECT_EQ(dx.get(0), 1.5f);
    EXPECT_EQ(dx.get(1), 0.0f);
    for (size_t i = 3; i < n; ++i) {
      EXPECT_EQ(dx.get(2 * i), x.get(2 * i + 1)) << "x1=" << x1[i];
      EXPECT_EQ(dx.get(2 * i + 1), x.get(2 * i)) << "x1=" << x1[i];
    }
  }
}

// ---------------------------------------------------------------- dims x layouts x sizes
enum class Layout { kContiguous, kColumnMajor, kPadded, kInPlace };
const char *layoutName(Layout l) {
  static const char *names[] = {"Contiguous", "ColumnMajor", "Padded", "InPlace"};
  return names[static_cast<int>(l)];
}

std::vector<ptrdiff_t> stridesFor(Layout layout, const std::vector<size_t> &shape) {
  switch (layout) {
    case Layout::kColumnMajor:
      return columnMajorStrides(shape);
    case Layout::kPadded:
      return paddedStrides(shape);
    default:
      return {};
  }
}

float specialOr(size_t i, float value) {
  static const float specials[] = {INFINITY, -INFINITY, NAN,     1e4f,   -1e4f, 1e-40f,
                                   -1e-40f,  0.0f,      -100.0f, -88.0f, 90.0f, -1.2785f};
  if (i % 19 != 18) return value;
  return specials[(i / 19) % (sizeof(specials) / sizeof(specials[0]))];
}

using Param = std::tuple<DeviceParam, infiniDtype_t, Layout>;

class SwiGluCases : public DeviceTestBase, public ::testing::WithParamInterface<Param> {
 protected:
  void SetUp() override { selectDevice(std::get<0>(GetParam())); }
  void TearDown() override { restoreTargets(); }
};

TEST_P(SwiGluCases, EveryDimMatchesFormula) {
  const infiniDtype_t dtype = std::get<1>(GetParam());
  const Layout layout = std::get<2>(GetParam());
  const size_t lengths[] = {1, 3, 8, 17, 33, 2200};  // the last: > 2^15 elements, all threads
  for (size_t n : lengths) {
    for (int dim : {0, 1, 2, -1, -2, -3}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " dim=" + std::to_string(dim));
      const size_t d = static_cast<size_t>(dim < 0 ? dim + 3 : dim);
      std::vector<size_t> half = {3, 5, n}, full = half;
      full[d] *= 2;
      TensorBuffer x(full, stridesFor(layout, full), dtype);
      TensorBuffer y(half, stridesFor(layout == Layout::kInPlace ? Layout::kPadded : layout, half),
                     dtype);
      TensorBuffer dy(half, dtype);
      TensorBuffer dx(full, stridesFor(layout, full), dtype);
      x.fill([&](size_t i) { return specialOr(i, signedValue(3, i, 10.0f)); });
      dy.fill([&](size_t i) { return i % 23 == 22 ? INFINITY : signedValue(4, i, 4.0f); });
      // Reference values by logical index: first and second half of x for each element of y.
      const size_t m = y.numel();
      std::vector<float> x1(m), x2(m), g(m);
      std::vector<size_t> first(m), second(m);
      for (size_t i = 0; i < m; ++i) {
        const size_t c[3] = {i / (5 * n), (i / n) % 5, i % n};
        size_t f = 0, s = 0;
        for (size_t k = 0; k < 3; ++k) {
          f = f * full[k] + c[k];
          s = s * full[k] + c[k] + (k == d ? half[d] : 0);
        }
        first[i] = f;
        second[i] = s;
        x1[i] = x.get(f);
        x2[i] = x.get(s);
        g[i] = dy.get(i);
      }
      int failures = 0;
      const auto check = [&](const char *what, size_t i, float got, long double truth, double tol) {
        const std::string problem = compareToTruth(dtype, got, truth, tol);
        if (!problem.empty() && failures++ < 5)
          ADD_FAILURE() << what << " element " << i << " x1=" << x1[i] << " x2=" << x2[i]
                        << " dy=" << g[i] << " got=" << got << ": " << problem;
      };
      if (layout != Layout::kInPlace) {
        y.poison();
        ASSERT_EQ(runForward(handle(), y, x, dim), INFINI_STATUS_SUCCESS) << last_error;
        for (size_t i = 0; i < m; i += checkStride(m)) {
          const long double silu = siluL(x1[i]);
          check(
              "y", i, y.get(i), timesTail(x2[i], silu, x1[i]),
              allowedError(f32_bound_u::swiglu, dtype, x2[i], std::fabs(static_cast<double>(silu)),
                           0, onePlusAbs(x1[i]), static_cast<double>(silu * x2[i])));
        }
      }
      TensorBuffer &out = layout == Layout::kInPlace ? x : dx;
      if (layout != Layout::kInPlace) dx.poison();
      ASSERT_EQ(runBackward(handle(), out, out.data(), dy, x, dim), INFINI_STATUS_SUCCESS)
          << last_error;
      for (size_t i = 0; i < m; i += checkStride(m)) {
        const long double silu = siluL(x1[i]);
        const long double derivative = siluDerivativeL(x1[i]);
        const double terms1 = siluDerivativeTerms(x1[i]);
        const long double scale1 = static_cast<long double>(g[i]) * x2[i];
        check("x_grad1", i, out.get(first[i]), timesTail(scale1, derivative, x1[i]),
              allowedError(f32_bound_u::swiglu_backward, dtype, static_cast<double>(scale1), terms1,
                           0, onePlusAbs(x1[i]), static_cast<double>(scale1 * derivative)));
        check("x_grad2", i, out.get(second[i]), timesTail(g[i], silu, x1[i]),
              allowedError(f32_bound_u::swiglu_backward, dtype, g[i],
                           std::fabs(static_cast<double>(silu)), 0, onePlusAbs(x1[i]),
                           static_cast<double>(g[i] * silu)));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, SwiGluCases,
                         ::testing::Combine(::testing::ValuesIn(allDeviceParams()),
                                            ::testing::ValuesIn(kFloatDtypes),
                                            ::testing::Values(Layout::kContiguous,
                                                              Layout::kColumnMajor, Layout::kPadded,
                                                              Layout::kInPlace)),
                         [](const ::testing::TestParamInfo<Param> &info) {
                           return deviceParamName(std::get<0>(info.param)) + "_" +
                                  infiniop::dtypeName(std::get<1>(info.param)) + "_" +
                                  layoutName(std::get<2>(info.param));
                         });

// ---------------------------------------------------------------- bad arguments
TEST_P(DeviceTest, SwiGluBadArguments) {
  TensorBuffer x({4, 6}, INFINI_DTYPE_F32), y({4, 3}, INFINI_DTYPE_F32),
      odd({4, 5}, INFINI_DTYPE_F32);
  TensorBuffer y16({4, 3}, INFINI_DTYPE_F16), wrong({2, 6}, INFINI_DTYPE_F32);
  y.fill([](size_t) { return 7.0f; });
  const std::vector<uint8_t> before = y.storage();
  const auto expect = [&](infiniStatus_t status, TensorBuffer &out, TensorBuffer &in, int dim) {
    EXPECT_EQ(runForward(handle(), out, in, dim), status) << "dim " << dim;
    EXPECT_NE(last_create_error, "");
    EXPECT_EQ(y.storage(), before);
  };
  expect(INFINI_STATUS_BAD_PARAM, y, x, 2);
  expect(INFINI_STATUS_BAD_PARAM, y, x, -3);
  expect(INFINI_STATUS_BAD_TENSOR_SHAPE, y, odd, 1);
  expect(INFINI_STATUS_BAD_TENSOR_SHAPE, wrong, x, 1);
  expect(INFINI_STATUS_BAD_TENSOR_SHAPE, y, x, 0);  // x split on dim 0 gives [2,6]
  expect(INFINI_STATUS_BAD_TENSOR_DTYPE, y16, x, 1);
  TensorBuffer dx({4, 6}, INFINI_DTYPE_F32), dy({4, 3}, INFINI_DTYPE_F32),
      dx_small({4, 3}, INFINI_DTYPE_F32);
  EXPECT_EQ(runBackward(handle(), dx, dx.data(), dy, x, 5), INFINI_STATUS_BAD_PARAM);
  EXPECT_EQ(runBackward(handle(), dx, dx.data(), dy, odd, -1), INFINI_STATUS_BAD_TENSOR_SHAPE);
  EXPECT_EQ(runBackward(handle(), dx_small, dx_small.data(), dy, x, -1),
            INFINI_STATUS_BAD_TENSOR_SHAPE);
  EXPECT_EQ(runBackward(handle(), dx, dx.data(), y16, x, -1), INFINI_STATUS_BAD_TENSOR_DTYPE);
  // x_grad overlapping x without being x itself.
  EXPECT_EQ(runBackward(handle(), dx, static_cast<float *>(x.data()) + 1, dy, x, -1),
            INFINI_STATUS_BAD_TENSOR_STRIDES);
  infiniopSwiGluDescriptor_t op = nullptr;
  auto xd = x.descriptor();
  EXPECT_EQ(infiniopCreateSwiGluDescriptor(handle(), &op, nullptr, xd, -1),
            INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopCreateSwiGluDescriptor(handle(), &op, xd, nullptr, -1),
            INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopCreateSwiGluDescriptor(handle(), nullptr, xd, xd, -1),
            INFINI_STATUS_NULL_POINTER);
  infiniopDestroyTensorDescriptor(xd);
  EXPECT_EQ(infiniopDestroySwiGluDescriptor(nullptr), INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopDestroySwiGluBackwardDescriptor(nullptr), INFINI_STATUS_NULL_POINTER);
}

}  // namespace
}  // namespace infiniop_test
