// SPDX-License-Identifier: Apache-2.0
// Gelu and GeluBackwardV2 conformance, erf and tanh: cpu_reference against PyTorch's values, every
// device (cpu on every Highway target, opencl) against long-double formulas over dtypes, sizes and
// layouts with the accuracy contract of docs/gelu.md and docs/gelu_backward_v2.md; GeluBackwardV2
// tanh bit for bit GeluBackward; bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "accuracy.h"
#include "device_memory.h"
#include "device_param.h"
#include "elementwise_layouts.h"
#include "gelu_truth.h"
#include "tensor_buffer.h"

namespace infiniop_test {
namespace {

constexpr infiniopGeluApproximate_t kApproximations[] = {INFINIOP_GELU_APPROXIMATE_NONE,
                                                         INFINIOP_GELU_APPROXIMATE_TANH};

const char *approximationName(int approximate) {
  return approximate == INFINIOP_GELU_APPROXIMATE_TANH ? "Tanh" : "Erf";
}

// "" when `got` is gelu(x) within the bound of docs/gelu.md; else why not.
std::string checkGelu(infiniDtype_t dtype, infiniopGeluApproximate_t approximate, float x,
                      float got) {
  const GeluTruth t = geluTruth(approximate, x);
  const double value = static_cast<double>(t.value);
  return compareToTruth(dtype, got, t.value,
                        allowedError(f32_bound_u::gelu, dtype, 1.0, std::fabs(value), t.condition,
                                     onePlusAbs(x), value));
}

// "" when `got` is g gelu'(x) within the bound of docs/gelu_backward_v2.md; else why not.
std::string checkGrad(infiniDtype_t dtype, infiniopGeluApproximate_t approximate, float x, float g,
                      float got) {
  const GeluTruth t = geluTruth(approximate, x);
  const long double truth = timesTail(g, t.derivative, x);
  return compareToTruth(dtype, got, truth,
                        allowedError(f32_bound_u::gelu_backward_v2, dtype, g, t.derivative_terms,
                                     t.condition, t.derivative_floor, static_cast<double>(truth)));
}

// The message of the last failed create or calculate (destroying the descriptors afterwards
// succeeds, which clears infiniopGetLastError()).
std::string last_create_error, last_error;

// `approximate` travels as an int and is cast only in the call (see gelu_mul_test.cc).
infiniStatus_t runGelu(infiniopHandle_t h, TensorBuffer &out, void *out_data, TensorBuffer &in,
                       int approximate) {
  auto od = out.descriptor(), id = in.descriptor();
  infiniopGeluDescriptor_t op = nullptr;
  infiniStatus_t s = infiniopCreateGeluDescriptor(
      h, &op, od, id, static_cast<infiniopGeluApproximate_t>(approximate));
  last_create_error = last_error = infiniopGetLastError();
  infiniopDestroyTensorDescriptor(od);
  infiniopDestroyTensorDescriptor(id);
  if (s != INFINI_STATUS_SUCCESS) return s;
  size_t workspace = 1;
  EXPECT_EQ(infiniopGetGeluWorkspaceSize(op, &workspace), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(workspace, 0u);
  DeviceMirror device(h);  // out_data may lie in `in` (in place)
  device.add(out);
  device.add(in);
  s = infiniopGelu(op, nullptr, 0, device(out_data), device(in), nullptr);
  last_error = infiniopGetLastError();
  device.download();
  EXPECT_EQ(infiniopDestroyGeluDescriptor(op), INFINI_STATUS_SUCCESS);
  return s;
}

// GeluBackwardV2, or with `v1` GeluBackward itself (for the bit-identity check).
infiniStatus_t runGrad(infiniopHandle_t h, TensorBuffer &out, void *out_data, TensorBuffer &in,
                       void *in_data, TensorBuffer &grad, void *grad_data, int approximate,
                       bool v1 = false) {
  auto od = out.descriptor(), id = in.descriptor(), gd = grad.descriptor();
  infiniopGeluBackwardV2Descriptor_t op = nullptr;
  infiniopGeluBackwardDescriptor_t v1_op = nullptr;
  infiniStatus_t s =
      v1 ? infiniopCreateGeluBackwardDescriptor(h, &v1_op, od, id, gd)
         : infiniopCreateGeluBackwardV2Descriptor(
               h, &op, od, id, gd, static_cast<infiniopGeluApproximate_t>(approximate));
  last_create_error = last_error = infiniopGetLastError();
  infiniopDestroyTensorDescriptor(od);
  infiniopDestroyTensorDescriptor(id);
  infiniopDestroyTensorDescriptor(gd);
  if (s != INFINI_STATUS_SUCCESS) return s;
  if (op) {
    size_t workspace = 1;
    EXPECT_EQ(infiniopGetGeluBackwardV2WorkspaceSize(op, &workspace), INFINI_STATUS_SUCCESS);
    EXPECT_EQ(workspace, 0u);
  }
  DeviceMirror device(h);  // out_data may lie in `in` or `grad` (in place)
  device.add(out);
  device.add(in);
  device.add(grad);
  s = op ? infiniopGeluBackwardV2(op, nullptr, 0, device(out_data), device(in_data),
                                  device(grad_data), nullptr)
         : infiniopGeluBackward(v1_op, nullptr, 0, device(out_data), device(in_data),
                                device(grad_data), nullptr);
  last_error = infiniopGetLastError();
  device.download();
  EXPECT_EQ(op ? infiniopDestroyGeluBackwardV2Descriptor(op)
               : infiniopDestroyGeluBackwardDescriptor(v1_op),
            INFINI_STATUS_SUCCESS);
  return s;
}

infiniStatus_t runGrad(infiniopHandle_t h, TensorBuffer &out, TensorBuffer &in, TensorBuffer &grad,
                       int approximate, bool v1 = false) {
  return runGrad(h, out, out.data(), in, in.data(), grad, grad.data(), approximate, v1);
}

// ---------------------------------------------------------------- PyTorch's values
TEST(GeluReference, MatchesTorch) {
  // F.gelu(x, approximate) and aten.gelu_backward(ones, x, approximate) in float64.
  const float x[] = {0, 1, -1, 2, -0.5f, -3, 5};
  const double gelu[2][7] = {{0.0, 0.841344746068543, -0.15865525393145702, 1.9544997361036416,
                              -0.15426876936299344, -0.00404969409489031, 4.999998566742141},
                             {0.0, 0.8411919906082768, -0.15880800939172324, 1.954597694087775,
                              -0.15428599017485606, -0.0036373920817729943, 4.999999770820381}};
  const double grad[2][7] = {{0.5, 1.0833154705876864, -0.08331547058768635, 1.085231801078197,
                              0.13250487534383712, -0.01194564720418392, 1.000007146946002},
                             {0.5, 1.0829640838457826, -0.08296408384578252, 1.0860992566236183,
                              0.13263009646535764, -0.011584166630969648, 1.000001546361988}};
  Handle handle(INFINI_DEVICE_CPU_REFERENCE);
  const size_t n = sizeof(x) / sizeof(x[0]);
  for (int a = 0; a < 2; ++a) {
    TensorBuffer in({n}, INFINI_DTYPE_F32), g({n}, INFINI_DTYPE_F32), y({n}, INFINI_DTYPE_F32),
        dx({n}, INFINI_DTYPE_F32);
    in.fill([&](size_t i) { return x[i]; });
    g.fill([](size_t) { return 1.0f; });
    y.poison();
    dx.poison();
    ASSERT_EQ(runGelu(handle.get(), y, y.data(), in, a), INFINI_STATUS_SUCCESS) << last_error;
    ASSERT_EQ(runGrad(handle.get(), dx, in, g, a), INFINI_STATUS_SUCCESS) << last_error;
    for (size_t i = 0; i < n; ++i) {
      SCOPED_TRACE(std::string(approximationName(a)) + " x=" + std::to_string(x[i]));
      EXPECT_NEAR(y.get(i), gelu[a][i], ulpOf(INFINI_DTYPE_F32, gelu[a][i]));
      EXPECT_NEAR(dx.get(i), grad[a][i], ulpOf(INFINI_DTYPE_F32, grad[a][i]));
    }
  }
}

// ---------------------------------------------------------------- special values
TEST_P(DeviceTest, GeluSpecialValues) {
  const float inf = INFINITY, nan = NAN;
  const float xs[] = {inf,    -inf,  nan,    1e4f,  -1e4f,  1e-40f, -1e-40f, 0.0f,
                      -0.0f,  20.0f, -20.0f, 1e30f, -1e30f, 3e38f,  -3e38f,  -13.0f,
                      -14.0f, -9.0f, -0.75f, 1e-6f, -1e-6f, 13.19f, -87.5f,  88.0f};
  const size_t n = sizeof(xs) / sizeof(xs[0]);
  for (infiniopGeluApproximate_t approximate : kApproximations) {
    for (infiniDtype_t dtype : kFloatDtypes) {
      SCOPED_TRACE(std::string(infiniop::dtypeName(dtype)) + " " + approximationName(approximate));
      TensorBuffer in({n}, dtype), out({n}, dtype);
      in.fill([&](size_t i) { return xs[i]; });
      out.poison();
      ASSERT_EQ(runGelu(handle(), out, out.data(), in, approximate), INFINI_STATUS_SUCCESS);
      for (size_t i = 0; i < n; ++i)
        EXPECT_EQ(checkGelu(dtype, approximate, in.get(i), out.get(i)), "")
            << "x=" << in.get(i) << " got " << out.get(i);
      // SEMANTICS.md's limits, spelled out.
      EXPECT_EQ(out.get(0), inf);
      EXPECT_EQ(out.get(1), 0.0f);
      EXPECT_TRUE(std::isnan(out.get(2)));
      EXPECT_EQ(out.get(7), 0.0f);
      EXPECT_EQ(out.get(8), 0.0f);
    }
  }
}

TEST_P(DeviceTest, GeluBackwardV2SpecialValues) {
  const float inf = INFINITY, nan = NAN;
  const struct {
    float x, g, expected;  // expected NaN means "NaN"; otherwise checked against the bound too
  } cases[] = {{inf, 1, 1},        {-inf, 1, 0},     {nan, 1, nan},     {1e4f, 1, 1},
               {-1e4f, 1, 0},      {1e-40f, 2, 1},   {-1e-40f, 2, 1},   {0, -3, -1.5f},
               {1, inf, inf},      {-1, inf, -inf},  {inf, -inf, -inf}, {-inf, inf, nan},
               {1e30f, 1, 1},      {-1e30f, 1, 0},   {0, nan, nan},     {-20, 1, 0},
               {-1e4f, inf, -inf}, {-14, -inf, inf}, {inf, 0, 0},       {-0.0f, 2, 1},
               {3e38f, 5, 5}};
  const size_t n = sizeof(cases) / sizeof(cases[0]);
  for (infiniopGeluApproximate_t approximate : kApproximations) {
    for (infiniDtype_t dtype : kFloatDtypes) {
      TensorBuffer in({n}, dtype), grad({n}, dtype), out({n}, dtype);
      in.fill([&](size_t i) { return cases[i].x; });
      grad.fill([&](size_t i) { return cases[i].g; });
      out.poison();
      ASSERT_EQ(runGrad(handle(), out, in, grad, approximate), INFINI_STATUS_SUCCESS);
      for (size_t i = 0; i < n; ++i) {
        const float got = out.get(i), expected = cases[i].expected;
        SCOPED_TRACE(std::string(infiniop::dtypeName(dtype)) + " " +
                     approximationName(approximate) + " x=" + std::to_string(cases[i].x) +
                     " g=" + std::to_string(cases[i].g));
        if (std::isnan(expected)) {
          EXPECT_TRUE(std::isnan(got)) << got;
        } else {
          EXPECT_EQ(checkGrad(dtype, approximate, in.get(i), grad.get(i), got), "") << got;
          if (std::isinf(expected)) EXPECT_EQ(got, expected);
        }
      }
    }
  }
}

// Exact where exact is representable, on every target (docs/accuracy.md): gelu(x) = x and
// gelu'(x) = 1 wherever Phi(x) or sigmoid(v) rounds to 1; gelu(0) = 0 and gelu'(0) = 1/2.
TEST_P(DeviceTest, GeluExactWhereRepresentable) {
  const float x[] = {0, 9, 20, 1e4f, 6.5f, 0};
  const float g[] = {1, 7, -10.875f, 0.5f, 1, -3};
  const size_t n = sizeof(x) / sizeof(x[0]);
  for (infiniopGeluApproximate_t approximate : kApproximations) {
    for (infiniDtype_t dtype : kFloatDtypes) {
      SCOPED_TRACE(std::string(infiniop::dtypeName(dtype)) + " " + approximationName(approximate));
      TensorBuffer in({n}, dtype), grad({n}, dtype), y({n}, dtype), dx({n}, dtype),
          expected_y({n}, dtype), expected_dx({n}, dtype);
      in.fill([&](size_t i) { return x[i]; });
      grad.fill([&](size_t i) { return g[i]; });
      expected_y.fill([&](size_t i) { return x[i]; });  // rounded once, as the output must be
      expected_dx.fill([&](size_t i) { return x[i] == 0 ? g[i] / 2 : g[i]; });
      y.poison();
      dx.poison();
      ASSERT_EQ(runGelu(handle(), y, y.data(), in, approximate), INFINI_STATUS_SUCCESS);
      ASSERT_EQ(runGrad(handle(), dx, in, grad, approximate), INFINI_STATUS_SUCCESS);
      for (size_t i = 0; i < n; ++i) {
        EXPECT_EQ(y.get(i), expected_y.get(i)) << "x=" << x[i];
        EXPECT_EQ(dx.get(i), expected_dx.get(i)) << "x=" << x[i] << " g=" << g[i];
      }
    }
  }
}

// TANH is GeluBackward's own kernel: the same bits, specials included, on every dtype.
TEST_P(DeviceTest, GeluBackwardV2TanhIsGeluBackward) {
  const size_t n = 4099;
  for (infiniDtype_t dtype : kFloatDtypes) {
    TensorBuffer in({n}, dtype), grad({n}, dtype), v1({n}, dtype), v2({n}, dtype);
    in.fill([](size_t i) { return specialOr(i, signedValue(11, i, 12.0f), 13); });
    grad.fill([](size_t i) { return specialOr(i, signedValue(12, i, 4.0f), 31); });
    v1.poison();
    v2.poison();
    ASSERT_EQ(runGrad(handle(), v1, in, grad, INFINIOP_GELU_APPROXIMATE_TANH, true),
              INFINI_STATUS_SUCCESS)
        << last_error;
    ASSERT_EQ(runGrad(handle(), v2, in, grad, INFINIOP_GELU_APPROXIMATE_TANH),
              INFINI_STATUS_SUCCESS)
        << last_error;
    EXPECT_EQ(v1.storage(), v2.storage()) << infiniop::dtypeName(dtype);
  }
}

// ---------------------------------------------------------------- layouts x sizes
using Param = std::tuple<DeviceParam, infiniDtype_t, Layout, infiniopGeluApproximate_t>;

class GeluLayouts : public DeviceTestBase, public ::testing::WithParamInterface<Param> {
 protected:
  void SetUp() override { selectDevice(std::get<0>(GetParam())); }
  void TearDown() override { restoreTargets(); }
};

TEST_P(GeluLayouts, MatchesFormulaForEverySize) {
  const infiniDtype_t dtype = std::get<1>(GetParam());
  const Layout layout = std::get<2>(GetParam());
  const infiniopGeluApproximate_t approximate = std::get<3>(GetParam());
  // Row lengths around every vector width (4, 8, 16 F32 lanes), zero, and one large enough for
  // all threads (3 rows of it exceed the parallel threshold).
  const size_t sizes[] = {0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 257, 1000, 40000};
  for (size_t n : sizes) {
    if (layout == Layout::kRank8 && n > 1000) continue;
    SCOPED_TRACE("row length " + std::to_string(n));
    const size_t numel = makeViews(layout, n, dtype).out->numel();
    std::vector<float> x(numel), g(numel);
    int failures = 0;
    const auto check = [&](const char *what, size_t i, float got, const std::string &problem) {
      if (!problem.empty() && failures++ < 5)
        ADD_FAILURE() << what << " element " << i << " x=" << x[i] << " g=" << g[i]
                      << " got=" << got << ": " << problem;
    };
    // Each operator on fresh views: in place, the first one's output would be the second's input.
    for (const bool forward : {true, false}) {
      Views v = makeViews(layout, n, dtype);
      v.in->fill([&](size_t i) { return specialOr(i, signedValue(21, i, 14.0f), 23); });
      v.grad->fill([&](size_t i) {
        const float value = signedValue(22, i, 4.0f);
        return i % 29 == 28 ? value * 1e-6f : specialOr(i, value, 97);  // F16 subnormals too
      });
      for (size_t i = 0; i < numel; ++i) {  // read back: broadcast and rounding make them differ
        x[i] = v.in->get(i);
        g[i] = v.grad->get(i);
      }
      // Gelu has no grad_output: its in-place layout is kInPlaceInput only.
      if (forward && v.out_view == v.grad.get()) continue;
      if (v.out_view == v.out.get()) v.out->poison();
      const std::vector<uint8_t> guard_before = v.out_view->storage();
      if (forward) {
        ASSERT_EQ(runGelu(handle(), *v.out_view, v.out_view->data(), *v.in, approximate),
                  INFINI_STATUS_SUCCESS)
            << last_error;
        for (size_t i = 0; i < numel; i += checkStride(numel))
          check("gelu", i, v.out_view->get(i),
                checkGelu(dtype, approximate, x[i], v.out_view->get(i)));
      } else {
        ASSERT_EQ(runGrad(handle(), *v.out_view, v.out_view->data(), *v.in, v.in->data(), *v.grad,
                          v.grad->data(), approximate),
                  INFINI_STATUS_SUCCESS)
            << last_error;
        for (size_t i = 0; i < numel; i += checkStride(numel))
          check("grad", i, v.out_view->get(i),
                checkGrad(dtype, approximate, x[i], g[i], v.out_view->get(i)));
      }
      // The guard elements around the view are untouched.
      const auto &after = v.out_view->storage();
      const size_t es = v.out_view->elementSize();
      EXPECT_TRUE(std::equal(after.begin(), after.begin() + es, guard_before.begin()));
      EXPECT_TRUE(std::equal(after.end() - es, after.end(), guard_before.end() - es));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, GeluLayouts,
    ::testing::Combine(::testing::ValuesIn(allDeviceParams()), ::testing::ValuesIn(kFloatDtypes),
                       ::testing::Values(Layout::kContiguous, Layout::kStrided, Layout::kTransposed,
                                         Layout::kMixed, Layout::kBroadcast, Layout::kReversed,
                                         Layout::kInPlaceInput, Layout::kInPlaceGrad,
                                         Layout::kRank8),
                       ::testing::ValuesIn(kApproximations)),
    [](const ::testing::TestParamInfo<Param> &info) {
      return deviceParamName(std::get<0>(info.param)) + "_" +
             infiniop::dtypeName(std::get<1>(info.param)) + "_" +
             layoutName(std::get<2>(info.param)) + "_" + approximationName(std::get<3>(info.param));
    });

// ---------------------------------------------------------------- errors
TEST_P(DeviceTest, GeluBadArguments) {
  TensorBuffer in({4, 6}, INFINI_DTYPE_F32), out({4, 6}, INFINI_DTYPE_F32);
  TensorBuffer wrong({4, 5}, INFINI_DTYPE_F32), out16({4, 6}, INFINI_DTYPE_BF16);
  TensorBuffer broadcast({4, 6}, {0, 1}, INFINI_DTYPE_F32);
  const auto reset = [&] { out.fill([](size_t i) { return 3.0f + static_cast<float>(i); }); };
  reset();
  const std::vector<uint8_t> before = out.storage();
  const auto expect = [&](infiniStatus_t status, infiniStatus_t got, const char *word) {
    EXPECT_EQ(got, status);
    EXPECT_NE(last_error.find(word), std::string::npos) << last_error;
    EXPECT_EQ(out.storage(), before);
    reset();
  };
  for (int approximate : {2, -1, 100}) {
    SCOPED_TRACE("approximate " + std::to_string(approximate));
    expect(INFINI_STATUS_BAD_PARAM, runGelu(handle(), out, out.data(), in, approximate),
           "approximate");
    EXPECT_NE(last_create_error.find("Gelu:"), std::string::npos) << last_create_error;
    expect(INFINI_STATUS_BAD_PARAM, runGrad(handle(), out, in, in, approximate), "approximate");
    EXPECT_NE(last_create_error.find("GeluBackwardV2:"), std::string::npos) << last_create_error;
  }
  expect(INFINI_STATUS_BAD_TENSOR_SHAPE, runGelu(handle(), out, out.data(), wrong, 0), "shape");
  expect(INFINI_STATUS_BAD_TENSOR_SHAPE, runGrad(handle(), out, in, wrong, 1), "shape");
  expect(INFINI_STATUS_BAD_TENSOR_SHAPE, runGrad(handle(), out, wrong, in, 0), "shape");
  EXPECT_EQ(runGelu(handle(), out16, out16.data(), in, 1), INFINI_STATUS_BAD_TENSOR_DTYPE);
  EXPECT_EQ(runGrad(handle(), out, out16, in, 0), INFINI_STATUS_BAD_TENSOR_DTYPE);
  EXPECT_EQ(runGelu(handle(), broadcast, broadcast.data(), in, 0),
            INFINI_STATUS_BAD_TENSOR_STRIDES);
  EXPECT_EQ(runGrad(handle(), broadcast, in, in, 1), INFINI_STATUS_BAD_TENSOR_STRIDES);
  // An output overlapping its input without being it: shifted by one element.
  TensorBuffer storage({25}, INFINI_DTYPE_F32), view({24}, INFINI_DTYPE_F32);
  storage.fill([](size_t i) { return static_cast<float>(i); });
  const std::vector<uint8_t> storage_before = storage.storage();
  const auto shifted = [&](int k) { return static_cast<char *>(storage.data()) + 4 * k; };
  DeviceMirror device(handle());
  device.add(storage);
  auto vd = view.descriptor();
  infiniopGeluDescriptor_t op = nullptr;
  ASSERT_EQ(infiniopCreateGeluDescriptor(handle(), &op, vd, vd, INFINIOP_GELU_APPROXIMATE_NONE),
            INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopGelu(op, nullptr, 0, device(shifted(1)), device(shifted(0)), nullptr),
            INFINI_STATUS_BAD_TENSOR_STRIDES);
  EXPECT_NE(std::string(infiniopGetLastError()), "");
  EXPECT_EQ(infiniopGelu(op, nullptr, 0, nullptr, device(shifted(0)), nullptr),
            INFINI_STATUS_NULL_POINTER);
  infiniopGeluBackwardV2Descriptor_t grad_op = nullptr;
  ASSERT_EQ(infiniopCreateGeluBackwardV2Descriptor(handle(), &grad_op, vd, vd, vd,
                                                   INFINIOP_GELU_APPROXIMATE_NONE),
            INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopGeluBackwardV2(grad_op, nullptr, 0, device(shifted(0)), device(shifted(0)),
                                   device(shifted(1)), nullptr),
            INFINI_STATUS_BAD_TENSOR_STRIDES);
  device.download();
  EXPECT_EQ(storage.storage(), storage_before);
  EXPECT_EQ(infiniopDestroyGeluDescriptor(op), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopDestroyGeluBackwardV2Descriptor(grad_op), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopCreateGeluDescriptor(handle(), nullptr, vd, vd, INFINIOP_GELU_APPROXIMATE_NONE),
            INFINI_STATUS_NULL_POINTER);
  infiniopDestroyTensorDescriptor(vd);
  EXPECT_EQ(infiniopDestroyGeluDescriptor(nullptr), INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopDestroyGeluBackwardV2Descriptor(nullptr), INFINI_STATUS_NULL_POINTER);
}

}  // namespace
}  // namespace infiniop_test
