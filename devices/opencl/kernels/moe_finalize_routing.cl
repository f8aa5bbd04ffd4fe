// SPDX-License-Identifier: Apache-2.0
// MoeFinalizeRoutingV2 and its grad (src/ops/moe_finalize_routing.h has the formulas), built
// after `common` (storage.cl, math.cl, rounded.cl) and gather.cl. Each result is summed in F32 by one work-item in a fixed order,
// the order of devices/cpu/moe_finalize_routing.cc: the forward and grad_expanded_x use the same
// fma() steps and operands in the same order, and grad_scales the same fixed blocking of its dot
// product (SLOTS, sum_slots), so every output matches the cpu device bit for bit, at every
// Highway target.
#pragma OPENCL FP_CONTRACT OFF

// The index dtypes (INT32 or INT64, each its own) and scales' (the rows' storage, or F32 with
// -DSCALES_F32), as the host builds the program.
#ifndef ROW_INDEX_T
#define ROW_INDEX_T int
#endif
#ifndef EXPERT_INDEX_T
#define EXPERT_INDEX_T int
#endif
typedef ROW_INDEX_T row_index_t;
typedef EXPERT_INDEX_T expert_index_t;
#ifdef SCALES_F32
typedef float scale_t;
INLINE float load_scale(const __global scale_t *p, ulong i) {
  return p[i];
}
INLINE void store_scale(__global scale_t *p, ulong i, float v) {
  p[i] = isnan(v) ? CANONICAL_NAN : v;
}
#else
typedef storage_t scale_t;
#define load_scale load_value
#define store_scale store_value
#endif

// Which optional operands a call has (the others are dummy buffers, never read).
#define HAS_X1 1u
#define HAS_X2 2u
#define HAS_BIAS 4u
#define HAS_SCALES 8u

// The arguments of moe_forward and moe_forward_columns, and of moe_grad_expanded and
// moe_grad_expanded_columns (the host sets them alike; first_column is the scalar kernels').
#define FORWARD_PARAMS                                                                        \
  __global storage_t *out, row_view_t out_v, const __global storage_t *expanded,              \
      row_view_t expanded_v, const __global storage_t *x1, row_view_t x1_v,                   \
      const __global storage_t *x2, row_view_t x2_v, const __global storage_t *bias,          \
      row_view_t bias_v, const __global scale_t *scales, table_view_t scales_v,               \
      const __global row_index_t *row_index, table_view_t row_index_v,                        \
      const __global expert_index_t *expert_index, table_view_t expert_index_v, ulong tokens, \
      ulong topk, ulong hidden, ulong rows, uint flags, ulong first_column
#define GRAD_EXPANDED_PARAMS                                                                  \
  __global storage_t *grad_x, row_view_t grad_x_v, const __global storage_t *grad_y,          \
      row_view_t grad_y_v, const __global scale_t *scales, table_view_t scales_v,             \
      const __global int *inverse, ulong inverse_index, ulong rows, ulong topk, ulong hidden, \
      uint flags, ulong first_column

// out[r][j] = x1 + x2 + sum over k = 0..K-1 of scale * (expanded_x[index] + bias[expert]): one
// work-item per output element, (j, r) = global id (0, 1), each launched once (no bounds
// check). `rows` is expanded_x's row count; indices outside [0, rows) (the dropped -1) bring a
// zero row, the bias still counts.
__kernel void moe_forward(FORWARD_PARAMS) {
  const ulong j = first_column + get_global_id(0), r = get_global_id(1);
  // As cpu's LoadRow: x1 + x2, or the one present, or 0.
  float acc = 0.0f;
  if (flags & HAS_X1) acc = load_value(x1, at(row_base(x1_v, r), x1_v, j));
  if (flags & HAS_X2) acc = acc + load_value(x2, at(row_base(x2_v, r), x2_v, j));
  for (ulong k = 0; k < topk; ++k) {
    const long index = row_index[table_element(row_index_v, r, k)];
    float term = index >= 0 && (ulong)index < rows
                     ? load_value(expanded, at(row_base(expanded_v, (ulong)index), expanded_v, j))
                     : 0.0f;
    if (flags & HAS_BIAS) {
      const ulong expert = (ulong)expert_index[table_element(expert_index_v, r, k)];
      term = term + load_value(bias, at(row_base(bias_v, expert), bias_v, j));
    }
    const float scale =
        (flags & HAS_SCALES) ? load_scale(scales, table_element(scales_v, r, k)) : 1.0f;
    acc = fma(scale, term, acc);
  }
  store_value(out, at(row_base(out_v, r), out_v, j), acc);
}

