// SPDX-License-Identifier: Apache-2.0
// MoeZLoss and MoeZLossGrad (docs/moe_z_loss.md) on every device (cpu_reference, cpu at every
// Highway target, opencl) against this file's long double oracle written from Megatron-LM's
// z_loss_func (coeff * mean_t logsumexp(x_t)^2) and its derivative: F32/F16/BF16, signed logits
// from near zero to |x| = 1e4 (where exp would overflow without the max), rows of equal values,
// -inf entries, E = 1, T = 0 and T across the 256-row blocks, strided and 3-D x; rows whose max is
// +-inf or NaN as the doc states; bad arguments (status, nothing written). Outputs poisoned
// before each call.
//
// The bound (u = 2^-24, K = f32_bound_u::moe_z_loss, per row t: lse_t, z_t = lse_t^2, p_tj the
// softmax, a_tj = m_t - x_tj, A_t = sum_j a_tj p_tj, chain = ceil(E / 16) + 4, the 16-slot sum's
// longest addition chain; n_B = min(T, 256) + ceil(T / 256) the additions of the blocked sum):
//   loss:   |err| <= u |coeff| / T sum_t ((n_B + K) z_t + 2 |lse_t| (A_t + chain + K)) + 2^-149
//   grad_x: |err| <= u |c g| p_tj (|lse_t| (K + a_tj + A_t + chain) + A_t + chain + K)
//                    + 2^-125 |c g lse_t| + 2^-149 (+ 1 ulp of F16/BF16),   c = 2 coeff / T.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "accuracy_bounds.h"
#include "device_memory.h"
#include "device_param.h"
#include "tensor_buffer.h"

namespace infiniop_test {
namespace {

constexpr auto F32 = INFINI_DTYPE_F32;
constexpr auto F16 = INFINI_DTYPE_F16;
constexpr auto BF16 = INFINI_DTYPE_BF16;
constexpr double kU = 0x1p-24;
const double kK = f32_bound_u::moe_z_loss;
double g_worst_k = 0;      // the largest K the comparisons needed (printed at exit)
double g_worst_share = 0;  // the largest error as a share of its bound

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// One row of the oracle in long double.
struct Row {
  long double m = 0, lse = 0, A = 0;
  std::vector<long double> p, a;
};
Row rowOf(TensorBuffer &x, size_t r, size_t E) {
  Row w;
  std::vector<long double> v(E);
  w.m = -INFINITY;
  bool nan = false;
  for (size_t j = 0; j < E; ++j) {
    v[j] = x.get(r * E + j);
    nan = nan || std::isnan(v[j]);
    w.m = std::max(w.m, v[j]);
  }
  if (nan) {
    w.lse = NAN;
    return w;
  }
  if (std::isinf(w.m)) {
    w.lse = w.m;
    return w;
  }
  long double s = 0;
  for (size_t j = 0; j < E; ++j) s += std::exp(v[j] - w.m);
  w.lse = w.m + std::log(s);
  for (size_t j = 0; j < E; ++j) {
    // a -inf entry: p = 0 and its rounding costs nothing (its term is 0, not inf * 0)
    w.a.push_back(std::isinf(v[j]) ? 0 : w.m - v[j]);
    w.p.push_back(std::exp(v[j] - w.m) / s);
    w.A += w.a.back() * w.p.back();
  }
  return w;
}
double chainOf(size_t E) {
  return std::ceil(E / 16.0) + 4;
}

class MoeZLoss : public DeviceTest {
 protected:
  infiniStatus_t forward(TensorBuffer &loss, TensorBuffer &x, double coeff) {
    loss.poison();
    infiniopTensorDescriptor_t ld = loss.descriptor(), xd = x.descriptor();
    infiniopMoeZLossDescriptor_t desc = nullptr;
    infiniStatus_t status = infiniopCreateMoeZLossDescriptor(handle(), &desc, ld, xd, coeff);
    error_ = infiniopGetLastError();
    infiniopDestroyTensorDescriptor(ld);
    infiniopDestroyTensorDescriptor(xd);
    if (status != INFINI_STATUS_SUCCESS) return status;
    size_t size = 0;
    EXPECT_EQ(infiniopGetMoeZLossWorkspaceSize(desc, &size), INFINI_STATUS_SUCCESS);
    DeviceMirror device(handle());
    device.add(loss);
    device.addInput(x.storageBytes(), x.storage().size());
    status = infiniopMoeZLoss(desc, device.scratch(size), size, device(loss), device(x), nullptr);
    error_ = infiniopGetLastError();
    device.download();
    EXPECT_EQ(infiniopDestroyMoeZLossDescriptor(desc), INFINI_STATUS_SUCCESS);
    return status;
  }
  infiniStatus_t grad(TensorBuffer &grad_x, TensorBuffer &grad_loss, TensorBuffer &x,
                      double coeff) {
    grad_x.poison();
    infiniopTensorDescriptor_t gd = grad_x.descriptor(), ld = grad_loss.descriptor(),
                               xd = x.descriptor();
    infiniopMoeZLossGradDescriptor_t desc = nullptr;
    infiniStatus_t status =
        infiniopCreateMoeZLossGradDescriptor(handle(), &desc, gd, ld, xd, coeff);
    error_ = infiniopGetLastError();
    infiniopDestroyTensorDescriptor(gd);
    infiniopDestroyTensorDescriptor(ld);
    infiniopDestroyTensorDescriptor(xd);
    if (status != INFINI_STATUS_SUCCESS) return status;
    size_t size = 0;
    EXPECT_EQ(infiniopGetMoeZLossGradWorkspaceSize(desc, &size), INFINI_STATUS_SUCCESS);
    DeviceMirror device(handle());
    device.add(grad_x);
    device.addInput(grad_loss.storageBytes(), grad_loss.storage().size());
    device.addInput(x.storageBytes(), x.storage().size());
    status = infiniopMoeZLossGrad(desc, device.scratch(size), size, device(grad_x),
                                  device(grad_loss), device(x), nullptr);
    error_ = infiniopGetLastError();
    device.download();
    EXPECT_EQ(infiniopDestroyMoeZLossGradDescriptor(desc), INFINI_STATUS_SUCCESS);
    return status;
  }

