// SPDX-License-Identifier: Apache-2.0
// MoeInitRoutingV2 and MoeInitRoutingV2Grad conformance (SEMANTICS.md "MoeInitRoutingV2 and
// MoeInitRoutingV2Grad"), on every device (cpu_reference, cpu on every Highway target, opencl):
//  - the Init against an oracle written here (std::stable_sort of the positions p = r*K + k by
//    expert): both modes, active_num 0 / < R*K / = R*K / > R*K, capacity below the largest count
//    (drops), above R (padding) and exactly the counts, both count flags (outputs not asked for
//    given, poisoned, and left untouched, even with a wrong shape and dtype), INT32 / INT64 for
//    expert_idx, expanded_row_idx and the counts independently, R = 0, K = 1, H = 0, H = 4099, and
//    three layouts (contiguous; transposed x and expert_idx, padded expanded_x, 1-D outputs at
//    stride 2 or 3; every first dim reversed, which a library may reject with BAD_TENSOR_STRIDES).
//    x holds NaN payloads (quiet and signalling), -0, infinities and subnormals: every output
//    must be the oracle's bytes exactly, guard elements around each view included;
//  - the Init's grad against a long-double oracle, duplicates and skipped indices included;
//  - both operators the same bits for 1 and 2 OpenMP threads and on repeated calls, and a larger
//    call (R = 256, K = 8, E = 64, H = 512) bit-identical to cpu_reference;
//  - the round trips Init -> MoeFinalizeRoutingV2 (mode 2 dropless, 3 drop/pad) = the plain MoE
//    combine, and MoeFinalizeRoutingV2Grad -> MoeInitRoutingV2Grad = the oracle gradient;
//  - (moe_init_routing_api_test.cc) the workspace, and bad arguments: status, a message naming
//    the operator, every buffer untouched. The helpers both files use: moe_init_routing.h.
//
// Error model (u = 2^-24; terms = the sum of the magnitudes of what the formula adds):
//  - MoeInitRoutingV2Grad: grad_x[r] sums at most K rows in F32 (the additions only: K - 1
//    roundings) and rounds once: |got - truth| <= K (u terms + 2^-149) (+ 1 ulp of F16/BF16 at
//    |truth|). A row no index reaches is exactly 0.
//  - Round-trip forward (MoeFinalizeRoutingV2's own model): c = 2K + 3 roundings of u terms.
//  - Round-trip grad: MoeFinalizeRoutingV2Grad rounds each s * g to the dtype (at most 1 ulp of
//    the dtype at |s g|, F32 included) and the Init's grad sums K of those: (K + 1) u terms + the
//    sum of those ulps (+ 1 ulp at |truth| for F16/BF16); grad_scales its model, c = H + 2.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
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
#include "infiniop/ops/moe_finalize_routing_v2.h"
#include "infiniop/ops/moe_finalize_routing_v2_grad.h"
#include "infiniop/ops/moe_init_routing_v2.h"
#include "infiniop/ops/moe_init_routing_v2_grad.h"
#include "moe_init_routing.h"
#include "tensor_buffer.h"

namespace infiniop_test::moe_init {
namespace {

// ---------------------------------------------------------------- the Init's oracle
struct Routing {
  std::vector<int64_t> row_index;  // per position p
  std::vector<int64_t> counts;     // per expert, all positions
  std::vector<int64_t> source;     // per expanded row: the token copied there, -1: none
};
Routing initOracle(const std::vector<int64_t> &experts, size_t K, size_t E, int64_t mode,
                   size_t rows, size_t C) {
  const size_t n = experts.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return experts[a] < experts[b]; });
  Routing r;
  r.row_index.assign(n, -1);
  r.counts.assign(E, 0);
  for (int64_t e : experts) ++r.counts[static_cast<size_t>(e)];
  std::vector<int64_t> first(E, 0);  // s of the expert's first position
  for (size_t e = 1; e < E; ++e) first[e] = first[e - 1] + r.counts[e - 1];
  for (size_t s = 0; s < n; ++s) {
    const size_t p = order[s];
    const int64_t e = experts[p], j = static_cast<int64_t>(s) - first[static_cast<size_t>(e)];
    r.row_index[p] = mode == 0                     ? static_cast<int64_t>(s)
                     : j < static_cast<int64_t>(C) ? e * static_cast<int64_t>(C) + j
                                                   : -1;
  }
  r.source.assign(rows, -1);
  for (size_t p = 0; p < n; ++p)
    if (r.row_index[p] >= 0 && static_cast<size_t>(r.row_index[p]) < rows)
      r.source[static_cast<size_t>(r.row_index[p])] = static_cast<int64_t>(p / K);
  return r;
}

