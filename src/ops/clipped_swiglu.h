// SPDX-License-Identifier: Apache-2.0
// What ClippedSwiglu's kernels receive as attributes; each device's functor derives from it and
// adds no members, so the descriptor's copy of it is the functor.
#pragma once

namespace infiniop {

struct ClippedSwigluAttributes {
  float alpha;  // finite
  float limit;  // > 0, +inf for no clipping
  float bias;   // finite
  // Where the gate's a moves when alpha a leaves the range of exp (0 when alpha is 0): to
  // alpha a = -87 (the fast path's clamp) and -175 (the tail's). Divided once here, in C++,
  // correctly rounded, so that OpenCL (whose division may be 2.5 ulp) uses the same values.
  float far_left_a;  // -87 / alpha
  float tail_a;      // -175 / alpha
};

}  // namespace infiniop
