// SPDX-License-Identifier: Apache-2.0
#include "core/overlap.h"

#include <string>

#include "core/error.h"

namespace infiniop {
namespace {

bool intersect(const CallExtent &a, const CallExtent &b) {
  return a.begin != a.end && b.begin != b.end && a.begin < b.end && b.begin < a.end;
}

// An output that is exactly an input: the in-place case.
bool exactAlias(const CallExtent &output, const CallExtent &input) {
  return !input.written && output.shape && input.shape && output.begin == input.begin &&
         *output.shape == *input.shape && *output.strides == *input.strides;
}

}  // namespace

infiniStatus_t checkNoOverlap(const char *op, const CallExtent *extents, size_t count) {
  for (size_t w = 0; w < count; ++w) {
    if (!extents[w].written) continue;
    for (size_t other = 0; other < count; ++other) {
      // Each pair of written extents once; a written one against every read one.
      if (other == w || (extents[other].written && other < w)) continue;
      if (!intersect(extents[w], extents[other]) || exactAlias(extents[w], extents[other]))
        continue;
      const bool could_alias = extents[w].shape && extents[other].shape;
      return fail(INFINI_STATUS_BAD_TENSOR_STRIDES,
                  std::string(op) + ": " + extents[w].name + " overlaps " + extents[other].name +
                      (could_alias ? " without being exactly the same memory and layout" : ""));
    }
  }
  return INFINI_STATUS_SUCCESS;
}

}  // namespace infiniop