  // The forward of x (T rows of E, row-major element order) against the oracle.
  void expectLoss(TensorBuffer &x, size_t T, size_t E, double coeff, const std::string &what) {
    TensorBuffer loss({}, F32);
    ASSERT_EQ(forward(loss, x, coeff), INFINI_STATUS_SUCCESS) << error_;
    long double sum = 0, terms = 0;
    const double nB = std::min<size_t>(T, 256) + std::ceil(T / 256.0);
    for (size_t r = 0; r < T; ++r) {
      const Row w = rowOf(x, r, E);
      const long double z = w.lse * w.lse;
      sum += z;
      terms += nB * z + 2 * std::fabs(w.lse) * (w.A + chainOf(E));
      terms += kK * (z + 2 * std::fabs(w.lse));  // K's share
    }
    const double scale = std::fabs(coeff) / static_cast<double>(std::max<size_t>(T, 1));
    const double want = static_cast<double>(sum * coeff / std::max<size_t>(T, 1));
    const double got = loss.get(0);
    if (std::isnan(want) || std::isinf(want)) {
      if (std::isnan(want))
        EXPECT_EQ(bitsOf(loss.get(0)), 0x7fc00000u) << what;
      else
        EXPECT_EQ(got, want) << what;
      return;
    }
    const double allowed = kU * scale * static_cast<double>(terms) + 0x1p-149;
    const double err = std::fabs(got - want);
    if (T > 0 && terms > 0) {
      // the K that would just cover err (terms less K's share, over K's share per unit)
      long double base = 0, share = 0;
      for (size_t r = 0; r < T; ++r) {
        const Row w = rowOf(x, r, E);
        base += nB * w.lse * w.lse + 2 * std::fabs(w.lse) * (w.A + chainOf(E));
        share += w.lse * w.lse + 2 * std::fabs(w.lse);
      }
      if (share > 0)
        g_worst_k = std::max(g_worst_k, static_cast<double>((err / (kU * scale) - base) / share));
    }
    g_worst_share = std::max(g_worst_share, err / allowed);
    EXPECT_LE(err, allowed) << what << ": got " << got << ", want " << want;
  }

