// SPDX-License-Identifier: Apache-2.0
#include "cpu/clipped_gate_table.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "exact/clipped_swiglu.h"

namespace infiniop::cpu {
namespace {

// What the gate depends on: every attribute but bias, which the kernels add themselves.
struct GateKey {
  float alpha, limit, a_limit, a_pass;
  int32_t clamp_mode;
  bool bf16;
  bool operator==(const GateKey &o) const {
    return std::memcmp(&alpha, &o.alpha, 4) == 0 && std::memcmp(&limit, &o.limit, 4) == 0 &&
           std::memcmp(&a_limit, &o.a_limit, 4) == 0 && std::memcmp(&a_pass, &o.a_pass, 4) == 0 &&
           clamp_mode == o.clamp_mode && bf16 == o.bf16;
  }
};

struct GateSet {
  GateKey key;
  std::unique_ptr<float[]> data;  // the gate, then the slope
  std::unique_ptr<double[]> exact;
};

GateSet build(const GateKey &key, const ClippedSwigluAttributes &at, bool bf16) {
  std::unique_ptr<float[]> t(new float[2 * kTableEntries]);
  std::unique_ptr<double[]> exact(new double[kTableEntries]);
  for (uint32_t bits = 0; bits < kTableEntries; ++bits) {
    const float A = bf16 ? tableInput<true>(bits) : tableInput<false>(bits);
    const exact::Clipped c(at, A, 0.0f);
    const double gate = at.clamp_mode == 1 && A > at.a_pass ? double{at.limit} : c.g;
    t[bits] = factorEntry(A, gate);
    exact[bits] = c.g;
    // The slope passes where A <= a_pass; elsewhere the kernels mask dA to 0.
    t[kTableEntries + bits] = A <= at.a_pass ? factorEntry(A, c.slope()) : 0.0f;
  }
  return {key, std::move(t), std::move(exact)};
}

}  // namespace

ClippedGateTables clippedGateTables(const ClippedSwigluAttributes &at, bool bf16) {
  static std::mutex mutex;
  static std::vector<GateSet> sets;
  const GateKey key{at.alpha, at.limit, at.a_limit, at.a_pass, at.clamp_mode, bf16};
  std::lock_guard<std::mutex> lock(mutex);
  for (const GateSet &s : sets)
    if (s.key == key) return {s.data.get(), s.data.get() + kTableEntries, s.exact.get()};
  if (sets.size() >= kMaxClippedGateSets) return {};
  sets.push_back(build(key, at, bf16));
  return {sets.back().data.get(), sets.back().data.get() + kTableEntries, sets.back().exact.get()};
}

}  // namespace infiniop::cpu
