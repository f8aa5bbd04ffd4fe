// SPDX-License-Identifier: Apache-2.0
// MoeFinalizeRoutingV2 and MoeFinalizeRoutingV2Grad conformance (SEMANTICS.md
// "MoeFinalizeRoutingV2Grad ... and MoeFinalizeRoutingV2 (its forward)"): every device
// (cpu_reference, cpu on every Highway target, opencl) against a long-double oracle written here
// from the formulas, over the four forward modes and both grad modes, every allowed combination of
// optional inputs, active_num, dropped tokens and unfilled capacity, duplicate indices, sizes
// around the vector widths, zero sizes, the three dtypes and five layouts (contiguous, transposed,
// padded, stride-0 inputs, negative strides); the grad bit-identical for 1, 2 and 3 OpenMP threads
// (on opencl: three runs); a realistic size (cpu and opencl against cpu_reference); every oracle
// case again with INT64 expanded_row_idx / expert_idx and with F32 scales (grad_scales) beside F16
// / BF16 activations. The calls themselves (hand-worked values, absent tensors, bad arguments, the
// workspace) are moe_finalize_routing_api_test.cc; the helpers both files use,
// moe_finalize_routing.h.
//
// Error model. u = 2^-24 (F32 unit roundoff); `terms` = the sum of the magnitudes of everything
// the formula adds (for a product, the product of the magnitudes); `truth` = the long-double
// oracle on the dtype-rounded inputs:
//     |got - truth| <= c u terms + c 2^-149  (+ 1 ulp of the output type at |truth| for F16/BF16,
//                                              the one rounding of the F32 result at the store)
// where c counts the F32 operations in the chain:
//   - forward out: c = 2K + 3 (K = 1 without scales);
//   - grad_expanded_x: c = the number of contributions summed into the row (a product of two
//     F16/BF16 values is exact in F32, an F32 product is one rounding; n products and n - 1 sums
//     err by at most n u terms); rows that no index reaches must be exactly +0;
//   - grad_scales: c = H + 2.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "accuracy.h"
#include "device_memory.h"
#include "device_param.h"
#include "moe_finalize_routing.h"
#include "infiniop/ops/moe_finalize_routing_v2.h"
#include "infiniop/ops/moe_finalize_routing_v2_grad.h"
#include "tensor_buffer.h"