// ---------------------------------------------------------------- Init: one case, checked whole
enum class Experts { kUniform, kSkewed, kFew };
struct InitCase {
  int64_t mode = 0;
  size_t R = 0, K = 1, H = 1, E = 1;
  int64_t active_num = 0, capacity = 0, count_flag = 0;
  bool before_flag = false;
  infiniDtype_t expert_dt = kI32, row_dt = kI32, count_dt = kI32;
  Experts experts = Experts::kUniform;
  bool odd_unasked = false;     // the outputs not asked for: shape (2, 3), F32 (else (E), count_dt)
  bool exact_capacity = false;  // mode 1: capacity = the largest count (no drop, one expert full)
};
std::string caseName(const InitCase &c) {
  return "init mode=" + std::to_string(c.mode) + " R=" + std::to_string(c.R) +
         " K=" + std::to_string(c.K) + " H=" + std::to_string(c.H) + " E=" + std::to_string(c.E) +
         " active_num=" + std::to_string(c.active_num) + " C=" + std::to_string(c.capacity) +
         " count_flag=" + std::to_string(c.count_flag) +
         " before=" + std::to_string(c.before_flag) + " expert_idx " + dtypeStr(c.expert_dt) +
         " row_idx " + dtypeStr(c.row_dt) + " counts " + dtypeStr(c.count_dt) +
         (c.odd_unasked ? " odd-unasked" : "");
}

std::vector<int64_t> makeExperts(Experts kind, size_t n, size_t E, Rng &rng) {
  std::vector<int64_t> v(n);
  for (int64_t &e : v) {
    const size_t u = rng.below(E);
    e = static_cast<int64_t>(kind == Experts::kUniform  ? u
                             : kind == Experts::kSkewed ? (rng.below(2) ? 0 : u)
                                                        : u % std::max<size_t>(1, E / 3) * 3);
  }
  return v;
}

