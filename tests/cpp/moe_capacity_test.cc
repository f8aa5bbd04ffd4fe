// SPDX-License-Identifier: Apache-2.0
// MoeExpertCapacity (docs/moe_expert_capacity.md) on every device against this file's oracle: for
// each expert, the best remaining slot picked again and again (a NaN weight first, then the larger
// value, then the lower slot; or the lower slot for the position policy), the first C kept. Worked
// by hand; every index dtype pair and weights dtype with ties, NaN, +-0 and slots marked E;
// C = 0, C past every expert's count; strided and many-dim tensors; the DeepSeek size (the cpu
// device's threaded path); the position policy against MoeInitRoutingV2's drop_pad_mode 1; bad
// values (nothing written) and bad descriptors. Every output is poisoned before each call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
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
constexpr auto F16 = INFINI_DTYPE_F16;
constexpr auto BF16 = INFINI_DTYPE_BF16;

std::string bytesOf(TensorBuffer &b, size_t i) {
  const size_t size = b.dtype() == F32 ? 4 : 2;
  return std::string(b.at(i), size);
}

struct Kept {
  std::vector<int64_t> idx;  // kept_idx
  std::vector<bool> kept;
};

// The oracle: slot s = element s of expert_idx in row-major order; each expert's slots in slot
// order, stably sorted by the weights for the probability policy (a NaN before a number, else the
// larger value first; equal values, -0 and +0 among them, keep slot order), the first C kept.
Kept oracle(TensorBuffer &expert_idx, TensorBuffer *weights, int64_t E, size_t C, int policy) {
  const size_t slots = expert_idx.numel();
  Kept out{std::vector<int64_t>(slots, E), std::vector<bool>(slots, false)};
  std::vector<std::vector<size_t>> mine(static_cast<size_t>(E));
  for (size_t s = 0; s < slots; ++s)
    if (getInt(expert_idx, s) != E) mine[static_cast<size_t>(getInt(expert_idx, s))].push_back(s);
  for (int64_t e = 0; e < E; ++e) {
    std::vector<size_t> &list = mine[static_cast<size_t>(e)];
    if (policy == 1)
      std::stable_sort(list.begin(), list.end(), [&](size_t a, size_t b) {
        const float x = weights->get(a), y = weights->get(b);
        return std::isnan(x) ? !std::isnan(y) : x > y;
      });
    for (size_t i = 0; i < C && i < list.size(); ++i) {
      out.kept[list[i]] = true;
      out.idx[list[i]] = e;
    }
  }
  return out;
}

