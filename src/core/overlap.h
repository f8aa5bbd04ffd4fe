// SPDX-License-Identifier: Apache-2.0
// The call-time overlap rule every operator shares: what a call writes (its outputs and its
// workspace) shares no byte with anything else of the call, except an output that is exactly
// one of its inputs (same address, shape and strides) where the operator runs in place.
#pragma once

#include <cstddef>
#include <vector>

#include "infinicore.h"

namespace infiniop {

// One tensor of a call, or its workspace, as the rule sees it: bytes [begin, end).
struct CallExtent {
  const char *name;
  const char *begin = nullptr, *end = nullptr;  // begin == end: absent or empty
  bool written = false;                         // an output, or the workspace
  // Set on the outputs and inputs of operators that run in place: an output may then be exactly
  // an input. NULL: no exact alias is allowed.
  const std::vector<size_t> *shape = nullptr;
  const std::vector<ptrdiff_t> *strides = nullptr;
};

// BAD_TENSOR_STRIDES, naming both, for the first written extent that shares a byte with another
// extent beyond what the rule allows; messages start with `op`. Builds nothing on success.
infiniStatus_t checkNoOverlap(const char *op, const CallExtent *extents, size_t count);

}  // namespace infiniop
