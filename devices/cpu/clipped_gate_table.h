// SPDX-License-Identifier: Apache-2.0
// ClippedSwiglu's gate as tables (activation_table.h's, for an activation that depends on the
// operator's attributes): for every 16-bit A, the gate G(A) = a sigmoid(alpha a) with its clamps
// (a = min(A, a_limit); clamp_mode 1: limit where A > a_pass) and its slope g'(a), from
// cpu_reference's doubles, with factorTable's marks. Built once per attribute set and dtype, for
// the first kMaxClippedGateSets sets a process meets (models use one or two); beyond, null
// tables, and the kernels keep their evaluation with its bound.
#pragma once

#include "cpu/activation_table.h"
#include "ops/clipped_swiglu.h"
#include "ops/gated_quant.h"

namespace infiniop::cpu {

constexpr int kMaxClippedGateSets = 16;

struct ClippedGateTables {
  const float *gate = nullptr, *slope = nullptr;
  // The reference's double gate g itself (exact::Clipped's, no clamp_mode 1 clamp): the exact
  // values ClippedSwigluQuant's near lanes and scale candidates take, with no exponential.
  const double *exact = nullptr;
};

// Thread-safe; the tables live until the process ends.
ClippedGateTables clippedGateTables(const ClippedSwigluAttributes &attributes, bool bf16);

// ClippedSwigluQuant for 16-bit x through gated_quant.cc's F32 pipeline, with this plan's gate
// tables (clippedGateTables(plan.clipped, BF16 or not), not null).
void clippedSwigluQuantTabled(const quant::GatedQuantPlan &plan, const quant::GatedQuantData &data,
                              const ClippedGateTables &tables);

}  // namespace infiniop::cpu
