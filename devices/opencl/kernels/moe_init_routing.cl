// SPDX-License-Identifier: Apache-2.0
// MoeInitRoutingV2 (src/ops/moe_init_routing.h), built after gather.cl with -DELEMENT_T=uint or
// ushort (and -DVEC16_T=uint16 or ushort16): rows move as raw bits. The host sorted the positions
// and staged the results in the workspace as INT32: the destination row of every position (`dest`),
// and the per-expert values of the count outputs. MoeInitRoutingQuantV2 builds it after `common`,
// gather.cl and quant.cl with -DQUANT, -DELEMENT_T=uchar (-DVEC16_T=uchar16: the padding zeroes
// bytes) and x's -DSTORAGE_*: its rows are quantized by moe_init_quant_rows instead of moved.
typedef VEC16_T vec16_t;

// Work-item (c, r) moves columns [c * CHUNK, (c + 1) * CHUNK) of token r's row to its K places:
// each x vector is loaded once and stored K times (x read once, as on the cpu device), and a
// dropped place is tested per vector, not per element.
#define CHUNK 512

// expanded_x[dest[r*topk + k]] = x[r] for each k with dest in [0, rows), r = global id 1;
// dropped (-1) and inactive (>= rows) places are not written.
__kernel void moe_init_rows(__global ELEMENT_T *expanded, row_view_t expanded_v,
                            const __global ELEMENT_T *x, row_view_t x_v, const __global int *dest,
                            ulong dest_index, ulong topk, ulong rows, ulong hidden) {
  const ulong j0 = get_global_id(0) * CHUNK, r = get_global_id(1);
  const ulong j1 = min(j0 + CHUNK, hidden);
  const __global int *places = dest + dest_index + r * topk;
  const long src = row_base(x_v, r);
  ulong j = j0;
#ifdef UNIT_COLUMNS
  for (; j + 16 <= j1; j += 16) {
    const vec16_t v = vload16(0, x + src + j);
    for (ulong k = 0; k < topk; ++k) {
      const int d = places[k];
      if (d >= 0 && (ulong)d < rows) vstore16(v, 0, expanded + row_base(expanded_v, (ulong)d) + j);
    }
  }
#endif
  for (; j < j1; ++j) {
    const ELEMENT_T v = x[at(src, x_v, j)];
    for (ulong k = 0; k < topk; ++k) {
      const int d = places[k];
      if (d >= 0 && (ulong)d < rows)
        expanded[at(row_base(expanded_v, (ulong)d), expanded_v, j)] = v;
    }
  }
}

// Slot s of expert e (row e * capacity + s, global id 1) is zero where s >= counts[e]: the
// capacity nobody filled.
__kernel void moe_init_padding(__global ELEMENT_T *expanded, row_view_t expanded_v,
                               const __global int *counts, ulong counts_index, ulong capacity,
                               ulong hidden) {
  const ulong j0 = get_global_id(0) * CHUNK, d = get_global_id(1);
  const uint e = (uint)d / (uint)capacity, s = (uint)d - e * (uint)capacity;
  if ((long)s < (long)counts[counts_index + e]) return;
  const ulong j1 = min(j0 + CHUNK, hidden);
  const long base = row_base(expanded_v, d);
  ulong j = j0;
#ifdef UNIT_COLUMNS
  for (; j + 16 <= j1; j += 16) vstore16((vec16_t)0, 0, expanded + base + j);
#endif
  for (; j < j1; ++j) expanded[at(base, expanded_v, j)] = 0;
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

#ifdef QUANT
// devices/cpu_reference/moe_init_routing.cc's moe_init_routing_quant, the same double operations in
// the same order. Work-item p (global id 0) writes expanded row dest[p] (if kept and active) from
// token p / topk: static y = v scale + offset; dynamic z = v m (m from smooth row `experts[p]`
// where smooth_rows > 1, row 0 where 1, else 1), s from the exact amax, y = z / s.
INLINE double smooth_value(const __global storage_t *x, long src, row_view_t x_v,
                           const __global float *smooth, table_view_t smooth_v, ulong smooth_rows,
                           ulong row, ulong c) {
  const double v = (double)load_value(x, at(src, x_v, c));
  return smooth_rows == 0 ? v : v * (double)smooth[table_element(smooth_v, row, c)];
}

__kernel void moe_init_quant_rows(__global uchar *expanded, row_view_t expanded_v,
                                  const __global storage_t *x, row_view_t x_v,
                                  const __global int *staged, ulong dest_index, ulong experts_index,
                                  ulong topk, ulong rows, ulong hidden, const __global float *scale,
                                  table_view_t scale_v, const __global float *offset,
                                  ulong offset_index, __global float *dynamic_scales,
                                  row_view_t dynamic_v, uint fp8, uint dynamic, ulong smooth_rows) {
  const ulong p = get_global_id(0);
  const int d = staged[dest_index + p];
  if (d < 0 || (ulong)d >= rows) return;  // dropped, inactive
  const long src = row_base(x_v, p / topk), dst = row_base(expanded_v, (ulong)d);
  if (!dynamic) {  // v scale is exact in double, the sum rounded once
    const double sc = (double)scale[table_element(scale_v, 0, 0)];
    const double off = (double)offset[offset_index];
    for (ulong c = 0; c < hidden; ++c)
      expanded[at(dst, expanded_v, c)] =
          quantize_byte((double)load_value(x, at(src, x_v, c)) * sc + off, fp8);
    return;
  }
  const ulong row = smooth_rows > 1 ? (ulong)staged[experts_index + p] : 0;
  double amax = 0.0;
  for (ulong c = 0; c < hidden; ++c) {
    const double z = smooth_value(x, src, x_v, scale, scale_v, smooth_rows, row, c);
    amax = isnan(z) || isnan(amax) ? (double)NAN : fmax(amax, fabs(z));
  }
  const float s = dynamic_scale(amax, fp8, 0);
  dynamic_scales[row_base(dynamic_v, (ulong)d)] = s;
  for (ulong c = 0; c < hidden; ++c) {
    const double z = smooth_value(x, src, x_v, scale, scale_v, smooth_rows, row, c);
    expanded[at(dst, expanded_v, c)] = quantize_byte(z / (double)s, fp8);
  }
}

// The dynamic scale of slot s of expert e (row d = e * capacity + s, global id 0) is 0 where
// s >= counts[e]: the capacity nobody filled (moe_init_padding zeroes its bytes).
__kernel void moe_init_quant_padding(__global float *dynamic_scales, row_view_t dynamic_v,
                                     const __global int *counts, ulong counts_index,
                                     ulong capacity) {
  const ulong d = get_global_id(0);
  const uint e = (uint)d / (uint)capacity, s = (uint)d - e * (uint)capacity;
  if ((long)s >= (long)counts[counts_index + e]) dynamic_scales[row_base(dynamic_v, d)] = 0.0f;
}
#endif
