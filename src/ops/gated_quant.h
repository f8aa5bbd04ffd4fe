// SPDX-License-Identifier: Apache-2.0
// The gated activations with a quantized output (SwiGluQuant, GeluMulQuant, ClippedSwigluQuant;
// family GatedQuant)
// as the devices see them: one validated plan per descriptor, fixed at creation, and the data
// pointers of one call, whose group_index counts have been checked on the host before a kernel
// runs. What every device computes is docs/swiglu_quant.md; the formats are exact/quant.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "exact/quant.h"
#include "infinicore.h"
#include "kernels/host_family.h"
#include "ops/clipped_swiglu.h"
#include "ops/moe_gating.h"

namespace infiniop::quant {

using exact::QuantFormat;

// clipped: ClippedSwiglu's gate (clamp_mode 0) of (A, B), the attributes in `clipped`.
enum class GateActivation : int { silu, gelu_erf, gelu_tanh, clipped };

// rows rows of x (2H columns), y (H), scale (G), smooth_scales and group_index as given.
struct GatedQuantPlan : Plan {
  GateActivation activation = GateActivation::silu;
  infiniDtype_t dtype = INFINI_DTYPE_INVALID;  // x's: F32, F16 or BF16
  QuantFormat format = QuantFormat::int8;      // y's
  bool activate_left = true;  // the activation on x's first half (x1), the multiplier x2
  // clipped only: A = x[..., 0::2], B = x[..., 1::2] (else A the first half, B the second), and
  // ClippedSwiglu's attributes as its descriptor fills them (clamp_mode 0).
  bool interleaved = false;
  ClippedSwigluAttributes clipped{};
  bool dynamic = true;        // scale written (else read)
  bool power_of_two = false;  // UE8M0 dynamic scales
  size_t rows = 0, half = 0;  // H = half, x has 2H columns
  size_t group_size = 0;      // columns per group (H for per-token)
  size_t groups = 0;          // G = H / group_size (1 for per-token; 0 where H is 0)
  // The smooth scales: none, one row (H), or E rows (E, H) chosen by group_index's counts.
  bool smooth = false;
  size_t experts = 0;  // group_index's length E >= 1 (0: no group_index)
  moe::RouterView x, y, scale, smooth_scales, group_index;  // group_index: rows E, cols 1

  // Column c's activation input (A) and multiplier (B) columns of x.
  size_t gateColumn(size_t c) const {
    if (activation == GateActivation::clipped) return interleaved ? 2 * c : c;
    return activate_left ? c : half + c;
  }
  size_t multiplierColumn(size_t c) const {
    if (activation == GateActivation::clipped) return interleaved ? 2 * c + 1 : half + c;
    return activate_left ? half + c : c;
  }
};

// One call's device addresses (NULL where the operator has no such tensor).
struct GatedQuantData {
  void *y;
  void *scale;  // written (dynamic) or read (static)
  const void *x;
  const void *smooth_scales;
  const void *group_index;
  // group_index's counts as the host read them (checked: >= 0, sum <= rows), E of them; NULL
  // without group_index. Valid only during the call.
  const int64_t *counts;
  void *workspace;
};

// Made once at descriptor creation by the device's kernel table; run() is called after every
// check of the call has passed and writes every element of y (and, dynamic, of scale).
class GatedQuantRunner : public Runner {
 public:
  virtual infiniStatus_t run(const GatedQuantData &data, void *stream) const = 0;
};

// The smooth scales' row of x's row r (counts: E entries, checked), or -1: r is past the counts'
// sum (its outputs are 0 and a dynamic scale 0). Row 0 without group_index.
inline ptrdiff_t smoothRowOf(const GatedQuantPlan &p, const int64_t *counts, size_t r) {
  if (p.experts == 0) return 0;
  size_t end = 0;
  for (size_t e = 0; e < p.experts; ++e) {
    end += static_cast<size_t>(counts[e]);
    if (r < end) return static_cast<ptrdiff_t>(e);
  }
  return -1;
}

}  // namespace infiniop::quant

namespace infiniop::family {

// SwiGluQuant, GeluMulQuant and ClippedSwigluQuant as host devices run them: a synchronous function
// of host memory.
INFINIOP_HOST_FAMILY(GatedQuant, quant::GatedQuantPlan, const quant::GatedQuantData &data);

}  // namespace infiniop::family
