// SPDX-License-Identifier: Apache-2.0
// ClippedSwiglu and ClippedSwigluBackward against the long-double oracle (clipped_swiglu.h; the
// tolerances are clipped_swiglu_test.cc's file comment) on every device: every dim, both splits,
// attributes (clamp_mode 0 and 1), group_index sums, layouts and sizes around the vector widths.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "clipped_swiglu.h"
#include "device_param.h"

namespace infiniop_test::clipped_swiglu {
namespace {

// ---------------------------------------------------------------- dims x groups x layouts x sizes
using Param = std::tuple<DeviceParam, infiniDtype_t, Layout>;

class ClippedSwigluCases : public DeviceTestBase, public ::testing::WithParamInterface<Param> {
 protected:
  void SetUp() override { selectDevice(std::get<0>(GetParam())); }
  void TearDown() override { restoreTargets(); }
};

std::vector<Case> allCases() {
  std::vector<Case> cases;
  const float alphas[] = {1.702f, 0.5f, -1.25f, 0.0f};
  const float limits[] = {7.0f, 0.5f, INFINITY, 3.25f};
  const float biases[] = {1.0f, -0.75f, 2.5f, 0.0f};
  const Groups groups[] = {Groups::kNone,  Groups::kLess,    Groups::kEqual,
                           Groups::kMore,  Groups::kZeros,   Groups::kHuge,
                           Groups::kEmpty, Groups::kStrided, Groups::kEmptyNull};
  size_t k = 0;
  const auto attrs = [&](int64_t dim, bool interleaved) {
    Attrs at{dim, alphas[k % 4], limits[(k / 4 + k) % 4], biases[(k / 2) % 4], interleaved};
    ++k;
    return at;
  };
  // Rank 4: every dim in both spellings, both splits, with group_index variants.
  const std::vector<size_t> rank4 = {3, 2, 5, 3};
  for (int64_t dim = -4; dim < 4; ++dim)
    for (bool interleaved : {true, false}) {
      std::vector<size_t> shape = rank4;
      shape[static_cast<size_t>(dim < 0 ? dim + 4 : dim)] *= 2;
      cases.push_back({shape, attrs(dim, interleaved), groups[k % 9]});
    }
  // Row lengths around the vector widths (odd numbers of pairs included), both splits.
  for (size_t n : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 35, 63, 64, 65, 70})
    for (bool interleaved : {true, false})
      cases.push_back({{3, 2 * n}, attrs(-1, interleaved), groups[k % 4]});
  // 2-D split on dim 0 (transposed in the column-major layouts).
  for (size_t n : {1, 4, 17, 33})
    for (bool interleaved : {true, false}) cases.push_back({{2 * n, 3}, attrs(0, interleaved)});
  // Large enough for every thread (>= 2^15 pairs computed), with and without group_index.
  cases.push_back({{4, 2 * 8200}, Attrs{-1, 1.702f, 7.0f, 1.0f, true}});
  cases.push_back({{16, 8200}, Attrs{-1, 1.702f, 0.5f, 1.0f, false}, Groups::kLess});
  // DeepSeek-V4's clamp, silu(min(A, limit)) clamp(B, -limit, limit): clamp_mode 0, alpha 1,
  // bias 0.
  for (bool interleaved : {true, false})
    for (size_t n : {17, 64})
      cases.push_back({{5, 2 * n}, Attrs{-1, 1.0f, limits[n % 4], 0.0f, interleaved}});
  // clamp_mode 1 (min(silu(A), limit) clamp(B, -limit, limit); alpha and bias, varied here,
  // unused): every dim, both splits, group_index variants, row lengths, a large case.
  const auto after = [&](int64_t dim, bool interleaved) {
    Attrs at = attrs(dim, interleaved);
    at.clamp_mode = 1;
    return at;
  };
  for (int64_t dim = -4; dim < 4; ++dim)
    for (bool interleaved : {true, false}) {
      std::vector<size_t> shape = rank4;
      shape[static_cast<size_t>(dim < 0 ? dim + 4 : dim)] *= 2;
      cases.push_back({shape, after(dim, interleaved), groups[k % 9]});
    }
  for (size_t n : {1, 3, 7, 8, 9, 16, 17, 33, 65})
    for (bool interleaved : {true, false})
      cases.push_back({{3, 2 * n}, after(-1, interleaved), groups[k % 4]});
  cases.push_back({{8, 8200}, Attrs{-1, 1.702f, 7.0f, 1.0f, true, 1}, Groups::kLess});
  return cases;
}

TEST_P(ClippedSwigluCases, MatchesOracle) {
  const infiniDtype_t dtype = std::get<1>(GetParam());
  const Layout layout = std::get<2>(GetParam());
  uint64_t seed = 11;
  for (const Case &c : allCases()) checkCase(handle(), dtype, layout, c, seed++);
}

INSTANTIATE_TEST_SUITE_P(All, ClippedSwigluCases,
                         ::testing::Combine(::testing::ValuesIn(allDeviceParams()),
                                            ::testing::ValuesIn(kFloatDtypes),
                                            ::testing::Values(Layout::kContiguous,
                                                              Layout::kColumnMajor, Layout::kMixed,
                                                              Layout::kInPlace)),
                         [](const ::testing::TestParamInfo<Param> &info) {
                           return deviceParamName(std::get<0>(info.param)) + "_" +
                                  infiniop::dtypeName(std::get<1>(info.param)) + "_" +
                                  layoutName(std::get<2>(info.param));
                         });

}  // namespace
}  // namespace infiniop_test::clipped_swiglu
