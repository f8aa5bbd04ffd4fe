// SPDX-License-Identifier: Apache-2.0
// Walks a flat element range [begin, end) of a plan as rows along the inner dim. Row bases are
// advanced with an odometer; the only division is the one that locates `begin`, once per call.
#pragma once

#include <algorithm>

#include "elementwise/plan.h"

namespace infiniop::elementwise {

// row(char *const *bases, size_t count) handles `count` elements of the inner dim; bases[k] is
// the address of operand k's first element of the row.
template <class RowFn>
inline void walkRows(const Plan &plan, char *const *operands, size_t begin, size_t end,
                     RowFn &&row) {
  const int n_ops = plan.numOperands();
  const int inner = plan.ndim - 1;
  size_t coord[kMaxDims];
  char *base[kMaxOperands];
  size_t rest = begin;
  for (int d = plan.ndim; d-- > 0;) {
    coord[d] = rest % plan.shape[d];
    rest /= plan.shape[d];
  }
  for (int k = 0; k < n_ops; ++k) {
    ptrdiff_t offset = 0;
    for (int d = 0; d < plan.ndim; ++d)
      offset += static_cast<ptrdiff_t>(coord[d]) * plan.strides[k][d];
    base[k] = operands[k] + offset * static_cast<ptrdiff_t>(plan.element_size);
  }
  size_t position = begin;
  while (position < end) {
    const size_t count = std::min(plan.shape[inner] - coord[inner], end - position);
    row(static_cast<char *const *>(base), count);
    position += count;
    if (position >= end) break;
    // Step to the start of the next row: carry through the outer dims.
    for (int k = 0; k < n_ops; ++k)
      base[k] += static_cast<ptrdiff_t>(count) * plan.strides[k][inner] *
                 static_cast<ptrdiff_t>(plan.element_size);
    coord[inner] += count;
    for (int d = inner; d > 0 && coord[d] == plan.shape[d]; --d) {
      for (int k = 0; k < n_ops; ++k)
        base[k] +=
            (plan.strides[k][d - 1] - static_cast<ptrdiff_t>(plan.shape[d]) * plan.strides[k][d]) *
            static_cast<ptrdiff_t>(plan.element_size);
      coord[d] = 0;
      ++coord[d - 1];
    }
  }
}

}  // namespace infiniop::elementwise
