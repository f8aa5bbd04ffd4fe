// SPDX-License-Identifier: Apache-2.0
// The router operators' conformance (docs/moe_gating_top_k_softmax.md, docs/moe_gating_top_k.md)
// on every device (cpu_reference, cpu on every Highway target, opencl where it runs them):
//  - values worked by hand: softmax top-k with a tie (renorm 0 and 1), all-equal logits, finished
//    rows, NaN / +inf / -inf rows, DeepSeek-V3's grouping in both group_select_modes, and each
//    grad's formula evaluated here in double;
//  - against cpu_reference (double, the oracle), outputs poisoned before each call: E = 1, 7, 33,
//    257, 2048 with k = 1, a few, E; F32/F16/BF16, INT32/INT64 indices, renorm 0/1, finished
//    rows, row_idx and softmax_out / norm_out, strided and 3-D x, R = 0; DeepSeek-V3 (E 256, 8
//    groups, k_group 4, k 8, sigmoid, bias F32 and x's dtype, scale 2.5, both modes); DeepSeek-V4
//    (sqrtsoftplus, norm_type 2: E 256 and 384, top-6, scale 1.5, bias F32, logits over +-100);
//    group_select_mode 2 (Megatron's sum of the k / k_group largest) with every norm_type; the
//    grads with distinct and duplicate indices, sqrtsoftplus's over +-100 and its far-left tail.
// Bad arguments (status, nothing written) are moe_gating_api_test.cc's.
//
// Error model (u = 2^-24), per row of E experts, a_j = m - x_j (m the row's max):
//  - p_j = softmax: |err| <= u (K + |a_j| + chain + A) p_j + 2^-125 (+ 1 ulp of F16/BF16), with
//    chain = ceil(E / 16) + 4 (the longest addition chain of the 16-slot sum) and A = sum_j |a_j|
//    p_j (the rounding of each a_j carried into the sum). K = f32_bound_u::moe_gating.
//  - renorm 1: the same over the k selected (chain = k).
//  - MoeGatingTopK's y: p's bound (sigmoid: K u p) plus the largest selected p's (D's) plus k + 3
//    roundings of the normalization.
//  - the grads: |err| <= u (K + cond) terms_j, terms_j the sum of the magnitudes of what the
//    formula adds for element j and cond twice the row's largest condition above plus 2k (p_j's
//    own, and the selected p's through their sum).
// A selection may differ from the oracle's only between keys within that bound (near ties that
// F32 rounding makes equal or swaps); the test checks that and compares y at the device's choice.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "accuracy_bounds.h"
#include "device_param.h"
#include "exact/softplus.h"
#include "moe_gating.h"

