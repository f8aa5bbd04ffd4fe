// SPDX-License-Identifier: Apache-2.0
// GeluBackward conformance: cpu_reference against hand-worked values, and every device (cpu on
// every Highway target this machine runs, opencl) against a long-double formula over dtypes, sizes
// and layouts, with the accuracy contract of docs/gelu_backward.md.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "accuracy_bounds.h"
#include "device_memory.h"
#include "device_param.h"
#include "elementwise_layouts.h"
#include "tensor_buffer.h"

namespace infiniop_test {
namespace {

constexpr long double kA = 0.797884560802865355879892119868763737L;  // sqrt(2/pi)
constexpr long double kB = 0.044715L;

// d/dx gelu_tanh(x), written so that nothing cancels for negative x: 0.5(1 + tanh u) is
// sigmoid(2u) and 0.5(1 - tanh^2 u) is 2 sigmoid(2u) sigmoid(-2u).
long double derivative(long double x) {
  if (std::isnan(x)) return x;
  x = std::fmax(-40.0L, std::fmin(40.0L, x));  // exactly 0 / 1 beyond, even in long double
  const long double u = kA * (x + kB * x * x * x);
  const long double plus = 1.0L / (1.0L + std::exp(-2.0L * u));
  const long double minus = 1.0L / (1.0L + std::exp(2.0L * u));
  return plus + x * 2.0L * plus * minus * kA * (1.0L + 3.0L * kB * x * x);
}

// The accuracy contract. F32: the kernel's error is that of summing its two terms (4 ulp of
// their magnitudes), times (1 + |v|) because v = 2u is rounded to F32 before exp amplifies it,
// plus an absolute 2^-125 (1 + |x (1-s) v'|) where sigmoid(v) leaves the normal F32 range
// (x < -10, |gelu'| < 3e-36: the cpu kernel clamps exp there), plus a subnormal quantum for the
// final product. F16/BF16 add one rounding.
double allowedError(infiniDtype_t dtype, double x, double g, double truth) {
  const double xc = std::fmax(-40.0, std::fmin(40.0, x));
  const double v = 2.0 * static_cast<double>(kA) * (xc + 0.044715 * xc * xc * xc);
  const double dv = 2.0 * static_cast<double>(kA) * (1.0 + 3.0 * 0.044715 * xc * xc);
  const double s = 1.0 / (1.0 + std::exp(-v)), one_minus_s = 1.0 / (1.0 + std::exp(v));
  const double tail = std::fabs(xc * one_minus_s * dv);
  const double terms = s + s * tail;
  double f32 = std::fabs(g) * (f32_bound_u::gelu_backward * 0x1p-24 * terms * (1.0 + std::fabs(v)) +
                               0x1p-125 * (1.0 + tail));
  f32 += 0x1p-149;  // the final product may round into F32 subnormals
  if (dtype != INFINI_DTYPE_F32) f32 += ulpOf(dtype, std::fabs(truth));
  return f32;
}

// Checks one element; returns an explanation on failure.
std::string checkElement(infiniDtype_t dtype, float x, float g, float got) {
  const long double truth = static_cast<long double>(g) * derivative(x);
  const double t = static_cast<double>(truth);
  if (std::isnan(t)) return std::isnan(got) ? "" : "expected NaN";
  if (std::isinf(t)) return got == static_cast<float>(t) ? "" : "expected infinity";
  if (std::isnan(got) || std::isinf(got)) return "got non-finite";
  const double error = std::fabs(static_cast<double>(got) - t);
  const double allowed = allowedError(dtype, x, g, t);
  if (error <= allowed) return "";
  return "error " + std::to_string(error / ulpOf(dtype, std::fabs(t))) + " ulp > allowed " +
         std::to_string(allowed / ulpOf(dtype, std::fabs(t))) + " ulp, truth " + std::to_string(t);
}

// The message of the last failed create or calculate (destroying the descriptors afterwards
// succeeds, which clears infiniopGetLastError()).
std::string last_error;

infiniStatus_t runGeluBackward(infiniopHandle_t handle, TensorBuffer &out, void *out_data,
                               TensorBuffer &in, void *in_data, TensorBuffer &grad,
                               void *grad_data) {
  infiniopTensorDescriptor_t out_desc = out.descriptor(), in_desc = in.descriptor(),
                             grad_desc = grad.descriptor();
  infiniopGeluBackwardDescriptor_t op = nullptr;
  infiniStatus_t status =
      infiniopCreateGeluBackwardDescriptor(handle, &op, out_desc, in_desc, grad_desc);
  last_error = infiniopGetLastError();
  infiniopDestroyTensorDescriptor(out_desc);
  infiniopDestroyTensorDescriptor(in_desc);
  infiniopDestroyTensorDescriptor(grad_desc);
  if (status != INFINI_STATUS_SUCCESS) return status;
  size_t workspace = 1;
  EXPECT_EQ(infiniopGetGeluBackwardWorkspaceSize(op, &workspace), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(workspace, 0u);
  DeviceMirror device(handle);  // the pointers may alias: out_data may lie in `in` or `grad`
  device.add(out);
  device.add(in);
  device.add(grad);
  status = infiniopGeluBackward(op, nullptr, 0, device(out_data), device(in_data),
                                device(grad_data), nullptr);
  last_error = infiniopGetLastError();
  device.download();
  EXPECT_EQ(infiniopDestroyGeluBackwardDescriptor(op), INFINI_STATUS_SUCCESS);
  return status;
}

// ---------------------------------------------------------------- hand-worked values
TEST(GeluBackwardReference, HandWorkedValues) {
  // torch.ops.aten.gelu_backward(ones, x, approximate='tanh') in float64.
  const struct {
    float x;
    double expected;
  } cases[] = {{0.0f, 0.5},
               {1.0f, 1.0829640838457826},
               {-1.0f, -0.082964083845782521},
               {2.0f, 1.0860992566236183},
               {-0.5f, 0.13263009646535764},
               {-3.0f, -0.011584166630969648},
               {5.0f, 1.000001546361988}};
  Handle handle(INFINI_DEVICE_CPU_REFERENCE);
  for (const auto &c : cases) {
    TensorBuffer in({1}, INFINI_DTYPE_F32), grad({1}, INFINI_DTYPE_F32), out({1}, INFINI_DTYPE_F32);
    in.set(0, c.x);
    grad.set(0, 1.0f);
    out.poison();
    ASSERT_EQ(runGeluBackward(handle.get(), out, out.data(), in, in.data(), grad, grad.data()),
              INFINI_STATUS_SUCCESS);
    EXPECT_NEAR(out.get(0), c.expected, 2 * ulpOf(INFINI_DTYPE_F32, c.expected)) << "x=" << c.x;
  }
}

// ---------------------------------------------------------------- special values
TEST_P(DeviceTest, GeluBackwardSpecialValues) {
  const float inf = INFINITY, nan = NAN;
  const struct {
    float x, g, expected;  // expected NaN means "NaN"
  } cases[] = {{inf, 1, 1},   {-inf, 1, 0},    {nan, 1, nan},     {1e4f, 1, 1},
               {-1e4f, 1, 0}, {1e-40f, 2, 1},  {-1e-40f, 2, 1},   {0, -3, -1.5f},
               {1, inf, inf}, {-1, inf, -inf}, {inf, -inf, -inf}, {-inf, inf, nan},
               {1e30f, 1, 1}, {-1e30f, 1, 0},  {0, nan, nan},     {-20, 1, 0}};
  for (infiniDtype_t dtype : kFloatDtypes) {
    const size_t n = sizeof(cases) / sizeof(cases[0]);
    TensorBuffer in({n}, dtype), grad({n}, dtype), out({n}, dtype);
    in.fill([&](size_t i) { return cases[i].x; });
    grad.fill([&](size_t i) { return cases[i].g; });
    out.poison();
    ASSERT_EQ(runGeluBackward(handle(), out, out.data(), in, in.data(), grad, grad.data()),
              INFINI_STATUS_SUCCESS);
    for (size_t i = 0; i < n; ++i) {
      const float got = out.get(i), expected = cases[i].expected;
      SCOPED_TRACE(std::string(infiniop::dtypeName(dtype)) + " x=" + std::to_string(cases[i].x) +
                   " g=" + std::to_string(cases[i].g));
      if (std::isnan(expected)) {
        EXPECT_TRUE(std::isnan(got)) << got;
      } else {
        const float x = in.get(i), g = grad.get(i);  // as stored in dtype
        EXPECT_EQ(checkElement(dtype, x, g, got), "") << "got " << got;
      }
    }
  }
}

// Exact where exact is representable, on every target (docs/accuracy.md): gelu'(0) = 1/2, and
// gelu' = 1 wherever that is the rounded value (sigmoid(v) rounds to 1 for v > 17.4, i.e. x > 5.6
// here). With rcpps and one Newton step the AVX2 and SSE4 kernels gave 0.49999997 and 0.99999994.
TEST_P(DeviceTest, GeluBackwardExactWhereRepresentable) {
  const float x[] = {0, 0, 6, 9, 20, 1e4f}, g[] = {1, -3, 1, 7, -10.875f, 0.5f};
  const float expected[] = {0.5f, -1.5f, 1, 7, -10.875f, 0.5f};
  for (infiniDtype_t dtype : kFloatDtypes) {
    const size_t n = sizeof(x) / sizeof(x[0]);
    TensorBuffer in({n}, dtype), grad({n}, dtype), out({n}, dtype);
    in.fill([&](size_t i) { return x[i]; });
    grad.fill([&](size_t i) { return g[i]; });
    out.poison();
    ASSERT_EQ(runGeluBackward(handle(), out, out.data(), in, in.data(), grad, grad.data()),
              INFINI_STATUS_SUCCESS);
    for (size_t i = 0; i < n; ++i)
      EXPECT_EQ(out.get(i), expected[i]) << infiniop::dtypeName(dtype) << " x=" << x[i];
  }
}

// ---------------------------------------------------------------- layouts x sizes
using LayoutParam = std::tuple<DeviceParam, infiniDtype_t, Layout>;

class GeluBackwardLayouts : public DeviceTestBase,
                            public ::testing::WithParamInterface<LayoutParam> {
 protected:
  void SetUp() override { selectDevice(std::get<0>(GetParam())); }
  void TearDown() override { restoreTargets(); }
};

TEST_P(GeluBackwardLayouts, MatchesFormulaForEverySize) {
  const infiniDtype_t dtype = std::get<1>(GetParam());
  const Layout layout = std::get<2>(GetParam());
  // Row lengths around every vector width (4, 8, 16 F32 lanes), zero, and one large enough for
  // all threads (3 rows of it exceed the parallel threshold).
  const size_t sizes[] = {0,  1,  2,  3,  4,  5,  7,  8,   9,   15,   16,
                          17, 31, 32, 33, 63, 64, 65, 255, 257, 1000, 40000};
  for (size_t n : sizes) {
    if (layout == Layout::kRank8 && n > 1000) continue;
    SCOPED_TRACE("row length " + std::to_string(n));
    Views v = makeViews(layout, n, dtype);
    v.in->fill([&](size_t i) { return specialOr(i, signedValue(1, i, 10.0f), 23); });
    v.grad->fill([&](size_t i) {
      const float g = signedValue(2, i, 4.0f);
      return i % 29 == 28 ? g * 1e-6f : specialOr(i, g, 97);  // small grads reach F16 subnormals
    });
    const size_t numel = v.out->numel();
    std::vector<float> x(numel), g(numel);
    for (size_t i = 0; i < numel; ++i) {  // read back: broadcast and rounding make them differ
      x[i] = v.in->get(i);
      g[i] = v.grad->get(i);
    }
    if (v.out_view == v.out.get()) v.out->poison();
    const std::vector<uint8_t> guard_before = v.out_view->storage();
    ASSERT_EQ(runGeluBackward(handle(), *v.out_view, v.out_view->data(), *v.in, v.in->data(),
                              *v.grad, v.grad->data()),
              INFINI_STATUS_SUCCESS)
        << last_error;
    int failures = 0;
    for (size_t i = 0; i < numel && failures < 5; i += checkStride(numel)) {
      const std::string problem = checkElement(dtype, x[i], g[i], v.out_view->get(i));
      if (!problem.empty()) {
        ++failures;
        ADD_FAILURE() << "element " << i << " x=" << x[i] << " g=" << g[i]
                      << " got=" << v.out_view->get(i) << ": " << problem;
      }
    }
    // The guard elements around the view are untouched.
    const auto &after = v.out_view->storage();
    const size_t es = v.out_view->elementSize();
    EXPECT_TRUE(std::equal(after.begin(), after.begin() + es, guard_before.begin()));
    EXPECT_TRUE(std::equal(after.end() - es, after.end(), guard_before.end() - es));
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, GeluBackwardLayouts,
    ::testing::Combine(::testing::ValuesIn(allDeviceParams()), ::testing::ValuesIn(kFloatDtypes),
                       ::testing::Values(Layout::kContiguous, Layout::kStrided, Layout::kTransposed,
                                         Layout::kMixed, Layout::kBroadcast, Layout::kReversed,
                                         Layout::kInPlaceInput, Layout::kInPlaceGrad,
                                         Layout::kRank8)),
    [](const ::testing::TestParamInfo<LayoutParam> &info) {
      return deviceParamName(std::get<0>(info.param)) + "_" +
             infiniop::dtypeName(std::get<1>(info.param)) + "_" +
             layoutName(std::get<2>(info.param));
    });

}  // namespace
}  // namespace infiniop_test