// Runs the case once per entry of `threads`: every output (and every guard) exactly the oracle's
// bytes, every run the same. Returns the outputs' storage (expanded_x, row_idx, counts, before).
std::vector<std::vector<uint8_t>> checkInit(infiniopHandle_t h, infiniDtype_t dtype, Layout layout,
                                            const InitCase &c, uint64_t seed,
                                            const std::vector<int> &threads = {0}) {
  SCOPED_TRACE(caseName(c));
  const size_t R = c.R, K = c.K, H = c.H, E = c.E, n = R * K;
  const bool drop_pad = c.mode == 1;
  Rng rng(seed);
  const std::vector<int64_t> experts = makeExperts(c.experts, n, E, rng);
  int64_t capacity = c.capacity;
  if (c.exact_capacity) {
    std::vector<int64_t> counts(E, 0);
    for (int64_t v : experts) ++counts[static_cast<size_t>(v)];
    capacity = *std::max_element(counts.begin(), counts.end());
  }
  SCOPED_TRACE("expert_capacity " + std::to_string(capacity));
  const auto C = static_cast<size_t>(capacity);
  const size_t A = c.active_num > 0 && static_cast<size_t>(c.active_num) < n
                       ? static_cast<size_t>(c.active_num)
                       : n;
  const std::vector<size_t> ex_shape =
      drop_pad ? std::vector<size_t>{E, C, H} : std::vector<size_t>{A, H};
  TensorBuffer x = makeTensor(layout, Kind::kMatrix, {R, H}, dtype);
  TensorBuffer expert = makeTensor(layout, Kind::kMatrix, {R, K}, c.expert_dt);
  TensorBuffer ex = makeTensor(layout, Kind::kExpanded, ex_shape, dtype);
  TensorBuffer row = makeTensor(layout, Kind::kIndex, {n}, c.row_dt);
  const bool counts_asked = !drop_pad && c.count_flag != 0,
             before_asked = drop_pad && c.before_flag;
  const auto countTensor = [&](bool asked) {
    return asked || !c.odd_unasked ? makeTensor(layout, Kind::kCounts, {E}, c.count_dt)
                                   : TensorBuffer({2, 3}, kF32);
  };
  TensorBuffer counts = countTensor(counts_asked), before = countTensor(before_asked);
  fillSpecial(x, seed);
  for (size_t i = 0; i < n; ++i) setIndex(expert, i, experts[i]);
  const Routing truth = initOracle(indicesOf(expert), K, E, c.mode, drop_pad ? E * C : A, C);

  // What each output must hold: its poisoned bytes with the oracle's values written over.
  ex.poison();
  TensorBuffer want_ex = ex, want_row = row, want_counts = counts, want_before = before;
  for (size_t d = 0; d < truth.source.size(); ++d)
    for (size_t j = 0; j < H; ++j) {
      if (truth.source[d] < 0)
        std::memset(want_ex.at(d * H + j), 0, ex.elementSize());
      else
        std::memcpy(want_ex.at(d * H + j), x.at(static_cast<size_t>(truth.source[d]) * H + j),
                    ex.elementSize());
    }
  for (size_t p = 0; p < n; ++p) setIndex(want_row, p, truth.row_index[p]);
  int64_t sum = 0;
  for (size_t e = 0; e < E; ++e) {
    sum += truth.counts[e];
    if (counts_asked) setIndex(want_counts, e, c.count_flag == 1 ? sum : truth.counts[e]);
    if (before_asked) setIndex(want_before, e, truth.counts[e]);
  }

  Call call;
  call.tensors = {&ex, &row, &counts, &before, &x, &expert};
  const int64_t attrs[] = {c.active_num, capacity,     static_cast<int64_t>(E),
                           c.mode,       c.count_flag, c.before_flag};
  std::copy(std::begin(attrs), std::end(attrs), call.attr);
  std::vector<std::vector<uint8_t>> first;
  for (int t : threads) {
    SCOPED_TRACE("OpenMP threads " + std::to_string(t));
    ex.poison();
    std::memset(row.storageBytes(), 0xAB, row.storage().size());
    std::memset(counts.storageBytes(), 0xAB, counts.storage().size());
    std::memset(before.storageBytes(), 0xAB, before.storage().size());
    const std::vector<uint8_t> ex0 = ex.storage(), row0 = row.storage(), x0 = x.storage(),
                               expert0 = expert.storage();
    Outcome o;
    {
      const ThreadCount tc(t);
      o = run(h, kInit, call);
    }
    EXPECT_TRUE(x.storage() == x0 && expert.storage() == expert0) << "an input was written";
    if (layout == Layout::kReversed && o.status == INFINI_STATUS_BAD_TENSOR_STRIDES) {
      EXPECT_TRUE(ex.storage() == ex0 && row.storage() == row0) << "rejected, yet written";
      return {};
    }
    EXPECT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
    if (o.status != INFINI_STATUS_SUCCESS) return {};
    if (first.empty()) {
      expectBytes(ex, want_ex, "expanded_x");
      expectBytes(row, want_row, "expanded_row_idx");
      expectBytes(counts, want_counts,
                  counts_asked ? "expert_tokens_count_or_cumsum" : "unasked count output");
      expectBytes(before, want_before,
                  before_asked ? "expert_tokens_before_capacity" : "unasked before_capacity");
      first = {ex.storage(), row.storage(), counts.storage(), before.storage()};
    } else {
      EXPECT_TRUE(first[0] == ex.storage() && first[1] == row.storage() &&
                  first[2] == counts.storage() && first[3] == before.storage())
          << "differs from the first run";
    }
  }
  return first;
}

