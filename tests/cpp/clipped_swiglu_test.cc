// SPDX-License-Identifier: Apache-2.0
// ClippedSwiglu and ClippedSwigluBackward conformance (SEMANTICS.md "ClippedSwiglu"): hand-worked
// values, the interleaved split of the MERGED row, and every device (cpu_reference, cpu on every
// Highway target, opencl) against a long-double oracle written from the formulas
// (clipped_swiglu.h), over dtypes, every dim, both splits, attributes, group_index sums, layouts,
// sizes and special values; bad arguments leave the output untouched. The oracle suite over dims
// x groups x layouts x sizes is clipped_swiglu_oracle_test.cc (compiled with the build's
// optimization, this file quickly); the helpers both use, clipped_swiglu.h.
//
// Tolerances (accuracy.h's model; `truth` is the long-double oracle, never the library):
//  - F32: 8 ulp of the magnitudes the kernel sums (|g| for y and dB; s and |z s (1-s)| for dA's
//    slope), each widened by its sensitivity to the F32 rounding of z = alpha * a (|z| (1-s) for
//    s; 1 + |z| |1-2s| for z s (1-s)); plus 2^-125 * floor for the far left (z < -87), where the
//    kernels clamp exp and return a tiny number of the right sign: |g| <= |a| exp(-87) there, so
//    the floor is |scale| (1 + |a|) for y and dB, and for dA's slope (1+|z|) exp(z) it is
//    |dy (b + bias)| (1 + |z|); plus one F32 subnormal quantum.
//  - F16/BF16: the same F32 error plus 1 ulp of the output type at the truth (the result is
//    computed in F32 and rounded once, to nearest, at the store: <= 1/2 ulp of the type).
//  - Masked-out gradients (A > limit, |B| > limit, NaN A or B) must be exactly 0, and rows past
//    the group_index sum exactly +0, whatever the inputs.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "accuracy.h"
#include "device_memory.h"
#include "device_param.h"
#include "infiniop/ops/clipped_swiglu.h"
#include "infiniop/ops/clipped_swiglu_backward.h"
#include "clipped_swiglu.h"
#include "tensor_buffer.h"