// grad_expanded_x[d][j] = sum over the positions i reaching d, in increasing order, of
// scale(i) * grad_y[i / K][j]; one work-item per element, (j, d) = global id (0, 1), each
// launched once. `inverse` is gather::Inverse laid out as first[rows + 1] then sources. A row
// reached once is the product rounded once (cpu's sole row), others an fma chain from +0 (cpu's
// destination pass; unreached rows are +0).
__kernel void moe_grad_expanded(GRAD_EXPANDED_PARAMS) {
  const ulong j = first_column + get_global_id(0), d = get_global_id(1);
  const __global int *first = inverse + inverse_index;
  const __global int *sources = first + rows + 1;
  const int begin = first[d], end = first[d + 1];
  float acc = 0.0f;
  for (int s = begin; s < end; ++s) {
    const uint position = (uint)sources[s];  // < 2^31, as is topk
    const ulong r = position / (uint)topk, k = position % (uint)topk;
    const float scale =
        (flags & HAS_SCALES) ? load_scale(scales, table_element(scales_v, r, k)) : 1.0f;
    const float g = load_value(grad_y, at(row_base(grad_y_v, r), grad_y_v, j));
    acc = end - begin == 1 ? g * scale : fma(scale, g, acc);
  }
  store_value(grad_x, at(row_base(grad_x_v, d), grad_x_v, j), acc);
}

#ifdef UNIT_COLUMNS
// moe_forward and moe_grad_expanded on COLUMNS consecutive columns per work-item (float8
// vectors), from column COLUMNS x global id 0, with the same operations in the same order.
// Explicit vectors, because the data-dependent loop inside (over k, over sources) is the
// innermost one, which is all PoCL's vectorizer looks at; several of them per work-item share
// the index and scale loads. The host runs the scalar kernels on the last hidden % COLUMNS.
#define VECTORS 4
#define COLUMNS (8 * VECTORS)
__kernel void moe_forward_columns(FORWARD_PARAMS) {
  const ulong j = COLUMNS * get_global_id(0), r = get_global_id(1);
  float8 acc[VECTORS];
  for (int v = 0; v < VECTORS; ++v) {
    acc[v] = 0.0f;
    if (flags & HAS_X1) acc[v] = load8(x1, row_base(x1_v, r) + j + 8 * v);
    if (flags & HAS_X2) acc[v] = acc[v] + load8(x2, row_base(x2_v, r) + j + 8 * v);
  }
  for (ulong k = 0; k < topk; ++k) {
    const long index = row_index[table_element(row_index_v, r, k)];
    const bool reached = index >= 0 && (ulong)index < rows;
    const long expanded_base = reached ? row_base(expanded_v, (ulong)index) + (long)j : 0;
    long bias_base = 0;
    if (flags & HAS_BIAS)
      bias_base = row_base(bias_v, (ulong)expert_index[table_element(expert_index_v, r, k)]) + j;
    const float scale =
        (flags & HAS_SCALES) ? load_scale(scales, table_element(scales_v, r, k)) : 1.0f;
    for (int v = 0; v < VECTORS; ++v) {
      float8 term = 0.0f;
      if (reached) term = load8(expanded, expanded_base + 8 * v);
      if (flags & HAS_BIAS) term = term + load8(bias, bias_base + 8 * v);
      acc[v] = fma((float8)scale, term, acc[v]);
    }
  }
  const long out_base = row_base(out_v, r) + (long)j;
  for (int v = 0; v < VECTORS; ++v) store8(out, out_base + 8 * v, acc[v]);
}

