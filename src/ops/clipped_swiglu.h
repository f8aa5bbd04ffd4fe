// SPDX-License-Identifier: Apache-2.0
// What ClippedSwiglu's kernels receive as attributes; each device's functor derives from it and
// adds no members, so the descriptor's copy of it is the functor.
#pragma once

#include <cstdint>

#include "infinicore.h"

namespace infiniop {

struct ClippedSwigluAttributes {
  float alpha;  // finite; 1 for clamp_mode 1 (silu)
  float limit;  // > 0, +inf for no clipping
  float bias;   // finite; 0 for clamp_mode 1 (never added there)
  // Where the gate's a moves when alpha a leaves the range of exp (0 when alpha is 0): to
  // alpha a = -87 (the fast path's clamp) and -175 (the tail's). Divided once here, in C++,
  // correctly rounded, so that OpenCL (whose division may be 2.5 ulp) uses the same values.
  float far_left_a;  // -87 / alpha
  float tail_a;      // -175 / alpha
  float a_limit;     // A's clamp before the gate: limit (clamp_mode 0), +inf (1)
  // The largest A whose dA passes: limit (clamp_mode 0); for clamp_mode 1 the largest float A
  // with silu(A) <= limit in double (+inf for limit +inf), so that the gate's clamp silu(A) >
  // limit is decided exactly, and alike on every device, as A > a_pass.
  float a_pass;
  int32_t clamp_mode;  // 0: clamp A, then the gate; 1: the gate silu(A), then clamp it
};

// alpha (finite), limit (> 0, +inf: no clipping) and bias (finite) checked, in that order, with
// op's messages, and the attributes filled for clamp_mode (0 or 1, checked by the caller).
// ClippedSwiglu's and ClippedSwigluQuant's (clamp_mode 0).
infiniStatus_t clippedSwigluAttributes(const char *op, float alpha, float limit, float bias,
                                       int64_t clamp_mode, ClippedSwigluAttributes *attributes);

}  // namespace infiniop
