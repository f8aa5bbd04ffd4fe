// SPDX-License-Identifier: Apache-2.0
// The gather framework's views in OpenCL C (devices/opencl/gather.h sets them as arguments),
// shared by the MoE kernels.
#ifndef INLINE
#define INLINE inline __attribute__((always_inline))
#endif

// Views travel as vectors, values the compiler knows no store changes (PoCL does not vectorize
// across work-items what it must reload from a struct argument's memory).
// gather::RowView as long8 (index, block, block_stride, row_stride, col_stride): element
// (row, j) is at index + (row / block) * block_stride + (row % block) * row_stride
// + j * col_stride, `index` being the view's base in its buffer. With -DUNIT_COLUMNS every
// present row view has col_stride 1, which lets the compiler load consecutive columns as vectors.
typedef long8 row_view_t;
// gather::TableView and gather::IndexView as long4 (index, row_stride, col_stride): element
// (r, c) is at index + r * row_stride + c * col_stride.
typedef long4 table_view_t;

// Element index of (row, 0). Rows a kernel reads are below 2^31 (positions, and row counts the
// host bounds: E x C slots and R x K positions fit INT32) or below `block`, so the 64-bit division,
// the bulk of the cost on a CPU driver, is either skipped (2-D views: block = rows) or done in 32
// bits.
INLINE long row_base(row_view_t v, ulong row) {
  if (row < (ulong)v.s1) return v.s0 + (long)row * v.s3;
  const uint q = (uint)row / (uint)v.s1, m = (uint)row - q * (uint)v.s1;
  return v.s0 + (long)q * v.s2 + (long)m * v.s3;
}

INLINE ulong at(long base, row_view_t v, ulong j) {
#ifdef UNIT_COLUMNS
  return (ulong)(base + (long)j);
#else
  return (ulong)(base + (long)j * v.s4);
#endif
}

INLINE ulong table_element(table_view_t v, ulong r, ulong c) {
  return (ulong)(v.s0 + (long)r * v.s1 + (long)c * v.s2);
}