namespace infiniop_test::moe_finalize {
namespace {

// ---------------------------------------------------------------- forward: one case, checked whole
struct ForwardCase {
  int64_t mode = 0;
  size_t R = 0, K = 1, H = 0;
  size_t E = 1, C = 1;  // expanded_x (E, C, H) in modes 1 and 3; bias has E rows in every mode
  bool x1 = false, x2 = false, bias = false, scales = false;
  bool expert_idx_only = false;  // expert_idx given without bias
  Pattern pattern = Pattern::kPermutation;
  // INT32 or INT64 index tensors; scales F32 (else INVALID: the activations' dtype).
  infiniDtype_t row_dt = kI32, expert_dt = kI32, scales_dt = INFINI_DTYPE_INVALID;
};

// The index and scales dtypes of a case, for its name.
std::string mixName(infiniDtype_t row_dt, infiniDtype_t expert_dt, infiniDtype_t scales_dt) {
  std::string s = std::string(" expanded_row_idx ") + infiniop::dtypeName(row_dt) + " expert_idx " +
                  infiniop::dtypeName(expert_dt);
  if (scales_dt != INFINI_DTYPE_INVALID)
    s += std::string(" scales ") + infiniop::dtypeName(scales_dt);
  return s;
}

std::string caseName(const ForwardCase &c) {
  std::string s = "forward mode=" + std::to_string(c.mode) + " R=" + std::to_string(c.R) +
                  " K=" + std::to_string(c.K) + " H=" + std::to_string(c.H) +
                  " E=" + std::to_string(c.E);
  if (c.mode % 2) s += " C=" + std::to_string(c.C);
  s += std::string(c.x1 ? " x1" : "") + (c.x2 ? " x2" : "") + (c.bias ? " bias" : "") +
       (c.scales ? " scales" : " (no scales)") + (c.expert_idx_only ? " expert_idx-only" : "");
  return s + " " + patternName(c.pattern) + mixName(c.row_dt, c.expert_dt, c.scales_dt);
}

void checkForward(infiniopHandle_t h, infiniDtype_t dtype, Layout layout, const ForwardCase &c,
                  uint64_t seed) {
  SCOPED_TRACE(caseName(c));
  const size_t R = c.R, K = c.K, H = c.H, n = R * K;
  const bool drop_pad = c.mode == 1 || c.mode == 3, column = c.mode < 2;
  const std::vector<size_t> ex_shape =
      drop_pad ? std::vector<size_t>{c.E, c.C, H} : std::vector<size_t>{n, H};
  const size_t rows = drop_pad ? c.E * c.C : n;
  const auto strides = [&](const std::vector<size_t> &shape, Role role) {
    return stridesFor(layout, shape, role);
  };
  TensorBuffer out({R, H}, strides({R, H}, Role::kOutput), dtype);
  TensorBuffer ex(ex_shape, strides(ex_shape, Role::kInput), dtype);
  TensorBuffer idx({n}, strides({n}, Role::kIndex), c.row_dt);
  const infiniDtype_t scales_dt = c.scales_dt != INFINI_DTYPE_INVALID ? c.scales_dt : dtype;
  std::optional<TensorBuffer> x1, x2, bias, scales, expert;
  if (c.x1) x1.emplace(std::vector<size_t>{R, H}, strides({R, H}, Role::kInput), dtype);
  if (c.x2) x2.emplace(std::vector<size_t>{R, H}, strides({R, H}, Role::kInput), dtype);
  if (c.bias) bias.emplace(std::vector<size_t>{c.E, H}, strides({c.E, H}, Role::kInput), dtype);
  if (c.scales) scales.emplace(std::vector<size_t>{R, K}, strides({R, K}, Role::kInput), scales_dt);
  if (c.bias || c.expert_idx_only)
    expert.emplace(std::vector<size_t>{R, K}, strides({R, K}, Role::kIndex), c.expert_dt);

  Rng rng(seed);
  ex.fill([&](size_t i) { return signedValue(seed, i, 2.0f); });
  if (x1) x1->fill([&](size_t i) { return signedValue(seed + 1, i, 2.0f); });
  if (x2) x2->fill([&](size_t i) { return signedValue(seed + 2, i, 2.0f); });
  if (bias) bias->fill([&](size_t i) { return signedValue(seed + 3, i, 1.0f); });
  if (scales) scales->fill([&](size_t i) { return signedValue(seed + 4, i, 1.0f); });
  const std::vector<int32_t> slots = makeIndices(c.pattern, n, rows, drop_pad, rng);
  for (size_t r = 0; r < R; ++r)
    for (size_t k = 0; k < K; ++k) setIndex(idx, column ? k * R + r : r * K + k, slots[r * K + k]);
  if (expert)
    for (size_t i = 0; i < n; ++i) setIndex(*expert, i, static_cast<int32_t>(rng.below(c.E)));

  // The oracle, from what the tensors hold (dtype-rounded; stride-0 views read back as stored).
  const std::vector<float> exv = valuesOf(&ex), x1v = valuesOf(ptr(x1)), x2v = valuesOf(ptr(x2)),
                           biasv = valuesOf(ptr(bias)), sv = valuesOf(ptr(scales));
  const std::vector<int64_t> idxv = indicesOf(&idx), expv = indicesOf(ptr(expert));

  ForwardCall call;
  call.mode = c.mode;
  call.tensors = {&out, &ex, &idx, ptr(x1), ptr(x2), ptr(bias), ptr(scales), ptr(expert)};
  out.poison();
  const std::vector<uint8_t> out_before = out.storage();
  const Outcome o = runForward(h, call);
  if (layout == Layout::kReversed && o.status == INFINI_STATUS_BAD_TENSOR_STRIDES) {
    EXPECT_TRUE(out.storage() == out_before) << "rejected, yet written";
    return;
  }
  ASSERT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;

  Mismatches bad("out");
  const double ops = 2.0 * static_cast<double>(K) + 3;
  for (size_t r = 0; r < R; ++r)
    for (size_t j = 0; j < H; ++j) {
      long double truth = 0, terms = 0;
      const size_t e = r * H + j;
      if (x1) truth += x1v[e], terms += std::fabs(x1v[e]);
      if (x2) truth += x2v[e], terms += std::fabs(x2v[e]);
      for (size_t k = 0; k < K; ++k) {
        const int64_t d = idxv[column ? k * R + r : r * K + k];
        const long double s = scales ? sv[r * K + k] : 1.0L;
        const long double x = d < 0 ? 0.0L : exv[static_cast<size_t>(d) * H + j];
        const long double b = bias ? biasv[static_cast<size_t>(expv[r * K + k]) * H + j] : 0.0L;
        truth += s * (x + b);
        terms += std::fabs(s) * (std::fabs(x) + std::fabs(b));
      }
      bad.check(dtype, out, e, truth, allowed(dtype, ops, terms, truth),
                [&] { return "[" + std::to_string(r) + "," + std::to_string(j) + "]"; });
    }
}

std::vector<ForwardCase> forwardCases() {
  std::vector<ForwardCase> cases;
  const size_t hs[] = {1, 3, 17, 67};
  const Pattern patterns[] = {Pattern::kPermutation, Pattern::kDuplicates, Pattern::kDrops};
  size_t k = 0;
  // Every mode x every allowed combination of optional inputs (x1 / x1 + x2, bias, scales).
  for (int64_t mode = 0; mode < 4; ++mode)
    for (int x = 0; x < 3; ++x)
      for (bool bias : {false, true})
        for (bool scales : {false, true}) {
          ForwardCase c;
          c.mode = mode;
          c.R = 1 + (k * 7) % 12;
          c.K = scales ? 1 + k % 4 : 1;
          c.H = hs[k % 4];
          c.E = 2 + k % 3;
          c.C = (c.R * c.K + c.E - 1) / c.E + k % 2;  // just enough capacity, or a spare row each
          c.x1 = x > 0;
          c.x2 = x > 1;
          c.bias = bias;
          c.scales = scales;
          c.expert_idx_only = !bias && k % 5 == 0;
          c.pattern = patterns[k % 3];
          cases.push_back(c);
          ++k;
        }
  const auto all = [](int64_t mode, size_t R, size_t K, size_t H, size_t E, size_t C,
                      Pattern pattern) {
    ForwardCase c;
    c.mode = mode, c.R = R, c.K = K, c.H = H, c.E = E, c.C = C, c.pattern = pattern;
    c.x1 = c.x2 = c.bias = c.scales = true;
    return c;
  };
  // Long rows, K = 8, and a call big enough for every thread.
  cases.push_back(all(0, 5, 3, 1000, 3, 1, Pattern::kDuplicates));
  cases.push_back(all(3, 4, 2, 1000, 3, 2, Pattern::kDrops));
  cases.push_back(all(2, 9, 8, 33, 4, 1, Pattern::kPermutation));
  cases.push_back(all(1, 9, 8, 33, 4, 20, Pattern::kDuplicates));
  cases.push_back(all(2, 160, 4, 256, 8, 1, Pattern::kPermutation));
  cases.push_back(all(1, 160, 4, 256, 8, 90, Pattern::kDrops));
  // Zero sizes: no tokens, no hidden, no top-k (out = x1 + x2, or 0).
  cases.push_back(all(0, 0, 2, 5, 2, 1, Pattern::kPermutation));
  cases.push_back(all(1, 0, 2, 5, 2, 3, Pattern::kPermutation));
  cases.push_back(all(2, 3, 2, 0, 2, 1, Pattern::kDuplicates));
  cases.push_back(all(3, 3, 2, 0, 2, 3, Pattern::kDrops));
  cases.push_back(all(0, 3, 0, 5, 2, 1, Pattern::kPermutation));
  ForwardCase bare = all(1, 3, 0, 5, 2, 2, Pattern::kPermutation);
  bare.x1 = bare.x2 = false;
  cases.push_back(bare);
  bare.mode = 2;
  cases.push_back(bare);
  return cases;
}

// ---------------------------------------------------------------- grad: one case, checked whole
struct GradCase {
  int64_t mode = 0;
  size_t R = 0, K = 1, H = 0;
  int64_t active_num = 0, expert_num = 0, expert_capacity = 0;
  size_t bias_rows = 1;  // mode 0 (mode 1: expert_num)
  bool scales = false, expanded_x = false, bias = false;
  bool expert_idx_only = false;  // expert_idx without bias, holding values no bias could index
  bool grad_scales = false;      // grad_scales given: (R, K), or without scales a placeholder
  bool odd_grad_scales = false;  // ... the placeholder of shape (3, 7)
  Pattern pattern = Pattern::kPermutation;
  // INT32 or INT64 index tensors; scales and grad_scales F32 (else INVALID: the activations').
  infiniDtype_t row_dt = kI32, expert_dt = kI32, scales_dt = INFINI_DTYPE_INVALID;
};

std::string caseName(const GradCase &c) {
  std::string s = "grad mode=" + std::to_string(c.mode) + " R=" + std::to_string(c.R) +
                  " K=" + std::to_string(c.K) + " H=" + std::to_string(c.H) +
                  " active_num=" + std::to_string(c.active_num) +
                  " expert_num=" + std::to_string(c.expert_num) +
                  " expert_capacity=" + std::to_string(c.expert_capacity);
  s += std::string(c.scales ? " scales" : " (no scales)") + (c.expanded_x ? " expanded_x" : "") +
       (c.bias ? " bias" : "") + (c.expert_idx_only ? " expert_idx-only" : "") +
       (c.grad_scales ? (c.odd_grad_scales ? " grad_scales[3,7]" : " grad_scales") : "");
  return s + " " + patternName(c.pattern) + mixName(c.row_dt, c.expert_dt, c.scales_dt);
}

// Runs the case once per entry of `threads` (OpenMP thread counts; 0 = as set): the first result
// against the oracle, the others bit for bit against the first.
void checkGrad(infiniopHandle_t h, infiniDtype_t dtype, Layout layout, const GradCase &c,
               uint64_t seed, const std::vector<int> &threads = {0}) {
  SCOPED_TRACE(caseName(c));
  const size_t R = c.R, K = c.K, H = c.H, n = R * K;
  const bool mode1 = c.mode == 1;
  const size_t E = static_cast<size_t>(c.expert_num), C = static_cast<size_t>(c.expert_capacity);
  const bool limited = c.active_num > 0 && static_cast<size_t>(c.active_num) < n;
  const size_t rows = mode1 ? E * C : limited ? static_cast<size_t>(c.active_num) : n;
  const std::vector<size_t> gx_shape =
      mode1 ? std::vector<size_t>{E, C, H} : std::vector<size_t>{rows, H};
  const size_t bias_rows = mode1 ? E : c.bias_rows;
  const std::vector<size_t> gs_shape =
      c.odd_grad_scales ? std::vector<size_t>{3, 7} : std::vector<size_t>{R, K};
  const auto strides = [&](const std::vector<size_t> &shape, Role role) {
    return stridesFor(layout, shape, role);
  };
  TensorBuffer gx(gx_shape, strides(gx_shape, Role::kOutput), dtype);
  TensorBuffer gy({R, H}, strides({R, H}, Role::kInput), dtype);
  TensorBuffer idx({n}, strides({n}, Role::kIndex), c.row_dt);
  const infiniDtype_t scales_dt = c.scales_dt != INFINI_DTYPE_INVALID ? c.scales_dt : dtype;
  std::optional<TensorBuffer> gs, ex, scales, expert, bias;
  if (c.grad_scales) gs.emplace(gs_shape, strides(gs_shape, Role::kOutput), scales_dt);
  if (c.expanded_x) ex.emplace(gx_shape, strides(gx_shape, Role::kInput), dtype);
  if (c.scales) scales.emplace(std::vector<size_t>{R, K}, strides({R, K}, Role::kInput), scales_dt);
  if (c.bias)
    bias.emplace(std::vector<size_t>{bias_rows, H}, strides({bias_rows, H}, Role::kInput), dtype);
  if (c.bias || c.expert_idx_only)
    expert.emplace(std::vector<size_t>{R, K}, strides({R, K}, Role::kIndex), c.expert_dt);

  Rng rng(seed);
  gy.fill([&](size_t i) { return signedValue(seed, i, 2.0f); });
  if (ex) ex->fill([&](size_t i) { return signedValue(seed + 1, i, 2.0f); });
  if (scales) scales->fill([&](size_t i) { return signedValue(seed + 2, i, 1.0f); });
  if (bias) bias->fill([&](size_t i) { return signedValue(seed + 3, i, 1.0f); });
  // Index values over their whole valid range: [0, R*K) in mode 0 (those >= rows are skipped),
  // [-1, E*C) in mode 1.
  const std::vector<int32_t> slots = makeIndices(c.pattern, n, mode1 ? E * C : n, mode1, rng);
  for (size_t i = 0; i < n; ++i) setIndex(idx, i, slots[i]);
  if (expert)
    for (size_t i = 0; i < n; ++i)
      setIndex(*expert, i,
               c.bias ? static_cast<int32_t>(rng.below(bias_rows))
                      : (i % 2 ? INT32_MIN + static_cast<int32_t>(i)
                               : 1000000 + static_cast<int32_t>(i)));

  // The oracle.
  const std::vector<float> gyv = valuesOf(&gy), exv = valuesOf(ptr(ex)), sv = valuesOf(ptr(scales)),
                           biasv = valuesOf(ptr(bias));
  const std::vector<int64_t> idxv = indicesOf(&idx), expv = indicesOf(ptr(expert));
  const size_t out_rows = mode1 ? E * C : rows;
  std::vector<long double> gx_truth(out_rows * H), gx_terms(out_rows * H), gs_truth(n), gs_terms(n);
  std::vector<size_t> contributions(out_rows);
  for (size_t i = 0; i < n; ++i) {
    const size_t r = i / K;
    const int64_t d = idxv[i];
    const bool skipped = mode1 ? d == -1 : d >= static_cast<int64_t>(rows);
    const long double s = scales ? sv[i] : 1.0L;
    if (!skipped) {
      ++contributions[static_cast<size_t>(d)];
      for (size_t j = 0; j < H; ++j) {
        const long double p = gyv[r * H + j] * s;
        gx_truth[static_cast<size_t>(d) * H + j] += p;
        gx_terms[static_cast<size_t>(d) * H + j] += std::fabs(p);
      }
    }
    if (scales)
      for (size_t j = 0; j < H; ++j) {
        const long double x = skipped ? 0.0L : exv[static_cast<size_t>(d) * H + j];
        const long double b = bias ? biasv[static_cast<size_t>(expv[i]) * H + j] : 0.0L;
        const long double g = gyv[r * H + j];
        gs_truth[i] += (x + b) * g;
        gs_terms[i] += (std::fabs(x) + std::fabs(b)) * std::fabs(g);
      }
  }

  GradCall call;
  call.mode = c.mode;
  call.active_num = c.active_num;
  call.expert_num = c.expert_num;
  call.expert_capacity = c.expert_capacity;
  call.tensors = {&gx, ptr(gs), &gy, &idx, ptr(ex), ptr(scales), ptr(expert), ptr(bias)};
  std::vector<uint8_t> first_gx, first_gs;
  for (size_t run = 0; run < threads.size(); ++run) {
    SCOPED_TRACE("OpenMP threads " + std::to_string(threads[run]));
    gx.poison();
    if (gs) {
      if (scales)
        gs->poison();
      else
        gs->fill([](size_t) { return 7.0f; });  // not to be touched
    }
    const std::vector<uint8_t> gs_before = gs ? gs->storage() : std::vector<uint8_t>{};
    const std::vector<uint8_t> gx_before = gx.storage();
    {
      const ThreadCount thread_count(threads[run]);
      const Outcome o = runGrad(h, call);
      if (layout == Layout::kReversed && o.status == INFINI_STATUS_BAD_TENSOR_STRIDES) {
        EXPECT_TRUE(gx.storage() == gx_before && (!gs || gs->storage() == gs_before))
            << "rejected, yet written";
        return;
      }
      ASSERT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
    }
    if (run > 0) {
      EXPECT_TRUE(gx.storage() == first_gx) << "grad_expanded_x differs from the first run";
      if (gs) {
        EXPECT_TRUE(gs->storage() == first_gs) << "grad_scales differs from the first run";
      }
      continue;
    }
    first_gx = gx.storage();
    if (gs) first_gs = gs->storage();
    Mismatches bad_gx("grad_expanded_x");
    for (size_t d = 0; d < out_rows; ++d)
      for (size_t j = 0; j < H; ++j) {
        const size_t e = d * H + j;
        const auto where = [&] {
          return "row " + std::to_string(d) + " col " + std::to_string(j) + " (" +
                 std::to_string(contributions[d]) + " contributions)";
        };
        if (contributions[d] == 0)
          bad_gx.checkZero(gx, e, where);
        else
          bad_gx.check(
              dtype, gx, e, gx_truth[e],
              allowed(dtype, static_cast<double>(contributions[d]), gx_terms[e], gx_truth[e]),
              where);
      }
    if (!gs) continue;
    if (!scales) {
      EXPECT_TRUE(gs->storage() == gs_before) << "grad_scales written without scales";
      continue;
    }
    Mismatches bad_gs("grad_scales");
    for (size_t i = 0; i < n; ++i)
      bad_gs.check(scales_dt, *gs, i, gs_truth[i],
                   allowed(scales_dt, static_cast<double>(H) + 2, gs_terms[i], gs_truth[i]), [&] {
                     return "[" + std::to_string(i / K) + "," + std::to_string(i % K) + "] index " +
                            std::to_string(idxv[i]);
                   });
  }
}

std::vector<GradCase> gradCases() {
  struct Combo {
    bool scales, expanded_x, bias, expert_idx_only, grad_scales, odd_grad_scales;
  };
  const Combo combos[] = {
      // scales, expanded_x, bias, expert_idx-only, grad_scales, (3, 7) grad_scales
      {false, false, false, false, false, false},  // grad_y only (K = 1)
      {false, true, false, false, false, false},   // expanded_x given, not read
      {false, false, true, false, true, false},    // bias unused; (R, 1) grad_scales untouched
      {false, true, false, true, true, true},      // (3, 7) grad_scales untouched
      {true, true, false, false, true, false},
      {true, true, false, false, false, false},  // grad_scales NULL
      {true, true, true, false, true, false},
      {true, true, true, false, false, false},
      {true, true, false, true, true, false},  // expert_idx without bias: not read
  };
  const size_t hs[] = {1, 3, 17, 67};
  const Pattern patterns[] = {Pattern::kPermutation, Pattern::kDuplicates, Pattern::kDrops};
  std::vector<GradCase> cases;
  size_t k = 0;
  for (int64_t mode : {0, 1})
    for (const Combo &combo : combos)
      for (int variant = 0; variant < 2; ++variant) {
        GradCase c;
        c.mode = mode;
        c.R = 1 + (k * 5) % 11;
        c.K = combo.scales ? 1 + k % 4 : 1;
        c.H = hs[k % 4];
        const auto n = static_cast<int64_t>(c.R * c.K);
        if (mode == 0) {
          // active_num: none, half (skips tokens), all, more than all, one row.
          const int64_t actives[] = {0, n / 2, n, n + 3, 1};
          c.active_num = actives[k % 5];
          c.expert_num = k % 2 ? -1 : 0;  // ignored in mode 0
          c.expert_capacity = k % 3 ? 0 : -5;
          c.bias_rows = 2 + k % 3;
        } else {
          c.active_num = k % 2 ? 3 : 0;  // ignored in mode 1
          c.expert_num = static_cast<int64_t>(2 + k % 3);
          c.expert_capacity = (n + c.expert_num - 1) / c.expert_num + static_cast<int64_t>(k % 2);
          if (c.expert_capacity == 0) c.expert_capacity = 1;
        }
        c.scales = combo.scales;
        c.expanded_x = combo.expanded_x;
        c.bias = combo.bias;
        c.expert_idx_only = combo.expert_idx_only;
        c.grad_scales = combo.grad_scales;
        c.odd_grad_scales = combo.odd_grad_scales;
        c.pattern = patterns[k % 3];
        cases.push_back(c);
        ++k;
      }
  const auto all = [](int64_t mode, size_t R, size_t K, size_t H, int64_t active, int64_t E,
                      int64_t C, Pattern pattern) {
    GradCase c;
    c.mode = mode, c.R = R, c.K = K, c.H = H, c.active_num = active;
    c.expert_num = E, c.expert_capacity = C, c.bias_rows = 3, c.pattern = pattern;
    c.scales = c.expanded_x = c.bias = c.grad_scales = true;
    return c;
  };
  // Long rows, K = 8, and calls big enough for every thread.
  cases.push_back(all(0, 5, 3, 1000, 9, 0, 0, Pattern::kDuplicates));
  cases.push_back(all(1, 4, 2, 1000, 0, 3, 2, Pattern::kDrops));
  cases.push_back(all(0, 9, 8, 33, 0, 0, 0, Pattern::kPermutation));
  cases.push_back(all(1, 9, 8, 33, 0, 4, 20, Pattern::kDuplicates));
  cases.push_back(all(0, 160, 4, 256, 0, 0, 0, Pattern::kDuplicates));
  cases.push_back(all(0, 160, 4, 256, 300, 0, 0, Pattern::kPermutation));
  cases.push_back(all(1, 160, 4, 256, 0, 8, 90, Pattern::kPermutation));
  // Zero sizes: no tokens (mode 1 still zero-fills), no hidden, no top-k.
  cases.push_back(all(0, 0, 2, 5, 0, 0, 0, Pattern::kPermutation));
  cases.push_back(all(0, 0, 2, 5, 4, 0, 0, Pattern::kPermutation));
  cases.push_back(all(1, 0, 2, 5, 0, 2, 3, Pattern::kPermutation));
  cases.push_back(all(0, 3, 2, 0, 0, 0, 0, Pattern::kDuplicates));
  cases.push_back(all(1, 3, 2, 0, 0, 2, 3, Pattern::kDrops));
  cases.push_back(all(0, 3, 0, 5, 0, 0, 0, Pattern::kPermutation));
  cases.push_back(all(0, 3, 0, 5, 4, 0, 0, Pattern::kPermutation));
  cases.push_back(all(1, 3, 0, 5, 0, 2, 2, Pattern::kPermutation));
  return cases;
}

// ---------------------------------------------------------------- the oracle suites
using Param = std::tuple<DeviceParam, infiniDtype_t, Layout>;

class MoeFinalizeRoutingV2Cases : public DeviceTestBase,
                                  public ::testing::WithParamInterface<Param> {
 protected:
  void SetUp() override { selectDevice(std::get<0>(GetParam())); }
  void TearDown() override { restoreTargets(); }
  infiniDtype_t dtype() const { return std::get<1>(GetParam()); }
  Layout layout() const { return std::get<2>(GetParam()); }
};

TEST_P(MoeFinalizeRoutingV2Cases, ForwardMatchesOracle) {
  uint64_t seed = 101;
  for (const ForwardCase &c : forwardCases()) checkForward(handle(), dtype(), layout(), c, seed++);
}

TEST_P(MoeFinalizeRoutingV2Cases, GradMatchesOracle) {
  uint64_t seed = 701;
  for (const GradCase &c : gradCases()) checkGrad(handle(), dtype(), layout(), c, seed++);
}

INSTANTIATE_TEST_SUITE_P(
    All, MoeFinalizeRoutingV2Cases,
    ::testing::Combine(::testing::ValuesIn(allDeviceParams()), ::testing::ValuesIn(kFloatDtypes),
                       ::testing::Values(Layout::kContiguous, Layout::kTransposed, Layout::kPadded,
                                         Layout::kBroadcast, Layout::kReversed)),
    [](const ::testing::TestParamInfo<Param> &info) {
      return deviceParamName(std::get<0>(info.param)) + "_" +
             infiniop::dtypeName(std::get<1>(info.param)) + "_" +
             layoutName(std::get<2>(info.param));
    });

// ---------------------------------------------------------------- INT64 indices, F32 scales
// Every oracle case again, at the error model above, with the index and scales dtypes mixed:
// INT64 expanded_row_idx and expert_idx (together and each alone), and F32 scales (F32
// grad_scales) with F16 / BF16 activations, which must be used unrounded (the oracle reads the
// F32 values; a library rounding them to the activations' dtype errs by up to 2^-9 relative).
// The layouts rotate over the cases (contiguous, transposed, padded, reversed).
struct Mix {
  infiniDtype_t row_dt, expert_dt;
  bool f32_scales;
};
constexpr Mix kMixes[] = {{kI64, kI64, false}, {kI64, kI32, true}, {kI32, kI64, true}};

using MixParam = std::tuple<DeviceParam, infiniDtype_t, int>;
class MoeFinalizeRoutingV2Mixed : public DeviceTestBase,
                                  public ::testing::WithParamInterface<MixParam> {
 protected:
  void SetUp() override { selectDevice(std::get<0>(GetParam())); }
  void TearDown() override { restoreTargets(); }
  infiniDtype_t dtype() const { return std::get<1>(GetParam()); }
  const Mix &mix() const { return kMixes[std::get<2>(GetParam())]; }
  template <class Case>
  Case mixed(Case c) const {
    c.row_dt = mix().row_dt, c.expert_dt = mix().expert_dt;
    c.scales_dt = mix().f32_scales ? kF32 : INFINI_DTYPE_INVALID;
    return c;
  }
};
constexpr Layout kMixLayouts[] = {Layout::kContiguous, Layout::kTransposed, Layout::kPadded,
                                  Layout::kReversed};

TEST_P(MoeFinalizeRoutingV2Mixed, ForwardMatchesOracle) {
  uint64_t seed = 1101;
  size_t k = 0;
  for (const ForwardCase &c : forwardCases())
    checkForward(handle(), dtype(), kMixLayouts[k++ % 4], mixed(c), seed++);
}

TEST_P(MoeFinalizeRoutingV2Mixed, GradMatchesOracle) {
  uint64_t seed = 1701;
  size_t k = 0;
  for (const GradCase &c : gradCases())
    checkGrad(handle(), dtype(), kMixLayouts[k++ % 4], mixed(c), seed++);
}

// F32 scales are only a mixture with F16 / BF16 activations: with F32 ones the first mix only.
std::vector<MixParam> mixParams() {
  std::vector<MixParam> params;
  for (DeviceParam p : allDeviceParams())
    for (infiniDtype_t dtype : kFloatDtypes)
      for (int m = 0; m < 3; ++m)
        if (dtype != kF32 || !kMixes[m].f32_scales) params.emplace_back(p, dtype, m);
  return params;
}

INSTANTIATE_TEST_SUITE_P(All, MoeFinalizeRoutingV2Mixed, ::testing::ValuesIn(mixParams()),
                         [](const ::testing::TestParamInfo<MixParam> &info) {
                           const Mix &m = kMixes[std::get<2>(info.param)];
                           return deviceParamName(std::get<0>(info.param)) + "_" +
                                  infiniop::dtypeName(std::get<1>(info.param)) + "_row" +
                                  infiniop::dtypeName(m.row_dt) + "_expert" +
                                  infiniop::dtypeName(m.expert_dt) +
                                  (m.f32_scales ? "_scalesF32" : "");
                         });

// ---------------------------------------------------------------- determinism
// Duplicate indices sum, and the sums are the same bit for bit for 1, 2 and 3 OpenMP threads
// (on cpu_reference trivially; on opencl, where the thread count means nothing, the same for
// three runs: no order-dependent accumulation, e.g. float atomics). Both calls are large enough for
// every thread. Half the tokens go to a few hot rows: 128 of mode 0's 8192 (~32 contributions
// each), 8 of mode 1's 512 (~400).
TEST_P(DeviceTest, MoeFinalizeRoutingV2GradDeterministic) {
  GradCase c;
  c.R = 1024, c.K = 8, c.H = 67;
  c.scales = c.expanded_x = c.bias = c.grad_scales = true;
  c.bias_rows = 5;
  c.pattern = Pattern::kDuplicates;
  for (infiniDtype_t dtype : {kF32, kBF16}) {
    SCOPED_TRACE(infiniop::dtypeName(dtype));
    c.mode = 0;
    checkGrad(handle(), dtype, Layout::kContiguous, c, 17, {1, 2, 3});
    c.mode = 1;
    c.expert_num = 8, c.expert_capacity = 64;
    checkGrad(handle(), dtype, Layout::kContiguous, c, 18, {1, 2, 3});
  }
}

// ---------------------------------------------------------------- realistic size
// R = 4096 tokens, K = 8, H = 4096, E = 64 experts (C = R / 8 = 512 in mode 1, with a skewed
// routing so that busy experts drop tokens and quiet ones leave capacity rows unfilled), BF16, with
// scales, bias, expanded_x (and x1 for the forward): the cpu device, and opencl where this machine
// has an OpenCL device, against cpu_reference. Each is within the error model of the truth, so they
// differ by at most twice its F32 part plus 1 ulp of BF16 on each side at the largest magnitude
// the truth can have. Under an emulator (INFINIOP_TEST_EMULATED, set by tests/emulated.cmake),
// where each R = 4096 case took a minute, R = 256 and C = 32: the same rows (H = 4096, one tile),
// routing, drops and checks, 16x fewer of them.
size_t realisticTokens() {
  const char *emulated = std::getenv("INFINIOP_TEST_EMULATED");
  return emulated && *emulated ? 256 : 4096;
}
const uint16_t *bf16Of(TensorBuffer &t) {
  return static_cast<const uint16_t *>(t.data());
}
void fillBf16(TensorBuffer &t, uint64_t seed, float range) {
  auto *p = static_cast<uint16_t *>(t.data());
  for (size_t i = 0; i < t.numel(); ++i) p[i] = infiniop::bf16FromF32(signedValue(seed, i, range));
}
void poisonBf16(TensorBuffer &t) {
  auto *p = static_cast<uint16_t *>(t.data());
  std::fill(p, p + t.numel(), uint16_t{0x7FC0});
}
void setIndices(TensorBuffer &t, const std::vector<int32_t> &v) {
  std::memcpy(t.data(), v.data(), v.size() * sizeof(int32_t));
}

// Compares a device's result (a) with cpu_reference's (b) at element i: c F32 operations over
// `terms`.
class PairCheck {
 public:
  PairCheck(const char *what, const char *device)
      : device_(device), bad_(std::string(device) + " " + what) {}
  void operator()(float a, float b, double c, double terms, size_t i) {
    const double f32_part = c * (0x1p-24 * terms + 0x1p-149);
    const double biggest = std::max(std::fabs(a), std::fabs(b)) + f32_part;
    const double tol = 2 * (f32_part + ulpOf(kBF16, biggest));
    if (!(std::fabs(static_cast<double>(a) - b) <= tol))
      bad_.add("element " + std::to_string(i) + ": " + device_ + " " + str(a) + ", cpu_reference " +
               str(b) + ", allowed difference " + str(tol));
  }
  void add(const std::string &m) { bad_.add(m); }