__kernel void moe_grad_expanded_columns(GRAD_EXPANDED_PARAMS) {
  const ulong j = COLUMNS * get_global_id(0), d = get_global_id(1);
  const __global int *first = inverse + inverse_index;
  const __global int *sources = first + rows + 1;
  const int begin = first[d], end = first[d + 1];
  float8 acc[VECTORS];
  for (int v = 0; v < VECTORS; ++v) acc[v] = 0.0f;
  for (int s = begin; s < end; ++s) {
    const uint position = (uint)sources[s];
    const ulong r = position / (uint)topk, k = position % (uint)topk;
    const float scale =
        (flags & HAS_SCALES) ? load_scale(scales, table_element(scales_v, r, k)) : 1.0f;
    const long grad_y_base = row_base(grad_y_v, r) + (long)j;
    for (int v = 0; v < VECTORS; ++v) {
      const float8 g = load8(grad_y, grad_y_base + 8 * v);
      acc[v] = end - begin == 1 ? g * scale : fma((float8)scale, g, acc[v]);
    }
  }
  const long grad_x_base = row_base(grad_x_v, d) + (long)j;
  for (int v = 0; v < VECTORS; ++v) store8(grad_x, grad_x_base + 8 * v, acc[v]);
}
#endif

// The fixed blocking of a grad_scales dot product, the cpu device's (devices/cpu/rows-inl.h,
// kDotSlots): element j's product accumulates into slot j % SLOTS, each slot a chain of fma()
// from +0 in increasing j; then sum_slots adds the slots pairwise.
#define SLOTS 64