namespace infiniop_test::moe_gating {
namespace {

constexpr double kU = 0x1p-24;
const double kBound = f32_bound_u::moe_gating;
double g_worst_k = 0;  // the largest K the comparisons needed (printed at exit)

double floorOf(infiniDtype_t dt, double truth) {
  return 0x1p-125 + 0x1p-149 + (dt == kF32 ? 0.0 : ulpOf(dt, std::fabs(truth)));
}
// |got - want| within u (K + cond) scale + the floors; records the K it needed.
::testing::AssertionResult near(infiniDtype_t dt, double got, double want, double cond,
                                double scale) {
  if (std::isnan(want) && std::isnan(got)) return ::testing::AssertionSuccess();
  const double err = std::fabs(got - want), floor = floorOf(dt, want);
  if (scale > 0 && err > floor)
    g_worst_k = std::max(g_worst_k, (err - floor) / (kU * scale) - cond);
  if (err <= kU * (kBound + cond) * scale + floor) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "got " << got << ", want " << want << " (err " << err << ", allowed "
         << kU * (kBound + cond) * scale + floor << ")";
}

// The softmax of a row in double with its conditions: a_j = m - x_j, A = sum |a_j| p_j.
struct Softmax {
  std::vector<double> p, a;
  double A = 0;
};
Softmax softmaxOf(const std::vector<double> &x) {
  Softmax s;
  const double m = *std::max_element(x.begin(), x.end());
  double sum = 0;
  for (double v : x) {
    s.a.push_back(m - v);
    s.p.push_back(std::exp(v - m));
    sum += s.p.back();
  }
  for (size_t j = 0; j < x.size(); ++j) {
    s.p[j] /= sum;
    s.A += s.a[j] * s.p[j];
  }
  return s;
}
double chainOf(size_t n) {
  return std::ceil(n / 16.0) + 4;
}

std::vector<double> rowOf(TensorBuffer &t, size_t r, size_t n) {
  std::vector<double> v(n);
  for (size_t j = 0; j < n; ++j) v[j] = t.get(r * n + j);
  return v;
}

// Strided layouts: x transposed within its last two dims (the row dim moves fastest) or padded.
enum class Layout { kContiguous, kTransposed, kPadded };
TensorBuffer tensor(Layout layout, const std::vector<size_t> &shape, infiniDtype_t dt) {
  if (layout == Layout::kContiguous) return TensorBuffer(shape, dt);
  if (layout == Layout::kPadded) return TensorBuffer(shape, paddedStrides(shape), dt);
  std::vector<ptrdiff_t> strides(shape.size());
  const size_t n = shape.size();
  strides[n - 2] = 1;
  strides[n - 1] = static_cast<ptrdiff_t>(std::max<size_t>(shape[n - 2], 1));
  ptrdiff_t step = strides[n - 1] * static_cast<ptrdiff_t>(std::max<size_t>(shape[n - 1], 1));
  for (size_t d = n - 2; d-- > 0;) {
    strides[d] = step;
    step *= static_cast<ptrdiff_t>(std::max<size_t>(shape[d], 1));
  }
  return TensorBuffer(shape, strides, dt);
}

std::vector<size_t> with(std::vector<size_t> lead, size_t last) {
  lead.push_back(last);
  return lead;
}
size_t product(const std::vector<size_t> &v) {
  size_t n = 1;
  for (size_t d : v) n *= d;
  return n;
}

// ---------------------------------------------------------------- forwards against the oracle
struct Forward {
  Op op = Op::kSoftmax;
  infiniDtype_t dt = kF32, idx = kI32, bias_dt = kF32;
  std::vector<size_t> lead{5};
  size_t E = 8, k = 2;
  int64_t renorm = 0;
  bool finished = false, row_idx = true, probs = true, bias = false;
  Layout layout = Layout::kContiguous;
  int64_t k_group = 1, group_count = 1, mode = 0, norm_type = 1;
  double scale = 1.0, eps = 1e-20;
  float range = 4.0f;
};
std::string nameOf(const Forward &c) {
  std::string lead;
  for (size_t d : c.lead) lead += std::to_string(d) + "x";
  return std::string(c.op == Op::kSoftmax ? "softmax" : "top_k") + " " + lead +
         std::to_string(c.E) + " k=" + std::to_string(c.k) + " " + infiniop::dtypeName(c.dt) +
         " idx " + infiniop::dtypeName(c.idx) + " renorm=" + std::to_string(c.renorm) +
         " layout=" + std::to_string(static_cast<int>(c.layout)) + (c.finished ? " finished" : "") +
         (c.bias ? " bias" : "") + " groups=" + std::to_string(c.group_count) + "/" +
         std::to_string(c.k_group) + " mode=" + std::to_string(c.mode) +
         " norm=" + std::to_string(c.norm_type);
}

struct ForwardTensors {
  TensorBuffer y, idx, row_idx, probs;
  ForwardTensors(const Forward &c, Layout layout)
      : y(tensor(layout, with(c.lead, c.k), c.dt)),
        idx(tensor(layout, with(c.lead, c.k), c.idx)),
        row_idx(with(c.lead, c.k), c.idx),
        probs(tensor(layout, with(c.lead, c.E), kF32)) {}
};

Call forwardCall(const Forward &c, ForwardTensors &o, TensorBuffer &x, TensorBuffer *finished,
                 TensorBuffer *bias, bool probs) {
  Call call;
  call.op = c.op;
  call.k = static_cast<int64_t>(c.k);
  call.renorm = c.renorm;
  call.k_group = c.k_group;
  call.group_count = c.group_count;
  call.mode = c.mode;
  call.norm_type = c.norm_type;
  call.scale = c.scale;
  call.eps = c.eps;
  if (c.op == Op::kSoftmax)
    call.t = {&o.y, &o.idx,  c.row_idx ? &o.row_idx : nullptr, probs ? &o.probs : nullptr,
              &x,   finished};
  else
    call.t = {&o.y, &o.idx, probs ? &o.probs : nullptr, &x, bias};
  for (size_t s = 0; s < call.outputs(); ++s) poison(call.t[s]);
  return call;
}

void checkForward(infiniopHandle_t h, const Forward &c, uint64_t seed) {
  SCOPED_TRACE(nameOf(c));
  const size_t R = product(c.lead), E = c.E, k = c.k;
  TensorBuffer x = tensor(c.layout, with(c.lead, E), c.dt);
  x.fill([&](size_t i) { return signedValue(seed, i, c.range); });
  TensorBuffer finished(c.lead, kBool);
  for (size_t r = 0; r < R; ++r) setBool(finished, r, c.finished && r % 3 == 1);
  TensorBuffer bias({E}, c.bias_dt);
  bias.fill([&](size_t i) { return signedValue(seed + 7, i, 0.05f); });
  const bool probs = c.renorm == 0 && c.probs;
  ForwardTensors dev(c, c.layout), ref(c, Layout::kContiguous);
  const Outcome o = run(
      h, forwardCall(c, dev, x, c.finished ? &finished : nullptr, c.bias ? &bias : nullptr, probs));
  ASSERT_EQ(o.create, INFINI_STATUS_SUCCESS) << o.error;
  ASSERT_EQ(o.calc, INFINI_STATUS_SUCCESS) << o.error;
  Handle reference(INFINI_DEVICE_CPU_REFERENCE);
  Forward rc = c;
  rc.row_idx = true;
  const Outcome ro = run(reference.get(), forwardCall(rc, ref, x, c.finished ? &finished : nullptr,
                                                      c.bias ? &bias : nullptr, c.renorm == 0));
  ASSERT_EQ(ro.calc, INFINI_STATUS_SUCCESS) << ro.error;

  for (size_t r = 0; r < R; ++r) {
    SCOPED_TRACE("row " + std::to_string(r));
    const std::vector<double> xr = rowOf(x, r, E);
    const Softmax sm = softmaxOf(xr);
    // The keys the oracle selected on and each expert's condition.
    std::vector<double> key(E), pr(E), cond(E);
    for (size_t j = 0; j < E; ++j) {
      pr[j] = c.renorm == 0 ? ref.probs.get(r * E + j) : xr[j];
      // sigmoid, sqrtsoftplus: p_j's own bound (math-inl.h: SqrtSoftplus within 1.6 ulp)
      const bool elementwise = c.op == Op::kTopK && c.norm_type != 0;
      cond[j] = elementwise ? 2.0 : sm.a[j] + sm.A + chainOf(E);
      key[j] = pr[j] + (c.bias ? bias.get(j) : 0.0);
      if (probs)
        EXPECT_TRUE(near(kF32, dev.probs.get(r * E + j), pr[j], cond[j], pr[j])) << "probs " << j;
    }
    const bool done = c.finished && boolAt(finished, r);
    std::vector<size_t> chosen;
    for (size_t i = 0; i < k; ++i) {
      const size_t n = r * k + i;
      if (c.row_idx && c.op == Op::kSoftmax)
        EXPECT_EQ(indexAt(dev.row_idx, n), static_cast<int64_t>(i * R + r));
      const int64_t got = indexAt(dev.idx, n), want = indexAt(ref.idx, n);
      if (done) {
        EXPECT_EQ(got, static_cast<int64_t>(E)) << "finished row, slot " << i;
        EXPECT_EQ(dev.y.get(n), 0.0f) << "finished row, slot " << i;
        continue;
      }
      ASSERT_TRUE(got >= 0 && got < static_cast<int64_t>(E)) << "slot " << i << ": " << got;
      chosen.push_back(static_cast<size_t>(got));
      if (got != want)  // a near tie only
        EXPECT_TRUE(near(kF32, key[got], key[want], cond[want] + 2, std::fabs(key[want])))
            << "slot " << i << " chose " << got << " where the oracle chose " << want;
    }
    if (done) continue;
    // y at the device's choice, from the oracle's values.
    std::vector<double> want(k), ycond(k);
    if (c.op == Op::kSoftmax && c.renorm == 1) {
      std::vector<double> picked;
      for (size_t j : chosen) picked.push_back(xr[j]);
      const Softmax s = softmaxOf(picked);
      want = s.p;
      for (size_t i = 0; i < k; ++i) ycond[i] = s.a[i] + s.A + chainOf(k);
    } else if (c.op == Op::kSoftmax) {
      for (size_t i = 0; i < k; ++i) want[i] = pr[chosen[i]], ycond[i] = cond[chosen[i]];
    } else {
      double sum = 0, sum_cond = 0;  // D carries the selected p's errors
      for (size_t j : chosen) sum += pr[j], sum_cond = std::max(sum_cond, cond[j]);
      for (size_t i = 0; i < k; ++i) {
        want[i] = pr[chosen[i]] / (sum + c.eps) * c.scale;
        ycond[i] = cond[chosen[i]] + sum_cond + static_cast<double>(k) + 3;
      }
    }
    for (size_t i = 0; i < k; ++i) {
      EXPECT_TRUE(near(c.dt, dev.y.get(r * k + i), want[i], ycond[i], std::fabs(want[i])))
          << "y slot " << i;
    }
    // Distinct experts, and within the kept groups.
    std::vector<size_t> sorted = chosen;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_TRUE(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
  }
}

class MoeGatingCases : public DeviceTest {};

TEST_P(MoeGatingCases, SoftmaxMatchesReference) {
  uint64_t seed = 1;
  for (infiniDtype_t dt : kFloatDtypes)
    for (size_t E : {1, 7, 33, 257, 2048})
      for (size_t k : {size_t{1}, std::min<size_t>(E, 4), E}) {
        if (E == 2048 && k == E && dt != kF32) continue;  // the long sort once is enough
        for (int64_t renorm : {0, 1}) {
          Forward c;
          c.dt = dt;
          c.E = E;
          c.k = k;
          c.renorm = renorm;
          c.lead = {E >= 1024 ? size_t{3} : size_t{9}};
          c.idx = seed % 2 ? kI32 : kI64;
          c.finished = seed % 3 != 0;
          c.layout = static_cast<Layout>(seed % 3);
          checkForward(handle(), c, seed++);
        }
      }
}

TEST_P(MoeGatingCases, SoftmaxShapes) {
  uint64_t seed = 100;
  for (const std::vector<size_t> &lead :
       {std::vector<size_t>{0}, std::vector<size_t>{2, 3}, std::vector<size_t>{2, 0},
        std::vector<size_t>{1, 4}, std::vector<size_t>{3, 1, 2}})
    for (Layout layout : {Layout::kContiguous, Layout::kTransposed, Layout::kPadded}) {
      Forward c;
      c.lead = lead;
      c.E = 33;
      c.k = 5;
      c.layout = layout;
      c.finished = true;
      checkForward(handle(), c, seed++);
    }
}

TEST_P(MoeGatingCases, DeepSeekMatchesReference) {
  uint64_t seed = 200;
  for (infiniDtype_t dt : kFloatDtypes)
    for (int64_t mode : {0, 1})
      for (infiniDtype_t bias_dt : {kF32, dt}) {
        Forward c;
        c.op = Op::kTopK;
        c.dt = dt;
        c.bias_dt = bias_dt;
        c.bias = true;
        c.E = 256;
        c.lead = {2, 7};
        c.k = 8;
        c.group_count = 8;
        c.k_group = 4;
        c.mode = mode;
        c.norm_type = 1;
        c.scale = 2.5;
        c.idx = mode ? kI64 : kI32;
        c.layout = static_cast<Layout>(seed % 3);
        checkForward(handle(), c, seed++);
      }
  // softmax scores, no groups, no bias; E not a power of two; k = E
  for (size_t E : {7, 33, 257}) {
    Forward c;
    c.op = Op::kTopK;
    c.E = E;
    c.k = E == 7 ? 7 : 6;
    c.norm_type = 0;
    c.eps = 0.0;
    c.lead = {11};
    checkForward(handle(), c, seed++);
  }
}

// DeepSeek-V4's router (norm_type 2, sqrtsoftplus; ungrouped top-6 of 256 or 384, c = 1.5, bias
// F32) over logits of both signs out to +-100 (the exp's clamp at 87 and the root's tail below
// -87), and narrower ones where near ties are common.
TEST_P(MoeGatingCases, DeepSeekV4MatchesReference) {
  uint64_t seed = 250;
  for (infiniDtype_t dt : kFloatDtypes)
    for (size_t E : {256, 384})
      for (float range : {100.0f, 3.0f}) {
        Forward c;
        c.op = Op::kTopK;
        c.dt = dt;
        c.bias = true;
        c.E = E;
        c.lead = {9};
        c.k = 6;
        c.norm_type = 2;
        c.scale = 1.5;
        c.range = range;
        c.idx = seed % 2 ? kI64 : kI32;
        c.layout = static_cast<Layout>(seed % 3);
        checkForward(handle(), c, seed++);
      }
}

// group_select_mode 2 (a group's score is the sum of its k / k_group largest v): 3, 2 and 1 of
// them, with every norm_type, with and without a bias.
TEST_P(MoeGatingCases, GroupSumOfTopMatchesReference) {
  uint64_t seed = 270;
  for (infiniDtype_t dt : kFloatDtypes)
    for (int64_t norm_type : {0, 1, 2})
      for (size_t k : {12, 8, 4}) {
        Forward c;
        c.op = Op::kTopK;
        c.dt = dt;
        c.bias = seed % 2 == 0;
        c.E = 256;
        c.lead = {7};
        c.k = k;
        c.group_count = 8;
        c.k_group = 4;
        c.mode = 2;
        c.norm_type = norm_type;
        c.scale = 2.5;
        c.range = norm_type == 2 ? 20.0f : 4.0f;
        c.idx = seed % 2 ? kI64 : kI32;
        c.layout = static_cast<Layout>(seed % 3);
        checkForward(handle(), c, seed++);
      }
}

// ---------------------------------------------------------------- values worked by hand
template <class Check>
void softmaxCase(infiniopHandle_t h, const std::vector<float> &x_values, size_t k, int64_t renorm,
                 infiniDtype_t idx_dt, bool finished_row, const Check &check) {
  const size_t E = x_values.size();
  TensorBuffer x({1, E}, kF32), y({1, k}, kF32), idx({1, k}, idx_dt), rows({1, k}, idx_dt),
      probs({1, E}, kF32), finished({1}, kBool);
  for (size_t j = 0; j < E; ++j) x.set(j, x_values[j]);
  setBool(finished, 0, finished_row);
  Call call;
  call.k = static_cast<int64_t>(k);
  call.renorm = renorm;
  call.t = {&y, &idx, &rows, renorm ? nullptr : &probs, &x, &finished};
  for (size_t s = 0; s < 4; ++s) poison(call.t[s]);
  const Outcome o = run(h, call);
  ASSERT_EQ(o.create, INFINI_STATUS_SUCCESS) << o.error;
  ASSERT_EQ(o.calc, INFINI_STATUS_SUCCESS) << o.error;
  for (size_t i = 0; i < k; ++i) EXPECT_EQ(indexAt(rows, i), static_cast<int64_t>(i));
  check(y, idx, probs);
}

TEST_P(MoeGatingCases, SoftmaxByHand) {
  const double e = std::exp(1.0), S = e + 2 * e * e + e * e * e;
  // x = [1, 2, 3, 2]: p = e^x / S; experts 1 and 3 tie: 1 first.
  softmaxCase(handle(), {1, 2, 3, 2}, 3, 0, kI64, false,
              [&](TensorBuffer &y, TensorBuffer &idx, TensorBuffer &probs) {
                const int64_t want[] = {2, 1, 3};
                const double wy[] = {e * e * e / S, e * e / S, e * e / S};
                for (size_t i = 0; i < 3; ++i) {
                  EXPECT_EQ(indexAt(idx, i), want[i]);
                  EXPECT_TRUE(near(kF32, y.get(i), wy[i], 8, wy[i]));
                }
                EXPECT_TRUE(near(kF32, probs.get(0), e / S, 8, e / S));
              });
  // renorm 1: the top 2 of x (3, then 2 at expert 1), their softmax: 1 / (1 + e^-1), ...
  softmaxCase(handle(), {1, 2, 3, 2}, 2, 1, kI32, false,
              [&](TensorBuffer &y, TensorBuffer &idx, TensorBuffer &) {
                EXPECT_EQ(indexAt(idx, 0), 2);
                EXPECT_EQ(indexAt(idx, 1), 1);
                EXPECT_TRUE(near(kF32, y.get(0), 1 / (1 + 1 / e), 4, 1));
                EXPECT_TRUE(near(kF32, y.get(1), (1 / e) / (1 + 1 / e), 4, 1));
              });
  // equal logits: experts 0..k-1, y = 1/E
  softmaxCase(handle(), std::vector<float>(7, 0.5f), 3, 0, kI32, false,
              [&](TensorBuffer &y, TensorBuffer &idx, TensorBuffer &) {
                for (size_t i = 0; i < 3; ++i) {
                  EXPECT_EQ(indexAt(idx, i), static_cast<int64_t>(i));
                  EXPECT_TRUE(near(kF32, y.get(i), 1.0 / 7, 8, 1.0 / 7));
                }
              });
  // +0 and -0 are equal keys
  softmaxCase(handle(), {-0.0f, -1.0f, 0.0f}, 2, 1, kI32, false,
              [&](TensorBuffer &, TensorBuffer &idx, TensorBuffer &) {
                EXPECT_EQ(indexAt(idx, 0), 0);
                EXPECT_EQ(indexAt(idx, 1), 2);
              });
  // k = E = 1: y = 1
  softmaxCase(handle(), {-3.0f}, 1, 0, kI32, false,
              [&](TensorBuffer &y, TensorBuffer &idx, TensorBuffer &probs) {
                EXPECT_EQ(indexAt(idx, 0), 0);
                EXPECT_EQ(y.get(0), 1.0f);
                EXPECT_EQ(probs.get(0), 1.0f);
              });
  // a finished row: y = 0, expert_idx = E, softmax_out still written
  softmaxCase(handle(), {1, 2, 3, 2}, 2, 0, kI64, true,
              [&](TensorBuffer &y, TensorBuffer &idx, TensorBuffer &probs) {
                for (size_t i = 0; i < 2; ++i) {
                  EXPECT_EQ(indexAt(idx, i), 4);
                  EXPECT_EQ(y.get(i), 0.0f);
                }
                EXPECT_TRUE(near(kF32, probs.get(2), e * e * e / S, 8, 1));
              });
}

TEST_P(MoeGatingCases, SoftmaxSpecialRows) {
  const float inf = INFINITY, nan = NAN;
  const auto allNan = [](TensorBuffer &t, size_t n) {
    for (size_t i = 0; i < n; ++i) EXPECT_TRUE(std::isnan(t.get(i))) << i;
  };
  // a NaN: p all NaN, selection 0..k-1 (every key NaN, ties by index)
  softmaxCase(handle(), {1, nan, 3, 2}, 2, 0, kI32, false,
              [&](TensorBuffer &y, TensorBuffer &idx, TensorBuffer &probs) {
                EXPECT_EQ(indexAt(idx, 0), 0);
                EXPECT_EQ(indexAt(idx, 1), 1);
                allNan(y, 2);
                allNan(probs, 4);
              });
  // +inf: inf - inf = NaN, the same
  softmaxCase(handle(), {1, 2, inf, 2}, 2, 0, kI32, false,
              [&](TensorBuffer &y, TensorBuffer &, TensorBuffer &probs) {
                allNan(y, 2);
                allNan(probs, 4);
              });
  // all -inf: -inf - -inf = NaN
  softmaxCase(handle(), {-inf, -inf, -inf}, 1, 0, kI32, false,
              [&](TensorBuffer &y, TensorBuffer &, TensorBuffer &probs) {
                allNan(y, 1);
                allNan(probs, 3);
              });
  // some -inf: exactly 0 there
  softmaxCase(handle(), {-inf, 0, -inf}, 3, 0, kI32, false,
              [&](TensorBuffer &y, TensorBuffer &idx, TensorBuffer &) {
                EXPECT_EQ(indexAt(idx, 0), 1);
                EXPECT_EQ(indexAt(idx, 1), 0);
                EXPECT_EQ(indexAt(idx, 2), 2);
                EXPECT_EQ(y.get(0), 1.0f);
                EXPECT_EQ(y.get(1), 0.0f);
              });
  // renorm 1: NaN ranks first, m = NaN: y NaN
  softmaxCase(handle(), {1, 2, nan, 3}, 2, 1, kI32, false,
              [&](TensorBuffer &y, TensorBuffer &idx, TensorBuffer &) {
                EXPECT_EQ(indexAt(idx, 0), 2);
                EXPECT_EQ(indexAt(idx, 1), 3);
                allNan(y, 2);
              });
}

TEST_P(MoeGatingCases, DeepSeekByHand) {
  // x = [3, -3, 1, 1], sigmoid, 2 groups of 2, k_group 1, k 2, scale 2, eps 0. p = [s(3), s(-3),
  // s(1), s(1)], s(3) + s(-3) = 1. Mode 0 keeps group 0 (max 0.95 > 0.73): y = 2 p / 1. Mode 1
  // keeps group 1 (0.73 + 0.73 > 1): experts 2 then 3 (a tie), y = 1 each.
  const double s3 = 1 / (1 + std::exp(-3.0)), s1 = 1 / (1 + std::exp(-1.0));
  for (int64_t mode : {0, 1}) {
    TensorBuffer x({1, 4}, kF32), y({1, 2}, kF32), idx({1, 2}, kI32), probs({1, 4}, kF32);
    const float xv[] = {3, -3, 1, 1};
    for (size_t j = 0; j < 4; ++j) x.set(j, xv[j]);
    Call call;
    call.op = Op::kTopK;
    call.k = 2;
    call.k_group = 1;
    call.group_count = 2;
    call.mode = mode;
    call.scale = 2.0;
    call.eps = 0.0;
    call.t = {&y, &idx, &probs, &x, nullptr};
    for (size_t s = 0; s < 3; ++s) poison(call.t[s]);
    const Outcome o = run(handle(), call);
    ASSERT_EQ(o.calc, INFINI_STATUS_SUCCESS) << o.error;
    EXPECT_TRUE(near(kF32, probs.get(0), s3, 4, 1));
    if (mode == 0) {
      EXPECT_EQ(indexAt(idx, 0), 0);
      EXPECT_EQ(indexAt(idx, 1), 1);
      EXPECT_TRUE(near(kF32, y.get(0), 2 * s3, 8, 2));
      EXPECT_TRUE(near(kF32, y.get(1), 2 * (1 - s3), 8, 2));
    } else {
      EXPECT_EQ(indexAt(idx, 0), 2);
      EXPECT_EQ(indexAt(idx, 1), 3);
      EXPECT_EQ(y.get(0), 1.0f);
      EXPECT_EQ(y.get(1), 1.0f);
      EXPECT_TRUE(near(kF32, probs.get(2), s1, 4, 1));
    }
  }
  // a bias moves the selection (not the weights): bias [0, 0, 0, 1] picks expert 3 first
  TensorBuffer x({1, 4}, kF32), y({1, 2}, kF32), idx({1, 2}, kI64), bias({4}, kF32);
  const float xv[] = {3, -3, 1, 0};
  for (size_t j = 0; j < 4; ++j) {
    x.set(j, xv[j]);
    bias.set(j, j == 3 ? 1.0f : 0.0f);
  }
  Call call;
  call.op = Op::kTopK;
  call.k = 2;
  call.eps = 0.0;
  call.t = {&y, &idx, nullptr, &x, &bias};
  poison(&y);
  poison(&idx);
  ASSERT_EQ(run(handle(), call).calc, INFINI_STATUS_SUCCESS);
  EXPECT_EQ(indexAt(idx, 0), 3);  // 0.5 + 1
  EXPECT_EQ(indexAt(idx, 1), 0);  // s(3)
  EXPECT_TRUE(near(kF32, y.get(0), 0.5 / (0.5 + s3), 8, 1));
}

// MoeGatingTopK's outputs for one call over x (F32, one row), the bits of y and the indices.
struct TopKResult {
  std::vector<float> y, probs;
  std::vector<int64_t> idx;
};
TopKResult topK(infiniopHandle_t h, const std::vector<float> &xv, Call call) {
  const size_t E = xv.size(), k = static_cast<size_t>(call.k);
  TensorBuffer x({1, E}, kF32), y({1, k}, kF32), idx({1, k}, kI32), probs({1, E}, kF32);
  for (size_t j = 0; j < E; ++j) x.set(j, xv[j]);
  call.op = Op::kTopK;
  call.t = {&y, &idx, &probs, &x, nullptr};
  for (size_t s = 0; s < 3; ++s) poison(call.t[s]);
  const Outcome o = run(h, call);
  EXPECT_EQ(o.calc, INFINI_STATUS_SUCCESS) << o.error;
  TopKResult r;
  for (size_t i = 0; i < k; ++i) r.y.push_back(y.get(i)), r.idx.push_back(indexAt(idx, i));
  for (size_t j = 0; j < E; ++j) r.probs.push_back(probs.get(j));
  return r;
}

TEST_P(MoeGatingCases, GroupSumOfTopByHand) {
  // sqrtsoftplus, 2 groups of 4, k_group 1, k 3, c = 1.5, eps 0: x = [1, 1, 1, -5 | 3, -9, -9, -9].
  // Mode 2 sums each group's 3 largest p: 3 p(1) = 3.44 against p(3) + 2 p(-9) = 1.77, so group 0
  // and experts 0, 1, 2 (a three-way tie, lower index first), y = p / 3 p * 1.5 = 0.5 each. Mode 0
  // (the max) keeps group 1: experts 4, then 5 and 6 (ties).
  const std::vector<float> x = {1, 1, 1, -5, 3, -9, -9, -9};
  Call call;
  call.k = 3;
  call.k_group = 1;
  call.group_count = 2;
  call.norm_type = 2;
  call.scale = 1.5;
  call.eps = 0.0;
  call.mode = 2;
  const TopKResult two = topK(handle(), x, call);
  EXPECT_EQ(two.idx, (std::vector<int64_t>{0, 1, 2}));
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(near(kF32, two.y[i], 0.5, 6, 0.5)) << i;
  for (size_t j = 0; j < 8; ++j) {
    const double p = infiniop::exact::sqrtSoftplus(x[j]);
    EXPECT_TRUE(near(kF32, two.probs[j], p, 2, p)) << "p " << j;
  }
  call.mode = 0;
  EXPECT_EQ(topK(handle(), x, call).idx, (std::vector<int64_t>{4, 5, 6}));
  // Mode 2 is mode 1 where k / k_group = 2 and mode 0 where it is 1, bit for bit, every norm_type.
  const std::vector<float> w = {0.5f, -2, 7, 1, 1, -3, 2, 0.25f, 4, -1, 3, 3, -6, 5, 0, 2};
  for (int64_t norm_type : {0, 1, 2})
    for (int64_t k : {4, 2}) {
      Call c;
      c.k = k;
      c.k_group = 2;
      c.group_count = 4;
      c.norm_type = norm_type;
      c.mode = 2;
      const TopKResult sum = topK(handle(), w, c);
      c.mode = k == 4 ? 1 : 0;
      const TopKResult same = topK(handle(), w, c);
      EXPECT_EQ(sum.idx, same.idx) << "norm " << norm_type << ", k " << k;
      EXPECT_EQ(sum.y, same.y) << "norm " << norm_type << ", k " << k;
    }
}

TEST_P(MoeGatingCases, SqrtSoftplusByHand) {
  // p = sqrt(softplus(x)) at x = 0 (sqrt(ln 2)), +-30 (sqrt(30), e^-15), -100 (the tail e^-50),
  // -200 (0: below -174); one tie at 2, 2.
  const std::vector<float> x = {0, 30, -30, -100, -200, 2, 2, -1};
  Call call;
  call.k = 4;
  call.norm_type = 2;
  call.eps = 0.0;
  const TopKResult r = topK(handle(), x, call);
  EXPECT_EQ(r.idx, (std::vector<int64_t>{1, 5, 6, 0}));
  for (size_t j = 0; j < 8; ++j) {  // -200: 0 (cpu, opencl) or e^-100 (cpu_reference), the floor
    const double p = infiniop::exact::sqrtSoftplus(x[j]);
    EXPECT_TRUE(near(kF32, r.probs[j], p, 2, p)) << "p " << j;
  }
  double S = 0;
  for (int64_t j : r.idx) S += infiniop::exact::sqrtSoftplus(x[j]);
  for (size_t i = 0; i < 4; ++i) {
    const double want = infiniop::exact::sqrtSoftplus(x[r.idx[i]]) / S;
    EXPECT_TRUE(near(kF32, r.y[i], want, 12, want)) << "y " << i;
  }
}

// ---------------------------------------------------------------- the grads
struct Grad {
  Op op = Op::kSoftmaxGrad;
  infiniDtype_t dt = kF32, idx = kI32;
  size_t R = 6, E = 8, k = 2;
  int64_t renorm = 0, norm_type = 1;
  double scale = 1.0, eps = 1e-20;
  bool duplicates = false, finished = false;
  Layout layout = Layout::kContiguous;
  float range = 3.0f;  // x's
};

// grad_x[j] in double for one row, and the magnitudes of its terms.
void gradOracle(const Grad &c, const std::vector<double> &x, const std::vector<double> &g,
                const std::vector<size_t> &s, std::vector<double> *grad,
                std::vector<double> *terms) {
  const size_t E = c.E, k = c.k;
  grad->assign(E, 0.0);
  terms->assign(E, 0.0);
  if (c.op == Op::kSoftmaxGrad && c.renorm == 1) {
    std::vector<double> picked;
    for (size_t j : s) picked.push_back(x[j]);
    const std::vector<double> y = softmaxOf(picked).p;
    double dot = 0, mag = 0;
    for (size_t i = 0; i < k; ++i) dot += g[i] * y[i], mag += std::fabs(g[i]) * y[i];
    for (size_t i = 0; i < k; ++i) {
      (*grad)[s[i]] += y[i] * (g[i] - dot);
      (*terms)[s[i]] += y[i] * (std::fabs(g[i]) + mag);
    }
    return;
  }
  const bool elementwise = c.op == Op::kTopKGrad && c.norm_type != 0;
  const std::vector<double> p = elementwise ? [&] {
    std::vector<double> v;
    for (double xj : x)
      v.push_back(c.norm_type == 1 ? 1 / (1 + std::exp(-xj)) : infiniop::exact::sqrtSoftplus(xj));
    return v;
  }()
                                            : softmaxOf(x).p;
  std::vector<double> gp(E, 0.0), gp_mag(E, 0.0);  // the gradient at p, and its magnitudes
  if (c.op == Op::kSoftmaxGrad) {
    for (size_t i = 0; i < k; ++i) gp[s[i]] += g[i], gp_mag[s[i]] += std::fabs(g[i]);
  } else {
    double sum = 0, t = 0, t_mag = 0;
    for (size_t i = 0; i < k; ++i) sum += p[s[i]];
    for (size_t i = 0; i < k; ++i) t += g[i] * p[s[i]], t_mag += std::fabs(g[i]) * p[s[i]];
    const double D = sum + c.eps;
    for (size_t i = 0; i < k; ++i) {
      gp[s[i]] += c.scale / D * (g[i] - t / D);
      gp_mag[s[i]] += std::fabs(c.scale) / D * (std::fabs(g[i]) + t_mag / D);
    }
  }
  if (elementwise) {
    for (size_t j = 0; j < E; ++j) {
      // p (1 - p) as e / (1 + e)^2, e = exp(-|x|): 1 - p cancels in double too; sqrtsoftplus:
      // sigmoid(x) / (2 p), written apart from the library's (src/exact/softplus.h)
      const double e = std::exp(-std::fabs(x[j]));
      const double slope =
          c.norm_type == 1
              ? e / ((1 + e) * (1 + e))
              : 0.5 / (1 + std::exp(-x[j])) /
                    std::sqrt(std::log1p(std::exp(-std::fabs(x[j]))) + std::max(x[j], 0.0));
      (*grad)[j] = gp[j] * slope;
      (*terms)[j] = gp_mag[j] * slope;
    }
    return;
  }
  // q = sum_i (gradient at slot i) p_{s_i} = sum_j gp_j p_j (duplicates counted per slot)
  double q = 0, q_mag = 0;
  for (size_t j = 0; j < E; ++j) q += gp[j] * p[j], q_mag += gp_mag[j] * p[j];
  for (size_t j = 0; j < E; ++j) {
    (*grad)[j] = p[j] * (gp[j] - q);
    (*terms)[j] = p[j] * (gp_mag[j] + q_mag);
  }
}

void checkGrad(infiniopHandle_t h, const Grad &c, uint64_t seed) {
  const std::string name = std::string(c.op == Op::kSoftmaxGrad ? "softmax grad" : "top_k grad") +
                           " R=" + std::to_string(c.R) + " E=" + std::to_string(c.E) +
                           " k=" + std::to_string(c.k) + " " + infiniop::dtypeName(c.dt) +
                           " renorm=" + std::to_string(c.renorm) +
                           " norm=" + std::to_string(c.norm_type) +
                           (c.duplicates ? " duplicates" : "") + (c.finished ? " finished" : "");
  SCOPED_TRACE(name);
  const size_t R = c.R, E = c.E, k = c.k;
  TensorBuffer grad_x = tensor(c.layout, {R, E}, c.dt), x = tensor(c.layout, {R, E}, c.dt),
               grad_y = tensor(c.layout, {R, k}, c.dt), idx({R, k}, c.idx), finished({R}, kBool);
  x.fill([&](size_t i) { return signedValue(seed, i, c.range); });
  grad_y.fill([&](size_t i) { return signedValue(seed + 1, i, 2.0f); });
  std::vector<std::vector<size_t>> sel(R);
  for (size_t r = 0; r < R; ++r) {
    const bool done = c.finished && r % 2 == 1;
    setBool(finished, r, done);
    std::vector<size_t> perm(E);
    std::iota(perm.begin(), perm.end(), 0);
    for (size_t i = E; i > 1; --i) std::swap(perm[i - 1], perm[(seed * 31 + r * 7 + i) % i]);
    for (size_t i = 0; i < k; ++i) {
      sel[r].push_back(c.duplicates && i % 2 == 1 ? sel[r][0] : perm[i]);
      setIndex(idx, r * k + i, done ? static_cast<int64_t>(E) : static_cast<int64_t>(sel[r][i]));
    }
  }
  Call call;
  call.op = c.op;
  call.renorm = c.renorm;
  call.norm_type = c.norm_type;
  call.scale = c.scale;
  call.eps = c.eps;
  if (c.op == Op::kSoftmaxGrad)
    call.t = {&grad_x, &grad_y, &x, &idx, c.finished ? &finished : nullptr};
  else
    call.t = {&grad_x, &grad_y, &x, &idx};
  poison(&grad_x);
  const Outcome o = run(h, call);
  ASSERT_EQ(o.create, INFINI_STATUS_SUCCESS) << o.error;
  ASSERT_EQ(o.calc, INFINI_STATUS_SUCCESS) << o.error;
  // Each row's oracle and bound, once: the check against cpu_reference below reuses them (per
  // differing element they made that check quadratic in E).
  std::vector<std::vector<double>> terms_of(R);
  std::vector<double> cond_of(R);
  for (size_t r = 0; r < R; ++r) {
    const bool done = c.finished && boolAt(finished, r);
    std::vector<double> grad;
    std::vector<double> &terms = terms_of[r];
    const std::vector<double> xr = rowOf(x, r, E);
    gradOracle(c, xr, rowOf(grad_y, r, k), sel[r], &grad, &terms);
    const Softmax sm = softmaxOf(xr);
    const double cond =
        2 * (*std::max_element(sm.a.begin(), sm.a.end()) + sm.A + chainOf(E)) + 2.0 * k;
    cond_of[r] = cond;
    for (size_t j = 0; j < E; ++j) {
      const double got = grad_x.get(r * E + j);
      if (done) {
        EXPECT_EQ(got, 0.0f) << "finished row " << r << ", " << j;
        continue;
      }
      EXPECT_TRUE(near(c.dt, got, grad[j], cond, terms[j])) << "row " << r << ", expert " << j;
    }
  }
  // cpu_reference gives the same within the bound (the oracle itself when it is under test)
  Handle reference(INFINI_DEVICE_CPU_REFERENCE);
  TensorBuffer ref_grad({R, E}, c.dt);
  Call rc = call;
  rc.t[0] = &ref_grad;
  ASSERT_EQ(run(reference.get(), rc).calc, INFINI_STATUS_SUCCESS);
  for (size_t i = 0; i < R * E; ++i) {
    const double want = ref_grad.get(i), got = grad_x.get(i);
    if (want == got) continue;
    const size_t r = i / E;
    EXPECT_TRUE(near(c.dt, got, want, cond_of[r] + 1, terms_of[r][i % E] + std::fabs(want)))
        << "against cpu_reference, element " << i;
  }
}

TEST_P(MoeGatingCases, GradsMatchOracle) {
  uint64_t seed = 300;
  for (infiniDtype_t dt : kFloatDtypes)
    for (size_t E : {1, 7, 257, 2048})
      for (size_t k : {size_t{1}, std::min<size_t>(E, 3), E}) {
        if (E == 2048 && k == E) continue;
        for (int kind = 0; kind < 4; ++kind) {
          Grad c;
          c.op = kind < 2 ? Op::kSoftmaxGrad : Op::kTopKGrad;
          c.dt = dt;
          c.E = E;
          c.k = k;
          c.R = E >= 1024 ? 2 : 6;
          c.renorm = kind == 1 ? 1 : 0;
          c.norm_type = kind == 3 ? 1 : 0;
          c.scale = kind >= 2 ? 2.5 : 1.0;
          c.idx = seed % 2 ? kI32 : kI64;
          c.duplicates = k > 1 && seed % 3 == 0;
          c.finished = c.op == Op::kSoftmaxGrad && seed % 2 == 0;
          c.layout = static_cast<Layout>(seed % 3);
          checkGrad(handle(), c, seed++);
        }
      }
}

// MoeGatingTopKGrad with sqrtsoftplus (norm_type 2): every dtype, E up to 384 (DeepSeek-V4), x
// over +-3 and +-100 (the slope's tail p / 2 below -87, 1 / (2 sqrt(x)) at large x).
TEST_P(MoeGatingCases, SqrtSoftplusGradMatchesOracle) {
  uint64_t seed = 400;
  for (infiniDtype_t dt : kFloatDtypes)
    for (size_t E : {1, 7, 384})
      for (size_t k : {size_t{1}, std::min<size_t>(E, 6)})
        for (float range : {3.0f, 100.0f}) {
          Grad c;
          c.op = Op::kTopKGrad;
          c.dt = dt;
          c.E = E;
          c.k = k;
          c.norm_type = 2;
          c.scale = 1.5;
          c.range = range;
          c.idx = seed % 2 ? kI32 : kI64;
          c.duplicates = k > 1 && seed % 3 == 0;
          c.layout = static_cast<Layout>(seed % 3);
          checkGrad(handle(), c, seed++);
        }
}

// sqrtsoftplus's grad at x -> -inf, where p ~ e^(x / 2) and the slope p / 2: E = 2, x = [-120,
// 0], expert_idx = [0, 1], grad_y = [1, 0], c = 1, eps = 0. y0 = p0 / (p0 + p1), so grad_x0 =
// p1 / S^2 p0 / 2 (5.3e-27, not 0) and grad_x1 = -p0 / S^2 slope(0); x = -300 gives 0 (its
// truth is below 1e-65).
TEST_P(MoeGatingCases, SqrtSoftplusGradFarLeft) {
  for (float left : {-120.0f, -300.0f}) {
    TensorBuffer grad_x({1, 2}, kF32), grad_y({1, 2}, kF32), x({1, 2}, kF32), idx({1, 2}, kI32);
    x.set(0, left);
    x.set(1, 0.0f);
    grad_y.set(0, 1.0f);
    grad_y.set(1, 0.0f);
    setIndex(idx, 0, 0);
    setIndex(idx, 1, 1);
    Call call;
    call.op = Op::kTopKGrad;
    call.norm_type = 2;
    call.eps = 0.0;
    call.t = {&grad_x, &grad_y, &x, &idx};
    poison(&grad_x);
    ASSERT_EQ(run(handle(), call).calc, INFINI_STATUS_SUCCESS);
    const double p0 = std::exp(0.5 * left), p1 = std::sqrt(std::log(2.0)),
                 S2 = (p0 + p1) * (p0 + p1);
    const double want0 = p1 / S2 * p0 / 2, want1 = -p0 / S2 * (0.5 / 2 / p1);
    if (left < -172) {
      EXPECT_EQ(grad_x.get(0), 0.0f);
    } else {
      EXPECT_NE(grad_x.get(0), 0.0f);
      EXPECT_TRUE(near(kF32, grad_x.get(0), want0, 16, want0)) << left;
    }
    EXPECT_TRUE(near(kF32, grad_x.get(1), want1, 16, std::fabs(want1))) << left;
  }
}

// MoeGatingTopKGrad's call with sigmoid scores, c = 1, eps = 0; grad_x poisoned.
Call sigmoidGradCall(TensorBuffer &grad_x, TensorBuffer &grad_y, TensorBuffer &x,
                     TensorBuffer &idx) {
  Call call;
  call.op = Op::kTopKGrad;
  call.eps = 0.0;
  call.t = {&grad_x, &grad_y, &x, &idx};
  poison(&grad_x);
  return call;
}

TEST_P(MoeGatingCases, GradsByHand) {
  // E = 3, x = [0, 1, 2], expert_idx = [2, 0], grad_y = [1, 0.5].
  const double e = std::exp(1.0), S = 1 + e + e * e;
  const double p[] = {1 / S, e / S, e * e / S};
  for (int64_t renorm : {0, 1}) {
    TensorBuffer grad_x({1, 3}, kF32), grad_y({1, 2}, kF32), x({1, 3}, kF32), idx({1, 2}, kI32);
    for (size_t j = 0; j < 3; ++j) x.set(j, static_cast<float>(j));
    grad_y.set(0, 1.0f);
    grad_y.set(1, 0.5f);
    setIndex(idx, 0, 2);
    setIndex(idx, 1, 0);
    Call call;
    call.op = Op::kSoftmaxGrad;
    call.renorm = renorm;
    call.t = {&grad_x, &grad_y, &x, &idx, nullptr};
    poison(&grad_x);
    ASSERT_EQ(run(handle(), call).calc, INFINI_STATUS_SUCCESS);
    double want[3];
    if (renorm == 0) {  // d = p2 + 0.5 p0; grad_j = p_j (G_j - d), G = [0.5, 0, 1]
      const double d = p[2] + 0.5 * p[0];
      want[0] = p[0] * (0.5 - d);
      want[1] = p[1] * (0 - d);
      want[2] = p[2] * (1 - d);
    } else {  // y = [e^2, 1] / (e^2 + 1); d = y0 + 0.5 y1
      const double y0 = e * e / (e * e + 1), y1 = 1 / (e * e + 1), d = y0 + 0.5 * y1;
      want[0] = y1 * (0.5 - d);
      want[1] = 0;
      want[2] = y0 * (1 - d);
    }
    for (size_t j = 0; j < 3; ++j)
      EXPECT_TRUE(near(kF32, grad_x.get(j), want[j], 16, 1)) << "renorm " << renorm << ", " << j;
    EXPECT_EQ(grad_x.get(1) == 0.0f, renorm == 1);
  }
  // MoeGatingTopKGrad, sigmoid, E = 2, expert_idx = [1, 0], grad_y = [1, 0], c = 1, eps = 0:
  // y0 = p1 / (p0 + p1), so grad_x1 = p0 / S^2 s'(1), grad_x0 = -p1 / S^2 s'(0).
  const double p0 = 0.5, p1 = 1 / (1 + std::exp(-1.0)), S2 = (p0 + p1) * (p0 + p1);
  TensorBuffer grad_x({1, 2}, kF32), grad_y({1, 2}, kF32), x({1, 2}, kF32), idx({1, 2}, kI64);
  x.set(0, 0.0f);
  x.set(1, 1.0f);
  grad_y.set(0, 1.0f);
  grad_y.set(1, 0.0f);
  setIndex(idx, 0, 1);
  setIndex(idx, 1, 0);
  ASSERT_EQ(run(handle(), sigmoidGradCall(grad_x, grad_y, x, idx)).calc, INFINI_STATUS_SUCCESS);
  EXPECT_TRUE(near(kF32, grad_x.get(0), -p1 / S2 * 0.25, 16, 1));
  EXPECT_TRUE(near(kF32, grad_x.get(1), p0 / S2 * p1 * (1 - p1), 16, 1));
}

// MoeGatingTopKGrad, sigmoid, at large x: the slope p (1 - p) must not cancel. F32's 1 - p kept
// about 11 bits at x = 10 and none from x = 17 (grad_x 0 where the truth is g e^-x); (e p) p keeps
// them all (the fuzz harness found it: tests/fuzz/README.md, Findings).
TEST_P(MoeGatingCases, TopKGradSigmoidSlopeAtLargeX) {
  const std::vector<float> xs = {10.0f, 20.0f, 70.0f, -30.0f, 90.0f};
  const std::vector<size_t> sel = {2, 0, 3, 1};
  const std::vector<double> g = {1.0, -2.0, 0.25, 0.5};
  TensorBuffer grad_x({1, 5}, kF32), grad_y({1, 4}, kF32), x({1, 5}, kF32), idx({1, 4}, kI32);
  for (size_t j = 0; j < 5; ++j) x.set(j, xs[j]);
  for (size_t i = 0; i < 4; ++i) {
    grad_y.set(i, static_cast<float>(g[i]));
    setIndex(idx, i, static_cast<int64_t>(sel[i]));
  }
  ASSERT_EQ(run(handle(), sigmoidGradCall(grad_x, grad_y, x, idx)).calc, INFINI_STATUS_SUCCESS);
  Grad c;
  c.op = Op::kTopKGrad;
  c.E = 5;
  c.k = 4;
  c.eps = 0.0;
  std::vector<double> want, terms;
  gradOracle(c, rowOf(x, 0, 5), g, sel, &want, &terms);
  for (size_t j = 0; j < 4; ++j) {
    EXPECT_NE(grad_x.get(j), 0.0f) << j;
    EXPECT_TRUE(near(kF32, grad_x.get(j), want[j], 3.0 * 4 + 5, terms[j])) << "expert " << j;
  }
  EXPECT_EQ(grad_x.get(4), 0.0f);  // not selected: grad_p 0
}

// Creation-only limits (no data is allocated): index outputs too narrow for their values, and
// leading dims no stride merges beyond the plan's 8.
TEST(MoeGatingLimits, CreationRejects) {
  Handle h(INFINI_DEVICE_CPU_REFERENCE);
  const auto create = [&](const std::vector<size_t> &xs, const std::vector<ptrdiff_t> &x_strides,
                          size_t k, infiniDtype_t idx_dt, infiniDtype_t row_dt) {
    std::vector<size_t> ys = xs;
    ys.back() = k;
    infiniopTensorDescriptor_t x, y, idx, rows;
    EXPECT_EQ(infiniopCreateTensorDescriptor(&x, xs.size(), xs.data(),
                                             x_strides.empty() ? nullptr : x_strides.data(), kF32),
              INFINI_STATUS_SUCCESS);
    infiniopCreateTensorDescriptor(&y, ys.size(), ys.data(), nullptr, kF32);
    infiniopCreateTensorDescriptor(&idx, ys.size(), ys.data(), nullptr, idx_dt);
    infiniopCreateTensorDescriptor(&rows, ys.size(), ys.data(), nullptr, row_dt);
    infiniopMoeGatingTopKSoftmaxDescriptor_t op = nullptr;
    const infiniStatus_t status = infiniopCreateMoeGatingTopKSoftmaxDescriptor(
        h.get(), &op, y, idx, rows, nullptr, x, nullptr, static_cast<int64_t>(k), 0);
    if (op) infiniopDestroyMoeGatingTopKSoftmaxDescriptor(op);
    for (auto t : {x, y, idx, rows}) infiniopDestroyTensorDescriptor(t);
    return status;
  };
  const size_t big = size_t{1} << 31;
  EXPECT_EQ(create({1, big}, {}, 1, kI32, kI64), INFINI_STATUS_BAD_TENSOR_DTYPE);  // E = 2^31
  EXPECT_EQ(create({1, big}, {}, 1, kI64, kI64), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(create({big, 2}, {}, 2, kI64, kI32), INFINI_STATUS_BAD_TENSOR_DTYPE);  // k R - 1
  EXPECT_EQ(create({big, 2}, {}, 2, kI32, kI64), INFINI_STATUS_SUCCESS);
  // 9 leading dims of 2, each stride 3x the next's size: none merges
  std::vector<size_t> shape(10, 2);
  std::vector<ptrdiff_t> strides(10, 1);
  for (size_t d = 9; d-- > 0;) strides[d] = strides[d + 1] * 3;
  EXPECT_EQ(create(shape, strides, 1, kI32, kI32), INFINI_STATUS_BAD_TENSOR_STRIDES)
      << infiniopGetLastError();
  shape.erase(shape.begin());  // 8: fine
  strides.erase(strides.begin());
  EXPECT_EQ(create(shape, strides, 1, kI32, kI32), INFINI_STATUS_SUCCESS) << infiniopGetLastError();
}

INSTANTIATE_TEST_SUITE_P(Devices, MoeGatingCases, ::testing::ValuesIn(allDeviceParams()),
                         [](const ::testing::TestParamInfo<DeviceParam> &info) {
                           return deviceParamName(info.param);
                         });

// The largest K the comparisons needed, for docs/accuracy.md.
struct WorstK : ::testing::Environment {
  void TearDown() override { std::printf("moe_gating: largest K needed = %.2f\n", g_worst_k); }
};
const auto *const kWorstK = ::testing::AddGlobalTestEnvironment(new WorstK);

}  // namespace
}  // namespace infiniop_test::moe_gating
