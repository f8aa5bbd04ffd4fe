// SPDX-License-Identifier: Apache-2.0
// MoeInitRoutingV2 (src/ops/moe_init_routing.h), built after gather.cl with -DELEMENT_T=uint or
// ushort: rows move as raw bits. The host sorted the positions and staged the results in the
// workspace as INT32: the destination row of every position (`dest`), and the per-expert values
// of the count outputs.

// expanded_x[dest[p]][j] = x[p / topk][j] for dest[p] in [0, rows): one work-item per element,
// (j, p) = global id (0, 1). Dropped (-1) and inactive (>= rows) positions write nothing.
__kernel void moe_init_rows(__global ELEMENT_T *expanded, row_view_t expanded_v,
                            const __global ELEMENT_T *x, row_view_t x_v, const __global int *dest,
                            ulong dest_index, ulong topk, ulong rows) {
  const ulong j = get_global_id(0), p = get_global_id(1);
  const int d = dest[dest_index + p];
  if (d < 0 || (ulong)d >= rows) return;
  const ulong r = (uint)p / (uint)topk;  // positions are below 2^31
  expanded[at(row_base(expanded_v, (ulong)d), expanded_v, j)] = x[at(row_base(x_v, r), x_v, j)];
}

// Slot s of expert e (row e * capacity + s, global id 1) is zero where s >= counts[e]: the
// capacity nobody filled.
__kernel void moe_init_padding(__global ELEMENT_T *expanded, row_view_t expanded_v,
                               const __global int *counts, ulong counts_index, ulong capacity) {
  const ulong j = get_global_id(0), d = get_global_id(1);
  const uint e = (uint)d / (uint)capacity, s = (uint)d - e * (uint)capacity;
  if ((long)s < (long)counts[counts_index + e]) return;
  expanded[at(row_base(expanded_v, d), expanded_v, j)] = 0;
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