class MoeCapacity : public DeviceTest {
 protected:
  infiniStatus_t run(TensorBuffer &kept_idx, TensorBuffer *weights_out, TensorBuffer &expert_idx,
                     TensorBuffer *weights, int64_t E, int64_t C, int64_t policy) {
    poisonBytes(kept_idx);
    if (weights_out) poisonBytes(*weights_out);
    infiniopTensorDescriptor_t kd = kept_idx.descriptor(), xd = expert_idx.descriptor();
    infiniopTensorDescriptor_t wod = weights_out ? weights_out->descriptor() : nullptr;
    infiniopTensorDescriptor_t wd = weights ? weights->descriptor() : nullptr;
    infiniopMoeExpertCapacityDescriptor_t desc = nullptr;
    infiniStatus_t status =
        infiniopCreateMoeExpertCapacityDescriptor(handle(), &desc, kd, wod, xd, wd, E, C, policy);
    error_ = infiniopGetLastError();
    for (auto d : {kd, xd, wod, wd})
      if (d) infiniopDestroyTensorDescriptor(d);
    if (status != INFINI_STATUS_SUCCESS) return status;
    size_t size = 0;
    EXPECT_EQ(infiniopGetMoeExpertCapacityWorkspaceSize(desc, &size), INFINI_STATUS_SUCCESS);
    DeviceMirror device(handle());
    device.add(kept_idx);
    device.add(weights_out);
    device.add(expert_idx);
    device.add(weights);
    status = infiniopMoeExpertCapacity(desc, device.scratch(size), size, device(kept_idx),
                                       device(weights_out), device(expert_idx), device(weights),
                                       nullptr);
    error_ = infiniopGetLastError();
    device.download();
    EXPECT_EQ(infiniopDestroyMoeExpertCapacityDescriptor(desc), INFINI_STATUS_SUCCESS);
    return status;
  }
  // One call against the oracle, kept_idx and weights_out bit for bit.
  void expectOracle(TensorBuffer &expert_idx, TensorBuffer &weights, int64_t E, int64_t C,
                    int policy, infiniDtype_t kept_dtype, const std::string &what) {
    SCOPED_TRACE(what + " C=" + std::to_string(C) + " policy=" + std::to_string(policy));
    TensorBuffer kept_idx(expert_idx.shape(), kept_dtype);
    TensorBuffer weights_out(expert_idx.shape(), weights.dtype());
    ASSERT_EQ(run(kept_idx, &weights_out, expert_idx, &weights, E, C, policy),
              INFINI_STATUS_SUCCESS)
        << error_;
    const Kept want = oracle(expert_idx, &weights, E, static_cast<size_t>(C), policy);
    const std::string zero(weights.dtype() == F32 ? 4 : 2, '\0');
    for (size_t s = 0; s < expert_idx.numel(); ++s) {
      ASSERT_EQ(getInt(kept_idx, s), want.idx[s]) << "slot " << s;
      ASSERT_EQ(bytesOf(weights_out, s), want.kept[s] ? bytesOf(weights, s) : zero) << "slot " << s;
    }
  }
  std::string error_;
};

uint64_t mix(uint64_t z) {
  z *= 0x9E3779B97F4A7C15ull;
  z ^= z >> 29;
  z *= 0xBF58476D1CE4E5B9ull;
  return z ^ (z >> 32);
}
// Experts in [0, E], E one in 16; weights signed, on a coarse grid (ties), with NaN and -0 and +0.
void fill(TensorBuffer &expert_idx, TensorBuffer &weights, int64_t E, uint64_t seed) {
  for (size_t i = 0; i < expert_idx.numel(); ++i) {
    const uint64_t z = mix(seed * 1000003 + i);
    setInt(expert_idx, i, (z & 15) == 0 ? E : static_cast<int64_t>((z >> 8) % uint64_t(E)));
    const uint64_t kind = (z >> 40) % 64;
    const float w = kind == 0   ? NAN
                    : kind == 1 ? -0.0f
                    : kind == 2 ? 0.0f
                                : static_cast<float>(static_cast<int64_t>((z >> 20) % 17) - 8) / 4;
    weights.set(i, w);
  }
}

TEST_P(MoeCapacity, ByHand) {
  // Rows {0, 1}, {0, 2}, {1, 0}, {3 = E, 0}; weights .5 .2 / .9 .1 / .7 .3 / .4 .6.
  // Expert 0 has slots 0 (.5), 2 (.9), 5 (.3), 7 (.6); expert 1: 1 (.2), 4 (.7); expert 2: 3.
  const int64_t idx[] = {0, 1, 0, 2, 1, 0, 3, 0};
  const float w[] = {0.5f, 0.2f, 0.9f, 0.1f, 0.7f, 0.3f, 0.4f, 0.6f};
  TensorBuffer expert_idx({4, 2}, I64), weights({4, 2}, F32), kept({4, 2}, I32),
      weights_out({4, 2}, F32);
  for (size_t i = 0; i < 8; ++i) setInt(expert_idx, i, idx[i]), weights.set(i, w[i]);
  // C = 2, position: expert 0 keeps slots 0 and 2; 5 and 7 dropped; experts 1, 2 keep all.
  ASSERT_EQ(run(kept, &weights_out, expert_idx, &weights, 3, 2, 0), INFINI_STATUS_SUCCESS)
      << error_;
  const int64_t by_position[] = {0, 1, 0, 2, 1, 3, 3, 3};
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(getInt(kept, i), by_position[i]) << i;
    EXPECT_EQ(weights_out.get(i), by_position[i] == 3 ? 0.0f : w[i]) << i;
  }
  // C = 2, probability: expert 0 keeps .9 (slot 2) and .6 (slot 7).
  ASSERT_EQ(run(kept, &weights_out, expert_idx, &weights, 3, 2, 1), INFINI_STATUS_SUCCESS)
      << error_;
  const int64_t by_probability[] = {3, 1, 0, 2, 1, 3, 3, 0};
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(getInt(kept, i), by_probability[i]) << i;
  // C = 0 drops everything; without weights_out and (position) without weights.
  ASSERT_EQ(run(kept, nullptr, expert_idx, nullptr, 3, 0, 0), INFINI_STATUS_SUCCESS) << error_;
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(getInt(kept, i), 3) << i;
}

