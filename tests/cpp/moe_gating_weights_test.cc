// SPDX-License-Identifier: Apache-2.0
// MoeGatingWeights' conformance (docs/moe_gating_weights.md) on every device (cpu_reference, cpu
// on every Highway target, opencl where it runs):
//  - y against the formula in double (softmax and sigmoid p, random indices with duplicates, E = 1
//    to 2048, k = 1 to E, F32/F16/BF16, INT32/INT64, 3-D and padded x, scale and eps), y poisoned
//    before each call, and against cpu_reference within the same bound;
//  - with expert_idx = MoeGatingTopK's own selection (no bias) y has MoeGatingTopK's y bits, with
//    and without groups, both group_select_modes, k above the one-pass selection's 32, rows with
//    infinities;
//  - MoeGatingTopKGrad at the same indices is the derivative of y: central differences in double
//    of the formula against the device's grad;
//  - an expert_idx value outside [0, E) fails the call (BAD_PARAM naming row and column) with y
//    untouched; creation rejects what MoeGatingTopKGrad's rejects.
// The bound is MoeGatingTopK's y's (moe_gating_test.cc): p's own (softmax: u (K + a_j + chain + A)
// p_j; sigmoid: u K p_j) plus the largest selected p's (through S) plus k + 3 roundings.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "accuracy_bounds.h"
#include "device_param.h"
#include "moe_gating.h"

