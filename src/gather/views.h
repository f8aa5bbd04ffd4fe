// SPDX-License-Identifier: Apache-2.0
// The device-independent half of the gather framework: row-indexed operators (the MoE ones) see
// their float tensors as matrices of rows, their INT32 or INT64 index tensors as (rows, cols)
// tables, and check index values on the host before anything is written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/tensor.h"
#include "infinicore.h"

namespace infiniop::gather {

// A float tensor seen as `rows` rows of `cols` elements: a (rows, cols) matrix, or an
// (E, C, cols) tensor whose row d is [d / C][d % C]. Strides are in elements and may be any
// value (non-contiguous, transposed, negative, 0 on inputs).
struct RowView {
  bool present = false;
  size_t rows = 0, cols = 0;
  size_t block = 1;  // rows per leading-dim step: C for (E, C, cols), else every row
  ptrdiff_t block_stride = 0, row_stride = 0, col_stride = 1;
  ElementSpan span;  // for the overlap checks

  ptrdiff_t rowOffset(size_t row) const {
    return static_cast<ptrdiff_t>(row / block) * block_stride +
           static_cast<ptrdiff_t>(row % block) * row_stride;
  }
};

// An INT32 or INT64 tensor read as a (rows, cols) table: expert_idx (R, K), or
// expanded_row_idx (R*K) read as (R, K) in row layout (element r*K + k) or column layout
// (element k*R + r). Values are read whole (an INT64 value is never truncated).
struct IndexView {
  bool present = false;
  bool wide = false;  // INT64 elements
  size_t rows = 0, cols = 0;
  ptrdiff_t row_stride = 0, col_stride = 0;
  ElementSpan span;

  size_t elementSize() const { return wide ? sizeof(int64_t) : sizeof(int32_t); }
  ptrdiff_t offset(size_t r, size_t c) const {
    return static_cast<ptrdiff_t>(r) * row_stride + static_cast<ptrdiff_t>(c) * col_stride;
  }
  int64_t at(const void *data, size_t r, size_t c) const {
    return wide ? static_cast<const int64_t *>(data)[offset(r, c)]
                : static_cast<const int32_t *>(data)[offset(r, c)];
  }
  // Outputs (MoeInitRoutingV2's): the value fits the element type (the caller's bound).
  void store(void *data, size_t r, size_t c, int64_t value) const {
    if (wide)
      static_cast<int64_t *>(data)[offset(r, c)] = value;
    else
      static_cast<int32_t *>(data)[offset(r, c)] = static_cast<int32_t>(value);
  }
};

// A (rows, cols) table of floats: scales and grad_scales.
struct TableView {
  bool present = false;
  size_t rows = 0, cols = 0;
  ptrdiff_t row_stride = 0, col_stride = 0;
  ElementSpan span;

  ptrdiff_t offset(size_t r, size_t c) const {
    return static_cast<ptrdiff_t>(r) * row_stride + static_cast<ptrdiff_t>(c) * col_stride;
  }
};

// Builders: each stores a tensor's layout; rank and dtype are checked by the caller first. An
// absent (NULL) tensor gives a view with present = false.
RowView rowView(const Tensor *t);      // rank 2: (rows, cols); rank 3: (E, C, cols)
TableView tableView(const Tensor *t);  // rank 2
// A 1-D index tensor of rows*cols elements read as (rows, cols); `column_major`: element
// c*rows+r. An (n) tensor is flatIndexView(t, n, 1, false).
IndexView flatIndexView(const Tensor *t, size_t rows, size_t cols, bool column_major);
IndexView tableIndexView(const Tensor *t);  // rank 2

// Fails with BAD_PARAM (and a message naming the element) unless every value v of the index
// satisfies lo <= v < hi. Reads the data only.
infiniStatus_t checkIndexRange(const std::string &op, const char *name, const IndexView &view,
                               const void *data, int64_t lo, int64_t hi);

}  // namespace infiniop::gather