  // The grad of x with grad_loss g against the oracle; grad_x of x's layout and dtype.
  void expectGrad(TensorBuffer &x, TensorBuffer &grad_x, size_t T, size_t E, double coeff, float g,
                  const std::string &what) {
    TensorBuffer grad_loss({}, F32);
    grad_loss.set(0, g);
    ASSERT_EQ(grad(grad_x, grad_loss, x, coeff), INFINI_STATUS_SUCCESS) << error_;
    const long double c = 2.0L * coeff / static_cast<long double>(std::max<size_t>(T, 1));
    size_t failures = 0;
    for (size_t r = 0; r < T; ++r) {
      const Row w = rowOf(x, r, E);
      for (size_t j = 0; j < E; ++j) {
        const double got = grad_x.get(r * E + j);
        if (!std::isfinite(w.lse)) {
          EXPECT_TRUE(std::isnan(got)) << what << " row " << r << " col " << j;
          continue;
        }
        const double want = static_cast<double>(c * g * w.lse * w.p[j]);
        const double cg = static_cast<double>(std::fabs(c * g));
        const double base = static_cast<double>(
            cg * w.p[j] * (std::fabs(w.lse) * (w.a[j] + w.A + chainOf(E)) + w.A + chainOf(E)));
        const double share = static_cast<double>(cg * w.p[j] * (std::fabs(w.lse) + 1));
        const double floor = 0x1p-125 * static_cast<double>(cg * std::fabs(w.lse)) + 0x1p-149 +
                             (grad_x.dtype() == F32 ? 0.0 : ulpOf(grad_x.dtype(), std::fabs(want)));
        const double err = std::fabs(got - want);
        if (share > 0 && err > floor)
          g_worst_k = std::max(g_worst_k, ((err - floor) / kU - base) / share);
        g_worst_share = std::max(g_worst_share, err / (kU * (base + kK * share) + floor));
        if (!(err <= kU * (base + kK * share) + floor) && failures++ < 5)
          ADD_FAILURE() << what << " row " << r << " col " << j << ": got " << got << ", want "
                        << want << " (err " << err << ", allowed "
                        << kU * (base + kK * share) + floor << ")";
      }
    }
  }