namespace infiniop_test::clipped_swiglu {
namespace {

// ---------------------------------------------------------------- hand-worked values
struct HandRow {
  float A, B, dy;
  double y, dA, dB;
};

// The rows as the pairs of one merged row (F32), both operators, within 1e-6 of the values.
void checkHandWorked(infiniopHandle_t h, const std::vector<HandRow> &rows, const Attrs &at) {
  const size_t n = rows.size();
  TensorBuffer x({1, 2 * n}, INFINI_DTYPE_F32), y({1, n}, INFINI_DTYPE_F32),
      dy({1, n}, INFINI_DTYPE_F32), dx({1, 2 * n}, INFINI_DTYPE_F32);
  const size_t step = at.interleaved ? 2 : 1, ib = at.interleaved ? 1 : n;  // A at step k
  for (size_t k = 0; k < n; ++k) {
    x.set(step * k, rows[k].A);
    x.set(ib + step * k, rows[k].B);
    dy.set(k, rows[k].dy);
  }
  y.poison();
  dx.poison();
  ASSERT_EQ(runForward(h, y, x, nullptr, at), INFINI_STATUS_SUCCESS) << last_error;
  ASSERT_EQ(runBackward(h, dx, dx.data(), dy, x, nullptr, at), INFINI_STATUS_SUCCESS) << last_error;
  for (size_t k = 0; k < n; ++k) {
    SCOPED_TRACE("pair " + std::to_string(k));
    EXPECT_NEAR(y.get(k), rows[k].y, 1e-6 * std::fabs(rows[k].y));
    EXPECT_NEAR(dx.get(step * k), rows[k].dA, 1e-6 * std::fabs(rows[k].dA));
    EXPECT_NEAR(dx.get(ib + step * k), rows[k].dB, 1e-6 * std::fabs(rows[k].dB));
  }
}

TEST_P(DeviceTest, ClippedSwigluHandWorkedValues) {
  // Defaults: alpha = 1.702, limit = 7, bias = 1, interleaved; x = [A0, B0, A1, B1, ...].
  // Expected values from mpmath at 30 digits, alpha = float(1.702) = 1.70200002193...
  checkHandWorked(
      handle(),
      {
          {1, 2, 1, 2.53738730638, 3.20333882673, 0.845795768794},
          {10, -10, 2, -41.9997187699, 0, 0},  // both clipped: gradients masked
          {-2, 0.5f, -1, -0.096512061186, 0.110723029035, 0.064341374124},
          {7, -7, 0.5f, -41.9997187699, -3.00021923738, 3.49997656416},  // at +-limit: they pass
          {-7.5f, 7.5f, 1, -0.000171546110537, -0.000269097834382, 0},   // no lower clamp on A
      },
      Attrs{});
}

// clamp_mode 1 (ClippedSwigluV2): y = min(silu(A), limit) clamp(B, -limit, limit), whatever alpha
// and bias are (1.702 and 1 here, and ignored). Expected values from mpmath at 30 digits.
TEST_P(DeviceTest, ClippedSwigluV2HandWorkedValues) {
  const std::vector<HandRow> rows = {
      {1, 2, 1, 1.46211715726, 1.85534102374, 0.73105857863},
      {10, -10, 2, -49.0, 0, 0},  // silu(10) > 7: the gate is 7, dA = 0; B clipped: dB = 0
      {-2, 0.5f, -1, -0.119202922022, 0.0453921243924, 0.238405844044},
      {7, -7, 0.5f, -48.9553584915, -3.51911173973, 3.49681132082},  // silu(7) < 7; B at -limit
      {8, 7.5f, 1, 49.0, 0, 0},                                      // both clamped
      {-7.5f, 7.5f, 1, -0.0290208784385, -0.0251353858584, 0},       // no clamp of A below
  };
  for (bool interleaved : {true, false}) {
    SCOPED_TRACE(interleaved ? "interleaved" : "halves");
    checkHandWorked(handle(), rows, Attrs{-1, 1.702f, 7.0f, 1.0f, interleaved, 1});
  }
}

// Rows [A, B] of F32 pairs under y_grad 2: y [n, 1] and x_grad [n, 2] of both operators.
void runPairs(infiniopHandle_t h, const std::vector<std::array<float, 2>> &pairs, const Attrs &at,
              TensorBuffer &y, TensorBuffer &dx) {
  const size_t n = pairs.size();
  TensorBuffer x({n, 2}, INFINI_DTYPE_F32), dy({n, 1}, INFINI_DTYPE_F32);
  for (size_t k = 0; k < n; ++k) {
    x.set(2 * k, pairs[k][0]);
    x.set(2 * k + 1, pairs[k][1]);
  }
  dy.fill([](size_t) { return 2.0f; });
  y.poison();
  dx.poison();
  ASSERT_EQ(runForward(h, y, x, nullptr, at), INFINI_STATUS_SUCCESS) << last_error;
  ASSERT_EQ(runBackward(h, dx, dx.data(), dy, x, nullptr, at), INFINI_STATUS_SUCCESS) << last_error;
}

// clamp_mode 1's boundaries: the gate's clamp passes the last A with silu(A) <= limit (dA flows,
// y = silu(A) b) and clamps the next float (dA exactly 0, y = limit b, dB = dy limit); B at
// +-limit passes, beyond is clipped; NaN passes both clamps; -0 B keeps its sign (no bias added).
TEST_P(DeviceTest, ClippedSwigluV2BoundaryRules) {
  for (float limit : {7.0f, 0.5f, 1e-20f, 3e38f}) {
    SCOPED_TRACE("limit " + std::to_string(limit));
    Attrs at{-1, -3.0f, limit, 5.0f, true, 1};
    const float edge = gateBoundary(limit), past = std::nextafter(edge, INFINITY);
    const float b = std::fmin(limit, 0.75f);
    const std::vector<std::array<float, 2>> pairs = {
        {edge, b},   {past, b},     {past, -limit}, {edge, limit},    {NAN, b},
        {edge, NAN}, {INFINITY, b}, {2.0f, -0.0f},  {past, 2 * limit}};
    TensorBuffer y({pairs.size(), 1}, INFINI_DTYPE_F32), dx({pairs.size(), 2}, INFINI_DTYPE_F32);
    runPairs(handle(), pairs, at, y, dx);
    const double silu_edge = edge / (1 + std::exp(-static_cast<double>(edge)));
    EXPECT_LE(silu_edge, limit);
    EXPECT_GT(past / (1 + std::exp(-static_cast<double>(past))), limit);
    EXPECT_NEAR(y.get(0), silu_edge * b, 4e-7 * silu_edge * b + 0x1p-149);
    EXPECT_NE(dx.get(0), 0.0f);  // dA passes at the edge
    EXPECT_EQ(y.get(1), static_cast<float>(static_cast<double>(limit) * b));  // limit b
    EXPECT_EQ(dx.get(2), 0.0f);                                               // dA clamped
    EXPECT_EQ(dx.get(3), 2 * limit);     // dB = dy limit (B inside)
    EXPECT_EQ(dx.get(5), 2 * limit);     // B = -limit passes
    EXPECT_NE(dx.get(7), 0.0f);          // B = +limit passes, and so does A
    EXPECT_TRUE(std::isnan(y.get(4)));   // NaN A
    EXPECT_EQ(dx.get(8), 0.0f);          // its dA is 0
    EXPECT_TRUE(std::isnan(dx.get(9)));  // dB = dy silu(NaN)
    EXPECT_TRUE(std::isnan(y.get(5)));   // NaN B
    EXPECT_EQ(dx.get(11), 0.0f);         // its dB is 0
    EXPECT_EQ(y.get(6), static_cast<float>(static_cast<double>(limit) * b));  // silu(inf) > limit
    EXPECT_EQ(dx.get(12), 0.0f);
    EXPECT_TRUE(y.get(7) == 0.0f && std::signbit(y.get(7)));  // silu(2) (-0) = -0
    EXPECT_EQ(y.get(8), static_cast<float>(static_cast<double>(limit) * limit));
    EXPECT_EQ(dx.get(17), 0.0f);  // B clipped
  }
}

// DeepSeek-V4's clamp, silu(min(A, limit)) clamp(B, -limit, limit), is clamp_mode 0 with alpha 1
// and bias 0 (what torch_npu callers pass).
TEST_P(DeviceTest, ClippedSwigluDeepSeekV4Clamp) {
  const Attrs at{-1, 1.0f, 7.0f, 0.0f, false};
  const float As[] = {-3.0f, 0.5f, 6.5f, 7.0f, 12.0f, -40.0f};
  const float Bs[] = {2.0f, -8.0f, 7.0f, -0.25f, 3.0f, 9.0f};
  const size_t n = 6;
  TensorBuffer x({1, 2 * n}, INFINI_DTYPE_F32), y({1, n}, INFINI_DTYPE_F32);
  for (size_t k = 0; k < n; ++k) {
    x.set(k, As[k]);
    x.set(n + k, Bs[k]);
  }
  y.poison();
  ASSERT_EQ(runForward(handle(), y, x, nullptr, at), INFINI_STATUS_SUCCESS) << last_error;
  for (size_t k = 0; k < n; ++k) {
    const double a = std::fmin(As[k], 7.0), b = std::fmax(-7.0, std::fmin(Bs[k], 7.0));
    const double expected = a / (1 + std::exp(-a)) * b;
    EXPECT_NEAR(y.get(k), expected, 4e-7 * std::fabs(expected)) << "pair " << k;
  }
}

// V2 with clamp_mode 0 is the original operator, bit for bit, forward and backward.
TEST_P(DeviceTest, ClippedSwigluV2ModeZeroIsTheOriginal) {
  for (infiniDtype_t dtype : kFloatDtypes) {
    SCOPED_TRACE(infiniop::dtypeName(dtype));
    const Attrs at{-1, 1.702f, 7.0f, 1.0f, true};
    TensorBuffer x({8, 70}, dtype), dy({8, 35}, dtype);
    x.fill([&](size_t i) { return inputValue(i, signedValue(5, i, 14.0f), at.limit); });
    dy.fill([](size_t i) { return signedValue(6, i, 3.0f); });
    auto xd = x.descriptor(), yd = dy.descriptor();
    std::vector<uint8_t> results[2][2];
    for (int v2 = 0; v2 < 2; ++v2) {
      TensorBuffer y({8, 35}, dtype), dx({8, 70}, dtype);
      infiniopClippedSwigluDescriptor_t op = nullptr;
      infiniopClippedSwigluBackwardDescriptor_t back = nullptr;
      ASSERT_EQ(v2 ? infiniopCreateClippedSwigluV2Descriptor(handle(), &op, yd, xd, nullptr, -1,
                                                             at.alpha, at.limit, at.bias, true, 0)
                   : createForward(handle(), &op, yd, xd, nullptr, at),
                INFINI_STATUS_SUCCESS);
      ASSERT_EQ(
          v2 ? infiniopCreateClippedSwigluBackwardV2Descriptor(
                   handle(), &back, xd, yd, xd, nullptr, -1, at.alpha, at.limit, at.bias, true, 0)
             : createBackward(handle(), &back, xd, yd, xd, nullptr, at),
          INFINI_STATUS_SUCCESS);
      DeviceMirror device(handle());
      device.add(y);
      device.add(dx);
      device.add(x);
      device.add(dy);
      ASSERT_EQ(infiniopClippedSwiglu(op, nullptr, 0, device(y), device(x), nullptr, nullptr),
                INFINI_STATUS_SUCCESS);
      ASSERT_EQ(infiniopClippedSwigluBackward(back, nullptr, 0, device(dx), device(dy), device(x),
                                              nullptr, nullptr),
                INFINI_STATUS_SUCCESS);
      device.download();
      results[v2][0] = y.storage();
      results[v2][1] = dx.storage();
      infiniopDestroyClippedSwigluDescriptor(op);
      infiniopDestroyClippedSwigluBackwardDescriptor(back);
    }
    EXPECT_EQ(results[0][0], results[1][0]);
    EXPECT_EQ(results[0][1], results[1][1]);
    infiniopDestroyTensorDescriptor(xd);
    infiniopDestroyTensorDescriptor(yd);
  }
}

// Interleaving pairs flat elements (2q, 2q+1) of the merged row [pre, cut*after], NOT elements
// 2k and 2k+1 along `dim`: with alpha = 0, limit = +inf and bias = 0, y = A B / 2 (F32: within
// 8 ulp, as sigmoid(0) is computed, not special-cased; the pairing errors are far larger).
TEST_P(DeviceTest, ClippedSwigluInterleavesTheMergedRow) {
  Attrs at;
  at.alpha = 0;
  at.limit = INFINITY;
  at.bias = 0;
  for (int64_t dim : {1, -2, 0, -3}) {  // of [2,4,3], dims 1 and 0 are even
    at.dim = dim;
    for (bool interleaved : {true, false}) {
      at.interleaved = interleaved;
      SCOPED_TRACE(attrsName(at));
      const size_t d = static_cast<size_t>(dim < 0 ? dim + 3 : dim);
      std::vector<size_t> full = {2, 4, 3}, half = full;
      half[d] /= 2;
      const size_t pre = d == 0 ? 1 : 2, L = 24 / pre;
      TensorBuffer x(full, INFINI_DTYPE_F32), y(half, INFINI_DTYPE_F32), dy(half, INFINI_DTYPE_F32),
          dx(full, INFINI_DTYPE_F32);
      x.fill([](size_t i) { return static_cast<float>(i + 1); });
      dy.fill([](size_t i) { return static_cast<float>(i % 3) - 1.0f; });
      y.poison();
      dx.poison();
      ASSERT_EQ(runForward(handle(), y, x, nullptr, at), INFINI_STATUS_SUCCESS) << last_error;
      ASSERT_EQ(runBackward(handle(), dx, dx.data(), dy, x, nullptr, at), INFINI_STATUS_SUCCESS)
          << last_error;
      for (size_t q = 0; q < 12; ++q) {
        const size_t p = q / (L / 2), j = q % (L / 2);
        const size_t ia = interleaved ? 2 * q : p * L + j;
        const size_t ib = interleaved ? 2 * q + 1 : p * L + L / 2 + j;
        const float A = static_cast<float>(ia + 1), B = static_cast<float>(ib + 1);
        const float g = static_cast<float>(q % 3) - 1.0f;
        EXPECT_NEAR(y.get(q), A * B / 2, 0x1p-20 * A * B / 2) << "y " << q;
        EXPECT_NEAR(dx.get(ia), g * B / 2, 0x1p-20 * B / 2) << "dA " << q;
        EXPECT_NEAR(dx.get(ib), g * A / 2, 0x1p-20 * A / 2) << "dB " << q;
      }
      if (interleaved && d == 1) {
        // A split along dim 1 would pair x[0,0,0] = 1 with x[0,1,0] = 4: y[0] would be 2, not 1.
        EXPECT_NEAR(y.get(0), 1.0f, 1e-6);
        EXPECT_NEAR(y.get(1), 6.0f, 1e-5);  // pair (3, 4): 3 * 4 / 2
      }
    }
  }
}

// ---------------------------------------------------------------- any strides, workspace
// SEMANTICS: any strides. x transposed (2-D, split on dim 0 and on dim -1) with y's rows padded,
// and the backward into a transposed x_grad: whatever workspace the descriptor asks for is
// enough, and one byte less is INSUFFICIENT_WORKSPACE with nothing written.
TEST_P(DeviceTest, ClippedSwigluTransposedAndPadded) {
  for (int64_t dim : {0, -1})
    for (bool interleaved : {true, false}) {
      Attrs at;
      at.dim = dim;
      at.interleaved = interleaved;
      at.limit = 2.0f;
      SCOPED_TRACE(attrsName(at));
      const std::vector<size_t> full =
          dim == 0 ? std::vector<size_t>{6, 5} : std::vector<size_t>{5, 6};
      std::vector<size_t> half = full;
      half[dim == 0 ? 0 : 1] /= 2;
      TensorBuffer x(full, columnMajorStrides(full), INFINI_DTYPE_F32);
      TensorBuffer y(half, {static_cast<ptrdiff_t>(half[1]) + 3, 1}, INFINI_DTYPE_F32);
      TensorBuffer dy(half, columnMajorStrides(half), INFINI_DTYPE_F32);
      TensorBuffer dx(full, columnMajorStrides(full), INFINI_DTYPE_F32);
      x.fill([](size_t i) { return signedValue(21, i, 4.0f); });
      dy.fill([](size_t i) { return signedValue(22, i, 2.0f); });
      y.poison();
      dx.poison();
      ASSERT_EQ(runForward(handle(), y, x, nullptr, at), INFINI_STATUS_SUCCESS) << last_error;
      ASSERT_EQ(runBackward(handle(), dx, dx.data(), dy, x, nullptr, at), INFINI_STATUS_SUCCESS)
          << last_error;
      const size_t L = dim == 0 ? 30 : 6, P = L / 2;
      for (size_t q = 0; q < y.numel(); ++q) {
        const size_t p = q / P, j = q % P;
        const size_t ia = p * L + (interleaved ? 2 * j : j);
        const size_t ib = p * L + (interleaved ? 2 * j + 1 : P + j);
        const Truth t = oracle(INFINI_DTYPE_F32, x.get(ia), x.get(ib), dy.get(q), at);
        EXPECT_EQ(compareToTruth(INFINI_DTYPE_F32, y.get(q), t.y, t.tol_y), "") << "y " << q;
        if (t.dA_masked)
          EXPECT_EQ(dx.get(ia), 0.0f) << "dA " << q;
        else
          EXPECT_EQ(compareToTruth(INFINI_DTYPE_F32, dx.get(ia), t.dA, t.tol_dA), "") << "dA " << q;
        if (t.dB_masked)
          EXPECT_EQ(dx.get(ib), 0.0f) << "dB " << q;
        else
          EXPECT_EQ(compareToTruth(INFINI_DTYPE_F32, dx.get(ib), t.dB, t.tol_dB), "") << "dB " << q;
      }
      // Too small a workspace, where one is asked for.
      auto yd = y.descriptor(), xd = x.descriptor();
      infiniopClippedSwigluDescriptor_t op = nullptr;
      ASSERT_EQ(infiniopCreateClippedSwigluDescriptor(handle(), &op, yd, xd, nullptr, at.dim,
                                                      at.alpha, at.limit, at.bias, interleaved),
                INFINI_STATUS_SUCCESS);
      infiniopDestroyTensorDescriptor(yd);
      infiniopDestroyTensorDescriptor(xd);
      size_t size = 0;
      ASSERT_EQ(infiniopGetClippedSwigluWorkspaceSize(op, &size), INFINI_STATUS_SUCCESS);
      if (size > 0) {
        std::vector<char> workspace(size), unaligned(size + 1);
        const std::vector<uint8_t> before = y.storage();
        DeviceMirror device(handle());
        device.add(y);
        device.add(x);
        device.add(workspace.data(), workspace.size());
        device.add(unaligned.data(), unaligned.size());
        EXPECT_EQ(infiniopClippedSwiglu(op, device(workspace.data()), size - 1, device(y),
                                        device(x), nullptr, nullptr),
                  INFINI_STATUS_INSUFFICIENT_WORKSPACE);
        EXPECT_NE(std::string(infiniopGetLastError()), "");
        EXPECT_EQ(infiniopClippedSwiglu(op, nullptr, size, device(y), device(x), nullptr, nullptr),
                  INFINI_STATUS_NULL_POINTER);
        // The workspace may not overlap a tensor (here the output itself).
        EXPECT_EQ(
            infiniopClippedSwiglu(op, device(y), size, device(y), device(x), nullptr, nullptr),
            INFINI_STATUS_BAD_TENSOR_STRIDES)
            << infiniopGetLastError();
        device.download();
        EXPECT_EQ(y.storage(), before);
        // Any workspace pointer works, aligned or not (an odd address here).
        y.poison();
        device.upload();
        EXPECT_EQ(infiniopClippedSwiglu(op, device(unaligned.data() + 1), size, device(y),
                                        device(x), nullptr, nullptr),
                  INFINI_STATUS_SUCCESS)
            << infiniopGetLastError();
        device.download();
        for (size_t q = 0; q < y.numel(); ++q) EXPECT_FALSE(std::isnan(y.get(q))) << q;
      }
      infiniopDestroyClippedSwigluDescriptor(op);
    }
}

// ---------------------------------------------------------------- boundary and NaN rules
TEST_P(DeviceTest, ClippedSwigluBoundaryAndNanRules) {
  Attrs at;
  at.limit = 0.5f;
  const std::vector<std::array<float, 2>> pairs = {
      {0.5f, -0.5f},       // 0: both exactly at the limit: both gradients pass
      {0.5f, 0.5f},        // 1
      {0.75f, -0.75f},     // 2: both clipped: y uses (0.5, -0.5), gradients exactly 0
      {-3.0f, 2.0f},       // 3: A below -limit is not clamped (dA != 0); B clipped (dB = 0)
      {NAN, 0.25f},        // 4: y NaN, dA = 0, dB NaN
      {0.25f, NAN},        // 5: y NaN, dA NaN, dB = 0
      {-INFINITY, 0.25f},  // 6: alpha > 0: y = 0 * (b + bias) = 0, dA = dy (b+bias) 0 = 0
      {0.0f, 0.25f},       // 7
  };
  TensorBuffer y({pairs.size(), 1}, INFINI_DTYPE_F32), dx({pairs.size(), 2}, INFINI_DTYPE_F32);
  runPairs(handle(), pairs, at, y, dx);
  const auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  const double g05 = 0.5 * sig(1.702 * 0.5);
  EXPECT_NEAR(dx.get(0), 2 * 0.5 * (sig(0.851) + 0.851 * sig(0.851) * sig(-0.851)), 1e-6);
  EXPECT_NEAR(dx.get(1), 2 * g05, 1e-6);
  EXPECT_NEAR(dx.get(3), 2 * g05, 1e-6);
  EXPECT_NEAR(y.get(2), g05 * 0.5, 1e-6);
  EXPECT_EQ(dx.get(4), 0.0f);
  EXPECT_EQ(dx.get(5), 0.0f);
  EXPECT_NEAR(y.get(3), -3 * sig(1.702 * -3) * 1.5, 1e-6);
  EXPECT_NE(dx.get(6), 0.0f);  // A = -3 < -limit still has a gradient
  EXPECT_EQ(dx.get(7), 0.0f);
  EXPECT_TRUE(std::isnan(y.get(4)));
  EXPECT_EQ(dx.get(8), 0.0f);
  EXPECT_TRUE(std::isnan(dx.get(9)));
  EXPECT_TRUE(std::isnan(y.get(5)));
  EXPECT_TRUE(std::isnan(dx.get(10)));
  EXPECT_EQ(dx.get(11), 0.0f);
  EXPECT_EQ(y.get(6), 0.0f);
  EXPECT_EQ(dx.get(12), 0.0f);
  EXPECT_EQ(dx.get(13), 0.0f);  // dy * g with g = 0
  EXPECT_EQ(y.get(7), 0.0f);
  EXPECT_NEAR(dx.get(14), 2 * 1.25 * 0.5, 1e-6);  // slope 1/2 at a = 0
}

// ---------------------------------------------------------------- every special pairing
TEST_P(DeviceTest, ClippedSwigluSpecialValues) {
  const Attrs attr_sets[] = {
      {-1, 1.702f, 7.0f, 1.0f, true},        {-1, 1.702f, INFINITY, 1.0f, true},
      {-1, -0.5f, INFINITY, -2.0f, true},    {-1, 0.0f, 0.5f, 1.0f, true},
      {-1, 0.5f, INFINITY, 0.0f, true},      {-1, 1.702f, 7.0f, 1.0f, true, 1},
      {-1, -0.5f, INFINITY, -2.0f, true, 1}, {-1, 0.0f, 0.5f, 1.0f, true, 1},
  };
  for (const Attrs &at : attr_sets) {
    const std::vector<float> specials = specialValues(at.limit, at.clamp_mode);
    const std::vector<float> grads = {1.5f, -0.25f, INFINITY, -INFINITY, 0.0f};
    const size_t S = specials.size(), rows = S * grads.size();
    for (infiniDtype_t dtype : kFloatDtypes) {
      SCOPED_TRACE(attrsName(at) + " " + infiniop::dtypeName(dtype));
      // Row r pairs B = specials[r % S] with every A, under y_grad grads[r / S].
      TensorBuffer x({rows, 2 * S}, dtype), y({rows, S}, dtype), dy({rows, S}, dtype),
          dx({rows, 2 * S}, dtype);
      x.fill([&](size_t i) {
        const size_t r = i / (2 * S), c = i % (2 * S);
        return c % 2 ? specials[r % S] : specials[c / 2];
      });
      dy.fill([&](size_t i) { return grads[i / S / S]; });
      y.poison();
      dx.poison();
      ASSERT_EQ(runForward(handle(), y, x, nullptr, at), INFINI_STATUS_SUCCESS) << last_error;
      ASSERT_EQ(runBackward(handle(), dx, dx.data(), dy, x, nullptr, at), INFINI_STATUS_SUCCESS)
          << last_error;
      int failures = 0;
      for (size_t q = 0; q < rows * S; ++q) {
        const float A = x.get(2 * q), B = x.get(2 * q + 1), g = dy.get(q);
        const Truth t = oracle(dtype, A, B, g, at);
        const auto report = [&](const char *what, float got, const std::string &why) {
          if (!why.empty() && failures++ < 8)
            ADD_FAILURE() << what << " A=" << A << " B=" << B << " dy=" << g << " got=" << got
                          << ": " << why;
        };
        report("y", y.get(q), compareToTruth(dtype, y.get(q), t.y, t.tol_y));
        const float dA = dx.get(2 * q), dB = dx.get(2 * q + 1);
        report("dA", dA,
               t.dA_masked ? (dA == 0 ? "" : "not exactly 0")
                           : compareToTruth(dtype, dA, t.dA, t.tol_dA));
        report("dB", dB,
               t.dB_masked ? (dB == 0 ? "" : "not exactly 0")
                           : compareToTruth(dtype, dB, t.dB, t.tol_dB));
      }
    }
  }
}

// A finite A so large that alpha * A overflows F32 (|A| > FLT_MAX / |alpha|): g = a sigmoid(alpha
// a) is still a finite, non-zero number of a's sign (SEMANTICS: sigmoid of a finite argument, and
// an infinity times a finite non-zero factor is an infinity of the product's sign), so with B =
// +inf and limit = +inf, y and dA are infinities, not NaN, and dy = +-inf gives dB = -+inf. This is
// not the a = -inf limit (where 0 * inf = NaN is right).
TEST_P(DeviceTest, ClippedSwigluHugeFiniteA) {
  for (infiniDtype_t dtype : {INFINI_DTYPE_F32, INFINI_DTYPE_BF16})
    for (float alpha : {1.702f, -1.702f}) {
      Attrs at;
      at.alpha = alpha;
      at.limit = INFINITY;
      SCOPED_TRACE(attrsName(at) + " " + infiniop::dtypeName(dtype));
      const float A = alpha > 0 ? -3e38f : 3e38f;
      const float Bs[] = {INFINITY, 2.0f}, dys[] = {1.0f, INFINITY, -INFINITY};
      TensorBuffer x({6, 2}, dtype), y({6, 1}, dtype), dy({6, 1}, dtype), dx({6, 2}, dtype);
      for (size_t r = 0; r < 6; ++r) {
        x.set(2 * r, A);
        x.set(2 * r + 1, Bs[r % 2]);
        dy.set(r, dys[r / 2]);
      }
      y.poison();
      dx.poison();
      ASSERT_EQ(runForward(handle(), y, x, nullptr, at), INFINI_STATUS_SUCCESS) << last_error;
      ASSERT_EQ(runBackward(handle(), dx, dx.data(), dy, x, nullptr, at), INFINI_STATUS_SUCCESS)
          << last_error;
      for (size_t r = 0; r < 6; ++r) {
        const Truth t = oracle(dtype, x.get(2 * r), x.get(2 * r + 1), dy.get(r), at);
        SCOPED_TRACE("B=" + std::to_string(x.get(2 * r + 1)) + " dy=" + std::to_string(dy.get(r)));
        EXPECT_EQ(compareToTruth(dtype, y.get(r), t.y, t.tol_y), "") << "y, got " << y.get(r);
        EXPECT_EQ(compareToTruth(dtype, dx.get(2 * r), t.dA, t.tol_dA), "")
            << "dA, got " << dx.get(2 * r);
        EXPECT_EQ(compareToTruth(dtype, dx.get(2 * r + 1), t.dB, t.tol_dB), "")
            << "dB, got " << dx.get(2 * r + 1);
      }
    }
}

// Interleaved rows (A_r, B_r) with y_grad dy_r, F32 and BF16: dA and dB against the oracle.
void expectBackwardRowsMatchOracle(infiniopHandle_t handle, const Attrs &at,
                                   const std::vector<float> &As, const std::vector<float> &Bs,
                                   const std::vector<float> &dys) {
  const size_t rows = As.size();
  for (infiniDtype_t dtype : {INFINI_DTYPE_F32, INFINI_DTYPE_BF16}) {
    SCOPED_TRACE(attrsName(at) + " " + infiniop::dtypeName(dtype));
    TensorBuffer x({rows, 2}, dtype), dy({rows, 1}, dtype), dx({rows, 2}, dtype);
    for (size_t r = 0; r < rows; ++r) {
      x.set(2 * r, As[r]);
      x.set(2 * r + 1, Bs[r]);
      dy.set(r, dys[r]);
    }
    dx.poison();
    ASSERT_EQ(runBackward(handle, dx, dx.data(), dy, x, nullptr, at), INFINI_STATUS_SUCCESS)
        << last_error;
    for (size_t r = 0; r < rows; ++r) {
      const Truth t = oracle(dtype, x.get(2 * r), x.get(2 * r + 1), dy.get(r), at);
      SCOPED_TRACE("A=" + std::to_string(x.get(2 * r)) + " dy=" + std::to_string(dy.get(r)));
      EXPECT_EQ(compareToTruth(dtype, dx.get(2 * r), t.dA, t.tol_dA), "")
          << "dA, got " << dx.get(2 * r);
      EXPECT_EQ(compareToTruth(dtype, dx.get(2 * r + 1), t.dB, t.tol_dB), "")
          << "dB, got " << dx.get(2 * r + 1);
    }
  }
}

// A finite bias near FLT_MAX: dy (b + bias) alone overflows F32 while dA, scaled down by the
// slope, is finite. Found by tests/fuzz (cpu and opencl gave -inf).
TEST_P(DeviceTest, ClippedSwigluBackwardHugeFiniteBias) {
  Attrs at;
  at.alpha = 1.702f;
  at.limit = 1e30f;
  at.bias = 2.28e38f;
  expectBackwardRowsMatchOracle(handle(), at, {-3.0f, -50.0f, -8.0f}, {1.0f, 1.0f, 1.0f},
                                {10.0f, 10.0f, -4.0f});
}

// Found by tests/fuzz (now seed tests/fuzz/corpus/clipped_swiglu_backward_huge_alpha): with a huge
// alpha the far-left gate a sigmoid(alpha a) of a finite a underflows to 0 in F32, and an
// infinite dy times it gave NaN on cpu and opencl where the limit is an infinity.
TEST_P(DeviceTest, ClippedSwigluBackwardUnderflowedGateTimesInfiniteDy) {
  Attrs at;
  at.alpha = 6.67e35f;
  at.limit = 7.0f;
  at.bias = 0.5f;
  expectBackwardRowsMatchOracle(handle(), at, {-3.0f, -3.0f, -0.5f, -1e-3f},
                                {1.0f, 2.0f, -1.0f, 6.5f},
                                {-INFINITY, INFINITY, INFINITY, -INFINITY});
}

// Found by tests/fuzz (now seed tests/fuzz/corpus/clipped_swiglu_huge_alpha_infinite_b): the
// forward's twin of the test above. With alpha near -FLT_MAX and no clipping (limit = inf) the
// far-left gate of a finite a > 0 underflows to 0 even scaled by 2^128 (a is moved to
// tail_a = 175 / |alpha|), and times an infinite b + bias it gave NaN on cpu and opencl where the
// limit is an infinity of sign(a) sign(b).
TEST_P(DeviceTest, ClippedSwigluUnderflowedGateTimesInfiniteB) {
  Attrs at;
  at.alpha = -1.8215115e38f;
  at.limit = INFINITY;
  at.bias = 1.0f;
  const std::vector<float> As = {3.915248f, 8.349191f, 73.14671f, 0.0038725163f, -2.0f, 0.0f};
  const std::vector<float> Bs = {-INFINITY, INFINITY, -INFINITY, -INFINITY, INFINITY, INFINITY};
  for (infiniDtype_t dtype : {INFINI_DTYPE_F32, INFINI_DTYPE_BF16}) {
    SCOPED_TRACE(infiniop::dtypeName(dtype));
    TensorBuffer x({As.size(), 2}, dtype), y({As.size(), 1}, dtype);
    for (size_t r = 0; r < As.size(); ++r) {
      x.set(2 * r, As[r]);
      x.set(2 * r + 1, Bs[r]);
    }
    y.poison();
    ASSERT_EQ(runForward(handle(), y, x, nullptr, at), INFINI_STATUS_SUCCESS) << last_error;
    for (size_t r = 0; r < As.size(); ++r) {
      const Truth t = oracle(dtype, x.get(2 * r), x.get(2 * r + 1), 1.0f, at);
      SCOPED_TRACE("A=" + std::to_string(x.get(2 * r)) + " B=" + std::to_string(x.get(2 * r + 1)));
      EXPECT_EQ(compareToTruth(dtype, y.get(r), t.y, t.tol_y), "") << "y, got " << y.get(r);
    }
  }
}

// ---------------------------------------------------------------- absent group_index
// API.md: a nullable descriptor given as NULL means its pointer is ignored, on every device.
// Without a group_index descriptor every row is computed whatever the group_index pointer is:
// NULL; device memory of the handle holding INT64 counts that, if read, would compute no row
// (zeros) or fail the call (-1: every byte 0xFF); a host buffer of -1 counts that is not device
// memory (on the CPU devices like the device junk; on opencl a pointer the library could not even
// resolve). The outputs must match the oracle and be bit-identical to the NULL run's, and the
// junk must be left as it was.
enum class GroupJunk { kNull, kZeroCounts, kNegativeCounts, kHostNegativeCounts };
const char *groupJunkName(GroupJunk j) {
  static const char *names[] = {"NULL", "device zero counts", "device -1 counts", "host -1 counts"};
  return names[static_cast<int>(j)];
}

// The dtypes of this test: all three on the CPU devices; F32 on opencl, where presence is decided
// by dtype-independent host code and each further dtype would only add program builds.
std::vector<infiniDtype_t> absentTestDtypes(DeviceParam p) {
  if (isDeviceMemory(p)) return {INFINI_DTYPE_F32};
  return {std::begin(kFloatDtypes), std::end(kFloatDtypes)};
}

// ClippedSwiglu into `out` (dy NULL) or ClippedSwigluBackward into `out` (dy given), created
// without group_index and called with `junk` as its pointer.
infiniStatus_t runWithoutGroupIndex(infiniopHandle_t h, TensorBuffer &out, TensorBuffer *dy,
                                    TensorBuffer &x, const Attrs &at, GroupJunk junk) {
  std::vector<int64_t> staged(64, junk == GroupJunk::kZeroCounts ? 0 : -1), host(64, -1);
  const std::vector<int64_t> staged_before = staged, host_before = host;
  auto od = out.descriptor(), xd = x.descriptor();
  auto dd = dy ? dy->descriptor() : nullptr;
  infiniopClippedSwigluDescriptor_t forward = nullptr;
  infiniopClippedSwigluBackwardDescriptor_t backward = nullptr;
  infiniStatus_t s =
      dy ? infiniopCreateClippedSwigluBackwardDescriptor(h, &backward, od, dd, xd, nullptr, at.dim,
                                                         at.alpha, at.limit, at.bias,
                                                         at.interleaved)
         : infiniopCreateClippedSwigluDescriptor(h, &forward, od, xd, nullptr, at.dim, at.alpha,
                                                 at.limit, at.bias, at.interleaved);
  last_error = infiniopGetLastError();
  infiniopDestroyTensorDescriptor(od);
  infiniopDestroyTensorDescriptor(xd);
  if (dd) infiniopDestroyTensorDescriptor(dd);
  if (s != INFINI_STATUS_SUCCESS) return s;
  size_t workspace_size = 0;
  EXPECT_EQ(dy ? infiniopGetClippedSwigluBackwardWorkspaceSize(backward, &workspace_size)
               : infiniopGetClippedSwigluWorkspaceSize(forward, &workspace_size),
            INFINI_STATUS_SUCCESS);
  DeviceMirror device(h);
  device.add(out);
  if (dy) device.add(*dy);
  device.add(x);
  device.add(staged.data(), staged.size() * sizeof(int64_t));  // written back: must not change
  void *workspace = device.scratch(workspace_size);
  const void *group_index = junk == GroupJunk::kNull                 ? nullptr
                            : junk == GroupJunk::kHostNegativeCounts ? host.data()
                                                                     : device(staged.data());
  s = dy ? infiniopClippedSwigluBackward(backward, workspace, workspace_size, device(out),
                                         device(*dy), device(x), group_index, nullptr)
         : infiniopClippedSwiglu(forward, workspace, workspace_size, device(out), device(x),
                                 group_index, nullptr);
  last_error = infiniopGetLastError();
  device.download();
  EXPECT_TRUE(staged == staged_before && host == host_before)
      << "the junk behind the absent group_index was written";
  if (dy)
    infiniopDestroyClippedSwigluBackwardDescriptor(backward);
  else
    infiniopDestroyClippedSwigluDescriptor(forward);
  return s;
}

TEST_P(DeviceTest, ClippedSwigluIgnoresAbsentGroupIndexPointer) {
  const size_t pre = 5, P = 37, L = 2 * P;  // P: opencl's vector width and a tail
  uint64_t seed = 9001;
  for (infiniDtype_t dtype : absentTestDtypes(GetParam()))
    for (bool interleaved : {true, false}) {
      Attrs at;
      at.interleaved = interleaved;
      SCOPED_TRACE(std::string(infiniop::dtypeName(dtype)) + " " + attrsName(at));
      TensorBuffer x({pre, L}, dtype), y({pre, P}, dtype), dy({pre, P}, dtype), dx({pre, L}, dtype);
      x.fill([&](size_t i) { return signedValue(seed, i, 2 * at.limit); });  // some clipped
      dy.fill([&](size_t i) { return signedValue(seed + 1, i, 4.0f); });
      seed += 2;
      std::vector<uint8_t> first_y, first_dx;
      for (GroupJunk junk : {GroupJunk::kNull, GroupJunk::kZeroCounts, GroupJunk::kNegativeCounts,
                             GroupJunk::kHostNegativeCounts}) {
        SCOPED_TRACE(groupJunkName(junk));
        y.poison();
        dx.poison();
        ASSERT_EQ(runWithoutGroupIndex(handle(), y, nullptr, x, at, junk), INFINI_STATUS_SUCCESS)
            << last_error;
        ASSERT_EQ(runWithoutGroupIndex(handle(), dx, &dy, x, at, junk), INFINI_STATUS_SUCCESS)
            << last_error;
        int failures = 0;
        const auto check = [&](const char *what, size_t p, size_t j, float got, long double truth,
                               double tol, bool masked) {
          const std::string problem =
              masked ? (got == 0 ? "" : "not exactly 0") : compareToTruth(dtype, got, truth, tol);
          if (!problem.empty() && failures++ < 5)
            ADD_FAILURE() << what << " row " << p << " pair " << j << " got " << got << ": "
                          << problem;
        };
        for (size_t p = 0; p < pre; ++p)
          for (size_t j = 0; j < P; ++j) {
            const size_t ia = p * L + (interleaved ? 2 * j : j);
            const size_t ib = p * L + (interleaved ? 2 * j + 1 : P + j);
            const Truth t = oracle(dtype, x.get(ia), x.get(ib), dy.get(p * P + j), at);
            check("y", p, j, y.get(p * P + j), t.y, t.tol_y, false);
            check("dA", p, j, dx.get(ia), t.dA, t.tol_dA, t.dA_masked);
            check("dB", p, j, dx.get(ib), t.dB, t.tol_dB, t.dB_masked);
          }
        if (junk == GroupJunk::kNull) {
          first_y = y.storage();
          first_dx = dx.storage();
        } else {
          EXPECT_TRUE(y.storage() == first_y) << "y differs from the run with NULL";
          EXPECT_TRUE(dx.storage() == first_dx) << "x_grad differs from the run with NULL";
        }
      }
    }
}

// ---------------------------------------------------------------- zero-size tensors
TEST_P(DeviceTest, ClippedSwigluZeroSize) {
  TensorBuffer x({0, 4}, INFINI_DTYPE_F32), y({0, 2}, INFINI_DTYPE_F32),
      dy({0, 2}, INFINI_DTYPE_F32), dx({0, 4}, INFINI_DTYPE_F32);
  const GroupIndex groups = GroupIndex::counts({3});
  EXPECT_EQ(runForward(handle(), y, x, nullptr, Attrs{}), INFINI_STATUS_SUCCESS) << last_error;
  EXPECT_EQ(runForward(handle(), y, x, &groups, Attrs{}), INFINI_STATUS_SUCCESS) << last_error;
  EXPECT_EQ(runBackward(handle(), dx, dx.data(), dy, x, &groups, Attrs{}), INFINI_STATUS_SUCCESS)
      << last_error;
}

// ---------------------------------------------------------------- bad arguments
TEST_P(DeviceTest, ClippedSwigluBadArguments) {
  TensorBuffer x({4, 6}, INFINI_DTYPE_F32), y({4, 3}, INFINI_DTYPE_F32);
  TensorBuffer odd({4, 5}, INFINI_DTYPE_F32), y_odd({4, 2}, INFINI_DTYPE_F32);
  TensorBuffer y16({4, 3}, INFINI_DTYPE_F16), wrong({4, 2}, INFINI_DTYPE_F32),
      whole({4, 6}, INFINI_DTYPE_F32), broadcast({4, 3}, {3, 0}, INFINI_DTYPE_F32);
  x.fill([](size_t i) { return signedValue(1, i, 3.0f); });
  y.fill([](size_t) { return 7.0f; });
  const std::vector<uint8_t> before = y.storage();
  const auto expect = [&](infiniStatus_t status, TensorBuffer &out, TensorBuffer &in,
                          const GroupIndex *groups, const Attrs &at, const char *what) {
    out.fill([](size_t) { return 7.0f; });
    const std::vector<uint8_t> out_before = out.storage();
    EXPECT_EQ(runForward(handle(), out, in, groups, at), status) << what;
    EXPECT_NE(last_error, "") << what;
    EXPECT_EQ(out.storage(), out_before) << what;
    EXPECT_EQ(y.storage(), before) << what;
  };
  const auto with = [](float alpha, float limit, float bias, int64_t dim = -1) {
    return Attrs{dim, alpha, limit, bias, true};
  };
  expect(INFINI_STATUS_BAD_TENSOR_SHAPE, y_odd, odd, nullptr, Attrs{}, "odd split size");
  expect(INFINI_STATUS_BAD_PARAM, y, x, nullptr, with(1.702f, 7, 1, 2), "dim 2 of rank 2");
  expect(INFINI_STATUS_BAD_PARAM, y, x, nullptr, with(1.702f, 7, 1, -3), "dim -3 of rank 2");
  expect(INFINI_STATUS_BAD_PARAM, y, x, nullptr, with(1.702f, 7, 1, INT64_MIN), "dim INT64_MIN");
  expect(INFINI_STATUS_BAD_PARAM, y, x, nullptr, with(1.702f, 7, 1, int64_t{1} << 40), "dim 2^40");
  expect(INFINI_STATUS_BAD_TENSOR_SHAPE, wrong, x, nullptr, Attrs{}, "y [4,2]");
  expect(INFINI_STATUS_BAD_TENSOR_SHAPE, whole, x, nullptr, Attrs{}, "y [4,6]");
  expect(INFINI_STATUS_BAD_TENSOR_SHAPE, y, x, nullptr, with(1.702f, 7, 1, 0), "dim 0 gives [2,6]");
  expect(INFINI_STATUS_BAD_TENSOR_DTYPE, y16, x, nullptr, Attrs{}, "y F16, x F32");
  expect(INFINI_STATUS_BAD_TENSOR_STRIDES, broadcast, x, nullptr, Attrs{}, "broadcast y");
  for (float limit : {0.0f, -0.0f, -1.0f, -INFINITY, NAN})
    expect(INFINI_STATUS_BAD_PARAM, y, x, nullptr, with(1.702f, limit, 1), "bad limit");
  for (float bad : {INFINITY, -INFINITY, NAN}) {
    expect(INFINI_STATUS_BAD_PARAM, y, x, nullptr, with(bad, 7, 1), "bad alpha");
    expect(INFINI_STATUS_BAD_PARAM, y, x, nullptr, with(1.702f, 7, bad), "bad bias");
  }
  // clamp_mode: 0 or 1 (V2), checked first; alpha, bias and limit still in clamp_mode 1.
  for (int64_t mode : {int64_t{2}, int64_t{-1}, INT64_MIN, INT64_MAX}) {
    Attrs at;
    at.clamp_mode = mode;
    expect(INFINI_STATUS_BAD_PARAM, y, x, nullptr, at, "bad clamp_mode");
    EXPECT_NE(last_error.find("clamp_mode " + std::to_string(mode)), std::string::npos)
        << last_error;
    at.dim = 5;  // a bad dim too: the clamp_mode is named
    expect(INFINI_STATUS_BAD_PARAM, y, x, nullptr, at, "bad clamp_mode and dim");
    EXPECT_NE(last_error.find("clamp_mode"), std::string::npos) << last_error;
  }
  for (const Attrs &bad : {Attrs{-1, INFINITY, 7, 1, true, 1}, Attrs{-1, 1.702f, 7, NAN, true, 1},
                           Attrs{-1, 1.702f, -1, 1, true, 1}, Attrs{-1, 1.702f, NAN, 1, true, 1}})
    expect(INFINI_STATUS_BAD_PARAM, y, x, nullptr, bad, "clamp_mode 1, bad attribute");
  expect(INFINI_STATUS_BAD_TENSOR_SHAPE, y_odd, odd, nullptr, Attrs{-1, 1.702f, 7, 1, true, 1},
         "clamp_mode 1, odd split size");
  // group_index: checked at create (dtype, rank) or at calculate (values, NULL pointer).
  const GroupIndex negative = GroupIndex::counts({2, -1});
  expect(INFINI_STATUS_BAD_PARAM, y, x, &negative, Attrs{}, "negative count");
  const GroupIndex negative_late = GroupIndex::counts({5, -1});  // after the sum reached pre
  expect(INFINI_STATUS_BAD_PARAM, y, x, &negative_late, Attrs{}, "negative count after sum");
  GroupIndex i32 = GroupIndex::counts({1, 1});
  i32.withDtype(INFINI_DTYPE_I32);
  expect(INFINI_STATUS_BAD_TENSOR_DTYPE, y, x, &i32, Attrs{}, "group_index I32");
  GroupIndex f32 = GroupIndex::counts({1, 1});
  f32.withDtype(INFINI_DTYPE_F32);
  expect(INFINI_STATUS_BAD_TENSOR_DTYPE, y, x, &f32, Attrs{}, "group_index F32");
  GroupIndex rank2 = GroupIndex::counts({1, 1});
  rank2.withShape({1, 2});
  expect(INFINI_STATUS_BAD_TENSOR_SHAPE, y, x, &rank2, Attrs{}, "group_index rank 2");
  GroupIndex null_data = GroupIndex::counts({1, 1});
  null_data.withNullData();
  expect(INFINI_STATUS_NULL_POINTER, y, x, &null_data, Attrs{}, "NULL group_index pointer");

  // NULL pointers.
  auto yd = y.descriptor(), xd = x.descriptor();
  infiniopClippedSwigluDescriptor_t op = nullptr;
  EXPECT_EQ(infiniopCreateClippedSwigluDescriptor(handle(), nullptr, yd, xd, nullptr, -1, 1.702f, 7,
                                                  1, true),
            INFINI_STATUS_NULL_POINTER);
  EXPECT_NE(std::string(infiniopGetLastError()), "");
  EXPECT_EQ(
      infiniopCreateClippedSwigluDescriptor(nullptr, &op, yd, xd, nullptr, -1, 1.702f, 7, 1, true),
      INFINI_STATUS_NULL_POINTER);
  EXPECT_NE(std::string(infiniopGetLastError()), "");
  EXPECT_EQ(infiniopCreateClippedSwigluDescriptor(handle(), &op, nullptr, xd, nullptr, -1, 1.702f,
                                                  7, 1, true),
            INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopCreateClippedSwigluDescriptor(handle(), &op, yd, nullptr, nullptr, -1, 1.702f,
                                                  7, 1, true),
            INFINI_STATUS_NULL_POINTER);
  ASSERT_EQ(
      infiniopCreateClippedSwigluDescriptor(handle(), &op, yd, xd, nullptr, -1, 1.702f, 7, 1, true),
      INFINI_STATUS_SUCCESS);
  DeviceMirror device(handle());
  device.add(y);
  device.add(x);
  EXPECT_EQ(infiniopClippedSwiglu(op, nullptr, 0, nullptr, device(x), nullptr, nullptr),
            INFINI_STATUS_NULL_POINTER);
  EXPECT_NE(std::string(infiniopGetLastError()), "");
  EXPECT_EQ(infiniopClippedSwiglu(op, nullptr, 0, device(y), nullptr, nullptr, nullptr),
            INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopGetClippedSwigluWorkspaceSize(op, nullptr), INFINI_STATUS_NULL_POINTER);
  device.download();
  EXPECT_EQ(y.storage(), before);
  EXPECT_EQ(infiniopDestroyClippedSwigluDescriptor(op), INFINI_STATUS_SUCCESS);
  infiniopDestroyTensorDescriptor(yd);
  infiniopDestroyTensorDescriptor(xd);
  size_t size = 0;
  EXPECT_EQ(infiniopGetClippedSwigluWorkspaceSize(nullptr, &size), INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopClippedSwiglu(nullptr, nullptr, 0, device(y), device(x), nullptr, nullptr),
            INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopDestroyClippedSwigluDescriptor(nullptr), INFINI_STATUS_NULL_POINTER);
  device.download();
  EXPECT_EQ(y.storage(), before);
}

TEST_P(DeviceTest, ClippedSwigluBackwardBadArguments) {
  TensorBuffer x({4, 6}, INFINI_DTYPE_F32), dy({4, 3}, INFINI_DTYPE_F32),
      dx({4, 6}, INFINI_DTYPE_F32);
  TensorBuffer odd({4, 5}, INFINI_DTYPE_F32), dy_odd({4, 2}, INFINI_DTYPE_F32),
      dx_odd({4, 5}, INFINI_DTYPE_F32);
  TensorBuffer dx_small({4, 3}, INFINI_DTYPE_F32), dy_wrong({4, 6}, INFINI_DTYPE_F32),
      dy16({4, 3}, INFINI_DTYPE_BF16), dx16({4, 6}, INFINI_DTYPE_F16);
  x.fill([](size_t i) { return signedValue(2, i, 3.0f); });
  dy.fill([](size_t i) { return signedValue(3, i, 3.0f); });
  dx.fill([](size_t) { return 5.0f; });
  const std::vector<uint8_t> before = dx.storage(), x_before = x.storage();
  const auto expect = [&](infiniStatus_t status, TensorBuffer &out, void *out_data,
                          TensorBuffer &grad, TensorBuffer &in, const GroupIndex *groups,
                          const Attrs &at, const char *what) {
    const std::vector<uint8_t> out_before = out.storage();
    EXPECT_EQ(runBackward(handle(), out, out_data, grad, in, groups, at), status) << what;
    EXPECT_NE(last_error, "") << what;
    EXPECT_EQ(out.storage(), out_before) << what;
    EXPECT_EQ(dx.storage(), before) << what;
    EXPECT_EQ(x.storage(), x_before) << what;
  };
  const auto with = [](float alpha, float limit, float bias, int64_t dim = -1) {
    return Attrs{dim, alpha, limit, bias, false};
  };
  expect(INFINI_STATUS_BAD_TENSOR_SHAPE, dx_odd, dx_odd.data(), dy_odd, odd, nullptr, Attrs{},
         "odd split size");
  expect(INFINI_STATUS_BAD_PARAM, dx, dx.data(), dy, x, nullptr, with(1.702f, 7, 1, 2), "dim 2");
  expect(INFINI_STATUS_BAD_PARAM, dx, dx.data(), dy, x, nullptr, with(1.702f, 7, 1, -3), "dim -3");
  expect(INFINI_STATUS_BAD_TENSOR_SHAPE, dx_small, dx.data(), dy, x, nullptr, Attrs{},
         "x_grad [4,3]");
  expect(INFINI_STATUS_BAD_TENSOR_SHAPE, dx, dx.data(), dy_wrong, x, nullptr, Attrs{},
         "y_grad [4,6]");
  expect(INFINI_STATUS_BAD_TENSOR_DTYPE, dx, dx.data(), dy16, x, nullptr, Attrs{}, "y_grad BF16");
  expect(INFINI_STATUS_BAD_TENSOR_DTYPE, dx16, dx.data(), dy, x, nullptr, Attrs{}, "x_grad F16");
  // x_grad overlapping x without being exactly x.
  expect(INFINI_STATUS_BAD_TENSOR_STRIDES, dx, static_cast<float *>(x.data()) + 1, dy, x, nullptr,
         Attrs{}, "x_grad overlaps x");
  for (float limit : {0.0f, -2.0f, NAN})
    expect(INFINI_STATUS_BAD_PARAM, dx, dx.data(), dy, x, nullptr, with(1.702f, limit, 1),
           "bad limit");
  for (float bad : {INFINITY, NAN}) {
    expect(INFINI_STATUS_BAD_PARAM, dx, dx.data(), dy, x, nullptr, with(bad, 7, 1), "bad alpha");
    expect(INFINI_STATUS_BAD_PARAM, dx, dx.data(), dy, x, nullptr, with(1.702f, 7, bad),
           "bad bias");
  }
  // clamp_mode: 0 or 1 (V2); alpha and bias are validated in clamp_mode 1 too.
  for (int64_t mode : {int64_t{2}, int64_t{-1}, INT64_MIN, INT64_MAX}) {
    Attrs at;
    at.clamp_mode = mode;
    expect(INFINI_STATUS_BAD_PARAM, dx, dx.data(), dy, x, nullptr, at, "bad clamp_mode");
    EXPECT_NE(last_error.find("clamp_mode " + std::to_string(mode)), std::string::npos)
        << last_error;
  }
  Attrs after = with(NAN, 7, 1);
  after.clamp_mode = 1;
  expect(INFINI_STATUS_BAD_PARAM, dx, dx.data(), dy, x, nullptr, after, "clamp_mode 1, NaN alpha");
  after = with(1.702f, 0, 1);
  after.clamp_mode = 1;
  expect(INFINI_STATUS_BAD_PARAM, dx, dx.data(), dy, x, nullptr, after, "clamp_mode 1, limit 0");
  const GroupIndex negative = GroupIndex::counts({1, -2, 1});
  expect(INFINI_STATUS_BAD_PARAM, dx, dx.data(), dy, x, &negative, Attrs{}, "negative count");
  // In place too: a negative count must not touch x.
  expect(INFINI_STATUS_BAD_PARAM, x, x.data(), dy, x, &negative, Attrs{}, "negative, in place");
  GroupIndex i32 = GroupIndex::counts({1, 1});
  i32.withDtype(INFINI_DTYPE_I32);
  expect(INFINI_STATUS_BAD_TENSOR_DTYPE, dx, dx.data(), dy, x, &i32, Attrs{}, "group_index I32");
  GroupIndex rank2 = GroupIndex::counts({1, 1});
  rank2.withShape({2, 1});
  expect(INFINI_STATUS_BAD_TENSOR_SHAPE, dx, dx.data(), dy, x, &rank2, Attrs{},
         "group_index rank 2");
  GroupIndex null_data = GroupIndex::counts({4});
  null_data.withNullData();
  expect(INFINI_STATUS_NULL_POINTER, dx, dx.data(), dy, x, &null_data, Attrs{},
         "NULL group_index pointer");

  auto gd = dx.descriptor(), yd = dy.descriptor(), xd = x.descriptor();
  infiniopClippedSwigluBackwardDescriptor_t op = nullptr;
  EXPECT_EQ(infiniopCreateClippedSwigluBackwardDescriptor(handle(), nullptr, gd, yd, xd, nullptr,
                                                          -1, 1.702f, 7, 1, true),
            INFINI_STATUS_NULL_POINTER);
  EXPECT_NE(std::string(infiniopGetLastError()), "");
  EXPECT_EQ(infiniopCreateClippedSwigluBackwardDescriptor(nullptr, &op, gd, yd, xd, nullptr, -1,
                                                          1.702f, 7, 1, true),
            INFINI_STATUS_NULL_POINTER);
  EXPECT_NE(std::string(infiniopGetLastError()), "");
  EXPECT_EQ(infiniopCreateClippedSwigluBackwardDescriptor(handle(), &op, gd, nullptr, xd, nullptr,
                                                          -1, 1.702f, 7, 1, true),
            INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopCreateClippedSwigluBackwardDescriptor(handle(), &op, gd, yd, nullptr, nullptr,
                                                          -1, 1.702f, 7, 1, true),
            INFINI_STATUS_NULL_POINTER);
  infiniopDestroyTensorDescriptor(gd);
  infiniopDestroyTensorDescriptor(yd);
  infiniopDestroyTensorDescriptor(xd);
  EXPECT_EQ(infiniopDestroyClippedSwigluBackwardDescriptor(nullptr), INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(dx.storage(), before);
}

}  // namespace
}  // namespace infiniop_test::clipped_swiglu
