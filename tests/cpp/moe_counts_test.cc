// SPDX-License-Identifier: Apache-2.0
// MoeExpertCounts and MoeBiasUpdate (docs/moe_expert_counts.md, docs/moe_bias_update.md) on
// every device: counts worked by hand and counted here, every index dtype pair, strided and
// many-dim expert_idx, finished rows (E), R = 0, E = 1, out-of-range values (BAD_PARAM, nothing
// written); the bias update against this file's double computation, bit for bit, ties untouched,
// strides, NaN bias, bad counts. Every output is poisoned before each call.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "device_memory.h"
#include "device_param.h"
#include "index_values.h"
#include "tensor_buffer.h"

namespace infiniop_test {
namespace {

constexpr auto I32 = INFINI_DTYPE_I32;
constexpr auto I64 = INFINI_DTYPE_I64;
constexpr auto F32 = INFINI_DTYPE_F32;

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

class MoeCounts : public DeviceTest {
 protected:
  // One MoeExpertCounts call: the status; counts read back (poisoned before).
  infiniStatus_t count(TensorBuffer &counts, TensorBuffer &expert_idx, int64_t E) {
    poisonBytes(counts);
    infiniopTensorDescriptor_t cd = counts.descriptor(), xd = expert_idx.descriptor();
    infiniopMoeExpertCountsDescriptor_t desc = nullptr;
    infiniStatus_t status = infiniopCreateMoeExpertCountsDescriptor(handle(), &desc, cd, xd, E);
    error_ = infiniopGetLastError();
    infiniopDestroyTensorDescriptor(cd);
    infiniopDestroyTensorDescriptor(xd);
    if (status != INFINI_STATUS_SUCCESS) return status;
    size_t size = 0;
    EXPECT_EQ(infiniopGetMoeExpertCountsWorkspaceSize(desc, &size), INFINI_STATUS_SUCCESS);
    DeviceMirror device(handle());
    device.add(counts);
    device.add(expert_idx);
    status = infiniopMoeExpertCounts(desc, device.scratch(size), size, device(counts),
                                     device(expert_idx), nullptr);
    error_ = infiniopGetLastError();
    device.download();
    EXPECT_EQ(infiniopDestroyMoeExpertCountsDescriptor(desc), INFINI_STATUS_SUCCESS);
    return status;
  }
  // One MoeBiasUpdate call on `bias` in place.
  infiniStatus_t update(TensorBuffer &bias, TensorBuffer &counts, double u) {
    infiniopTensorDescriptor_t bd = bias.descriptor(), cd = counts.descriptor();
    infiniopMoeBiasUpdateDescriptor_t desc = nullptr;
    infiniStatus_t status = infiniopCreateMoeBiasUpdateDescriptor(handle(), &desc, bd, cd, u);
    error_ = infiniopGetLastError();
    infiniopDestroyTensorDescriptor(bd);
    infiniopDestroyTensorDescriptor(cd);
    if (status != INFINI_STATUS_SUCCESS) return status;
    size_t size = 0;
    EXPECT_EQ(infiniopGetMoeBiasUpdateWorkspaceSize(desc, &size), INFINI_STATUS_SUCCESS);
    DeviceMirror device(handle());
    device.add(bias);
    device.add(counts);
    status = infiniopMoeBiasUpdate(desc, device.scratch(size), size, device(bias), device(counts),
                                   nullptr);
    error_ = infiniopGetLastError();
    device.download();
    EXPECT_EQ(infiniopDestroyMoeBiasUpdateDescriptor(desc), INFINI_STATUS_SUCCESS);
    return status;
  }
  // Counts of `expert_idx` (any layout) against a count made here.
  void expectCounted(TensorBuffer &expert_idx, int64_t E, infiniDtype_t counts_dtype) {
    std::vector<int64_t> expected(static_cast<size_t>(E), 0);
    for (size_t i = 0; i < expert_idx.numel(); ++i) {
      const int64_t e = getInt(expert_idx, i);
      if (e != E) ++expected[static_cast<size_t>(e)];
    }
    TensorBuffer counts({static_cast<size_t>(E)}, counts_dtype);
    ASSERT_EQ(count(counts, expert_idx, E), INFINI_STATUS_SUCCESS) << infiniopGetLastError();
    for (size_t e = 0; e < expected.size(); ++e)
      ASSERT_EQ(getInt(counts, e), expected[e]) << "expert " << e;
  }
  std::string error_;  // the message of the last create or call
};

// Random experts in [0, E], E (a finished row) one in 16.
void fillExperts(TensorBuffer &b, int64_t E, uint64_t seed) {
  for (size_t i = 0; i < b.numel(); ++i) {
    uint64_t z = (seed + i) * 0x9E3779B97F4A7C15ull;
    z ^= z >> 29;
    z *= 0xBF58476D1CE4E5B9ull;
    z ^= z >> 32;
    setInt(b, i, (z & 15) == 0 ? E : static_cast<int64_t>(z % static_cast<uint64_t>(E)));
  }
}

TEST_P(MoeCounts, ByHandEveryDtypePair) {
  // Rows {0, 2}, {2, 1}, {3, 0}, {4 (finished), 4}: experts 0, 1, 2, 3 have 2, 1, 2, 1.
  const int64_t values[] = {0, 2, 2, 1, 3, 0, 4, 4};
  for (infiniDtype_t in : {I32, I64})
    for (infiniDtype_t out : {I32, I64}) {
      TensorBuffer expert_idx({4, 2}, in), counts({4}, out);
      for (size_t i = 0; i < 8; ++i) setInt(expert_idx, i, values[i]);
      ASSERT_EQ(count(counts, expert_idx, 4), INFINI_STATUS_SUCCESS) << infiniopGetLastError();
      EXPECT_EQ(getInt(counts, 0), 2);
      EXPECT_EQ(getInt(counts, 1), 1);
      EXPECT_EQ(getInt(counts, 2), 2);
      EXPECT_EQ(getInt(counts, 3), 1);
    }
}

TEST_P(MoeCounts, StridedAndManyDims) {
  for (infiniDtype_t in : {I32, I64}) {
    TensorBuffer column({37, 5}, columnMajorStrides({37, 5}), in);
    fillExperts(column, 11, 1);
    expectCounted(column, 11, I32);
    TensorBuffer padded({3, 4, 5, 3}, paddedStrides({3, 4, 5, 3}), in);
    fillExperts(padded, 7, 2);
    expectCounted(padded, 7, I64);
    TensorBuffer reversed({9, 4}, {-4, -1}, in);
    fillExperts(reversed, 6, 3);
    expectCounted(reversed, 6, I32);
    TensorBuffer flat({50}, {3}, in);
    fillExperts(flat, 9, 4);
    expectCounted(flat, 9, I64);
  }
}

TEST_P(MoeCounts, DeepSeekSize) {
  // 16384 tokens x top-8 of 256 experts (the cpu device's threaded path).
  for (infiniDtype_t in : {I32, I64}) {
    TensorBuffer expert_idx({16384, 8}, in);
    fillExperts(expert_idx, 256, 5);
    expectCounted(expert_idx, 256, in);
  }
}

TEST_P(MoeCounts, NoRowsWritesZeros) {
  TensorBuffer expert_idx({0, 8}, I32), counts({5}, I64);
  ASSERT_EQ(count(counts, expert_idx, 5), INFINI_STATUS_SUCCESS) << infiniopGetLastError();
  for (size_t e = 0; e < 5; ++e) EXPECT_EQ(getInt(counts, e), 0);
}

TEST_P(MoeCounts, OneExpert) {
  TensorBuffer expert_idx({3, 1}, I64), counts({1}, I32);
  for (size_t i = 0; i < 3; ++i) setInt(expert_idx, i, i == 1 ? 1 : 0);  // 1 = E: finished
  ASSERT_EQ(count(counts, expert_idx, 1), INFINI_STATUS_SUCCESS) << infiniopGetLastError();
  EXPECT_EQ(getInt(counts, 0), 2);
}

TEST_P(MoeCounts, OutOfRangeWritesNothing) {
  for (int64_t bad : {int64_t{-1}, int64_t{5}, int64_t{1} << 40}) {
    TensorBuffer expert_idx({2, 2}, I64), counts({4}, I32);
    for (size_t i = 0; i < 4; ++i) setInt(expert_idx, i, i == 3 ? bad : 1);
    EXPECT_EQ(count(counts, expert_idx, 4), INFINI_STATUS_BAD_PARAM) << bad;
    EXPECT_NE(error_.find("outside [0, 4]"), std::string::npos) << error_;
    for (uint8_t byte : counts.storage()) ASSERT_EQ(byte, 0xA5) << "written";
  }
}

TEST_P(MoeCounts, BadDescriptors) {
  TensorBuffer expert_idx({2, 2}, I32), counts({4}, I32), f32({4}, F32), wide({5}, I32),
      square({4, 1}, I32), idx_f32({2, 2}, F32);
  infiniopTensorDescriptor_t x = expert_idx.descriptor(), c = counts.descriptor(),
                             f = f32.descriptor(), w = wide.descriptor(), s = square.descriptor(),
                             xf = idx_f32.descriptor();
  infiniopMoeExpertCountsDescriptor_t desc = nullptr;
  const auto create = [&](infiniopTensorDescriptor_t cd, infiniopTensorDescriptor_t xd, int64_t E) {
    const infiniStatus_t status =
        infiniopCreateMoeExpertCountsDescriptor(handle(), &desc, cd, xd, E);
    EXPECT_EQ(status == INFINI_STATUS_SUCCESS, std::string(infiniopGetLastError()).empty());
    return status;
  };
  EXPECT_EQ(create(nullptr, x, 4), INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(create(c, nullptr, 4), INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(infiniopCreateMoeExpertCountsDescriptor(handle(), nullptr, c, x, 4),
            INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(create(f, x, 4), INFINI_STATUS_BAD_TENSOR_DTYPE);
  EXPECT_EQ(create(c, xf, 4), INFINI_STATUS_BAD_TENSOR_DTYPE);
  EXPECT_EQ(create(w, x, 4), INFINI_STATUS_BAD_TENSOR_SHAPE);
  EXPECT_EQ(create(s, x, 4), INFINI_STATUS_BAD_TENSOR_SHAPE);
  EXPECT_EQ(create(c, x, 0), INFINI_STATUS_BAD_PARAM);
  EXPECT_EQ(desc, nullptr);
  // INT32 counts must hold R * k: 2^31 elements need INT64 (descriptors only, no data).
  const size_t huge_shape[] = {size_t{1} << 31, 1};
  infiniopTensorDescriptor_t huge = nullptr;
  ASSERT_EQ(infiniopCreateTensorDescriptor(&huge, 2, huge_shape, nullptr, I32),
            INFINI_STATUS_SUCCESS);
  EXPECT_EQ(create(c, huge, 4), INFINI_STATUS_BAD_TENSOR_DTYPE);
  TensorBuffer counts64({4}, I64);
  infiniopTensorDescriptor_t c64 = counts64.descriptor();
  ASSERT_EQ(create(c64, huge, 4), INFINI_STATUS_SUCCESS) << infiniopGetLastError();
  EXPECT_EQ(infiniopDestroyMoeExpertCountsDescriptor(desc), INFINI_STATUS_SUCCESS);
  for (auto t : {x, c, f, w, s, xf, huge, c64}) infiniopDestroyTensorDescriptor(t);
}

// ---- MoeBiasUpdate ---------------------------------------------------------------------------

// bias + u sign(mean - count) in F32, the mean S / E in double (the test's values keep S small,
// so the double comparison is exact).
float expectedBias(float bias, float u, double mean, int64_t count) {
  const double difference = mean - static_cast<double>(count);
  if (difference == 0) return bias;
  const float sum = difference > 0 ? bias + u : bias + -u;
  return std::isnan(sum) ? fromBits(0x7fc00000u) : sum;
}

void expectUpdated(TensorBuffer &bias, const std::vector<float> &before, TensorBuffer &counts,
                   float u) {
  double total = 0;
  for (size_t e = 0; e < counts.numel(); ++e) total += static_cast<double>(getInt(counts, e));
  const double mean = total / static_cast<double>(counts.numel());
  for (size_t e = 0; e < counts.numel(); ++e)
    ASSERT_EQ(bitsOf(bias.get(e)), bitsOf(expectedBias(before[e], u, mean, getInt(counts, e))))
        << "expert " << e << ": bias " << before[e] << ", count " << getInt(counts, e) << ", mean "
        << mean;
}

TEST_P(MoeCounts, BiasUpdateMatchesFormula) {
  for (infiniDtype_t cd : {I32, I64})
    for (const double u : {0.001, 0.5, -0.25, 0.0}) {
      TensorBuffer bias({256}, F32), counts({256}, cd);
      bias.fill([](size_t i) { return signedValue(7, i, 2.0f); });
      for (size_t e = 0; e < 256; ++e) setInt(counts, e, static_cast<int64_t>((e * 37) % 1024));
      std::vector<float> before(256);
      for (size_t e = 0; e < 256; ++e) before[e] = bias.get(e);
      ASSERT_EQ(update(bias, counts, u), INFINI_STATUS_SUCCESS) << infiniopGetLastError();
      expectUpdated(bias, before, counts, static_cast<float>(u));
    }
}

TEST_P(MoeCounts, BiasUpdateTiesUntouched) {
  // Counts {3, 5, 4, 4}: S = 16, mean 4: experts 2 and 3 keep their bits (-0, a NaN payload).
  TensorBuffer bias({4}, F32), counts({4}, I64);
  const uint32_t bits[] = {0x3f800000u, 0x40000000u, 0x80000000u, 0x7fa00001u};
  for (size_t e = 0; e < 4; ++e) bias.set(e, fromBits(bits[e]));
  const int64_t values[] = {3, 5, 4, 4};
  for (size_t e = 0; e < 4; ++e) setInt(counts, e, values[e]);
  ASSERT_EQ(update(bias, counts, 0.25), INFINI_STATUS_SUCCESS) << infiniopGetLastError();
  EXPECT_EQ(bitsOf(bias.get(0)), bitsOf(1.25f));
  EXPECT_EQ(bitsOf(bias.get(1)), bitsOf(1.75f));
  EXPECT_EQ(bitsOf(bias.get(2)), 0x80000000u);
  EXPECT_EQ(bitsOf(bias.get(3)), 0x7fa00001u);
}

TEST_P(MoeCounts, BiasUpdateExactMean) {
  // S = 2^62 + 1 over E = 3 (not a double): the mean is 2^62 / 3 + 1 / 3 exactly. Counts equal
  // to floor(mean) are below it (+u); the double of S / 3 would round to a tie.
  const int64_t big = (int64_t{1} << 62) / 3;  // 1537228672809129301
  const int64_t rest = (int64_t{1} << 62) + 1 - 2 * big;
  TensorBuffer bias({3}, F32), counts({3}, I64);
  for (size_t e = 0; e < 3; ++e) bias.set(e, 0.0f);
  setInt(counts, 0, big);
  setInt(counts, 1, big);
  setInt(counts, 2, rest);
  ASSERT_EQ(update(bias, counts, 1.0), INFINI_STATUS_SUCCESS) << infiniopGetLastError();
  EXPECT_EQ(bias.get(0), 1.0f);
  EXPECT_EQ(bias.get(1), 1.0f);
  EXPECT_EQ(bias.get(2), -1.0f);
}

TEST_P(MoeCounts, BiasUpdateStridedAndNaN) {
  TensorBuffer bias({5}, {-2}, F32), counts({5}, {3}, I32);
  const float values[] = {0.5f, std::numeric_limits<float>::infinity(), fromBits(0x7fa00001u),
                          -1.0f, 3.0f};
  std::vector<float> before(values, values + 5);
  for (size_t e = 0; e < 5; ++e) bias.set(e, values[e]);
  const int64_t c[] = {0, 9, 1, 2, 8};  // S = 20, mean 4
  for (size_t e = 0; e < 5; ++e) setInt(counts, e, c[e]);
  ASSERT_EQ(update(bias, counts, 0.125), INFINI_STATUS_SUCCESS) << infiniopGetLastError();
  expectUpdated(bias, before, counts, 0.125f);
  EXPECT_EQ(bitsOf(bias.get(2)), 0x7fc00000u) << "a NaN stored is the canonical one";
}

TEST_P(MoeCounts, BiasUpdateBadInputsWriteNothing) {
  TensorBuffer bias({3}, F32), counts({3}, I64);
  const auto expectFails = [&](const std::vector<int64_t> &c, double u, infiniStatus_t status) {
    for (size_t e = 0; e < 3; ++e) {
      bias.set(e, static_cast<float>(e));
      setInt(counts, e, c[e]);
    }
    const std::vector<uint8_t> before = bias.storage();
    EXPECT_EQ(update(bias, counts, u), status);
    EXPECT_NE(error_, "");
    EXPECT_EQ(bias.storage(), before) << "written";
  };
  expectFails({1, -1, 2}, 0.001, INFINI_STATUS_BAD_PARAM);
  const int64_t max = std::numeric_limits<int64_t>::max();
  expectFails({max, 1, 0}, 0.001, INFINI_STATUS_BAD_PARAM);
  expectFails({1, 2, 3}, std::numeric_limits<double>::infinity(), INFINI_STATUS_BAD_PARAM);
  expectFails({1, 2, 3}, std::nan(""), INFINI_STATUS_BAD_PARAM);
  expectFails({1, 2, 3}, 1e39, INFINI_STATUS_BAD_PARAM);  // infinite in F32

  TensorBuffer f16({3}, INFINI_DTYPE_F16), c_f32({3}, F32), c4({4}, I64), empty({0}, F32),
      empty_counts({0}, I64);
  const auto create = [&](TensorBuffer &b, TensorBuffer &c) {
    infiniopTensorDescriptor_t bd = b.descriptor(), cd = c.descriptor();
    infiniopMoeBiasUpdateDescriptor_t desc = nullptr;
    const infiniStatus_t status =
        infiniopCreateMoeBiasUpdateDescriptor(handle(), &desc, bd, cd, 0.1);
    EXPECT_EQ(desc, nullptr);
    infiniopDestroyTensorDescriptor(bd);
    infiniopDestroyTensorDescriptor(cd);
    return status;
  };
  EXPECT_EQ(create(f16, counts), INFINI_STATUS_BAD_TENSOR_DTYPE);
  EXPECT_EQ(create(bias, c_f32), INFINI_STATUS_BAD_TENSOR_DTYPE);
  EXPECT_EQ(create(bias, c4), INFINI_STATUS_BAD_TENSOR_SHAPE);
  EXPECT_EQ(create(empty, empty_counts), INFINI_STATUS_BAD_TENSOR_SHAPE);
  infiniopTensorDescriptor_t cd = counts.descriptor();
  infiniopMoeBiasUpdateDescriptor_t desc = nullptr;
  EXPECT_EQ(infiniopCreateMoeBiasUpdateDescriptor(handle(), &desc, nullptr, cd, 0.1),
            INFINI_STATUS_NULL_POINTER);
  infiniopDestroyTensorDescriptor(cd);
}

// counts (B, E): per sequence, row r of expert_idx in counts[r % B] (Megatron's (seq, batch)
// order), from (T, k) and (L, B, k) expert_idx, against a count made here; B not dividing the rows
// is BAD_TENSOR_SHAPE.
TEST_P(MoeCounts, PerSequenceCounts) {
  for (infiniDtype_t out : {I32, I64})
    for (const std::vector<size_t> &shape :
         {std::vector<size_t>{96, 6}, std::vector<size_t>{24, 4, 6},
          std::vector<size_t>{3000, 8}}) {
      const size_t B = shape.size() == 3 ? shape[1] : (shape[0] == 96 ? 3 : 4);
      const int64_t E = 40;
      TensorBuffer expert_idx(shape, I64), counts({B, static_cast<size_t>(E)}, out);
      fillExperts(expert_idx, E, 7 + B);
      const size_t k = shape.back(), rows = expert_idx.numel() / k;
      std::vector<int64_t> expected(B * E, 0);
      for (size_t i = 0; i < expert_idx.numel(); ++i) {
        const int64_t e = getInt(expert_idx, i);
        if (e != E) ++expected[(i / k) % B * E + static_cast<size_t>(e)];
      }
      ASSERT_EQ(rows % B, 0u);
      ASSERT_EQ(count(counts, expert_idx, E), INFINI_STATUS_SUCCESS) << error_;
      for (size_t i = 0; i < expected.size(); ++i)
        ASSERT_EQ(getInt(counts, i), expected[i]) << "sequence " << i / E << " expert " << i % E;
    }
  TensorBuffer expert_idx({10, 2}, I32), counts({4, 5}, I32);
  fillExperts(expert_idx, 5, 3);
  EXPECT_EQ(count(counts, expert_idx, 5), INFINI_STATUS_BAD_TENSOR_SHAPE);
  TensorBuffer counts3({2, 2, 5}, I32);
  EXPECT_EQ(count(counts3, expert_idx, 5), INFINI_STATUS_BAD_TENSOR_SHAPE);
}

// Counts, then the update, for a few steps: the loop a trainer runs.
TEST_P(MoeCounts, CountsFeedTheUpdate) {
  TensorBuffer bias({64}, F32), counts({64}, I32), expert_idx({512, 6}, I32);
  bias.fill([](size_t) { return 0.0f; });
  for (uint64_t step = 0; step < 4; ++step) {
    fillExperts(expert_idx, 64, 100 + step);
    ASSERT_EQ(count(counts, expert_idx, 64), INFINI_STATUS_SUCCESS) << infiniopGetLastError();
    std::vector<float> before(64);
    for (size_t e = 0; e < 64; ++e) before[e] = bias.get(e);
    ASSERT_EQ(update(bias, counts, 0.001), INFINI_STATUS_SUCCESS) << infiniopGetLastError();
    expectUpdated(bias, before, counts, 0.001f);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, MoeCounts, ::testing::ValuesIn(allDeviceParams()),
                         [](const ::testing::TestParamInfo<DeviceParam> &info) {
                           return deviceParamName(info.param);
                         });

}  // namespace
}  // namespace infiniop_test