TEST_P(MoeCapacity, TiesNanAndZeros) {
  // One expert, five slots: 1, NaN, -0, +0, 1, NaN; C = 3 keeps both NaN, then the first 1.
  const float w[] = {1.0f, NAN, -0.0f, 0.0f, 1.0f, NAN};
  TensorBuffer expert_idx({6, 1}, I32), weights({6, 1}, F32);
  for (size_t i = 0; i < 6; ++i) setInt(expert_idx, i, 0), weights.set(i, w[i]);
  // INT64_MAX: every slot (the cpu device once formed a pointer that far past its bucket).
  for (int64_t C : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5},
                    int64_t{6}, INT64_MAX})
    expectOracle(expert_idx, weights, 1, C, 1, I32, "ties");
  // -0 and +0 tie: with C = 5 the -0 (slot 2) is kept and the +0 (slot 3) dropped.
  TensorBuffer kept({6, 1}, I32);
  ASSERT_EQ(run(kept, nullptr, expert_idx, &weights, 1, 5, 1), INFINI_STATUS_SUCCESS) << error_;
  EXPECT_EQ(getInt(kept, 2), 0);
  EXPECT_EQ(getInt(kept, 3), 1);
}

TEST_P(MoeCapacity, RandomEveryDtype) {
  // Every index dtype pair with F32 weights, every weights dtype with I64 -> I32.
  struct Dtypes {
    infiniDtype_t in, out, weights;
  };
  const Dtypes cases[] = {{I32, I32, F32}, {I32, I64, F32}, {I64, I64, F32},
                          {I64, I32, F32}, {I64, I32, F16}, {I64, I32, BF16}};
  uint64_t seed = 1;
  for (const Dtypes &d : cases)
    for (int policy : {0, 1}) {
      TensorBuffer expert_idx({97, 6}, d.in), weights({97, 6}, d.weights);
      fill(expert_idx, weights, 13, ++seed);
      for (int64_t C : {0, 1, 7, 600})
        expectOracle(expert_idx, weights, 13, C, policy, d.out, "random");
    }
}

TEST_P(MoeCapacity, StridedAndManyDims) {
  for (int policy : {0, 1}) {
    TensorBuffer column({41, 5}, columnMajorStrides({41, 5}), I64),
        wcol({41, 5}, paddedStrides({41, 5}), BF16);
    fill(column, wcol, 9, 10 + policy);
    expectOracle(column, wcol, 9, 11, policy, I32, "column-major");
    TensorBuffer cube({3, 4, 5, 3}, paddedStrides({3, 4, 5, 3}), I32), wcube({3, 4, 5, 3}, F32);
    fill(cube, wcube, 7, 20 + policy);
    expectOracle(cube, wcube, 7, 9, policy, I64, "4-D");
    TensorBuffer reversed({9, 4}, {-4, -1}, I32), wrev({9, 4}, {-1, 9}, F16);
    fill(reversed, wrev, 6, 30 + policy);
    expectOracle(reversed, wrev, 6, 4, policy, I32, "reversed");
  }
}

