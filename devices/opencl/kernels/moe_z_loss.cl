// SPDX-License-Identifier: Apache-2.0
// MoeZLoss and MoeZLossGrad (src/ops/moe_z_loss.h; docs/moe_z_loss.md), built after `common` and
// moe_gating.cl, whose row_of, row_max, softmax_denominator (the 16-slot sum of exp_minus),
// exp_minus and divide they share with the routers: the cpu device's operations in the cpu
// device's order, so the same bits. The forward: one work-item per block of BLOCK_ROWS rows sums
// z_t = lse_t^2 in row order from +0 into the workspace, then one work-item adds the blocks' sums
// in block order from +0 and scales. The grad: one work-item per row.

// The views uploaded by the host (moe_gating.cl's GEOMETRY longs each).
#define ZVIEW_X 0
#define ZVIEW_GRAD_X 1

// Row r's lse = m + log(S) (m = +-inf: m itself; a NaN: NaN); *sum takes S where m is finite.
INLINE float row_lse(const __global storage_t *x, row_t xr, ulong E, float *m_out, float *sum) {
  const float m = row_max(x, xr, E);
  *m_out = m;
  if (isinf(m)) return m;
  const float S = softmax_denominator(x, xr, E, m);
  *sum = S;
  return m + log_f32(S);
}

__kernel void moe_z_loss_blocks(const __global long *geometry, const __global storage_t *x,
                                ulong x_index, __global float *block_sums, ulong sums_index,
                                ulong T, ulong E, ulong block_rows) {
  const ulong b = get_global_id(0);
  const ulong begin = b * block_rows;
  const ulong end = min(T, begin + block_rows);
  float sum = 0.0f;
  for (ulong r = begin; r < end; ++r) {
    float m = 0.0f, S = 0.0f;
    const float lse = row_lse(x, row_of(geometry, ZVIEW_X, x_index, r), E, &m, &S);
    sum += lse * lse;
  }
  block_sums[sums_index + b] = sum;
}

__kernel void moe_z_loss_finish(__global float *loss, ulong loss_index,
                                const __global float *block_sums, ulong sums_index, ulong blocks,
                                float scale) {
  float total = 0.0f;
  for (ulong b = 0; b < blocks; ++b) total += block_sums[sums_index + b];
  store_f32(loss, loss_index, total * scale);
}

// grad_x_tj = gs (lse_t (e_tj / S_t)), gs = g scale; NaN on a row whose lse is not finite.
__kernel void moe_z_loss_grad(const __global long *geometry, __global storage_t *grad_x,
                              ulong grad_x_index, const __global float *grad_loss,
                              ulong grad_loss_index, const __global storage_t *x, ulong x_index,
                              ulong E, float scale) {
  const ulong r = get_global_id(0);
  const row_t xr = row_of(geometry, ZVIEW_X, x_index, r);
  const row_t gr = row_of(geometry, ZVIEW_GRAD_X, grad_x_index, r);
  const float gs = grad_loss[grad_loss_index] * scale;
  float m = 0.0f, S = 0.0f;
  const float lse = row_lse(x, xr, E, &m, &S);
  if (!isfinite(lse)) {
    for (ulong j = 0; j < E; ++j) store_value(grad_x, element(gr, j), CANONICAL_NAN);
    return;
  }
  for (ulong j = 0; j < E; ++j)
    store_value(grad_x, element(gr, j), gs * (lse * divide(exp_minus(m - X_AT(j)), S)));
}
