// SPDX-License-Identifier: Apache-2.0
#include "gather/inverse.h"

#include <algorithm>

namespace infiniop::gather {

size_t inverseWorkspaceBytes(size_t rows, size_t positions) {
  return (rows + 1 + positions) * sizeof(int32_t) + alignof(int32_t) - 1;
}

Inverse invertIndex(const IndexView &view, const void *data, size_t rows, void *workspace) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(workspace);
  const uintptr_t mask = alignof(int32_t) - 1;
  int32_t *first = reinterpret_cast<int32_t *>((address + mask) & ~mask);
  int32_t *sources = first + rows + 1;

  Inverse inverse;
  inverse.rows = rows;
  inverse.first = first;
  inverse.sources = sources;
  // Count per destination into first[d + 1], then prefix-sum: first[d] = start of d.
  std::fill(first, first + rows + 1, 0);
  for (size_t r = 0; r < view.rows; ++r)
    for (size_t c = 0; c < view.cols; ++c) {
      const int64_t d = view.at(data, r, c);
      if (d < 0 || static_cast<size_t>(d) >= rows) continue;
      if (++first[d + 1] > 1) inverse.has_duplicates = true;
    }
  for (size_t d = 0; d < rows; ++d) first[d + 1] += first[d];
  // Place positions in increasing order; first[d] advances to the end of d (the start of d + 1),
  // and is shifted back afterwards.
  int32_t position = 0;
  for (size_t r = 0; r < view.rows; ++r)
    for (size_t c = 0; c < view.cols; ++c, ++position) {
      const int64_t d = view.at(data, r, c);
      if (d < 0 || static_cast<size_t>(d) >= rows) continue;
      sources[first[d]++] = position;
    }
  std::copy_backward(first, first + rows, first + rows + 1);
  first[0] = 0;
  return inverse;
}

}  // namespace infiniop::gather
