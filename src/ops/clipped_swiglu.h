// SPDX-License-Identifier: Apache-2.0
// What ClippedSwiglu's kernels receive as attributes; each device's functor derives from it and
// adds no members, so the descriptor's copy of it is the functor.
#pragma once

namespace infiniop {

struct ClippedSwigluAttributes {
  float alpha;  // finite
  float limit;  // > 0, +inf for no clipping
  float bias;   // finite
};

}  // namespace infiniop
