// SPDX-License-Identifier: Apache-2.0
#include "gather/views.h"

namespace infiniop::gather {

RowView rowView(const Tensor *t) {
  RowView v;
  if (!t) return v;
  v.present = true;
  v.span = elementSpan(t->shape, t->strides);
  const size_t n = t->ndim();
  v.cols = t->shape[n - 1];
  v.col_stride = t->strides[n - 1];
  v.row_stride = t->strides[n - 2];
  if (n == 3) {
    v.block = t->shape[1];
    v.block_stride = t->strides[0];
    v.rows = t->shape[0] * t->shape[1];
  } else {
    v.rows = t->shape[0];
    v.block = v.rows;
  }
  if (v.block == 0) v.block = 1;  // no rows: rowOffset is never called
  return v;
}

namespace {
// A rank-2 tensor's layout, as it is, into a table-like view.
template <class View>
View tableOf(const Tensor *t) {
  View v;
  if (!t) return v;
  v.present = true;
  v.rows = t->shape[0];
  v.cols = t->shape[1];
  v.row_stride = t->strides[0];
  v.col_stride = t->strides[1];
  v.span = elementSpan(t->shape, t->strides);
  return v;
}
}  // namespace

TableView tableView(const Tensor *t) {
  return tableOf<TableView>(t);
}

IndexView flatIndexView(const Tensor *t, size_t rows, size_t cols, bool column_major) {
  IndexView v;
  if (!t) return v;
  v.present = true;
  v.wide = t->dtype == INFINI_DTYPE_I64;
  v.rows = rows;
  v.cols = cols;
  const ptrdiff_t step = t->strides[0];
  v.row_stride = column_major ? step : step * static_cast<ptrdiff_t>(cols);
  v.col_stride = column_major ? step * static_cast<ptrdiff_t>(rows) : step;
  v.span = elementSpan(t->shape, t->strides);
  return v;
}

IndexView tableIndexView(const Tensor *t) {
  IndexView v = tableOf<IndexView>(t);
  v.wide = t && t->dtype == INFINI_DTYPE_I64;
  return v;
}

infiniStatus_t checkIndexRange(const std::string &op, const char *name, const IndexView &view,
                               const void *data, int64_t lo, int64_t hi) {
  for (size_t r = 0; r < view.rows; ++r)
    for (size_t c = 0; c < view.cols; ++c) {
      const int64_t value = view.at(data, r, c);
      if (value >= lo && value < hi) continue;
      return fail(INFINI_STATUS_BAD_PARAM,
                  op + ": " + name + " value " + std::to_string(value) + " (row " +
                      std::to_string(r) + ", column " + std::to_string(c) + ") is outside [" +
                      std::to_string(lo) + ", " + std::to_string(hi) + ")");
    }
  return INFINI_STATUS_SUCCESS;
}

}  // namespace infiniop::gather
