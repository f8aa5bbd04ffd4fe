// SPDX-License-Identifier: Apache-2.0
// Every 16-bit input of the activations: the cpu device's F16/BF16 paths read act(x) and act'(x)
// from tables of all 65536 inputs (devices/cpu/activation_table.h, clipped_gate_table.h for
// ClippedSwiglu's attributes), so each operator whose output
// goes through them runs here with its activation input x taking every bit pattern of the dtype
// once (NaNs, infinities, subnormals, both zeros included), its other inputs half random bit
// patterns (every magnitude: products that overflow, underflow or meet a NaN) and half about a
// standard normal, on the cpu device at every Highway target, and every output must have the bits
// of cpu_reference's, the oracle: the exact value rounded once (docs/accuracy.md).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "device_param.h"
#include "op_specs.h"
#include "tensor_buffer.h"

namespace infiniop_test {
namespace {

constexpr size_t kRows = 256, kColumns = 256;  // kRows x kColumns = 65536 activation inputs

// Under an emulator (INFINIOP_TEST_EMULATED, tests/emulated.cmake), whose double arithmetic is
// software, 8 rows, and the activation input of element i the pattern 8191 i mod 65536 (8191 is
// odd, so 2048 distinct patterns spread over every exponent and sign); the bits of every target
// against x86's are the bit-identity test's.
size_t rows() {
  static const bool emulated = [] {
    const char *value = std::getenv("INFINIOP_TEST_EMULATED");
    return value && *value;
  }();
  return emulated ? 8 : kRows;
}
uint16_t activationBits(size_t i) {
  return static_cast<uint16_t>(rows() == kRows ? i : i * 8191);
}

struct Operator {
  const char *spec;  // op_specs.h's name
  Attrs attrs;
  const char *label;
  bool interleaved = false;  // ClippedSwiglu's A in the even columns, not the first half
};
const Operator kOperators[] = {
    {"Gelu", {0}, "GeluErf"},
    {"Gelu", {1}, "GeluTanh"},
    {"GeluBackward", {}, "GeluBackward"},
    {"GeluBackwardV2", {0}, "GeluBackwardV2Erf"},
    {"GeluBackwardV2", {1}, "GeluBackwardV2Tanh"},
    {"SwiGlu", {-1}, "SwiGlu"},
    {"SwiGluBackward", {-1}, "SwiGluBackward"},
    {"GeluMul", {0}, "GeluMulErf"},
    {"GeluMul", {1}, "GeluMulTanh"},
    {"GeluMulBackward", {0}, "GeluMulBackwardErf"},
    {"GeluMulBackward", {1}, "GeluMulBackwardTanh"},
    // ClippedSwiglu: dim, alpha, limit, bias, interleaved (and clamp_mode for the V2 forms).
    {"ClippedSwiglu", {-1, 1.702, 7.0, 1.0, 0}, "ClippedSwigluHalves"},
    {"ClippedSwiglu", {-1, 1.702, 7.0, 1.0, 1}, "ClippedSwigluInterleaved", true},
    {"ClippedSwiglu", {-1, -0.75, 3.0, -0.25, 0}, "ClippedSwigluNegativeAlpha"},
    {"ClippedSwigluV2", {-1, 1.702, 7.0, 1.0, 0, 1}, "ClippedSwigluV2"},
    {"ClippedSwigluBackward", {-1, 1.702, 7.0, 1.0, 0}, "ClippedSwigluBackwardHalves"},
    {"ClippedSwigluBackward", {-1, 1.702, 7.0, 1.0, 1}, "ClippedSwigluBackwardInterleaved", true},
    {"ClippedSwigluBackward", {-1, -0.75, 3.0, -0.25, 0}, "ClippedSwigluBackwardNegativeAlpha"},
    {"ClippedSwigluBackwardV2", {-1, 1.702, 7.0, 1.0, 0, 1}, "ClippedSwigluBackwardV2"},
};

uint64_t mix(uint64_t seed, uint64_t i) {  // splitmix64 of (seed, i)
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + (i + 1) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The bits of a multiplier input (x2, dy): a random pattern, or about a standard normal (the sum
// of 4 uniforms over [-1, 1), rounded to the dtype).
uint16_t multiplierBits(infiniDtype_t dtype, uint64_t seed, size_t i) {
  const uint64_t z = mix(seed, i);
  if (z & 1) return static_cast<uint16_t>(z >> 16);
  float sum = 0;
  for (int k = 0; k < 4; ++k)
    sum += static_cast<float>(static_cast<double>(mix(z, k) >> 11) * 0x1p-52 - 1.0);
  return dtype == INFINI_DTYPE_BF16 ? infiniop::bf16FromF32(sum) : infiniop::f16FromF32(sum);
}

struct Every16BitInput : DeviceTestBase,
                         ::testing::WithParamInterface<std::tuple<DeviceParam, size_t, int>> {
  void SetUp() override { selectDevice(std::get<0>(GetParam())); }
  void TearDown() override { restoreTargets(); }
};

// The operator on `h` over these tensors (outputs, then inputs, in the API's order).
infiniStatus_t run(infiniopHandle_t h, const OpSpec &op, const Attrs &attrs,
                   std::vector<std::unique_ptr<TensorBuffer>> &tensors) {
  Descs descs;
  Ptrs ptrs;
  for (auto &t : tensors) {  // null: an absent optional tensor (group_index)
    descs.push_back(t ? t->descriptor() : nullptr);
    ptrs.push_back(t ? t->data() : nullptr);
  }
  void *desc = nullptr;
  infiniStatus_t s = op.create(h, &desc, descs, attrs);
  for (auto d : descs)
    if (d) infiniopDestroyTensorDescriptor(d);
  if (s != INFINI_STATUS_SUCCESS) return s;
  size_t workspace = 0;
  EXPECT_EQ(op.workspace(desc, &workspace), INFINI_STATUS_SUCCESS);
  std::vector<uint8_t> space(workspace + 1);
  s = op.calculate(desc, space.data(), workspace, ptrs, nullptr);
  EXPECT_EQ(op.destroy(desc), INFINI_STATUS_SUCCESS);
  return s;
}

// Runs the operator on `h` and on cpu_reference over every activation input, and expects every
// output's bits to be the oracle's.
void expectOraclesBits(infiniopHandle_t h, const Operator &o, infiniDtype_t dtype) {
  const OpSpec &op = spec(o.spec);
  // The activation input: "input" or "x"; split operators (an input twice an output's width)
  // hold it in each row's first half.
  std::vector<std::unique_ptr<TensorBuffer>> mine, oracle_tensors;
  bool split = false;
  for (const Slot &s : op.slots) split |= s.shape.size() == 2 && s.shape[1] == 8;  // [x1, x2]
  for (const Slot &s : op.slots) {
    if (s.nullable) {
      mine.emplace_back();
      continue;
    }
    const bool wide = s.shape[1] == 8;
    const std::vector<size_t> shape = {rows(), wide ? 2 * kColumns : kColumns};
    mine.push_back(std::make_unique<TensorBuffer>(shape, dtype));
    TensorBuffer &t = *mine.back();
    if (s.output) {
      t.poison();
      continue;
    }
    const bool activation = std::strcmp(s.name, "input") == 0 || std::strcmp(s.name, "x") == 0;
    const uint64_t seed = std::hash<std::string>()(s.name) + (dtype == INFINI_DTYPE_BF16);
    for (size_t i = 0; i < t.numel(); ++i) {
      const size_t row = i / shape[1], column = i % shape[1];
      uint16_t bits;
      if (activation && !split)
        bits = activationBits(row * kColumns + column);
      else if (activation && !o.interleaved && column < kColumns)
        bits = activationBits(row * kColumns + column);
      else if (activation && o.interleaved && column % 2 == 0)
        bits = activationBits(row * kColumns + column / 2);
      else
        bits = multiplierBits(dtype, seed, i);
      std::memcpy(t.at(i), &bits, 2);
    }
  }
  for (auto &t : mine) oracle_tensors.push_back(t ? std::make_unique<TensorBuffer>(*t) : nullptr);
  ASSERT_EQ(run(h, op, o.attrs, mine), INFINI_STATUS_SUCCESS) << infiniopGetLastError();
  Handle reference(INFINI_DEVICE_CPU_REFERENCE);
  ASSERT_EQ(run(reference.get(), op, o.attrs, oracle_tensors), INFINI_STATUS_SUCCESS)
      << infiniopGetLastError();
  for (size_t k = 0; k < op.slots.size(); ++k) {
    if (!op.slots[k].output) continue;
    size_t differ = 0;
    std::ostringstream first;
    for (size_t i = 0; i < mine[k]->numel(); ++i) {
      uint16_t got, want;
      std::memcpy(&got, mine[k]->at(i), 2);
      std::memcpy(&want, oracle_tensors[k]->at(i), 2);
      if (got == want) continue;
      if (differ++ == 0)
        first << std::hex << "element " << std::dec << i << ": 0x" << std::hex << got
              << ", oracle 0x" << want;
    }
    EXPECT_EQ(differ, 0u) << o.label << " " << op.slots[k].name << ": " << differ
                          << " elements differ from cpu_reference; first " << first.str();
  }
}

TEST_P(Every16BitInput, OutputsAreTheOraclesBits) {
  expectOraclesBits(handle(), kOperators[std::get<1>(GetParam())],
                    std::get<2>(GetParam()) ? INFINI_DTYPE_BF16 : INFINI_DTYPE_F16);
}

// ClippedSwiglu's gate tables are kept for 16 attribute sets (clipped_gate_table.h); the sets
// after those take the evaluation with its bound, as exact.
TEST(Every16BitInputClippedSwiglu, ManyAttributeSets) {
  Handle cpu(INFINI_DEVICE_CPU);
  for (int k = 0; k < 20; ++k) {
    const Operator forward{"ClippedSwiglu", {-1, 0.5 + 0.25 * k, 7.0, 1.0, 0}, "ClippedSwiglu"};
    const Operator backward{
        "ClippedSwigluBackward", {-1, 0.5 + 0.25 * k, 7.0, 1.0, 0}, "ClippedSwigluBackward"};
    expectOraclesBits(cpu.get(), forward, INFINI_DTYPE_BF16);
    expectOraclesBits(cpu.get(), backward, INFINI_DTYPE_F16);
  }
}

std::vector<DeviceParam> cpuParams() {
  std::vector<DeviceParam> params;
  for (DeviceParam p : allDeviceParams())
    if (isCpu(p)) params.push_back(p);
  return params;
}

INSTANTIATE_TEST_SUITE_P(Cpu, Every16BitInput,
                         ::testing::Combine(::testing::ValuesIn(cpuParams()),
                                            ::testing::Range<size_t>(0, std::size(kOperators)),
                                            ::testing::Values(0, 1)),
                         [](const auto &info) {
                           return deviceParamName(std::get<0>(info.param)) + "_" +
                                  kOperators[std::get<1>(info.param)].label +
                                  (std::get<2>(info.param) ? "_BF16" : "_F16");
                         });

}  // namespace
}  // namespace infiniop_test
