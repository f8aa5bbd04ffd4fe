// SPDX-License-Identifier: Apache-2.0
// MoeInitRoutingV2 (src/ops/moe_init_routing.h), built after gather.cl with -DELEMENT_T=uint or
// ushort: rows move as raw bits. The host sorted the positions and staged the results in the
// workspace as INT32: the destination row of every position (`dest`), and the per-expert values
// of the count outputs.

// Work-item (c, p) moves columns [c * CHUNK, (c + 1) * CHUNK) of one row, so a dropped row's
// test is made once per chunk, not per element, and unit-stride rows move as vectors.
#define CHUNK 128

// Columns [j0, j1) of row `src` of x (NULL: zeros) to row `dst` of expanded_x.
INLINE void move_columns(__global ELEMENT_T *expanded, row_view_t expanded_v, long dst,
                         const __global ELEMENT_T *x, row_view_t x_v, long src, ulong j0,
                         ulong j1) {
  ulong j = j0;
#ifdef UNIT_COLUMNS
  for (; j + 16 <= j1; j += 16)
    vstore16(x ? vload16(0, x + src + j) : (ELEMENT_T)0, 0, expanded + dst + j);
#endif
  for (; j < j1; ++j) expanded[at(dst, expanded_v, j)] = x ? x[at(src, x_v, j)] : (ELEMENT_T)0;
}

// expanded_x[dest[p]] = x[p / topk] for dest[p] in [0, rows), p = global id 1; dropped (-1) and
// inactive (>= rows) positions write nothing.
__kernel void moe_init_rows(__global ELEMENT_T *expanded, row_view_t expanded_v,
                            const __global ELEMENT_T *x, row_view_t x_v, const __global int *dest,
                            ulong dest_index, ulong topk, ulong rows, ulong hidden) {
  const ulong j0 = get_global_id(0) * CHUNK, p = get_global_id(1);
  const int d = dest[dest_index + p];
  if (d < 0 || (ulong)d >= rows) return;
  const ulong r = (uint)p / (uint)topk;  // positions are below 2^31
  move_columns(expanded, expanded_v, row_base(expanded_v, (ulong)d), x, x_v, row_base(x_v, r), j0,
               min(j0 + CHUNK, hidden));
}

// Slot s of expert e (row e * capacity + s, global id 1) is zero where s >= counts[e]: the
// capacity nobody filled.
__kernel void moe_init_padding(__global ELEMENT_T *expanded, row_view_t expanded_v,
                               const __global int *counts, ulong counts_index, ulong capacity,
                               ulong hidden) {
  const ulong j0 = get_global_id(0) * CHUNK, d = get_global_id(1);
  const uint e = (uint)d / (uint)capacity, s = (uint)d - e * (uint)capacity;
  if ((long)s < (long)counts[counts_index + e]) return;
  move_columns(expanded, expanded_v, row_base(expanded_v, d), 0, expanded_v, 0, j0,
               min(j0 + CHUNK, hidden));
}

// out[i * step] = values[i] (out at `index` of its buffer): the index outputs, INT32 or INT64.
__kernel void moe_init_index32(__global int *out, long index, long step, const __global int *values,
                               ulong values_index) {
  const ulong i = get_global_id(0);
  out[index + (long)i * step] = values[values_index + i];
}
__kernel void moe_init_index64(__global long *out, long index, long step,
                               const __global int *values, ulong values_index) {
  const ulong i = get_global_id(0);
  out[index + (long)i * step] = (long)values[values_index + i];
}
