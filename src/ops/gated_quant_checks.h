// SPDX-License-Identifier: Apache-2.0
// The checks the quantized gated activations share (SwiGluQuant, GeluMulQuant: gated_quant.cc;
// DequantSwigluQuant: dequant_swiglu_quant.cc): the attributes, the tensors y, scale,
// smooth_scales and group_index against x's shape, and group_index's counts read at the call.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/gated_quant.h"
#include "infiniop/ops/quant.h"
#include "ops/moe_checks.h"
#include "ops/moe_gating_checks.h"

namespace infiniop::quant {

// The attributes every *Quant operator shares, the enums as ints (infiniop::enumValue: a C caller
// may pass any int, which a C++ enum may not hold).
struct QuantAttributes {
  int32_t activate_left;
  int quant_mode;
  int64_t group_size;
  int scale_format;
};

infiniStatus_t checkAttributes(const moe_checks::Checker &check, const QuantAttributes &a);

// The shape of x's leading dims plus `last`.
std::vector<size_t> rowsShape(const Tensor *x, size_t last);

// x's shape ((..., 2H), rank >= 1), y, scale, smooth_scales and group_index as swiglu_quant.h
// says (x's dtype is the caller's to check), then every field of the plan but kernel, activation
// and dtype. group_index_needs_smooth: group_index without smooth_scales is BAD_PARAM (it would
// choose rows of nothing); false where the caller has other per-expert tensors.
infiniStatus_t planGatedQuant(const moe_checks::Checker &check, const Tensor *y,
                              const Tensor *scale, const Tensor *x, const Tensor *smooth,
                              const Tensor *group_index, const QuantAttributes &a,
                              bool group_index_needs_smooth, GatedQuantPlan *p);

// group_index's counts: each >= 0, their sum at most the rows.
infiniStatus_t readCounts(const char *op, const GatedQuantPlan &p,
                          const moe_gating::HostCopy &values, std::vector<int64_t> *counts);

// A call's group_index counts, after its operand checks: read through the device and checked
// into *counts (none without group_index); *write false where the call has nothing to write (no
// rows, or no columns and no scale written: 2^40 rows of 0 columns).
infiniStatus_t callCounts(const char *op, infiniopHandle_t handle, void *stream,
                          const GatedQuantPlan &p, const void *group_index,
                          std::vector<int64_t> *counts, bool *write);

// The data of a call (counts: callCounts'; valid while it lives).
GatedQuantData callData(void *y, void *scale, const void *x, const void *smooth_scales,
                        const void *group_index, const std::vector<int64_t> &counts,
                        void *workspace);

}  // namespace infiniop::quant
