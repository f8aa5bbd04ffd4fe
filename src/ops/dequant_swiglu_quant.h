// SPDX-License-Identifier: Apache-2.0
// DequantSwigluQuant (family DequantSwigluQuant) as the devices see it: SwiGluQuant's plan and
// data (ops/gated_quant.h: y, scale, smooth_scales, group_index, the modes and groups) with x
// INT32 and the dequantization's tensors added. What every device computes is
// docs/dequant_swiglu_quant.md; the values are exact/dequant.h's.
#pragma once

#include "ops/gated_quant.h"

namespace infiniop::quant {

// GatedQuantPlan's fields (dtype I32, activation silu) and the dequantization's: weight_scale
// (2H) or (E, 2H), activation_scale (one value per row of x), bias (2H) or (E, 2H).
struct DequantSwigluQuantPlan : GatedQuantPlan {
  bool weight_per_expert = false;  // weight_scale (E, 2H): row e of expert e's rows
  bool bias_per_expert = false;    // bias (E, 2H)
  bool bias_int = false;           // bias INT32: added to the accumulator (else after the scales)
  moe::RouterView weight_scale, activation_scale, bias;  // activation_scale: rows of x, 1 column

  size_t weightRow(ptrdiff_t e) const { return weight_per_expert ? static_cast<size_t>(e) : 0; }
  size_t biasRow(ptrdiff_t e) const { return bias_per_expert ? static_cast<size_t>(e) : 0; }
};

struct DequantSwigluQuantData : GatedQuantData {
  const void *weight_scale;
  const void *activation_scale;
  const void *bias;
};

class DequantSwigluQuantRunner : public Runner {
 public:
  virtual infiniStatus_t run(const DequantSwigluQuantData &data, void *stream) const = 0;
};

}  // namespace infiniop::quant

namespace infiniop::family {

// DequantSwigluQuant as host devices run it: a synchronous function of host memory.
INFINIOP_HOST_FAMILY(DequantSwigluQuant, quant::DequantSwigluQuantPlan,
                     const quant::DequantSwigluQuantData &data);

}  // namespace infiniop::family
