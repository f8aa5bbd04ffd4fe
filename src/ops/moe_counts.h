// SPDX-License-Identifier: Apache-2.0
// The expert-count operators (MoeExpertCounts, MoeBiasUpdate: DeepSeek-V3's auxiliary-loss-free
// balancing; MoeExpertCapacity: capacity with a drop policy) as the devices see them: one validated
// plan per descriptor, fixed at creation, and the data pointers of one call, whose index and count
// values have been checked on the host before a kernel runs. The arithmetic every device follows is
// docs/moe_expert_counts.md and docs/moe_bias_update.md, docs/moe_expert_capacity.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "infinicore.h"
#include "kernels/host_family.h"
#include "ops/moe_gating.h"

namespace infiniop::moe {

enum class CountsKind : int {
  expert_counts,  // MoeExpertCounts
  bias_update,    // MoeBiasUpdate
  capacity,       // MoeExpertCapacity
};

// MoeExpertCapacity's drop_policy.
enum class DropPolicy : int { position = 0, probability = 1 };

// E experts. MoeExpertCounts: expert_idx (..., k) seen as `rows` rows of k (any strides; values
// in [0, E] checked, E skipped) -> counts (E). MoeBiasUpdate: counts (E) -> bias (E) F32 in place.
// The 1-D tensors are views of one row of E elements (col_stride their stride).
// MoeExpertCapacity: expert_idx (rows, k) -> kept_idx (rows, k) and, where present, weights
// (rows, k) -> weights_out (rows, k); slot s = r k + c.
struct CountsPlan : Plan {
  CountsKind kind = CountsKind::expert_counts;
  size_t experts = 0;        // E >= 1
  size_t sequences = 1;      // MoeExpertCounts: B; counts (B, E), row r counted in counts[r % B]
  RouterView expert_idx;     // MoeExpertCounts: I32/I64 (rows, k)
  RouterView counts;         // output of MoeExpertCounts (B, E), input of MoeBiasUpdate (1, E)
  RouterView bias;           // MoeBiasUpdate: F32 (1, E), read and written
  float update_rate = 0.0f;  // MoeBiasUpdate: u, rounded to F32 at creation, finite
  // MoeExpertCapacity.
  size_t capacity = 0;  // C: slots each expert keeps
  DropPolicy policy = DropPolicy::position;
  RouterView kept_idx;     // output, expert_idx's dtype or the other index dtype
  RouterView weights;      // input, F32/F16/BF16; absent for the position policy without
                           // weights_out
  RouterView weights_out;  // output, weights' dtype; optional
};

// A weight's rank key for the probability policy: larger weights give larger keys, a NaN the
// largest (it ranks first, as in the routers' selection), -0 and +0 one key. Exact: a total order
// of F32 values, so every device that sorts by (key descending, slot ascending) keeps the same
// slots.
inline uint32_t capacityKey(float w) {
  if (w != w) return 0xffffffffu;
  if (w == 0.0f) return 0x80000000u;
  uint32_t bits;
  std::memcpy(&bits, &w, sizeof bits);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// One call's device addresses (NULL where the operator has no such tensor or it is empty).
struct CountsData {
  const void *expert_idx;  // MoeExpertCounts
  void *counts;            // MoeExpertCounts
  const void *counts_in;   // MoeBiasUpdate
  void *bias;              // MoeBiasUpdate
  void *kept_idx;          // MoeExpertCapacity (expert_idx too)
  void *weights_out;       // MoeExpertCapacity, NULL when absent
  const void *weights;     // MoeExpertCapacity, NULL when absent
  // MoeBiasUpdate: the sum S of the counts, checked on the host to be >= 0 with every count and
  // below 2^63; the mean is S / E exactly (docs/moe_bias_update.md).
  int64_t total;
  void *workspace;
};

// sign(S / E - c) for the exact rational S / E (S >= 0, E >= 1): +1, 0 or -1, in integers only.
inline int meanSign(int64_t total, int64_t experts, int64_t count) {
  const int64_t q = total / experts, r = total % experts;  // S = q E + r, 0 <= r < E
  if (count < q) return 1;
  if (count > q) return -1;
  return r > 0 ? 1 : 0;
}

// Made once at descriptor creation by the device's kernel table; run() is called after every
// check of the call has passed and writes every output of the plan (MoeExpertCounts writes its
// E counts even with no rows). The work is queued on `stream` where the device has streams.
class CountsRunner : public Runner {
 public:
  virtual infiniStatus_t run(const CountsData &data, void *stream) const = 0;
};

}  // namespace infiniop::moe

namespace infiniop::family {

// The expert-count operators as host devices run them: a synchronous function of host memory
// per kernel.
INFINIOP_HOST_FAMILY(MoeCounts, moe::CountsPlan, const moe::CountsData &data);

}  // namespace infiniop::family
