// SPDX-License-Identifier: Apache-2.0
// The views of moe::RouterView (src/ops/moe_gating.h) as the kernels read them: the host uploads,
// per view, GEOMETRY longs (col_stride, ndim, dims[8], strides[8]) at descriptor creation
// (router_view.h's uploadViewGeometry); a call passes each view's element index in its buffer.
// Row r is the row-major index over the leading dims. Part of `common`.
#define MAX_LEADING 8
#define GEOMETRY (2 + 2 * MAX_LEADING)

// A view's row: where (r, 0) is and the column step.
typedef struct {
  long base, step;
} row_t;

INLINE row_t row_of(const __global long *geometry, int view, ulong index, ulong r) {
  const __global long *g = geometry + view * GEOMETRY;
  long offset = 0;
  for (int d = (int)g[1] - 1; d >= 0; --d) {
    const ulong dim = (ulong)g[2 + d];
    offset += (long)(r % dim) * g[2 + MAX_LEADING + d];
    r /= dim;
  }
  row_t row = {(long)index + offset, g[0]};
  return row;
}
INLINE ulong element(row_t row, ulong c) {
  return (ulong)(row.base + (long)c * row.step);
}
