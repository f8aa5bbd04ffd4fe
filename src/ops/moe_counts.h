// SPDX-License-Identifier: Apache-2.0
// The expert-count operators (MoeExpertCounts, MoeBiasUpdate: DeepSeek-V3's auxiliary-loss-free
// balancing) as the devices see them: one validated plan per descriptor, fixed at creation, and
// the data pointers of one call, whose index and count values have been checked on the host
// before a kernel runs. The arithmetic every device follows is docs/moe_expert_counts.md and
// docs/moe_bias_update.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "infinicore.h"
#include "kernels/host_family.h"
#include "ops/moe_gating.h"

namespace infiniop::moe {

enum class CountsKind : int {
  expert_counts,  // MoeExpertCounts
  bias_update,    // MoeBiasUpdate
};

// E experts. MoeExpertCounts: expert_idx (..., k) seen as `rows` rows of k (any strides; values
// in [0, E] checked, E skipped) -> counts (E). MoeBiasUpdate: counts (E) -> bias (E) F32 in place.
// The 1-D tensors are views of one row of E elements (col_stride their stride).
struct CountsPlan : Plan {
  CountsKind kind = CountsKind::expert_counts;
  size_t experts = 0;        // E >= 1
  size_t sequences = 1;      // MoeExpertCounts: B; counts (B, E), row r counted in counts[r % B]
  RouterView expert_idx;     // MoeExpertCounts: I32/I64 (rows, k)
  RouterView counts;         // output of MoeExpertCounts (B, E), input of MoeBiasUpdate (1, E)
  RouterView bias;           // MoeBiasUpdate: F32 (1, E), read and written
  float update_rate = 0.0f;  // MoeBiasUpdate: u, rounded to F32 at creation, finite
};

// One call's device addresses (NULL where the operator has no such tensor or it is empty).
struct CountsData {
  const void *expert_idx;  // MoeExpertCounts
  void *counts;            // MoeExpertCounts
  const void *counts_in;   // MoeBiasUpdate
  void *bias;              // MoeBiasUpdate
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

// The two expert-count operators as host devices run them: a synchronous function of host memory
// per kernel.
INFINIOP_HOST_FAMILY(MoeCounts, moe::CountsPlan, const moe::CountsData &data);

}  // namespace infiniop::family