  std::string error_;
};

// Signed logits: near zero, [-range, range], and one row in 8 of equal values.
void fillLogits(TensorBuffer &x, size_t T, size_t E, float range, uint64_t seed) {
  for (size_t r = 0; r < T; ++r) {
    const bool equal = r % 8 == 5;
    for (size_t j = 0; j < E; ++j)
      x.set(r * E + j,
            equal ? signedValue(seed, r * E, range) : signedValue(seed, r * E + j, range));
  }
}

const char *nameOf(infiniDtype_t dt) {
  return infiniop::dtypeName(dt);
}

TEST_P(MoeZLoss, MatchesOracle) {
  struct Shape {
    size_t T, E;
  };
  const Shape shapes[] = {{1, 1}, {3, 1}, {7, 5}, {33, 64}, {300, 256}, {513, 17}, {40, 384}};
  for (infiniDtype_t dt : {F32, F16, BF16})
    for (const Shape &s : shapes)
      for (float range : {1.0f, 30.0f, 1e4f}) {
        const std::string what = std::string(nameOf(dt)) + " " + std::to_string(s.T) + "x" +
                                 std::to_string(s.E) + " range " + std::to_string(range);
        TensorBuffer x({s.T, s.E}, dt), grad_x({s.T, s.E}, dt);
        fillLogits(x, s.T, s.E, range, s.T * 131 + s.E);
        expectLoss(x, s.T, s.E, 0.001, what);
        expectGrad(x, grad_x, s.T, s.E, 0.001, 1.0f, what);
        expectGrad(x, grad_x, s.T, s.E, -0.5, 3.25f, what + " g 3.25");
      }
}

TEST_P(MoeZLoss, StridedAndManyDims) {
  for (infiniDtype_t dt : {F32, BF16}) {
    // (2, 3, 40) transposed in its last two dims; and padded.
    const std::vector<size_t> shape{2, 3, 40};
    TensorBuffer xt(shape, {120, 1, 3}, dt), gt(shape, {120, 1, 3}, dt);
    fillLogits(xt, 6, 40, 8.0f, 7);
    expectLoss(xt, 6, 40, 0.01, "transposed");
    expectGrad(xt, gt, 6, 40, 0.01, 1.0f, "transposed");
    TensorBuffer xp(shape, paddedStrides(shape), dt), gp(shape, paddedStrides(shape), dt);
    fillLogits(xp, 6, 40, 8.0f, 8);
    expectLoss(xp, 6, 40, 0.01, "padded");
    expectGrad(xp, gp, 6, 40, 0.01, -2.0f, "padded");
  }
}

TEST_P(MoeZLoss, ManyBlocks) {
  // 1000 rows: 4 blocks, the last partial; past the cpu device's threading threshold.
  TensorBuffer x({1000, 64}, F32), grad_x({1000, 64}, F32);
  fillLogits(x, 1000, 64, 20.0f, 3);
  expectLoss(x, 1000, 64, 0.001, "1000x64");
  expectGrad(x, grad_x, 1000, 64, 0.001, 1.0f, "1000x64");
}

TEST_P(MoeZLoss, ByHand) {
  // Equal rows: lse = x + log E. Row 0: (0, 0, 0, 0): lse = log 4; row 1: (2, 2, 2, 2):
  // lse = 2 + log 4. E = 1: lse = x exactly, grad = 2 coeff / T g x.
  TensorBuffer x({2, 4}, F32), grad_x({2, 4}, F32);
  x.fill([](size_t i) { return i < 4 ? 0.0f : 2.0f; });
  TensorBuffer loss({}, F32);
  ASSERT_EQ(forward(loss, x, 1.0), INFINI_STATUS_SUCCESS) << error_;
  const double l4 = std::log(4.0);
  EXPECT_NEAR(loss.get(0), (l4 * l4 + (2 + l4) * (2 + l4)) / 2, 1e-6);
  TensorBuffer one({3, 1}, F32), g1({3, 1}, F32);
  one.set(0, 3.0f), one.set(1, -0.5f), one.set(2, 1e4f);
  ASSERT_EQ(forward(loss, one, 0.5), INFINI_STATUS_SUCCESS) << error_;
  EXPECT_FLOAT_EQ(loss.get(0), static_cast<float>((9.0 + 0.25 + 1e8) * 0.5 / 3));
  expectGrad(one, g1, 3, 1, 0.5, 1.0f, "E = 1");
  EXPECT_FLOAT_EQ(g1.get(2), static_cast<float>(2 * 0.5 / 3 * 1e4));
}

TEST_P(MoeZLoss, NoOverflowAtLargeLogits) {
  // exp(100) overflows F32: the max keeps every exponent <= 0. lse = 100 + log(1 + e^-1 + e^-99)
  TensorBuffer x({2, 3}, F32), grad_x({2, 3}, F32);
  const float v[] = {100.0f, 99.0f, 1.0f, -3e4f, -3e4f + 1, 3e4f};
  for (size_t i = 0; i < 6; ++i) x.set(i, v[i]);
  expectLoss(x, 2, 3, 1e-3, "large");
  expectGrad(x, grad_x, 2, 3, 1e-3, 1.0f, "large");
  TensorBuffer loss({}, F32);
  ASSERT_EQ(forward(loss, x, 1e-3), INFINI_STATUS_SUCCESS);
  EXPECT_TRUE(std::isfinite(loss.get(0)));
}

TEST_P(MoeZLoss, SpecialRows) {
  // Row 0: -inf entries (exp 0, finite lse). Row 1: every entry -inf (lse -inf, z +inf).
  // Row 2: a +inf (lse +inf). Row 3: a NaN. The grad: NaN on rows 1-3 only.
  const float inf = std::numeric_limits<float>::infinity();
  const float rows[4][3] = {
      {-inf, 1.0f, -inf}, {-inf, -inf, -inf}, {1.0f, inf, 2.0f}, {1.0f, NAN, 2.0f}};
  for (infiniDtype_t dt : {F32, F16, BF16}) {
    TensorBuffer x({4, 3}, dt), grad_x({4, 3}, dt);
    for (size_t r = 0; r < 4; ++r)
      for (size_t j = 0; j < 3; ++j) x.set(r * 3 + j, rows[r][j]);
    expectGrad(x, grad_x, 4, 3, 0.1, 1.0f, std::string("special ") + nameOf(dt));
    if (dt == F32) EXPECT_FLOAT_EQ(grad_x.get(1), static_cast<float>(2 * 0.1 / 4));  // lse 1, p 1
    EXPECT_EQ(grad_x.get(0), 0.0f);
    for (size_t first : {0u, 1u, 2u}) {
      // loss over row 0 alone: 1 * 0.1; with row 1 or 2: +inf; with row 3: NaN.
      TensorBuffer one({2, 3}, dt);
      for (size_t j = 0; j < 3; ++j) {
        one.set(j, rows[0][j]);
        one.set(3 + j, rows[first + 1][j]);
      }
      TensorBuffer loss({}, F32);
      ASSERT_EQ(forward(loss, one, 0.1), INFINI_STATUS_SUCCESS) << error_;
      if (first < 2)
        EXPECT_EQ(loss.get(0), inf) << first;
      else
        EXPECT_EQ(bitsOf(loss.get(0)), 0x7fc00000u);
    }
    TensorBuffer single({1, 3}, dt);
    for (size_t j = 0; j < 3; ++j) single.set(j, rows[0][j]);
    TensorBuffer loss({}, F32);
    ASSERT_EQ(forward(loss, single, 0.1), INFINI_STATUS_SUCCESS) << error_;
    EXPECT_FLOAT_EQ(loss.get(0), 0.1f);
  }
}

TEST_P(MoeZLoss, NoRows) {
  TensorBuffer x({0, 8}, F32), loss({}, F32), grad_x({0, 8}, F32), g({}, F32);
  ASSERT_EQ(forward(loss, x, 0.001), INFINI_STATUS_SUCCESS) << error_;
  EXPECT_EQ(bitsOf(loss.get(0)), 0u);  // +0
  g.set(0, 1.0f);
  EXPECT_EQ(grad(grad_x, g, x, 0.001), INFINI_STATUS_SUCCESS) << error_;
  // An empty x may have any E: the cpu device's scratch rows of 2 E floats wrapped at E near
  // SIZE_MAX (INTERNAL_ERROR: bad_alloc; a fuzz finding). None are needed without rows.
  const size_t huge = SIZE_MAX;
  TensorBuffer wide({0, huge}, {1, 1}, F32), wide_grad({0, huge}, {1, 1}, F32);
  ASSERT_EQ(forward(loss, wide, 0.001), INFINI_STATUS_SUCCESS) << error_;
  EXPECT_EQ(bitsOf(loss.get(0)), 0u);
  EXPECT_EQ(grad(wide_grad, g, wide, 0.001), INFINI_STATUS_SUCCESS) << error_;
}

TEST_P(MoeZLoss, BadArgumentsWriteNothing) {
  TensorBuffer x({4, 8}, F32), loss({}, F32), grad_x({4, 8}, F32), g({}, F32);
  fillLogits(x, 4, 8, 3.0f, 1);
  g.set(0, 1.0f);
  const auto expectUntouched = [](TensorBuffer &t) {
    TensorBuffer poisoned(t.shape(), t.dtype());
    poisoned.poison();
    EXPECT_EQ(std::memcmp(t.storageBytes(), poisoned.storageBytes(), t.storage().size()), 0);
  };
  {
    TensorBuffer l1({1}, F32), l16({}, F16), x1({8}, F32), x0({4, 0}, F32),
        xi({4, 8}, INFINI_DTYPE_I32);
    EXPECT_EQ(forward(l1, x, 1.0), INFINI_STATUS_BAD_TENSOR_SHAPE);
    EXPECT_NE(error_.find("loss shape"), std::string::npos) << error_;
    EXPECT_EQ(forward(l16, x, 1.0), INFINI_STATUS_BAD_TENSOR_DTYPE);
    EXPECT_EQ(forward(loss, x1, 1.0), INFINI_STATUS_BAD_TENSOR_SHAPE);
    EXPECT_EQ(forward(loss, x0, 1.0), INFINI_STATUS_BAD_TENSOR_SHAPE);
    EXPECT_EQ(forward(loss, xi, 1.0), INFINI_STATUS_BAD_TENSOR_DTYPE);
    EXPECT_EQ(forward(loss, x, INFINITY), INFINI_STATUS_BAD_PARAM);
    EXPECT_EQ(forward(loss, x, 1e39), INFINI_STATUS_BAD_PARAM);
    EXPECT_EQ(forward(loss, x, NAN), INFINI_STATUS_BAD_PARAM);
    expectUntouched(loss);
  }
  {
    TensorBuffer gshape({4, 7}, F32), gdt({4, 8}, BF16), g1({1}, F32), g16({}, BF16);
    EXPECT_EQ(grad(gshape, g, x, 1.0), INFINI_STATUS_BAD_TENSOR_SHAPE);
    EXPECT_EQ(grad(gdt, g, x, 1.0), INFINI_STATUS_BAD_TENSOR_DTYPE);
    EXPECT_EQ(grad(grad_x, g1, x, 1.0), INFINI_STATUS_BAD_TENSOR_SHAPE);
    EXPECT_EQ(grad(grad_x, g16, x, 1.0), INFINI_STATUS_BAD_TENSOR_DTYPE);
    // 2 coeff / T = 2 * 3e38 / 4 overflows F32 where coeff itself does not.
    TensorBuffer x1({1, 8}, F32), gx1({1, 8}, F32);
    EXPECT_EQ(grad(gx1, g, x1, 3e38), INFINI_STATUS_BAD_PARAM);
    EXPECT_NE(error_.find("overflow"), std::string::npos) << error_;
    TensorBuffer overlapping({4, 8}, {0, 1}, F32);
    EXPECT_EQ(grad(overlapping, g, x, 1.0), INFINI_STATUS_BAD_TENSOR_STRIDES);
    expectUntouched(grad_x);
  }
  // NULL data pointers, and grad_x the same memory as x.
  infiniopTensorDescriptor_t ld = loss.descriptor(), xd = x.descriptor();
  infiniopMoeZLossDescriptor_t desc = nullptr;
  ASSERT_EQ(infiniopCreateMoeZLossDescriptor(handle(), &desc, ld, xd, 1.0), INFINI_STATUS_SUCCESS);
  size_t size = 0;
  ASSERT_EQ(infiniopGetMoeZLossWorkspaceSize(desc, &size), INFINI_STATUS_SUCCESS);
  DeviceMirror device(handle());
  device.add(x);
  device.add(loss);
  void *ws = device.scratch(size);
  EXPECT_EQ(infiniopMoeZLoss(desc, ws, size, nullptr, device(x), nullptr),
            INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopMoeZLoss(desc, ws, size, device(loss), nullptr, nullptr),
            INFINI_STATUS_NULL_POINTER);
  if (size > 0)
    EXPECT_EQ(infiniopMoeZLoss(desc, ws, size - 1, device(loss), device(x), nullptr),
              INFINI_STATUS_INSUFFICIENT_WORKSPACE);
  EXPECT_EQ(infiniopDestroyMoeZLossDescriptor(desc), INFINI_STATUS_SUCCESS);
  infiniopDestroyTensorDescriptor(ld);
  infiniopDestroyTensorDescriptor(xd);
  infiniopTensorDescriptor_t gd = grad_x.descriptor(), gld = g.descriptor();
  xd = x.descriptor();
  infiniopMoeZLossGradDescriptor_t gdesc = nullptr;
  ASSERT_EQ(infiniopCreateMoeZLossGradDescriptor(handle(), &gdesc, gd, gld, xd, 1.0),
            INFINI_STATUS_SUCCESS);
  device.add(g);
  EXPECT_EQ(infiniopMoeZLossGrad(gdesc, nullptr, 0, device(x), device(g), device(x), nullptr),
            INFINI_STATUS_BAD_TENSOR_STRIDES);
  EXPECT_EQ(infiniopMoeZLossGrad(gdesc, nullptr, 0, nullptr, device(g), device(x), nullptr),
            INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopDestroyMoeZLossGradDescriptor(gdesc), INFINI_STATUS_SUCCESS);
  infiniopDestroyTensorDescriptor(gd);
  infiniopDestroyTensorDescriptor(gld);
  infiniopDestroyTensorDescriptor(xd);
}

INSTANTIATE_TEST_SUITE_P(Devices, MoeZLoss, ::testing::ValuesIn(allDeviceParams()),
                         [](const ::testing::TestParamInfo<DeviceParam> &info) {
                           return deviceParamName(info.param);
                         });

struct PrintWorstK {
  ~PrintWorstK() {
    std::printf("moe_z_loss: the largest K needed: %.2f; the largest error %.3f of its bound\n",
                g_worst_k, g_worst_share);
  }
} print_worst_k;

}  // namespace
}  // namespace infiniop_test
