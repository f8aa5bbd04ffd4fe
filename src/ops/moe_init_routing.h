// SPDX-License-Identifier: Apache-2.0
// MoeInitRoutingV2 as the devices see it. The host does the sort (src/ops/moe_init_routing.cc:
// a counting sort of R*K positions, cheap beside the rows): a device only copies rows to the
// places the sort gave, zero-fills the capacity slots nobody filled and writes the index
// outputs from the host's values. (The grad is MoeFinalizeRoutingV2's forward with weight 1:
// moe::ForwardPlan.)
#pragma once

#include <memory>
#include <vector>

#include "exact/quant.h"
#include "kernels/host_family.h"
#include "kernels/list.h"
#include "gather/views.h"
#include "infiniop/handle.h"

namespace infiniop::moe {

// expanded_x[row_index(r, k)] = x[r] where row_index(r, k) is in [0, expanded_x.rows); with a
// capacity C (drop/pad), slot j of expert e is zero where j >= min(count(e), C).
struct InitPlan : Plan {
  size_t element_size = 0;  // rows are copied bit for bit, whatever the float dtype
  size_t tokens = 0, topk = 0, hidden = 0, experts = 0;
  size_t capacity = 0;            // 0: dropless
  gather::RowView x, expanded_x;  // (R, H); (A, H) or (E, C, H)
  gather::IndexView row_index;    // expanded_row_idx, (R, K) in row layout
  // (E) outputs, present where written: expert_tokens_count_or_cumsum (`cumsum`: inclusive
  // prefix sums) and expert_tokens_before_capacity (counts).
  gather::IndexView counts, before_capacity;
  bool cumsum = false;
  // MoeInitRoutingQuantV2 (kernel moe_init_routing_quant): expanded_x's rows are quantized from
  // x's values instead of copied (docs/moe_init_routing_quant.md); the routing is the same.
  struct Quant {
    infiniDtype_t dtype = INFINI_DTYPE_INVALID;  // x's: F32, F16 or BF16
    exact::QuantFormat format = exact::QuantFormat::int8;
    bool dynamic = false;
    // Dynamic: the smooth scale m of (expert e, column c) at smooth.offset(smooth_rows > 1 ? e :
    // 0, c); smooth_rows 0: m = 1. dynamic_scale: one F32 per expanded row (rowOffset(d)).
    size_t smooth_rows = 0;
    gather::TableView smooth;
    gather::RowView dynamic_scale;
  } quant;
  bool quantized() const { return kernel == KernelId::moe_init_routing_quant; }
};
struct InitData {
  void *expanded_x, *row_index, *counts, *before_capacity;
  const void *x;
  void *workspace;
  // MoeInitRoutingQuantV2's: dynamic_quant_scale (dynamic), scale (static: (1); dynamic: the
  // smooth scales or NULL) and offset (static, (1)); NULL for MoeInitRoutingV2.
  void *dynamic_scale;
  const void *scale, *offset;
};
// The sort's result, in host memory: the value of expanded_row_idx at each position r*K + k
// (-1: dropped) and the positions per expert (before capacity). Values fit INT32.
struct InitRouting {
  std::vector<int32_t> row_index;
  std::vector<int32_t> counts;
  // The expert of each position r*K + k: only where a quantized plan has (E, H) smooth scales.
  std::vector<int32_t> experts;
};

// The index outputs of host memory from the sort's values.
void writeInitIndices(const InitPlan &plan, const InitData &data, const InitRouting &routing);

// Made once at descriptor creation by the device's kernel table; run() is called after
// every check of the call has passed, and writes every output of the plan.
class InitRunner : public Runner {
 public:
  virtual infiniStatus_t run(const InitData &data, const InitRouting &routing,
                             void *stream) const = 0;
};

}  // namespace infiniop::moe

namespace infiniop::family {

// MoeInitRoutingV2 as host devices run it: the host kernel writes expanded_x's rows, the runner
// the index outputs (moe::writeInitIndices).
INFINIOP_HOST_FAMILY(MoeInit, moe::InitPlan, const moe::InitData &data,
                     const moe::InitRouting &routing);

}  // namespace infiniop::family