TEST_P(MoeCapacity, DeepSeekSize) {
  // 16384 tokens x top-8 of 256 experts, capacity factor 1 (C = 512) and 1.25 (640).
  for (int policy : {0, 1}) {
    TensorBuffer expert_idx({16384, 8}, I32), weights({16384, 8}, BF16);
    fill(expert_idx, weights, 256, 40 + policy);
    for (int64_t C : {512, 640}) expectOracle(expert_idx, weights, 256, C, policy, I32, "size");
  }
}

TEST_P(MoeCapacity, PositionIsInitRoutingV2Mode1) {
  // MoeInitRoutingV2 drop_pad_mode 1 at expert_capacity C drops position p (expanded_row_idx -1)
  // exactly where the position policy writes E.
  const size_t R = 53, K = 4, H = 3;
  const int64_t E = 6, C = 9;
  TensorBuffer expert_idx({R, K}, I32), weights({R, K}, F32);
  fill(expert_idx, weights, E, 77);
  for (size_t i = 0; i < R * K; ++i)  // MoeInitRoutingV2 takes no E
    if (getInt(expert_idx, i) == E) setInt(expert_idx, i, static_cast<int64_t>(i % E));
  TensorBuffer kept({R, K}, I32);
  ASSERT_EQ(run(kept, nullptr, expert_idx, nullptr, E, C, 0), INFINI_STATUS_SUCCESS) << error_;
  TensorBuffer x({R, H}, F32), expanded_x({static_cast<size_t>(E), static_cast<size_t>(C), H}, F32),
      row_idx({R * K}, I32);
  for (size_t i = 0; i < R * H; ++i) x.set(i, static_cast<float>(i));
  infiniopTensorDescriptor_t ex = expanded_x.descriptor(), ri = row_idx.descriptor(),
                             xd = x.descriptor(), ed = expert_idx.descriptor();
  infiniopMoeInitRoutingV2Descriptor_t init = nullptr;
  ASSERT_EQ(infiniopCreateMoeInitRoutingV2Descriptor(handle(), &init, ex, ri, nullptr, nullptr, xd,
                                                     ed, 0, C, E, 1, 0, false),
            INFINI_STATUS_SUCCESS)
      << infiniopGetLastError();
  for (auto d : {ex, ri, xd, ed}) infiniopDestroyTensorDescriptor(d);
  size_t size = 0;
  ASSERT_EQ(infiniopGetMoeInitRoutingV2WorkspaceSize(init, &size), INFINI_STATUS_SUCCESS);
  DeviceMirror device(handle());
  device.add(expanded_x);
  device.add(row_idx);
  device.add(x);
  device.add(expert_idx);
  ASSERT_EQ(infiniopMoeInitRoutingV2(init, device.scratch(size), size, device(expanded_x),
                                     device(row_idx), nullptr, nullptr, device(x),
                                     device(expert_idx), nullptr),
            INFINI_STATUS_SUCCESS)
      << infiniopGetLastError();
  device.download();
  EXPECT_EQ(infiniopDestroyMoeInitRoutingV2Descriptor(init), INFINI_STATUS_SUCCESS);
  size_t dropped = 0;
  for (size_t p = 0; p < R * K; ++p) {
    ASSERT_EQ(getInt(row_idx, p) == -1, getInt(kept, p) == E) << "position " << p;
    dropped += getInt(kept, p) == E;
  }
  EXPECT_GT(dropped, 0u);  // the case drops something
}

TEST_P(MoeCapacity, NoSlots) {
  TensorBuffer expert_idx({0, 8}, I32), weights({0, 8}, F32), kept({0, 8}, I32);
  EXPECT_EQ(run(kept, nullptr, expert_idx, &weights, 4, 2, 1), INFINI_STATUS_SUCCESS) << error_;
}

