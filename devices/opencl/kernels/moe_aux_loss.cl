// SPDX-License-Identifier: Apache-2.0
// MoeAuxLoss and MoeAuxLossGrad (src/ops/moe_aux_loss.h; docs/moe_aux_loss.md), built after
// `common` and moe_gating.cl (whose row primitives, exp, sigmoid, slot sums and division, are the
// routers': the same operations in the same order as devices/cpu's, so the same bits). The
// forward: one work-item per block of BLOCK rows sums the rows' values in row order into the
// workspace, then one work-item adds the block sums in block order and scales once by K. The
// grad: one work-item per row.
#pragma OPENCL FP_CONTRACT OFF

// The dtype of tokens_per_expert (INT32 or INT64), as the host builds the program.
#ifndef COUNT_T
#define COUNT_T int
#endif
typedef COUNT_T count_t;

#define AUX_BLOCK 256
#define AUX_EPS 1e-20f
#define AUX_VIEW_X 0
#define AUX_VIEW_COUNTS 1
#define AUX_VIEW_GRAD_X 2

// n_{b,j} as F32 (exact: the host checked every count to be in [0, 2^24]).
#define N_AT(j) ((float)counts[element(nr, (j))])

// The row's scores: softmax (m, S: p_j = SOFTMAX_AT(j)) or the normalized sigmoid or sqrtsoftplus
// (D = slot sum of s_j + 1e-20, p_j = s_j / D). `score`: 1 sigmoid, 2 sqrtsoftplus; `sigmoid`:
// either (not softmax).
#define AUX_S_AT(j) (score == 1 ? sigmoid_value(X_AT(j)) : sqrt_softplus_f32(X_AT(j)))
#define AUX_P_AT(j) (sigmoid ? divide(AUX_S_AT(j), D) : SOFTMAX_AT(j))

// Sets m and S (softmax) or D (sigmoid) of row xr.
#define AUX_ROW_SETUP                                                       \
  float m = 0.0f, S = 1.0f, D = 1.0f;                                       \
  if (sigmoid) {                                                            \
    float slot_[SUM_SLOTS];                                                 \
    for (int i_ = 0; i_ < SUM_SLOTS; ++i_) slot_[i_] = 0.0f;                \
    for (ulong j_ = 0; j_ < E; ++j_) slot_[j_ % SUM_SLOTS] += AUX_S_AT(j_); \
    D = fold_slots(slot_) + AUX_EPS;                                        \
  } else {                                                                  \
    m = row_max(x, xr, E);                                                  \
    S = softmax_denominator(x, xr, E, m);                                   \
  }

// w = the slot sum of p_j n_j.
#define AUX_ROW_VALUE(w)                                                               \
  do {                                                                                 \
    float slot_[SUM_SLOTS];                                                            \
    for (int i_ = 0; i_ < SUM_SLOTS; ++i_) slot_[i_] = 0.0f;                           \
    for (ulong j_ = 0; j_ < E; ++j_) slot_[j_ % SUM_SLOTS] += AUX_P_AT(j_) * N_AT(j_); \
    w = fold_slots(slot_);                                                             \
  } while (0)

// sums[b] = the values v_t of block b's rows, in row order from +0.
__kernel void moe_aux_loss_blocks(const __global long *geometry, const __global storage_t *x,
                                  ulong x_index, const __global count_t *counts, ulong counts_index,
                                  __global float *sums, ulong sums_index, ulong T, ulong E, ulong B,
                                  uint score) {
  const bool sigmoid = score != 0;
  const ulong block = get_global_id(0);
  const ulong end = min(T, (block + 1) * AUX_BLOCK);
  float sum = 0.0f;
  for (ulong r = block * AUX_BLOCK; r < end; ++r) {
    const row_t xr = row_of(geometry, AUX_VIEW_X, x_index, r);
    const row_t nr = row_of(geometry, AUX_VIEW_COUNTS, counts_index, r % B);
    AUX_ROW_SETUP
    float v;
    AUX_ROW_VALUE(v);
    sum += v;
  }
  sums[sums_index + block] = sum;
}

// loss = (the block sums in block order from +0) K.
__kernel void moe_aux_loss_total(const __global float *sums, ulong sums_index, ulong blocks,
                                 __global float *loss, ulong loss_index, float K) {
  float total = 0.0f;
  for (ulong b = 0; b < blocks; ++b) total += sums[sums_index + b];
  store_f32(loss, loss_index, total * K);
}

// grad_x_j: softmax ((n_j - w) p_j) c; sigmoid (((n_j - w) slope_j) / D) c; c = grad_loss K,
// w = the row's value.
__kernel void moe_aux_loss_grad(const __global long *geometry, __global storage_t *grad_x,
                                ulong grad_x_index, const __global float *grad_loss,
                                ulong grad_loss_index, const __global storage_t *x, ulong x_index,
                                const __global count_t *counts, ulong counts_index, ulong E,
                                ulong B, uint score, float K) {
  const bool sigmoid = score != 0;
  const ulong r = get_global_id(0);
  const row_t xr = row_of(geometry, AUX_VIEW_X, x_index, r);
  const row_t nr = row_of(geometry, AUX_VIEW_COUNTS, counts_index, r % B);
  const row_t gxr = row_of(geometry, AUX_VIEW_GRAD_X, grad_x_index, r);
  const float c = grad_loss[grad_loss_index] * K;
  AUX_ROW_SETUP
  float w;
  AUX_ROW_VALUE(w);
  for (ulong j = 0; j < E; ++j) {
    const float dn = N_AT(j) - w;
    float value;
    if (sigmoid) {
      const float xj = X_AT(j);
      float slope;
      if (score == 1) {
        slope = sigmoid_slope_value(xj, sigmoid_value(xj));
      } else {  // sigmoid(x) / (r + r); r / 2 below -87; 0 where r = 0 (cpu's)
        const float root = sqrt_softplus_f32(xj);
        const float v = root > 0.0f ? divide(sigmoid_value(xj), root + root) : 0.0f;
        slope = isnan(xj) ? xj : (xj < -87.0f ? root * 0.5f : v);
      }
      value = divide(dn * slope, D) * c;
    } else {
      value = (dn * SOFTMAX_AT(j)) * c;
    }
    store_value(grad_x, element(gxr, j), value);
  }
}