// Slot i + 32 added into slot i for i < 32, then i + 16 for i < 16, ..., then slot 1 into slot
// 0: the shape every grad_scales kernel ends with (cpu's DotSlotsSum). A NaN sum is the quiet NaN
// 0x7fc00000, whichever NaN the operations passed on.
INLINE float sum_slots(float *acc) {
  for (int width = SLOTS / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  return isnan(acc[0]) ? as_float(0x7fc00000u) : acc[0];
}

#ifdef UNIT_COLUMNS
// The slots of the unit-column kernels as eight float8 (slot 8 v + l in lane l of s<v>), named
// variables rather than an array, which PoCL kept in memory. EACH_SLOT_VECTOR(M, ...) expands
// M(s<v>, v, ...) for v = 0..7 in order; STORE_SLOT_VECTORS(acc) writes them to float acc[SLOTS].
#define SLOT_VECTORS \
  float8 s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f, s4 = 0.0f, s5 = 0.0f, s6 = 0.0f, s7 = 0.0f
// clang-format off
#define EACH_SLOT_VECTOR(M, ...) \
  M(s0, 0, __VA_ARGS__) M(s1, 1, __VA_ARGS__) M(s2, 2, __VA_ARGS__) M(s3, 3, __VA_ARGS__) \
  M(s4, 4, __VA_ARGS__) M(s5, 5, __VA_ARGS__) M(s6, 6, __VA_ARGS__) M(s7, 7, __VA_ARGS__)
// clang-format on
#define STORE_SLOT_VECTOR(s, v, acc) vstore8(s, v, acc);
#define STORE_SLOT_VECTORS(acc) EACH_SLOT_VECTOR(STORE_SLOT_VECTOR, acc)

// sum_slots of the eight vectors, in registers: the same additions in the same order (slot
// i + 32 is lane l of s<v + 4> for i = 8 v + l, and so on down to the lanes of s0).
INLINE float sum_slot_vectors(float8 s0, float8 s1, float8 s2, float8 s3, float8 s4, float8 s5,
                              float8 s6, float8 s7) {
  s0 += s4;  // + 32
  s1 += s5;
  s2 += s6;
  s3 += s7;
  s0 += s2;  // + 16
  s1 += s3;
  s0 += s1;                        // + 8
  const float4 q = s0.lo + s0.hi;  // + 4
  const float2 p = q.lo + q.hi;    // + 2
  const float sum = p.x + p.y;     // + 1
  return isnan(sum) ? as_float(0x7fc00000u) : sum;
}
#define SUM_SLOT_VECTORS sum_slot_vectors(s0, s1, s2, s3, s4, s5, s6, s7)
// A dot's term v = e + b at column i as a float8, in the grad_scales kernels' names.
#define TERM_EXPANDED_BIAS(i) (load8(expanded, expanded_base + (i)) + load8(bias, bias_base + (i)))
#define TERM_EXPANDED(i) load8(expanded, expanded_base + (i))
#define TERM_BIAS(i) load8(bias, bias_base + (i))
#define TERM_ZERO(i) ((float8)0.0f)  // 0 * grad_y: +0, or NaN for inf and NaN (as the cpu's)
#endif

// grad_scales[r][k] = sum_j (expanded_x[index][j] + bias[expert][j]) * grad_y[r][j]: one
// work-item per position r * K + k. (A work-group per position with a local-memory tree was
// 2 to 3 times slower on PoCL: its barriers cost more than the serial loop.)
__kernel void moe_grad_scales(__global scale_t *grad_scales, table_view_t grad_scales_v,
                              const __global storage_t *grad_y, row_view_t grad_y_v,
                              const __global storage_t *expanded, row_view_t expanded_v,
                              const __global storage_t *bias, row_view_t bias_v,
                              const __global row_index_t *row_index, table_view_t row_index_v,
                              const __global expert_index_t *expert_index,
                              table_view_t expert_index_v, ulong positions, ulong topk,
                              ulong hidden, ulong rows, uint flags) {
  const ulong position = get_global_id(0);
  const ulong r = (uint)position / (uint)topk, k = (uint)position % (uint)topk;  // < 2^31
  const long index = row_index[table_element(row_index_v, r, k)];
  const bool reached = index >= 0 && (ulong)index < rows;
  const bool has_bias = (flags & HAS_BIAS) != 0;
  const long expanded_base = reached ? row_base(expanded_v, (ulong)index) : 0;
  const long bias_base =
      has_bias ? row_base(bias_v, (ulong)expert_index[table_element(expert_index_v, r, k)]) : 0;
  const long grad_y_base = row_base(grad_y_v, r);
  float acc[SLOTS];
  for (int l = 0; l < SLOTS; ++l) acc[l] = 0.0f;
  ulong start = 0;
#ifdef UNIT_COLUMNS
  // The same slots as float8 vectors over whole blocks of SLOTS columns (same sums, same
  // order). One loop per case, each a bare stream of loads and fma.
  SLOT_VECTORS;
  const ulong whole = hidden / SLOTS * SLOTS;
#define SCALES_FMA(s, v, TERM) \
  s = fma(TERM(start + 8 * v), load8(grad_y, grad_y_base + start + 8 * v), s);
  if (reached && has_bias) {
    for (start = 0; start < whole; start += SLOTS) {
      EACH_SLOT_VECTOR(SCALES_FMA, TERM_EXPANDED_BIAS)
    }
  } else if (reached) {
    for (start = 0; start < whole; start += SLOTS) {
      EACH_SLOT_VECTOR(SCALES_FMA, TERM_EXPANDED)
    }
  } else if (has_bias) {
    for (start = 0; start < whole; start += SLOTS) {
      EACH_SLOT_VECTOR(SCALES_FMA, TERM_BIAS)
    }
  } else {
    for (start = 0; start < whole; start += SLOTS) {
      EACH_SLOT_VECTOR(SCALES_FMA, TERM_ZERO)
    }
  }
  if (whole == hidden) {
    store_scale(grad_scales, table_element(grad_scales_v, r, k), SUM_SLOT_VECTORS);
    return;
  }
  start = whole;
  STORE_SLOT_VECTORS(acc)
#endif
  for (ulong j0 = start; j0 < hidden; j0 += SLOTS) {
    for (int l = 0; l < SLOTS; ++l) {
      const ulong j = j0 + l;
      if (j >= hidden) break;
      // As cpu's LoadSum: expanded + bias, or the one present, or 0.
      float v = 0.0f;
      if (reached && has_bias)
        v = load_value(expanded, at(expanded_base, expanded_v, j)) +
            load_value(bias, at(bias_base, bias_v, j));
      else if (reached)
        v = load_value(expanded, at(expanded_base, expanded_v, j));
      else if (has_bias)
        v = load_value(bias, at(bias_base, bias_v, j));
      acc[l] = fma(v, load_value(grad_y, at(grad_y_base, grad_y_v, j)), acc[l]);
    }
  }
  store_scale(grad_scales, table_element(grad_scales_v, r, k), sum_slots(acc));
}

#ifdef UNIT_COLUMNS
// grad_expanded_x and grad_scales in one pass where every expanded row is reached by exactly one
// position (the host checks the inversion): position (r, k) writes its row d = row_index[r][k]
// as scale * grad_y[r] and sums its dot product while both rows are in registers, so grad_y is
// read once instead of once per pass (the bytes of the cpu device's fused pass). Same values,
// bit for bit, as moe_grad_expanded (a sole row is the product rounded once) and moe_grad_scales
// (same slots, same order).
__kernel void moe_grad_fused(__global storage_t *grad_x, row_view_t grad_x_v,
                             __global scale_t *grad_scales, table_view_t grad_scales_v,
                             const __global storage_t *grad_y, row_view_t grad_y_v,
                             const __global storage_t *expanded, row_view_t expanded_v,
                             const __global storage_t *bias, row_view_t bias_v,
                             const __global scale_t *scales, table_view_t scales_v,
                             const __global row_index_t *row_index, table_view_t row_index_v,
                             const __global expert_index_t *expert_index,
                             table_view_t expert_index_v, ulong topk, ulong hidden, uint flags) {
  const ulong position = get_global_id(0);
  const ulong r = (uint)position / (uint)topk, k = (uint)position % (uint)topk;  // < 2^31
  const ulong d = (ulong)row_index[table_element(row_index_v, r, k)];
  const bool has_bias = (flags & HAS_BIAS) != 0;
  const float scale =
      (flags & HAS_SCALES) ? load_scale(scales, table_element(scales_v, r, k)) : 1.0f;
  const long expanded_base = row_base(expanded_v, d), grad_x_base = row_base(grad_x_v, d);
  const long bias_base =
      has_bias ? row_base(bias_v, (ulong)expert_index[table_element(expert_index_v, r, k)]) : 0;
  const long grad_y_base = row_base(grad_y_v, r);
  const ulong whole = hidden / SLOTS * SLOTS;
  SLOT_VECTORS;
  // Column j + 8 v of grad_x written, and its dot term accumulated into s<v>.
#define FUSED_STEP(s, v, TERM)                       \
  {                                                  \
    const ulong i = j + 8 * v;                       \
    const float8 g = load8(grad_y, grad_y_base + i); \
    store8(grad_x, grad_x_base + i, g * scale);      \
    s = fma(TERM(i), g, s);                          \
  }
  if (has_bias) {
    for (ulong j = 0; j < whole; j += SLOTS) {
      EACH_SLOT_VECTOR(FUSED_STEP, TERM_EXPANDED_BIAS)
    }
  } else {
    for (ulong j = 0; j < whole; j += SLOTS) {
      EACH_SLOT_VECTOR(FUSED_STEP, TERM_EXPANDED)
    }
  }
  if (whole == hidden) {
    store_scale(grad_scales, table_element(grad_scales_v, r, k), SUM_SLOT_VECTORS);
    return;
  }
  float acc[SLOTS];
  STORE_SLOT_VECTORS(acc)
  for (ulong j = whole; j < hidden; ++j) {
    const float g = load_value(grad_y, (ulong)(grad_y_base + (long)j));
    store_value(grad_x, (ulong)(grad_x_base + (long)j), g * scale);
    float v = load_value(expanded, (ulong)(expanded_base + (long)j));
    if (has_bias) v = v + load_value(bias, (ulong)(bias_base + (long)j));
    acc[j - whole] = fma(v, g, acc[j - whole]);
  }
  store_scale(grad_scales, table_element(grad_scales_v, r, k), sum_slots(acc));
}
#endif