std::vector<InitCase> initCases() {
  std::vector<InitCase> cases;
  const infiniDtype_t idx[] = {kI32, kI64};
  size_t k = 0;
  const auto add = [&](InitCase c) {  // index dtypes cycle through all 8 combinations
    c.expert_dt = idx[k % 2], c.row_dt = idx[(k / 2) % 2], c.count_dt = idx[(k / 4) % 2];
    c.odd_unasked = k % 3 == 1;
    cases.push_back(c);
    ++k;
  };
  // Mode 0: active_num 0, < R*K, = R*K, > R*K, 1; every count flag; the before flag ignored.
  for (int64_t active : {0, 7, 15, 40, 1})
    for (int64_t flag : {0, 1, 2}) {
      InitCase c;
      c.R = 5, c.K = 3, c.H = 17 + 2 * k, c.E = 4 + k % 3, c.active_num = active;
      c.count_flag = flag, c.before_flag = k % 2 == 0;
      c.experts = static_cast<Experts>(k % 3);
      add(c);
    }
  // Mode 1: capacity 1 (drops), the largest count (exact), 2R + 3 > R (padding); both flags.
  for (int64_t cap : {1, 0, 15})
    for (bool before : {false, true})
      for (int64_t flag : {0, 2}) {
        InitCase c;
        c.mode = 1, c.R = 6, c.K = 2, c.H = 9 + k, c.E = 3, c.capacity = cap, c.count_flag = flag;
        c.before_flag = before, c.experts = static_cast<Experts>(k % 3);
        c.exact_capacity = cap == 0;
        add(c);
      }
  const auto make = [](int64_t mode, size_t R, size_t K, size_t H, size_t E, int64_t active,
                       int64_t cap) {
    InitCase c;
    c.mode = mode, c.R = R, c.K = K, c.H = H, c.E = E, c.active_num = active, c.capacity = cap;
    c.count_flag = mode == 0 ? 1 : 0, c.before_flag = mode == 1;
    return c;
  };
  add(make(0, 0, 2, 5, 3, 0, 0));  // R = 0
  add(make(0, 0, 2, 5, 3, 4, 0));
  add(make(1, 0, 2, 5, 3, 0, 2));  // R = 0: every slot zero, counts 0
  add(make(0, 7, 1, 6, 5, 0, 0));  // K = 1
  add(make(1, 7, 1, 6, 5, 0, 2));
  add(make(0, 6, 2, 0, 3, 5, 0));  // H = 0: the index outputs only
  add(make(1, 6, 2, 0, 3, 0, 2));
  add(make(0, 7, 2, 4099, 3, 0, 0));  // long odd rows
  add(make(1, 7, 2, 4099, 3, 0, 3));
  add(make(0, 40, 8, 33, 64, 100, 0));  // many experts, most of them empty
  add(make(1, 40, 8, 33, 64, 0, 2));
  return cases;
}

using InitParam = std::tuple<DeviceParam, infiniDtype_t, Layout>;
class MoeInitRoutingV2Cases : public DeviceTestBase,
                              public ::testing::WithParamInterface<InitParam> {
 protected:
  void SetUp() override { selectDevice(std::get<0>(GetParam())); }
  void TearDown() override { restoreTargets(); }
  infiniDtype_t dtype() const { return std::get<1>(GetParam()); }
  Layout layout() const { return std::get<2>(GetParam()); }
};

TEST_P(MoeInitRoutingV2Cases, MatchesOracle) {
  uint64_t seed = 11;
  for (const InitCase &c : initCases()) checkInit(handle(), dtype(), layout(), c, seed++);
}

// ---------------------------------------------------------------- the grad: one case
struct GradCase {
  int64_t mode = 0;
  size_t R = 0, K = 1, H = 1, E = 1, C = 1;
  int64_t active_num = 0;
  infiniDtype_t idx_dt = kI32;
  Pattern pattern = Pattern::kPermutation;
  bool special = false;  // infinities and NaN in grad_expanded_x
};
std::string caseName(const GradCase &c) {
  static const char *patterns[] = {"permutation", "duplicates", "drops"};
  return "grad mode=" + std::to_string(c.mode) + " R=" + std::to_string(c.R) +
         " K=" + std::to_string(c.K) + " H=" + std::to_string(c.H) +
         (c.mode ? " E=" + std::to_string(c.E) + " C=" + std::to_string(c.C)
                 : " active_num=" + std::to_string(c.active_num)) +
         " idx " + dtypeStr(c.idx_dt) + " " + patterns[static_cast<int>(c.pattern)] +
         (c.special ? " special" : "");
}