 private:
  const char *device_;
  Mismatches bad_;
};

void realisticCase(int64_t mode) {
  const size_t R = realisticTokens(), K = 8, H = 4096, E = 64, C = R / 8, n = R * K;
  const std::vector<size_t> ex_shape =
      mode == 0 ? std::vector<size_t>{n, H} : std::vector<size_t>{E, C, H};
  const auto bf = kBF16;
  const auto start = std::chrono::steady_clock::now();

  // Routing: K distinct experts per token, skewed towards the low experts.
  Rng rng(42 + static_cast<uint64_t>(mode));
  std::vector<int32_t> expert(n), idx(n), fwd_idx(n);
  for (size_t r = 0; r < R; ++r)
    for (size_t k = 0; k < K; ++k) {
      int32_t e;
      do {
        const double x = static_cast<double>(rng.next() >> 11) * 0x1p-53;
        e = static_cast<int32_t>(static_cast<double>(E) * x * x);
      } while (std::find(&expert[r * K], &expert[r * K + k], e) != &expert[r * K + k]);
      expert[r * K + k] = e;
    }
  std::vector<size_t> count(E, 0), offset(E, 0);
  if (mode == 0) {  // position in the expert-sorted order: a permutation of [0, n)
    for (int32_t e : expert) ++count[static_cast<size_t>(e)];
    for (size_t e = 1; e < E; ++e) offset[e] = offset[e - 1] + count[e - 1];
    for (size_t i = 0; i < n; ++i)
      idx[i] = static_cast<int32_t>(offset[static_cast<size_t>(expert[i])]++);
  } else {  // slot e*C + arrival within the expert, -1 past the capacity
    for (size_t i = 0; i < n; ++i) {
      const auto e = static_cast<size_t>(expert[i]);
      idx[i] = count[e] < C ? static_cast<int32_t>(e * C + count[e]++) : -1;
    }
  }
  for (size_t r = 0; r < R; ++r)  // the forward's modes 0 and 1 read the column layout
    for (size_t k = 0; k < K; ++k) fwd_idx[k * R + r] = idx[r * K + k];

  TensorBuffer gy({R, H}, bf), ex(ex_shape, bf), scales({R, K}, bf), bias({E, H}, bf),
      x1({R, H}, bf), idx_t({n}, kI32), fwd_idx_t({n}, kI32), expert_t({R, K}, kI32);
  fillBf16(gy, 1, 2.0f);
  fillBf16(ex, 2, 2.0f);
  fillBf16(scales, 3, 1.0f);
  fillBf16(bias, 4, 1.0f);
  fillBf16(x1, 5, 2.0f);
  setIndices(idx_t, idx);
  setIndices(fwd_idx_t, fwd_idx);
  setIndices(expert_t, expert);
  // Devices: 0 cpu, 1 cpu_reference, 2 opencl (where it exists).
  const char *names[] = {"cpu", "cpu_reference", "opencl"};
  int devices = 2;
  std::string opencl_missing = "built without opencl";
  infiniopHandle_t opencl = nullptr;
  if (isBuilt(INFINI_DEVICE_OPENCL)) {
    bool skip = false;
    opencl = sharedHandle(INFINI_DEVICE_OPENCL, &opencl_missing, &skip);
    if (opencl) devices = 3;
    ASSERT_TRUE(opencl || skip) << opencl_missing;
  }
  const bool with_cpu = isBuilt(INFINI_DEVICE_CPU);
  std::vector<TensorBuffer> out, gx, gs;
  out.reserve(3), gx.reserve(3), gs.reserve(3);  // no copies of 256 MiB buffers
  for (int d = 0; d < devices; ++d) {
    out.emplace_back(std::vector<size_t>{R, H}, bf);
    gx.emplace_back(ex_shape, bf);
    gs.emplace_back(std::vector<size_t>{R, K}, bf);
  }
  const auto setup = std::chrono::steady_clock::now();

  double seconds[3] = {0, 0, 0};
  for (int d = with_cpu ? 0 : 1; d < devices; ++d) {
    SCOPED_TRACE(names[d]);
    const Handle owned(d == 0 ? INFINI_DEVICE_CPU : INFINI_DEVICE_CPU_REFERENCE);
    const infiniopHandle_t h = d == 2 ? opencl : owned.get();
    poisonBf16(out[d]);
    poisonBf16(gx[d]);
    poisonBf16(gs[d]);
    const auto t0 = std::chrono::steady_clock::now();
    ForwardCall f;
    f.mode = mode;
    f.tensors = {&out[d], &ex, &fwd_idx_t, &x1, nullptr, &bias, &scales, &expert_t};
    Outcome o = runForward(h, f);
    ASSERT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
    GradCall g;
    g.mode = mode;
    g.expert_num = static_cast<int64_t>(E);
    g.expert_capacity = static_cast<int64_t>(C);
    g.tensors = {&gx[d], &gs[d], &gy, &idx_t, &ex, &scales, &expert_t, &bias};
    o = runGrad(h, g);
    ASSERT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
    seconds[d] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const auto rows_of = [&](const uint16_t *p, size_t row) { return p + row * H; };
  const auto v = [](uint16_t h) { return infiniop::f32FromBf16(h); };
  const uint16_t *exp_ = bf16Of(ex), *gyp = bf16Of(gy), *sp = bf16Of(scales), *bp = bf16Of(bias),
                 *x1p = bf16Of(x1);

  std::vector<int> compared;  // cpu, and opencl where it ran: each against cpu_reference
  if (with_cpu) compared.push_back(0);
  if (devices == 3) compared.push_back(2);
  // One PairCheck per compared device, fed the same (expensive) terms.
  const auto checks = [&](const char *what) {
    std::deque<PairCheck> c;
    for (int dev : compared) c.emplace_back(what, names[dev]);
    return c;
  };
  {  // forward: c = 2K + 3
    std::deque<PairCheck> check = checks("out");
    const uint16_t *b = bf16Of(out[1]);
    std::vector<double> terms(H);
    for (size_t r = 0; r < R; ++r) {
      for (size_t j = 0; j < H; ++j) terms[j] = std::fabs(v(x1p[r * H + j]));
      for (size_t k = 0; k < K; ++k) {
        const int32_t d = idx[r * K + k];
        const double s = std::fabs(v(sp[r * K + k]));
        const uint16_t *bias_row = rows_of(bp, static_cast<size_t>(expert[r * K + k]));
        for (size_t j = 0; j < H; ++j)
          terms[j] += s * ((d < 0 ? 0.0 : std::fabs(v(exp_[static_cast<size_t>(d) * H + j]))) +
                           std::fabs(v(bias_row[j])));
      }
      for (size_t c = 0; c < compared.size(); ++c) {
        const uint16_t *a = bf16Of(out[compared[c]]);
        for (size_t j = 0; j < H; ++j)
          check[c](v(a[r * H + j]), v(b[r * H + j]), 2.0 * K + 3, terms[j], r * H + j);
      }
    }
  }
  {  // grad_expanded_x: one contribution per reached row, +0 elsewhere
    std::deque<PairCheck> check = checks("grad_expanded_x");
    const uint16_t *b = bf16Of(gx[1]);
    const size_t rows = mode == 0 ? n : E * C;
    std::vector<int64_t> source(rows, -1);
    for (size_t i = 0; i < n; ++i)
      if (idx[i] >= 0) source[static_cast<size_t>(idx[i])] = static_cast<int64_t>(i);
    for (size_t c = 0; c < compared.size(); ++c) {
      const uint16_t *a = bf16Of(gx[compared[c]]);
      for (size_t d = 0; d < rows; ++d) {
        if (source[d] < 0) {
          for (size_t j = 0; j < H; ++j)
            if (a[d * H + j] != 0 || b[d * H + j] != 0) {
              check[c].add("unreached row " + std::to_string(d) + " not +0");
              break;
            }
          continue;
        }
        const auto i = static_cast<size_t>(source[d]);
        const double s = v(sp[i]);
        for (size_t j = 0; j < H; ++j) {
          const double p = std::fabs(v(gyp[(i / K) * H + j]) * s);
          check[c](v(a[d * H + j]), v(b[d * H + j]), 1, p, d * H + j);
        }
      }
    }
  }
  {  // grad_scales: c = H + 2
    std::deque<PairCheck> check = checks("grad_scales");
    const uint16_t *b = bf16Of(gs[1]);
    for (size_t i = 0; i < n; ++i) {
      const int32_t d = idx[i];
      const uint16_t *g = rows_of(gyp, i / K),
                     *bias_row = rows_of(bp, static_cast<size_t>(expert[i]));
      double terms = 0;
      for (size_t j = 0; j < H; ++j)
        terms += ((d < 0 ? 0.0 : std::fabs(v(exp_[static_cast<size_t>(d) * H + j]))) +
                  std::fabs(v(bias_row[j]))) *
                 std::fabs(v(g[j]));
      for (size_t c = 0; c < compared.size(); ++c)
        check[c](v(bf16Of(gs[compared[c]])[i]), v(b[i]), static_cast<double>(H) + 2, terms, i);
    }
  }
  const auto end = std::chrono::steady_clock::now();
  std::printf(
      "[ timing ] mode %d: setup %.2f s, cpu %.2f s, cpu_reference %.2f s, opencl %.2f s, checks "
      "%.2f s\n",
      static_cast<int>(mode), std::chrono::duration<double>(setup - start).count(), seconds[0],
      seconds[1], seconds[2],
      std::chrono::duration<double>(end - setup).count() - seconds[0] - seconds[1] - seconds[2]);
  if (devices < 3) std::printf("[ note   ] opencl not compared: %s\n", opencl_missing.c_str());
}

TEST(MoeFinalizeRoutingV2Realistic, Bf16Mode0) {
  realisticCase(0);
}
TEST(MoeFinalizeRoutingV2Realistic, Bf16Mode1) {
  realisticCase(1);
}

}  // namespace
}  // namespace infiniop_test::moe_finalize
