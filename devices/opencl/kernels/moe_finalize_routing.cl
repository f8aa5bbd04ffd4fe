// MoeFinalizeRoutingV2 and its grad (src/ops/moe_finalize_routing.h has the formulas), built
// after common.cl. Each result is summed in F32 in a fixed order, with the fma() steps and the
// operand order of devices/cpu/moe_finalize_routing.cc, so runs are bit-identical and the
// forward and grad_expanded_x match the cpu device bit for bit.

// gather::RowView: element (row, j) is at index + (row / block) * block_stride
// + (row % block) * row_stride + j * col_stride, `index` being the view's base in its buffer.
typedef struct {
  ulong index, block;
  long block_stride, row_stride, col_stride;
} row_view_t;

// gather::TableView and gather::IndexView: element (r, c) is at index + r * row_stride
// + c * col_stride.
typedef struct {
  ulong index;
  long row_stride, col_stride;
} table_view_t;

// Which optional operands a call has (the others are dummy buffers, never read).
#define HAS_X1 1u
#define HAS_X2 2u
#define HAS_BIAS 4u
#define HAS_SCALES 8u

inline ulong row_element(row_view_t v, ulong row, ulong j) {
  return (ulong)((long)v.index + (long)(row / v.block) * v.block_stride +
                 (long)(row % v.block) * v.row_stride + (long)j * v.col_stride);
}

inline ulong table_element(table_view_t v, ulong r, ulong c) {
  return (ulong)((long)v.index + (long)r * v.row_stride + (long)c * v.col_stride);
}

// out[r][j] = x1 + x2 + sum over k = 0..K-1 of scale * (expanded_x[index] + bias[expert]): one
// work-item per output element. `rows` is expanded_x's row count; indices outside [0, rows)
// (the dropped -1) bring a zero row, the bias still counts.
__kernel void moe_forward(__global storage_t *out, row_view_t out_v,
                          const __global storage_t *expanded, row_view_t expanded_v,
                          const __global storage_t *x1, row_view_t x1_v,
                          const __global storage_t *x2, row_view_t x2_v,
                          const __global storage_t *bias, row_view_t bias_v,
                          const __global storage_t *scales, table_view_t scales_v,
                          const __global int *row_index, table_view_t row_index_v,
                          const __global int *expert_index, table_view_t expert_index_v,
                          ulong tokens, ulong topk, ulong hidden, ulong rows, uint flags) {
  const ulong id = get_global_id(0);
  if (id >= tokens * hidden) return;
  const ulong r = id / hidden, j = id % hidden;
  // As cpu's LoadRow: x1 + x2, or the one present, or 0.
  float acc = 0.0f;
  if ((flags & HAS_X1) && (flags & HAS_X2))
    acc = load_value(x1, row_element(x1_v, r, j)) + load_value(x2, row_element(x2_v, r, j));
  else if (flags & HAS_X1)
    acc = load_value(x1, row_element(x1_v, r, j));
  for (ulong k = 0; k < topk; ++k) {
    const long index = row_index[table_element(row_index_v, r, k)];
    float term = index >= 0 && (ulong)index < rows
                     ? load_value(expanded, row_element(expanded_v, (ulong)index, j))
                     : 0.0f;
    if (flags & HAS_BIAS) {
      const ulong expert = (ulong)expert_index[table_element(expert_index_v, r, k)];
      term = term + load_value(bias, row_element(bias_v, expert, j));
    }
    const float scale =
        (flags & HAS_SCALES) ? load_value(scales, table_element(scales_v, r, k)) : 1.0f;
    acc = fma(scale, term, acc);
  }
  store_value(out, row_element(out_v, r, j), acc);
}

// grad_expanded_x[d][j] = sum over the positions i reaching d, in increasing order, of
// scale(i) * grad_y[i / K][j]; one work-item per element. `inverse` is gather::Inverse laid out
// as first[rows + 1] then sources. A row reached once is the product rounded once (cpu's sole
// row), others an fma chain from +0 (cpu's destination pass; unreached rows are +0).
__kernel void moe_grad_expanded(__global storage_t *grad_x, row_view_t grad_x_v,
                                const __global storage_t *grad_y, row_view_t grad_y_v,
                                const __global storage_t *scales, table_view_t scales_v,
                                const __global int *inverse, ulong inverse_index, ulong rows,
                                ulong topk, ulong hidden, uint flags) {
  const ulong id = get_global_id(0);
  if (id >= rows * hidden) return;
  const ulong d = id / hidden, j = id % hidden;
  const __global int *first = inverse + inverse_index;
  const __global int *sources = first + rows + 1;
  const int begin = first[d], end = first[d + 1];
  float acc = 0.0f;
  for (int s = begin; s < end; ++s) {
    const ulong position = (ulong)sources[s];
    const ulong r = position / topk, k = position % topk;
    const float scale =
        (flags & HAS_SCALES) ? load_value(scales, table_element(scales_v, r, k)) : 1.0f;
    const float g = load_value(grad_y, row_element(grad_y_v, r, j));
    acc = end - begin == 1 ? g * scale : fma(scale, g, acc);
  }
  store_value(grad_x, row_element(grad_x_v, d, j), acc);
}

// The largest work-group moe_grad_scales is launched with (its local array).
#define MAX_GROUP 256

// grad_scales[r][k] = sum_j (expanded_x[index][j] + bias[expert][j]) * grad_y[r][j]: one
// work-group (a power of two of at most MAX_GROUP items) per position; item l sums j = l, l + G,
// ... with fma, then a fixed local-memory tree adds the G partial sums. The shape depends only
// on G, which is fixed per descriptor, so results are the same from run to run.
__kernel void moe_grad_scales(__global storage_t *grad_scales, table_view_t grad_scales_v,
                              const __global storage_t *grad_y, row_view_t grad_y_v,
                              const __global storage_t *expanded, row_view_t expanded_v,
                              const __global storage_t *bias, row_view_t bias_v,
                              const __global int *row_index, table_view_t row_index_v,
                              const __global int *expert_index, table_view_t expert_index_v,
                              ulong topk, ulong hidden, ulong rows, uint flags) {
  __local float partial[MAX_GROUP];
  const ulong position = get_group_id(0);
  const uint l = get_local_id(0), group = get_local_size(0);
  const ulong r = position / topk, k = position % topk;
  const long index = row_index[table_element(row_index_v, r, k)];
  const bool reached = index >= 0 && (ulong)index < rows;
  ulong expert = 0;
  if (flags & HAS_BIAS) expert = (ulong)expert_index[table_element(expert_index_v, r, k)];
  float acc = 0.0f;
  for (ulong j = l; j < hidden; j += group) {
    // As cpu's LoadSum: expanded + bias, or the one present, or 0.
    float v = 0.0f;
    if (reached && (flags & HAS_BIAS))
      v = load_value(expanded, row_element(expanded_v, (ulong)index, j)) +
          load_value(bias, row_element(bias_v, expert, j));
    else if (reached)
      v = load_value(expanded, row_element(expanded_v, (ulong)index, j));
    else if (flags & HAS_BIAS)
      v = load_value(bias, row_element(bias_v, expert, j));
    acc = fma(v, load_value(grad_y, row_element(grad_y_v, r, j)), acc);
  }
  partial[l] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint width = group / 2; width > 0; width /= 2) {
    if (l < width) partial[l] += partial[l + width];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l == 0) store_value(grad_scales, table_element(grad_scales_v, r, k), partial[0]);
}
