// SPDX-License-Identifier: Apache-2.0
// The host half of the OpenCL gather kernels (kernels/gather.cl): the gather framework's views
// as kernel arguments, resolved from the call's device pointers.
#pragma once

#include <initializer_list>

#include "core/error.h"
#include "gather/views.h"
#include "opencl/cl.h"
#include "opencl/program.h"

namespace infiniop::opencl {

// row_view_t and table_view_t of the .cl file: (index, block, block_stride, row_stride,
// col_stride) and (index, row_stride, col_stride), vectors so that they are values.
struct RowArg {
  cl_long8 v{{0, 1, 0, 0, 0, 0, 0, 0}};
};
struct TableArg {
  cl_long4 v{};
};

// A view's buffer and its argument. Absent or empty views are never read by the kernels: they
// get `unused`, a buffer of the call, since OpenCL 1.2 drivers differ on NULL buffer arguments.
struct Operand {
  cl_mem mem;
  bool present;
};

inline infiniStatus_t resolveSpan(const char *op, infiniopHandle_t handle, const void *data,
                                  const ElementSpan &span, size_t element_size, cl_mem *mem,
                                  cl_ulong *index) {
  const auto size = static_cast<ptrdiff_t>(element_size);
  BufferArg arg{};
  INFINIOP_CHECK(resolveView(op, handle, data, span.lowest * size, (span.highest + 1) * size,
                             element_size, &arg));
  *mem = arg.mem;
  *index = arg.index;
  return INFINI_STATUS_SUCCESS;
}

inline infiniStatus_t resolveRows(const char *op, infiniopHandle_t handle,
                                  const gather::RowView &view, const void *data,
                                  size_t element_size, cl_mem unused, Operand *operand,
                                  RowArg *arg) {
  *operand = {unused, view.present && view.rows * view.cols > 0};
  if (!operand->present) return INFINI_STATUS_SUCCESS;
  cl_ulong index = 0;
  INFINIOP_CHECK(resolveSpan(op, handle, data, view.span, element_size, &operand->mem, &index));
  arg->v = {{static_cast<cl_long>(index), static_cast<cl_long>(view.block), view.block_stride,
             view.row_stride, view.col_stride, 0, 0, 0}};
  return INFINI_STATUS_SUCCESS;
}

// TableView and IndexView alike.
template <class View>
infiniStatus_t resolveTable(const char *op, infiniopHandle_t handle, const View &view,
                            const void *data, size_t element_size, cl_mem unused, Operand *operand,
                            TableArg *arg) {
  *operand = {unused, view.present && view.rows * view.cols > 0};
  if (!operand->present) return INFINI_STATUS_SUCCESS;
  cl_ulong index = 0;
  INFINIOP_CHECK(resolveSpan(op, handle, data, view.span, element_size, &operand->mem, &index));
  arg->v = {{static_cast<cl_long>(index), view.row_stride, view.col_stride, 0}};
  return INFINI_STATUS_SUCCESS;
}

// Whether every present row view has unit column stride (the common case), which the program
// is then built for (-DUNIT_COLUMNS): consecutive columns load as vectors.
inline bool unitColumns(std::initializer_list<const gather::RowView *> views) {
  for (const gather::RowView *view : views)
    if (view->present && view->rows * view->cols > 0 && view->cols > 1 && view->col_stride != 1)
      return false;
  return true;
}

}  // namespace infiniop::opencl