TEST_P(MoeCapacity, OutOfRangeWritesNothing) {
  for (int64_t bad : {int64_t{-1}, int64_t{5}, int64_t{1} << 40}) {
    TensorBuffer expert_idx({2, 2}, I64), weights({2, 2}, F32), kept({2, 2}, I32),
        weights_out({2, 2}, F32);
    for (size_t i = 0; i < 4; ++i) setInt(expert_idx, i, i == 3 ? bad : 1), weights.set(i, 1.0f);
    EXPECT_EQ(run(kept, &weights_out, expert_idx, &weights, 4, 1, 1), INFINI_STATUS_BAD_PARAM);
    EXPECT_NE(error_.find("outside [0, 4]"), std::string::npos) << error_;
    for (uint8_t byte : kept.storage()) ASSERT_EQ(byte, 0xA5) << "written";
    for (uint8_t byte : weights_out.storage()) ASSERT_EQ(byte, 0xA5) << "written";
  }
}

TEST_P(MoeCapacity, BadDescriptors) {
  TensorBuffer expert_idx({3, 2}, I32), weights({3, 2}, F32), kept({3, 2}, I32),
      wrong_shape({2, 3}, I32), half({3, 2}, F16), floats({3, 2}, F32);
  const auto expect = [&](infiniStatus_t want, TensorBuffer &k, TensorBuffer *wo, TensorBuffer &x,
                          TensorBuffer *w, int64_t E, int64_t C, int64_t policy,
                          const char *message) {
    EXPECT_EQ(run(k, wo, x, w, E, C, policy), want) << message;
    EXPECT_NE(error_.find(message), std::string::npos) << error_;
  };
  expect(INFINI_STATUS_BAD_PARAM, kept, nullptr, expert_idx, &weights, 0, 1, 0,
         "num_experts 0 is outside [1, 16777216]");
  expect(INFINI_STATUS_BAD_PARAM, kept, nullptr, expert_idx, &weights, (int64_t{1} << 24) + 1, 1, 0,
         "num_experts 16777217 is outside [1, 16777216]");
  expect(INFINI_STATUS_BAD_PARAM, kept, nullptr, expert_idx, &weights, 4, -1, 0,
         "capacity -1 is negative");
  expect(INFINI_STATUS_BAD_PARAM, kept, nullptr, expert_idx, &weights, 4, 1, 2,
         "drop_policy 2 is not 0 (position) or 1 (probability)");
  expect(INFINI_STATUS_NULL_POINTER, kept, nullptr, expert_idx, nullptr, 4, 1, 1,
         "drop_policy 1 (probability) ranks by it");
  expect(INFINI_STATUS_NULL_POINTER, kept, &floats, expert_idx, nullptr, 4, 1, 0,
         "weights_out is given");
  expect(INFINI_STATUS_BAD_TENSOR_SHAPE, wrong_shape, nullptr, expert_idx, &weights, 4, 1, 0,
         "kept_idx");
  expect(INFINI_STATUS_BAD_TENSOR_DTYPE, kept, &half, expert_idx, &weights, 4, 1, 1,
         "weights_out has dtype F16");
  expect(INFINI_STATUS_BAD_TENSOR_DTYPE, floats, nullptr, expert_idx, &weights, 4, 1, 0,
         "kept_idx");
  expect(INFINI_STATUS_BAD_TENSOR_DTYPE, kept, nullptr, floats, &weights, 4, 1, 0, "expert_idx");
}

INSTANTIATE_TEST_SUITE_P(Devices, MoeCapacity, ::testing::ValuesIn(allDeviceParams()),
                         [](const ::testing::TestParamInfo<DeviceParam> &info) {
                           return deviceParamName(info.param);
                         });

}  // namespace
}  // namespace infiniop_test
