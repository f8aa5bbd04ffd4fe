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

// ---- MoeExpertCapacity (docs/moe_expert_capacity.md) ----
// Four views (expert_idx, kept_idx, weights, weights_out), each (col_stride, ndim, dims[8],
// strides[8]) at geometry + VIEW * view; kept_idx has count_t elements, the weights storage_t
// (read as values through load_value, copied as bits_t). One work-item per expert e < E writes
// exactly the slots routed to e; work-item E the slots already marked E. Slot s = r k + c.
#define VIEW (2 + 2 * MAX_LEADING)
#ifndef BITS_T
#define BITS_T uint
#endif
typedef BITS_T bits_t;

INLINE long view_offset(__global const long *geometry, int view, ulong s, ulong k) {
  __global const long *g = geometry + VIEW * view;
  return row_offset(g, s / k) + (long)(s % k) * g[0];
}

// The rank key of a weight: larger weights larger keys, NaN the largest, -0 and +0 one key
// (moe::capacityKey).
INLINE uint capacity_key(float w) {
  if (isnan(w)) return 0xffffffffu;
  if (w == 0.0f) return 0x80000000u;
  const uint bits = as_uint(w);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

INLINE uint slot_key(__global const long *geometry, __global const storage_t *weights,
                     ulong weights_index, ulong s, ulong k) {
  return capacity_key(load_value(weights, weights_index + view_offset(geometry, 2, s, k)));
}

// policy 0: expert e keeps its first C slots in slot order. policy 1: its C slots of the largest
// key, ties to the lower slot: the C-th largest key T by a radix select on 4-bit digits (high to
// low), then every slot above T and the first `equal` slots at T.
__kernel void moe_expert_capacity(__global const long *geometry, __global const index_t *expert_idx,
                                  ulong expert_idx_index, __global count_t *kept_idx,
                                  ulong kept_idx_index, __global const storage_t *weights,
                                  __global const bits_t *weight_bits, ulong weights_index,
                                  __global bits_t *weights_out, ulong weights_out_index,
                                  ulong slots, ulong k, ulong E, ulong C, int policy,
                                  int has_weights_out) {
  const ulong e = get_global_id(0);
  __global const index_t *idx = expert_idx + expert_idx_index;
  uint threshold = 0;
  ulong equal = C;  // slots at the threshold still kept (policy 1), or the capacity (policy 0)
  if (policy == 1 && e < E) {
    ulong n = 0;
    for (ulong s = 0; s < slots; ++s) n += (ulong)idx[view_offset(geometry, 0, s, k)] == e;
    if (n <= C) {
      equal = C;  // keeps all: every key is >= 0
    } else {
      uint prefix = 0, mask = 0;
      ulong remaining = C;  // the rank of T among the keys under the prefix, from 1
      for (int shift = 28; shift >= 0; shift -= 4) {
        ulong hist[16];
        for (int i = 0; i < 16; ++i) hist[i] = 0;
        for (ulong s = 0; s < slots; ++s) {
          if ((ulong)idx[view_offset(geometry, 0, s, k)] != e) continue;
          const uint key = slot_key(geometry, weights, weights_index, s, k);
          if ((key & mask) == prefix) ++hist[(key >> shift) & 15u];
        }
        int digit = 15;
        for (; digit > 0; --digit) {
          if (hist[digit] >= remaining) break;
          remaining -= hist[digit];
        }
        prefix |= (uint)digit << shift;
        mask |= 15u << shift;
      }
      threshold = prefix;
      equal = remaining;
    }
  }
  ulong taken = 0;
  for (ulong s = 0; s < slots; ++s) {
    const ulong expert = (ulong)idx[view_offset(geometry, 0, s, k)];
    if (expert != e) continue;
    bool kept = false;
    if (e < E) {
      if (policy == 0) {
        kept = taken++ < C;
      } else {
        const uint key = slot_key(geometry, weights, weights_index, s, k);
        kept = key > threshold || (key == threshold && taken++ < equal);
      }
    }
    kept_idx[kept_idx_index + view_offset(geometry, 1, s, k)] = kept ? (count_t)e : (count_t)E;
    if (has_weights_out)
      weights_out[weights_out_index + view_offset(geometry, 3, s, k)] =
          kept ? weight_bits[weights_index + view_offset(geometry, 2, s, k)] : (bits_t)0;
  }
}
