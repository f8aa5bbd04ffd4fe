// SPDX-License-Identifier: Apache-2.0
// MoeExpertCounts and MoeBiasUpdate (src/ops/moe_counts.h; docs/moe_expert_counts.md and
// docs/moe_bias_update.md), built after `common` (storage.cl, math.cl, rounded.cl) with
// -DSTORAGE_F32. One work-item per expert: counting scans every element of expert_idx and counts
// those equal to its expert (no atomics, no workspace; integer, so exact), the bias update
// compares its count with the exact mean S / E given as S = q E + r (integers only) and adds +u
// or -u in F32, as the cpu device does.

// The dtypes of expert_idx and counts (INT32 or INT64, each its own), as the host builds the
// program.
#ifndef INDEX_T
#define INDEX_T int
#endif
#ifndef COUNT_T
#define COUNT_T int
#endif
typedef INDEX_T index_t;
typedef COUNT_T count_t;

// expert_idx's view (moe::RouterView): the host uploads (col_stride, ndim, dims[8], strides[8])
// at descriptor creation; row r is the row-major index over the leading dims.
#define MAX_LEADING 8

INLINE long row_offset(__global const long *geometry, ulong r) {
  const int ndim = (int)geometry[1];
  long offset = 0;
  for (int d = ndim - 1; d >= 0; --d) {
    const ulong dim = (ulong)geometry[2 + d];
    offset += (long)(r % dim) * geometry[2 + MAX_LEADING + d];
    r /= dim;
  }
  return offset;
}

// counts[b, e] = the number of elements of expert_idx's rows r with r % B == b equal to e (E, a
// finished row's mark, is nobody's); one work-item per (b, e), id b E + e.
__kernel void moe_expert_counts(__global const long *geometry, __global const index_t *expert_idx,
                                ulong expert_idx_index, __global count_t *counts,
                                ulong counts_index, long counts_stride, long counts_row_stride,
                                ulong rows, ulong cols, ulong E, ulong B) {
  const ulong id = get_global_id(0);
  const ulong e = id % E, b = id / E;
  const long col_stride = geometry[0];
  __global const index_t *base = expert_idx + expert_idx_index;
  long n = 0;
  for (ulong r = b; r < rows; r += B) {
    __global const index_t *row = base + row_offset(geometry, r);
    for (ulong c = 0; c < cols; ++c) n += (long)row[(long)c * col_stride] == (long)e ? 1 : 0;
  }
  counts[counts_index + (long)b * counts_row_stride + (long)e * counts_stride] = (count_t)n;
}

// bias[e] += u sign(S / E - counts[e]); the mean leaves bias[e] untouched.
__kernel void moe_bias_update(__global float *bias, ulong bias_index, long bias_stride,
                              __global const count_t *counts, ulong counts_index,
                              long counts_stride, long quotient, long remainder, float u) {
  const ulong e = get_global_id(0);
  const long count = (long)counts[counts_index + (long)e * counts_stride];
  const int sign = count < quotient ? 1 : count > quotient ? -1 : (remainder > 0 ? 1 : 0);
  const ulong at = bias_index + (long)e * bias_stride;
  if (sign != 0) store_value(bias, at, bias[at] + (sign > 0 ? u : -u));
}