// The allowed error of a sum of `ops` roundings over `terms` (the file comment).
double allowed(infiniDtype_t dtype, double ops, long double terms, long double truth) {
  double e = ops * (0x1p-24 * static_cast<double>(terms) + 0x1p-149);
  if (dtype != kF32) e += ulpOf(dtype, std::fabs(static_cast<double>(truth)));
  return e;
}

void checkGrad(infiniopHandle_t h, infiniDtype_t dtype, Layout layout, const GradCase &c,
               uint64_t seed, const std::vector<int> &threads = {0}) {
  SCOPED_TRACE(caseName(c));
  const size_t R = c.R, K = c.K, H = c.H, n = R * K;
  const bool mode1 = c.mode == 1;
  const size_t A = c.active_num > 0 && static_cast<size_t>(c.active_num) < n
                       ? static_cast<size_t>(c.active_num)
                       : n;
  const size_t rows = mode1 ? c.E * c.C : A;
  const std::vector<size_t> gex_shape =
      mode1 ? std::vector<size_t>{c.E, c.C, H} : std::vector<size_t>{A, H};
  TensorBuffer gx = makeTensor(layout, Kind::kMatrix, {R, H}, dtype);
  TensorBuffer gex = makeTensor(layout, Kind::kExpanded, gex_shape, dtype);
  TensorBuffer idx = makeTensor(layout, Kind::kIndex, {n}, c.idx_dt);
  const float range = dtype == kF16 ? 3000.0f : 1.0e6f;
  gex.fill([&](size_t i) { return signedValue(seed, i, i % 4 ? range : 2.0f); });
  if (c.special)
    for (size_t i = 3; i < gex.numel(); i += 11)
      gex.set(i, i % 3 == 0 ? NAN : i % 3 == 1 ? INFINITY : -INFINITY);
  Rng rng(seed);
  // Mode 0: values over [0, R*K), those >= A skipped; mode 1: [-1, E*C).
  const std::vector<int64_t> v = makeIndices(c.pattern, n, mode1 ? rows : n, rng);
  for (size_t i = 0; i < n; ++i) setIndex(idx, i, mode1 || v[i] >= 0 ? v[i] : 0);
  const std::vector<int64_t> iv = indicesOf(idx);

  Call call;
  call.tensors = {&gx, &gex, &idx};
  call.attr[0] = static_cast<int64_t>(K), call.attr[1] = c.mode, call.attr[2] = c.active_num;
  std::vector<uint8_t> first;
  for (int t : threads) {
    SCOPED_TRACE("OpenMP threads " + std::to_string(t));
    gx.poison();
    const std::vector<uint8_t> gx0 = gx.storage(), gex0 = gex.storage();
    Outcome o;
    {
      const ThreadCount tc(t);
      o = run(h, kGrad, call);
    }
    EXPECT_TRUE(gex.storage() == gex0) << "grad_expanded_x written";
    if (layout == Layout::kReversed && o.status == INFINI_STATUS_BAD_TENSOR_STRIDES) {
      EXPECT_TRUE(gx.storage() == gx0) << "rejected, yet written";
      return;
    }
    ASSERT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
    EXPECT_EQ(o.workspace, 0u) << "the grad needs no workspace";
    if (!first.empty()) {
      EXPECT_TRUE(gx.storage() == first) << "differs from the first run";
      continue;
    }
    first = gx.storage();
    int bad = 0;
    for (size_t r = 0; r < R; ++r)
      for (size_t j = 0; j < H; ++j) {
        long double truth = 0, terms = 0;
        int adds = 0;
        for (size_t k = 0; k < K; ++k) {
          const int64_t d = iv[r * K + k];
          if (d < 0 || static_cast<size_t>(d) >= rows) continue;
          const long double g = gex.get(static_cast<size_t>(d) * H + j);
          truth += g, terms += std::fabs(g), ++adds;
        }
        const float got = gx.get(r * H + j);
        const std::string why =
            adds == 0 ? (got == 0 ? "" : "a row no index reaches is not 0")
                      : compareToTruth(dtype, got, truth,
                                       allowed(dtype, static_cast<double>(K), terms, truth));
        if (!why.empty() && bad++ < 5)
          ADD_FAILURE() << "grad_x[" << r << "," << j << "] got " << got << ": " << why;
      }
    EXPECT_EQ(bad, 0) << "mismatches";
  }
}

