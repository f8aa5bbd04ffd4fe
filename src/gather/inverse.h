// SPDX-License-Identifier: Apache-2.0
// The grad's scatter grad_expanded_x[index[i]] += ... turned into a gather: a counting sort of
// the positions i by destination row. Each destination row then has one owner (one thread) that
// sums its sources in increasing i, so the result is the same for any thread count, duplicates
// included, and rows that no position reaches are known without a second pass.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gather/views.h"

namespace infiniop::gather {

struct Inverse {
  size_t rows = 0;
  // Sources of destination d: sources[first[d]] .. sources[first[d + 1] - 1], increasing.
  const int32_t *first = nullptr;  // rows + 1 entries
  const int32_t *sources = nullptr;
  bool has_duplicates = false;

  size_t count(size_t d) const { return static_cast<size_t>(first[d + 1] - first[d]); }
};

// Workspace bytes invertIndex needs for `positions` index values and `rows` destinations,
// alignment slack included (the workspace may have any address).
size_t inverseWorkspaceBytes(size_t rows, size_t positions);

// Position i = r * view.cols + c holds index value view.at(data, r, c); values outside
// [0, rows) are skipped (dropped or inactive tokens; the range was checked before). Builds the
// inverse in `workspace` (inverseWorkspaceBytes large); positions must fit in int32.
Inverse invertIndex(const IndexView &view, const void *data, size_t rows, void *workspace);

}  // namespace infiniop::gather