namespace infiniop_test::moe_gating {
namespace {

constexpr double kU = 0x1p-24;
const double kBound = f32_bound_u::moe_gating;

size_t product(const std::vector<size_t> &v) {
  size_t n = 1;
  for (size_t d : v) n *= d;
  return n;
}
std::vector<size_t> with(std::vector<size_t> lead, size_t last) {
  lead.push_back(last);
  return lead;
}
std::vector<double> rowOf(TensorBuffer &t, size_t r, size_t n) {
  std::vector<double> v(n);
  for (size_t j = 0; j < n; ++j) v[j] = t.get(r * n + j);
  return v;
}

// p of one row in double (softmax, or sigmoid per element) and each p_j's condition in units of
// u: softmax a_j + A + chain (a_j = m - x_j, A = sum a_j p_j, chain the 16-slot sum's), sigmoid 2.
struct Probs {
  std::vector<double> p, cond;
};
Probs probsOf(const std::vector<double> &x, int64_t norm_type) {
  const size_t E = x.size();
  Probs out;
  out.p.resize(E);
  out.cond.assign(E, 2.0);
  if (norm_type == 1) {
    for (size_t j = 0; j < E; ++j) out.p[j] = 1 / (1 + std::exp(-x[j]));
    return out;
  }
  const double m = *std::max_element(x.begin(), x.end());
  double sum = 0, A = 0;
  for (size_t j = 0; j < E; ++j) sum += out.p[j] = std::exp(x[j] - m);
  for (size_t j = 0; j < E; ++j) A += (m - x[j]) * (out.p[j] /= sum);
  for (size_t j = 0; j < E; ++j) out.cond[j] = (m - x[j]) + A + std::ceil(E / 16.0) + 4;
  return out;
}
// y_i = p_{s_i} / (sum_i p_{s_i} + eps) * c in double.
std::vector<double> weightsOf(const std::vector<double> &p, const std::vector<size_t> &s,
                              double scale, double eps) {
  double sum = 0;
  for (size_t j : s) sum += p[j];
  std::vector<double> y;
  for (size_t j : s)
    y.push_back(p[j] / (sum + static_cast<double>(static_cast<float>(eps))) *
                static_cast<double>(static_cast<float>(scale)));
  return y;
}

::testing::AssertionResult near(infiniDtype_t dt, double got, double want, double cond) {
  const double floor = 0x1p-125 + 0x1p-149 + (dt == kF32 ? 0.0 : ulpOf(dt, std::fabs(want)));
  const double allowed = kU * (kBound + cond) * std::fabs(want) + floor;
  if (std::fabs(got - want) <= allowed) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "got " << got << ", want " << want << " (allowed " << allowed << ")";
}

struct Case {
  infiniDtype_t dt = kF32, idx = kI32;
  std::vector<size_t> lead{5};
  size_t E = 8, k = 2;
  int64_t norm_type = 1;
  double scale = 1.0, eps = 1e-20;
  bool duplicates = false, padded = false;
};
std::string nameOf(const Case &c) {
  std::string lead;
  for (size_t d : c.lead) lead += std::to_string(d) + "x";
  return lead + std::to_string(c.E) + " k=" + std::to_string(c.k) + " " +
         infiniop::dtypeName(c.dt) + " idx " + infiniop::dtypeName(c.idx) +
         " norm=" + std::to_string(c.norm_type) + " scale=" + std::to_string(c.scale) +
         " eps=" + std::to_string(c.eps) + (c.duplicates ? " duplicates" : "") +
         (c.padded ? " padded" : "");
}

Call weightsCall(const Case &c, TensorBuffer &y, TensorBuffer &x, TensorBuffer &idx) {
  Call call;
  call.op = Op::kWeights;
  call.norm_type = c.norm_type;
  call.scale = c.scale;
  call.eps = c.eps;
  call.t = {&y, &x, &idx};
  poison(&y);
  return call;
}

// Random indices in [0, E) per row; with duplicates, every third slot repeats slot 0.
std::vector<std::vector<size_t>> randomIndices(const Case &c, TensorBuffer &idx, uint64_t seed) {
  const size_t R = product(c.lead);
  std::vector<std::vector<size_t>> s(R);
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t r = 0; r < R; ++r)
    for (size_t i = 0; i < c.k; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const size_t j = c.duplicates && i % 3 == 2 ? s[r][0] : (state >> 33) % c.E;
      s[r].push_back(j);
      setIndex(idx, r * c.k + i, static_cast<int64_t>(j));
    }
  return s;
}

void checkWeights(infiniopHandle_t h, const Case &c, uint64_t seed) {
  SCOPED_TRACE(nameOf(c));
  const size_t R = product(c.lead), E = c.E, k = c.k;
  const auto xs = with(c.lead, E), ys = with(c.lead, k);
  TensorBuffer x = c.padded ? TensorBuffer(xs, paddedStrides(xs), c.dt) : TensorBuffer(xs, c.dt);
  x.fill([&](size_t i) { return signedValue(seed, i, i % 5 == 0 ? 12.0f : 4.0f); });
  TensorBuffer y = c.padded ? TensorBuffer(ys, paddedStrides(ys), c.dt) : TensorBuffer(ys, c.dt);
  TensorBuffer idx(ys, c.idx), ref_y(ys, c.dt);
  const auto s = randomIndices(c, idx, seed);
  const Outcome o = run(h, weightsCall(c, y, x, idx));
  ASSERT_EQ(o.create, INFINI_STATUS_SUCCESS) << o.error;
  ASSERT_EQ(o.calc, INFINI_STATUS_SUCCESS) << o.error;
  Handle reference(INFINI_DEVICE_CPU_REFERENCE);
  ASSERT_EQ(run(reference.get(), weightsCall(c, ref_y, x, idx)).calc, INFINI_STATUS_SUCCESS);
  for (size_t r = 0; r < R; ++r) {
    const Probs p = probsOf(rowOf(x, r, E), c.norm_type);
    const std::vector<double> want = weightsOf(p.p, s[r], c.scale, c.eps);
    double sum_cond = 0;
    for (size_t j : s[r]) sum_cond = std::max(sum_cond, p.cond[j]);
    for (size_t i = 0; i < k; ++i) {
      const double cond = p.cond[s[r][i]] + sum_cond + static_cast<double>(k) + 3;
      EXPECT_TRUE(near(c.dt, y.get(r * k + i), want[i], cond)) << "row " << r << ", slot " << i;
      EXPECT_TRUE(near(c.dt, y.get(r * k + i), ref_y.get(r * k + i), cond + 1))
          << "against cpu_reference: row " << r << ", slot " << i;
    }
  }
}

class MoeGatingWeightsCases : public DeviceTest {};

TEST_P(MoeGatingWeightsCases, MatchesOracle) {
  uint64_t seed = 900;
  for (infiniDtype_t dt : kFloatDtypes)
    for (size_t E : {1, 7, 33, 257, 2048})
      for (size_t k : {size_t{1}, std::min<size_t>(E, 3), std::min<size_t>(E, 40), E}) {
        if (E == 2048 && k == E) continue;
        for (int64_t norm_type : {0, 1}) {
          Case c;
          c.dt = dt;
          c.E = E;
          c.k = k;
          c.norm_type = norm_type;
          c.idx = seed % 2 ? kI32 : kI64;
          c.lead = E >= 1024       ? std::vector<size_t>{2}
                   : seed % 3 == 0 ? std::vector<size_t>{2, 3}
                                   : std::vector<size_t>{5};
          c.scale = seed % 4 == 1 ? 2.5 : 1.0;
          c.eps = seed % 5 == 2 ? 0.25 : 1e-20;
          c.duplicates = k > 2 && seed % 2 == 0;
          c.padded = seed % 3 == 1;
          checkWeights(handle(), c, seed++);
        }
      }
}

// MoeGatingTopK (no bias) on x, then MoeGatingWeights at its expert_idx: the same y bits.
struct Routing {
  size_t E, k;
  int64_t group_count = 1, k_group = 1, mode = 0;
};
void checkSameBits(infiniopHandle_t h, infiniDtype_t dt, infiniDtype_t idx_dt, const Routing &g,
                   int64_t norm_type, uint64_t seed) {
  SCOPED_TRACE(std::string(infiniop::dtypeName(dt)) + " E=" + std::to_string(g.E) +
               " k=" + std::to_string(g.k) + " groups=" + std::to_string(g.group_count) + "/" +
               std::to_string(g.k_group) + " mode=" + std::to_string(g.mode) +
               " norm=" + std::to_string(norm_type));
  const size_t R = 9, E = g.E, k = g.k;
  TensorBuffer x({R, E}, dt), y_top({R, k}, dt), idx({R, k}, idx_dt), y({R, k}, dt);
  x.fill([&](size_t i) {
    const size_t r = i / E, j = i % E;
    if (r == 2 && j % 13 == 5) return -INFINITY;
    if (r == 3 && j == E / 2) return INFINITY;
    if (r == 4) return static_cast<float>(j % 4) - 1.5f;  // ties
    return signedValue(seed, i, r % 2 ? 20.0f : 4.0f);
  });
  Call top;
  top.op = Op::kTopK;
  top.k = static_cast<int64_t>(k);
  top.group_count = g.group_count;
  top.k_group = g.k_group;
  top.mode = g.mode;
  top.norm_type = norm_type;
  top.scale = 2.5;
  top.eps = 1e-20;
  top.t = {&y_top, &idx, nullptr, &x, nullptr};
  poison(&y_top);
  poison(&idx);
  const Outcome o = run(h, top);
  ASSERT_EQ(o.calc, INFINI_STATUS_SUCCESS) << o.error;
  Case c;
  c.norm_type = norm_type;
  c.scale = top.scale;
  c.eps = top.eps;
  const Outcome w = run(h, weightsCall(c, y, x, idx));
  ASSERT_EQ(w.calc, INFINI_STATUS_SUCCESS) << w.error;
  const size_t bytes = infiniop::dtypeSize(dt);
  for (size_t i = 0; i < R * k; ++i)
    EXPECT_EQ(std::memcmp(y.at(i), y_top.at(i), bytes), 0)
        << "row " << i / k << ", slot " << i % k << ": " << y.get(i) << " vs MoeGatingTopK's "
        << y_top.get(i);
}

TEST_P(MoeGatingWeightsCases, SameBitsAsTopK) {
  uint64_t seed = 1200;
  const Routing routings[] = {{8, 2},         {257, 7},          {100, 40},
                              {256, 8, 8, 4}, {256, 8, 8, 4, 1}, {64, 6, 4, 2, 1}};
  for (infiniDtype_t dt : kFloatDtypes)
    for (const Routing &g : routings)
      for (int64_t norm_type : {0, 1})
        checkSameBits(handle(), dt, seed % 2 ? kI32 : kI64, g, norm_type, seed++);
}

// MoeGatingTopKGrad at the indices is the derivative of y: grad_x_j = sum_i g_i dy_i/dx_j, the
// derivative by central differences of the formula in double (step 2^-20 |x_j| or so; the
// formula's third derivative keeps its error near 1e-11).
TEST_P(MoeGatingWeightsCases, TopKGradIsTheDerivative) {
  uint64_t seed = 1500;
  for (int64_t norm_type : {0, 1})
    for (bool duplicates : {false, true}) {
      Case c;
      c.norm_type = norm_type;
      c.E = 9;
      c.k = 4;
      c.lead = {4};
      c.scale = 2.5;
      c.eps = 0.125;
      c.duplicates = duplicates;
      SCOPED_TRACE(nameOf(c));
      const size_t R = 4, E = c.E, k = c.k;
      TensorBuffer x({R, E}, kF32), g({R, k}, kF32), idx({R, k}, kI32), grad_x({R, E}, kF32);
      x.fill([&](size_t i) { return signedValue(seed, i, 3.0f); });
      g.fill([&](size_t i) { return signedValue(seed + 1, i, 2.0f); });
      const auto s = randomIndices(c, idx, seed++);
      Call call;
      call.op = Op::kTopKGrad;
      call.norm_type = c.norm_type;
      call.scale = c.scale;
      call.eps = c.eps;
      call.t = {&grad_x, &g, &x, &idx};
      poison(&grad_x);
      const Outcome o = run(handle(), call);
      ASSERT_EQ(o.calc, INFINI_STATUS_SUCCESS) << o.error;
      for (size_t r = 0; r < R; ++r) {
        const std::vector<double> xr = rowOf(x, r, E), gr = rowOf(g, r, k);
        const auto dot = [&](const std::vector<double> &at) {
          const std::vector<double> y = weightsOf(probsOf(at, c.norm_type).p, s[r], c.scale, c.eps);
          double v = 0;
          for (size_t i = 0; i < k; ++i) v += gr[i] * y[i];
          return v;
        };
        double magnitude = 0;
        for (double v : gr) magnitude += std::fabs(v);
        for (size_t j = 0; j < E; ++j) {
          const double step = 0x1p-20 * std::max(1.0, std::fabs(xr[j]));
          std::vector<double> up = xr, down = xr;
          up[j] += step;
          down[j] -= step;
          const double want = (dot(up) - dot(down)) / (2 * step);
          EXPECT_NEAR(grad_x.get(r * E + j), want, 1e-5 * c.scale * magnitude)
              << "row " << r << ", expert " << j;
        }
      }
    }
}

TEST_P(MoeGatingWeightsCases, IndexOutsideRangeFailsTheCall) {
  for (int64_t bad : {int64_t{-1}, int64_t{8}, int64_t{1} << 40})
    for (infiniDtype_t idx_dt : {kI32, kI64}) {
      if (idx_dt == kI32 && bad > 8) continue;
      TensorBuffer x({3, 8}, kF32), y({3, 2}, kF32), idx({3, 2}, idx_dt);
      x.fill([](size_t i) { return signedValue(7, i, 4.0f); });
      for (size_t i = 0; i < 6; ++i) setIndex(idx, i, static_cast<int64_t>(i));
      setIndex(idx, 2 * 2 + 1, bad);  // row 2, column 1
      Case c;
      const Outcome o = run(handle(), weightsCall(c, y, x, idx));
      EXPECT_EQ(o.create, INFINI_STATUS_SUCCESS) << o.error;
      EXPECT_EQ(o.calc, INFINI_STATUS_BAD_PARAM);
      EXPECT_NE(o.error.find("row 2, column 1"), std::string::npos) << o.error;
      EXPECT_NE(o.error.find(std::to_string(bad)), std::string::npos) << o.error;
      EXPECT_TRUE(untouched(&y)) << "y written by a failed call";
    }
}

TEST_P(MoeGatingWeightsCases, CreationRejects) {
  TensorBuffer x({3, 8}, kF32), y({3, 2}, kF32), y16({3, 2}, kF16), idx({3, 2}, kI32),
      idx_f({3, 2}, kF32), wide({3, 9}, kF32), idx_wide({3, 9}, kI32), y_rows({4, 2}, kF32);
  const auto create = [&](TensorBuffer *yt, TensorBuffer *it, int64_t norm_type, int64_t renorm,
                          double scale, double eps) {
    Case c;
    c.norm_type = norm_type;
    c.scale = scale;
    c.eps = eps;
    Call call = weightsCall(c, *yt, x, *it);
    call.renorm = renorm;
    return run(handle(), call).create;
  };
  EXPECT_EQ(create(&y, &idx, 1, 0, 1.0, 1e-20), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(create(&y, &idx, 0, 0, 1.0, 0.0), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(create(&y, &idx, 7, 0, 1.0, 1e-20), INFINI_STATUS_BAD_PARAM);
  EXPECT_EQ(create(&y, &idx, 1, 1, 1.0, 1e-20), INFINI_STATUS_BAD_PARAM);
  EXPECT_EQ(create(&y, &idx, 1, 0, 1e300, 1e-20), INFINI_STATUS_BAD_PARAM);
  EXPECT_EQ(create(&y, &idx, 1, 0, 1.0, -1.0), INFINI_STATUS_BAD_PARAM);
  EXPECT_EQ(create(&y16, &idx, 1, 0, 1.0, 1e-20), INFINI_STATUS_BAD_TENSOR_DTYPE);
  EXPECT_EQ(create(&y, &idx_f, 1, 0, 1.0, 1e-20), INFINI_STATUS_BAD_TENSOR_DTYPE);
  EXPECT_EQ(create(&wide, &idx_wide, 1, 0, 1.0, 1e-20), INFINI_STATUS_BAD_TENSOR_SHAPE);  // k > E
  EXPECT_EQ(create(&y_rows, &idx, 1, 0, 1.0, 1e-20), INFINI_STATUS_BAD_TENSOR_SHAPE);
  Case c;
  Call call = weightsCall(c, y, x, idx);
  call.t[2] = nullptr;
  EXPECT_EQ(run(handle(), call).create, INFINI_STATUS_NULL_POINTER);
}

INSTANTIATE_TEST_SUITE_P(Devices, MoeGatingWeightsCases, ::testing::ValuesIn(allDeviceParams()),
                         [](const ::testing::TestParamInfo<DeviceParam> &info) {
                           return deviceParamName(info.param);
                         });

}  // namespace
}  // namespace infiniop_test::moe_gating