std::vector<GradCase> gradCases() {
  std::vector<GradCase> cases;
  size_t k = 0;
  const Pattern patterns[] = {Pattern::kPermutation, Pattern::kDuplicates, Pattern::kDrops};
  for (int64_t mode : {0, 1})
    for (int variant = 0; variant < 6; ++variant) {
      GradCase c;
      c.mode = mode;
      c.R = 1 + (k * 5) % 11, c.K = 1 + k % 4, c.H = 1 + (k * 13) % 70;
      const auto n = static_cast<int64_t>(c.R * c.K);
      const int64_t actives[] = {0, n / 2, n, n + 3, 1, 0};
      c.active_num = mode ? 5 : actives[variant];  // ignored in mode 1
      c.E = 2 + k % 3, c.C = static_cast<size_t>(n) / c.E + k % 2 + 1;
      c.idx_dt = k % 2 ? kI64 : kI32;
      c.pattern = patterns[k % 3];
      if (mode == 0 && c.pattern == Pattern::kDrops) c.pattern = Pattern::kDuplicates;
      c.special = variant == 5;
      cases.push_back(c);
      ++k;
    }
  const auto make = [](int64_t mode, size_t R, size_t K, size_t H, int64_t active, size_t E,
                       size_t C, Pattern p, infiniDtype_t dt) {
    GradCase c;
    c.mode = mode, c.R = R, c.K = K, c.H = H, c.active_num = active, c.E = E, c.C = C;
    c.pattern = p, c.idx_dt = dt;
    return c;
  };
  cases.push_back(make(0, 0, 2, 5, 0, 1, 1, Pattern::kPermutation, kI32));  // R = 0
  cases.push_back(make(1, 0, 2, 5, 0, 2, 3, Pattern::kPermutation, kI64));
  cases.push_back(make(0, 4, 2, 0, 3, 1, 1, Pattern::kDuplicates, kI64));  // H = 0
  cases.push_back(make(1, 4, 2, 0, 0, 2, 3, Pattern::kDrops, kI32));
  cases.push_back(make(0, 9, 1, 4099, 0, 1, 1, Pattern::kPermutation, kI32));  // K = 1, long rows
  cases.push_back(make(1, 7, 2, 4099, 0, 3, 4, Pattern::kDrops, kI64));
  cases.push_back(make(0, 160, 8, 64, 700, 1, 1, Pattern::kDuplicates, kI64));  // every thread
  cases.push_back(make(1, 160, 8, 64, 0, 16, 64, Pattern::kDuplicates, kI32));
  return cases;
}

TEST_P(MoeInitRoutingV2Cases, GradMatchesOracle) {
  uint64_t seed = 301;
  for (const GradCase &c : gradCases()) checkGrad(handle(), dtype(), layout(), c, seed++);
}

INSTANTIATE_TEST_SUITE_P(
    All, MoeInitRoutingV2Cases,
    ::testing::Combine(::testing::ValuesIn(allDeviceParams()), ::testing::ValuesIn(kFloatDtypes),
                       ::testing::Values(Layout::kContiguous, Layout::kStrided, Layout::kReversed)),
    [](const ::testing::TestParamInfo<InitParam> &info) {
      return deviceParamName(std::get<0>(info.param)) + "_" +
             infiniop::dtypeName(std::get<1>(info.param)) + "_" +
             layoutName(std::get<2>(info.param));
    });

// ---------------------------------------------------------------- determinism, larger calls
// R = 256, K = 8, E = 64, H = 512, skewed routing (busy experts drop in mode 1): both operators the
// same bits for 1 and 2 OpenMP threads and a repeated call, against the oracle, and the Init
// bit-identical to cpu_reference's.
TEST_P(DeviceTest, MoeInitRoutingV2Larger) {
  for (infiniDtype_t dtype : {kF32, kBF16})
    for (int64_t mode : {0, 1}) {
      SCOPED_TRACE(dtypeStr(dtype));
      InitCase c;
      c.mode = mode, c.R = 256, c.K = 8, c.H = 512, c.E = 64, c.capacity = mode ? 40 : 0;
      c.count_flag = mode ? 0 : 1, c.before_flag = mode == 1, c.experts = Experts::kSkewed;
      c.row_dt = kI64;
      const auto got = checkInit(handle(), dtype, Layout::kContiguous, c, 5, {1, 2, 0});
      const Handle reference(INFINI_DEVICE_CPU_REFERENCE);
      const auto want = checkInit(reference.get(), dtype, Layout::kContiguous, c, 5);
      EXPECT_TRUE(got == want) << "differs from cpu_reference";
      GradCase g;
      g.mode = mode, g.R = 256, g.K = 8, g.H = 512, g.E = 64, g.C = 40;
      g.pattern = Pattern::kDuplicates;
      checkGrad(handle(), dtype, Layout::kContiguous, g, 6, {1, 2, 0});
    }
}

// ---------------------------------------------------------------- round trips
// Init -> MoeFinalizeRoutingV2 with scales (mode 2 dropless with A = R*K, mode 3 drop/pad) is
// out[r] = sum_k s[r,k] x[r] over the kept positions; MoeFinalizeRoutingV2Grad (mode 0 with the
// same active_num / mode 1 with the same E, C) then MoeInitRoutingV2Grad is grad_x[r] = sum over
// kept k of s[r,k] g[r], and grad_scales[r,k] = x[r] . g[r] where kept, else 0.
struct RoundTrip {
  int64_t mode;
  size_t R, K, H, E;
  int64_t active_num, capacity;
  infiniDtype_t scales_dt;  // the activations' dtype or F32
};

void checkRoundTrip(infiniopHandle_t h, infiniDtype_t dtype, const RoundTrip &t, uint64_t seed) {
  SCOPED_TRACE("round trip mode " + std::to_string(t.mode) + " R=" + std::to_string(t.R) +
               " K=" + std::to_string(t.K) + " H=" + std::to_string(t.H) +
               " active_num=" + std::to_string(t.active_num) + " C=" + std::to_string(t.capacity) +
               " scales " + dtypeStr(t.scales_dt));
  const size_t R = t.R, K = t.K, H = t.H, E = t.E, n = R * K, C = static_cast<size_t>(t.capacity);
  const bool mode1 = t.mode == 1;
  const size_t A = t.active_num > 0 && static_cast<size_t>(t.active_num) < n
                       ? static_cast<size_t>(t.active_num)
                       : n;
  const std::vector<size_t> ex_shape =
      mode1 ? std::vector<size_t>{E, C, H} : std::vector<size_t>{A, H};
  TensorBuffer x({R, H}, dtype), expert({R, K}, kI64), ex(ex_shape, dtype), row({n}, kI64),
      scales({R, K}, t.scales_dt), out({R, H}, dtype), gy({R, H}, dtype), gex(ex_shape, dtype),
      gs({R, K}, t.scales_dt), gx({R, H}, dtype);
  const float range = dtype == kF16 ? 1000.0f : 1.0e6f;
  x.fill([&](size_t i) { return signedValue(seed, i, i % 3 ? range : 1.0f); });
  gy.fill([&](size_t i) { return signedValue(seed + 1, i, i % 3 ? 4.0f : 1.0f); });
  scales.fill([&](size_t i) { return signedValue(seed + 2, i, 1.0f); });
  Rng rng(seed);
  const std::vector<int64_t> experts = makeExperts(Experts::kSkewed, n, E, rng);
  for (size_t i = 0; i < n; ++i) setIndex(expert, i, experts[i]);
  Call init;
  init.tensors = {&ex, &row, nullptr, nullptr, &x, &expert};
  const int64_t ia[] = {t.active_num, t.capacity, static_cast<int64_t>(E), t.mode, 0, 0};
  std::copy(std::begin(ia), std::end(ia), init.attr);
  Outcome o = run(h, kInit, init);
  ASSERT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
  const std::vector<int64_t> rv = indicesOf(row);
  const auto kept = [&](size_t p) {
    return rv[p] >= 0 && static_cast<size_t>(rv[p]) < (mode1 ? E * C : A);
  };
  int bad = 0;
  const auto check = [&](const char *what, infiniDtype_t dt, TensorBuffer &b, size_t i,
                         long double truth, double tol) {
    const std::string why = compareToTruth(dt, b.get(i), truth, tol);
    if (!why.empty() && bad++ < 5) ADD_FAILURE() << what << "[" << i << "] " << why;
  };
  if (mode1 || A == n) {  // the forward: MoeFinalizeRoutingV2 mode 2 / 3
    Call f;
    f.tensors = {&out, &ex, &row, nullptr, nullptr, nullptr, &scales, nullptr};
    f.attr[0] = mode1 ? 3 : 2;
    out.poison();
    o = run(h, kFinalize, f);
    ASSERT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
    for (size_t r = 0; r < R; ++r)
      for (size_t j = 0; j < H; ++j) {
        long double truth = 0, terms = 0;
        for (size_t k = 0; k < K; ++k) {
          if (!kept(r * K + k)) continue;
          const long double v = static_cast<long double>(scales.get(r * K + k)) * x.get(r * H + j);
          truth += v, terms += std::fabs(v);
        }
        check("out", dtype, out, r * H + j, truth, allowed(dtype, 2.0 * K + 3, terms, truth));
      }
  }
  Call fg;
  fg.tensors = {&gex, &gs, &gy, &row, &ex, &scales, nullptr, nullptr};
  const int64_t ga[] = {t.mode, t.active_num, static_cast<int64_t>(E), t.capacity};
  std::copy(std::begin(ga), std::end(ga), fg.attr);
  o = run(h, kFinalizeGrad, fg);
  ASSERT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
  Call ig;
  ig.tensors = {&gx, &gex, &row};
  ig.attr[0] = static_cast<int64_t>(K), ig.attr[1] = t.mode, ig.attr[2] = t.active_num;
  gx.poison();
  o = run(h, kGrad, ig);
  ASSERT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
  for (size_t r = 0; r < R; ++r)
    for (size_t j = 0; j < H; ++j) {
      long double truth = 0, terms = 0;
      double rounding = 0;
      for (size_t k = 0; k < K; ++k) {
        if (!kept(r * K + k)) continue;
        const long double v = static_cast<long double>(scales.get(r * K + k)) * gy.get(r * H + j);
        truth += v, terms += std::fabs(v);
        rounding += ulpOf(dtype, std::fabs(static_cast<double>(v)));
      }
      check("grad_x", dtype, gx, r * H + j, truth,
            allowed(dtype, K + 1.0, terms, truth) + rounding);
    }
  for (size_t p = 0; p < n; ++p) {
    long double truth = 0, terms = 0;
    if (kept(p))
      for (size_t j = 0; j < H; ++j) {
        const long double v =
            static_cast<long double>(x.get(p / K * H + j)) * gy.get(p / K * H + j);
        truth += v, terms += std::fabs(v);
      }
    check("grad_scales", t.scales_dt, gs, p, truth,
          allowed(t.scales_dt, static_cast<double>(H) + 2, terms, truth));
  }
  EXPECT_EQ(bad, 0) << "mismatches";
}

TEST_P(DeviceTest, MoeInitRoutingV2RoundTrip) {
  const RoundTrip trips[] = {
      {0, 9, 3, 37, 4, 0, 0, kF32},    {0, 9, 3, 37, 4, 27, 0, kF32},  // dropless, A = R*K
      {0, 9, 3, 37, 4, 20, 0, kF32},   {0, 9, 3, 37, 4, 50, 0, kF32},  // A < R*K; > R*K
      {1, 9, 3, 37, 4, 0, 3, kF32},    {1, 9, 3, 37, 4, 0, 30, kF32},  // drops; padding
      {0, 64, 8, 130, 16, 0, 0, kF32}, {1, 64, 8, 130, 16, 0, 40, kF32},
  };
  uint64_t seed = 900;
  for (infiniDtype_t dtype : kFloatDtypes)
    for (RoundTrip t : trips) {
      SCOPED_TRACE(dtypeStr(dtype));
      if (t.scales_dt != dtype && dtype != kF32) {
        checkRoundTrip(handle(), dtype, t, seed++);  // F32 scales with F16 / BF16 activations
      }
      t.scales_dt = dtype;
      checkRoundTrip(handle(), dtype, t, seed++);
    }
}

}  // namespace
}  // namespace infiniop_test::moe_init
