// SPDX-License-Identifier: Apache-2.0
// The router operators (src/ops/moe_gating.h; docs/moe_gating_top_k_softmax.md and
// docs/moe_gating_top_k.md have the arithmetic), built after `common` (storage.cl, math.cl,
// rounded.cl). One work-item per row (global id 0): every sum of a row is then one fixed chain, the
// same operations in the same order as devices/cpu's, so every output has the cpu device's bits.
// Any E and k: the selection keeps the k best in private arrays for k <= SMALL_K, and above makes k
// passes over the row, pass i taking the best key ranked after pass i - 1's (the order is total),
// so it needs no per-row marks. The forwards keep p (and MoeGatingTopK its group scores) in the
// workspace, a row of floats per row; the grads recompute p and need none.
#pragma OPENCL FP_CONTRACT OFF

// The index dtypes (INT32 or INT64, each its own) and bias's (x's storage, or F32 with
// -DBIAS_F32), as the host builds the program.
#ifndef EXPERT_INDEX_T
#define EXPERT_INDEX_T int
#endif
#ifndef ROW_INDEX_T
#define ROW_INDEX_T int
#endif
typedef EXPERT_INDEX_T expert_index_t;
typedef ROW_INDEX_T row_index_t;
#ifdef BIAS_F32
typedef float bias_t;
INLINE float load_bias(const __global bias_t *p, ulong i) {
  return p[i];
}
#else
typedef storage_t bias_t;
#define load_bias load_value
#endif

// a / b, one IEEE division rounded to nearest even (the cpu device's): the operator with
// -cl-fp32-correctly-rounded-divide-sqrt where the device has it (-DDIVIDE_OPERATOR), else in
// double (a quotient of two floats rounded to 53 bits, then to 24, is the one rounded to 24).
#if defined(DIVIDE_OPERATOR)
INLINE float divide(float a, float b) {
  return a / b;
}
#elif defined(cl_khr_fp64)
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
INLINE float divide(float a, float b) {
  return (float)((double)a / (double)b);
}
#else
// Neither: the driver's division (docs/devices.md: bits may then differ from the cpu device's).
INLINE float divide(float a, float b) {
  return a / b;
}
#endif

// The views (views.cl, in `common`) of the router programs:
#define VIEW_Y 0
#define VIEW_EXPERT_IDX 1
#define VIEW_ROW_IDX 2
#define VIEW_PROBS 3
#define VIEW_X 4
#define VIEW_FINISHED 5
#define VIEW_BIAS 6
#define VIEW_GRAD_X 7
#define VIEW_GRAD_Y 8

INLINE void store_f32(__global float *p, ulong i, float v) {
  p[i] = isnan(v) ? CANONICAL_NAN : v;
}

// exp(-a) for a = m - x_j >= 0 (the docs' exp): 0 beyond 87, where the library's exp stops; NaN
// stays NaN.
INLINE float exp_minus(float a) {
  return a > 87.0f ? 0.0f : exp_of_minus_sum(a, -0.0f);
}

// The library's sigmoid (the elementwise operators' Sigmoid, math-inl.h's Sigmoid::s, clamped to
// [-87, 60] by sigmoid_of's callers and itself), 0 below -87 (where it is below 2^-125.5, as
// cpu's SigmoidFloor); NaN stays NaN.
INLINE float sigmoid_value(float v) {
  const float s = sigmoid_of(fmax(v, -87.0f)).s;
  return isnan(v) ? v : (v < -87.0f ? 0.0f : s);
}

// sigmoid's slope p (1 - p) as (e p) p, e = exp(-v), without the cancellation of 1 - p (cpu's
// SigmoidSlopeFloor): for |v| <= 87, 0 beyond; NaN stays NaN. p is sigmoid_value(v).
INLINE float sigmoid_slope_value(float v, float p) {
  const bool beyond = fabs(v) > 87.0f;
  const float e = exp_of_minus_sum(beyond ? 0.0f : v, -0.0f);
  return isnan(v) ? v : (beyond ? 0.0f : (e * p) * p);
}

// sqrt(softplus(v))'s slope sigmoid(v) / (2 p) for v >= -87, p / 2 on [-172, -87), 0 below
// (cpu's SqrtSoftplusSlope); p is sqrt_softplus_f32(v).
INLINE float sqrt_softplus_slope(float v, float p) {
  return v < -87.0f ? (v < -172.0f ? 0.0f : p * 0.5f) : divide(sigmoid_value(v), p + p);
}

// MoeGatingTopK's elementwise p (score 1: sigmoid, 2: sqrt(softplus)) and its slope.
INLINE float elementwise_p(uint score, float v) {
  return score == 1 ? sigmoid_value(v) : sqrt_softplus_f32(v);
}
INLINE float elementwise_slope(uint score, float v, float p) {
  return score == 1 ? sigmoid_slope_value(v, p) : sqrt_softplus_slope(v, p);
}

// The row sum of the docs: 16 slots (element j into slot j % 16, each from +0 in increasing j),
// then slot i += slot i + 8, + 4, + 2, + 1.
#define SUM_SLOTS 16
INLINE float fold_slots(float *slot) {
  for (int width = SUM_SLOTS / 2; width > 0; width /= 2)
    for (int i = 0; i < width; ++i) slot[i] += slot[i + width];
  return slot[0];
}

// The selection order: key descending, NaN above +inf (NaNs equal), equal keys (+0 and -0 too)
// lower index first. True when (a, ia) comes before (b, ib).
INLINE bool ranks_before(float a, ulong ia, float b, ulong ib) {
  const bool a_nan = isnan(a), b_nan = isnan(b);
  if (a_nan != b_nan) return a_nan;
  if (a_nan || a == b) return ia < ib;
  return a > b;
}

// One selection pass over j in [0, n) of the best key ranked after (prev, prev_index) (the first
// pass: first != 0, nothing excluded); KEY(j) the key, ELIGIBLE(j) whether j may be taken.
// Leaves the result in best (n where nothing is eligible) and best_key.
#define SELECT_NEXT(n, KEY, ELIGIBLE, first, prev, prev_index, best, best_key) \
  do {                                                                         \
    best = (n);                                                                \
    best_key = 0.0f;                                                           \
    for (ulong j_ = 0; j_ < (n); ++j_) {                                       \
      if (!(ELIGIBLE(j_))) continue;                                           \
      const float key_ = KEY(j_);                                              \
      if (!(first) && !ranks_before(prev, prev_index, key_, j_)) continue;     \
      if (best == (n) || ranks_before(key_, j_, best_key, best)) {             \
        best = j_;                                                             \
        best_key = key_;                                                       \
      }                                                                        \
    }                                                                          \
  } while (0)
#define ALWAYS(j) true

// The first `count` of j in [0, n) (ELIGIBLE(j)) in selection order of KEY(j): EMIT(i, j, key)
// for i = 0..count-1 in order. Up to SMALL_K, one pass keeping the best `count` sorted in private
// arrays (most keys fail the first comparison); beyond, `count` SELECT_NEXT passes. The order is
// total, so both give the same selection (as the cpu device's TopK).
#define SMALL_K 32
#define FOR_EACH_TOP(n, KEY, ELIGIBLE, count, EMIT)                                            \
  do {                                                                                         \
    if ((count) <= SMALL_K) {                                                                  \
      float tk_[SMALL_K];                                                                      \
      ulong ti_[SMALL_K];                                                                      \
      ulong filled_ = 0;                                                                       \
      for (ulong j_ = 0; j_ < (n); ++j_) {                                                     \
        if (!(ELIGIBLE(j_))) continue;                                                         \
        const float key_ = KEY(j_);                                                            \
        if (filled_ == (count) && !ranks_before(key_, j_, tk_[(count)-1], ti_[(count)-1]))     \
          continue;                                                                            \
        ulong slot_ = filled_ < (count) ? filled_++ : (count)-1;                               \
        for (; slot_ > 0 && ranks_before(key_, j_, tk_[slot_ - 1], ti_[slot_ - 1]); --slot_) { \
          tk_[slot_] = tk_[slot_ - 1];                                                         \
          ti_[slot_] = ti_[slot_ - 1];                                                         \
        }                                                                                      \
        tk_[slot_] = key_;                                                                     \
        ti_[slot_] = j_;                                                                       \
      }                                                                                        \
      for (ulong i_ = 0; i_ < (count); ++i_) EMIT(i_, ti_[i_], tk_[i_]);                       \
    } else {                                                                                   \
      ulong prev_ = 0, best_ = 0;                                                              \
      float prev_key_ = 0.0f, best_key_ = 0.0f;                                                \
      for (ulong i_ = 0; i_ < (count); ++i_) {                                                 \
        SELECT_NEXT(n, KEY, ELIGIBLE, i_ == 0, prev_key_, prev_, best_, best_key_);            \
        EMIT(i_, best_, best_key_);                                                            \
        prev_ = best_;                                                                         \
        prev_key_ = best_key_;                                                                 \
      }                                                                                        \
    }                                                                                          \
  } while (0)

// x[r, j] of the row loaded as F32.
#define X_AT(j) load_value(x, element(xr, (j)))

// max over the row, NaN if any element is NaN (the docs' m).
INLINE float row_max(const __global storage_t *x, row_t xr, ulong E) {
  float m = -INFINITY;
  bool nan = false;
  for (ulong j = 0; j < E; ++j) {
    const float v = X_AT(j);
    nan = nan || isnan(v);
    m = v > m ? v : m;
  }
  return nan ? CANONICAL_NAN : m;
}

// S = the slot sum of e_j = exp(-(m - x_j)).
INLINE float softmax_denominator(const __global storage_t *x, row_t xr, ulong E, float m) {
  float slot[SUM_SLOTS];
  for (int i = 0; i < SUM_SLOTS; ++i) slot[i] = 0.0f;
  for (ulong j = 0; j < E; ++j) slot[j % SUM_SLOTS] += exp_minus(m - X_AT(j));
  return fold_slots(slot);
}

// p_j = e_j / S, recomputed (the same operations give the same bits).
#define SOFTMAX_AT(j) divide(exp_minus(m - X_AT(j)), S)

// p = softmax(x) into p[0, E): e_j there first, summed in slots, then each divided by S (the
// cpu device's Softmax: the same operations as SOFTMAX_AT).
INLINE void softmax_into(const __global storage_t *x, row_t xr, ulong E, __global float *p) {
  const float m = row_max(x, xr, E);
  float slot[SUM_SLOTS];
  for (int i = 0; i < SUM_SLOTS; ++i) slot[i] = 0.0f;
  for (ulong j = 0; j < E; ++j) {
    const float e = exp_minus(m - X_AT(j));
    p[j] = e;
    slot[j % SUM_SLOTS] += e;
  }
  const float S = fold_slots(slot);
  for (ulong j = 0; j < E; ++j) p[j] = divide(p[j], S);
}

// A row finished marks: y = 0 and expert_idx = E (the vendor's).
INLINE void finished_row(__global storage_t *y, row_t yr, __global expert_index_t *expert_idx,
                         row_t ir, ulong k, ulong E) {
  for (ulong i = 0; i < k; ++i) {
    store_value(y, element(yr, i), 0.0f);
    expert_idx[element(ir, i)] = (expert_index_t)E;
  }
}

// MoeGatingTopKSoftmax. scratch: the workspace's floats, row r's p at scratch_index + r * E.
__kernel void moe_gating_top_k_softmax(const __global long *geometry, __global storage_t *y,
                                       ulong y_index, __global expert_index_t *expert_idx,
                                       ulong expert_idx_index, __global row_index_t *row_idx,
                                       ulong row_idx_index, __global float *probs,
                                       ulong probs_index, const __global storage_t *x,
                                       ulong x_index, const __global uchar *finished,
                                       ulong finished_index, __global float *scratch,
                                       ulong scratch_index, ulong R, ulong E, ulong k, uint renorm,
                                       uint has_row_idx, uint has_probs, uint has_finished) {
  const ulong r = get_global_id(0);
  const row_t xr = row_of(geometry, VIEW_X, x_index, r);
  const row_t yr = row_of(geometry, VIEW_Y, y_index, r);
  const row_t ir = row_of(geometry, VIEW_EXPERT_IDX, expert_idx_index, r);
  if (has_row_idx) {
    const row_t rr = row_of(geometry, VIEW_ROW_IDX, row_idx_index, r);
    for (ulong i = 0; i < k; ++i) row_idx[element(rr, i)] = (row_index_t)(i * R + r);
  }
  const bool done =
      has_finished && finished[element(row_of(geometry, VIEW_FINISHED, finished_index, r), 0)];
  if (!renorm) {
    // p into the scratch row (and softmax_out), then the top k of p.
    __global float *p = scratch + scratch_index + r * E;
    softmax_into(x, xr, E, p);
    if (has_probs) {
      const row_t pr = row_of(geometry, VIEW_PROBS, probs_index, r);
      for (ulong j = 0; j < E; ++j) store_f32(probs, element(pr, j), p[j]);
    }
    if (done) {
      finished_row(y, yr, expert_idx, ir, k, E);
      return;
    }
#define P_AT(j) p[j]
#define EMIT_Y(i, j, key)                               \
  {                                                     \
    store_value(y, element(yr, (i)), (key));            \
    expert_idx[element(ir, (i))] = (expert_index_t)(j); \
  }
    FOR_EACH_TOP(E, P_AT, ALWAYS, k, EMIT_Y);
#undef EMIT_Y
#undef P_AT
    return;
  }
  if (done) {
    finished_row(y, yr, expert_idx, ir, k, E);
    return;
  }
  // renorm 1: the top k of x (indices first, into expert_idx), then their softmax over the k:
  // m = x_{s_0}, S the sum of e_i in selection order from +0.
  float m = 0.0f, S = 0.0f;
#define EMIT_X(i, j, key)                               \
  {                                                     \
    expert_idx[element(ir, (i))] = (expert_index_t)(j); \
    if ((i) == 0) m = (key);                            \
    S += exp_minus(m - (key));                          \
  }
  FOR_EACH_TOP(E, X_AT, ALWAYS, k, EMIT_X);
#undef EMIT_X
  for (ulong i = 0; i < k; ++i) {
    const ulong s = (ulong)expert_idx[element(ir, i)];
    store_value(y, element(yr, i), divide(exp_minus(m - X_AT(s)), S));
  }
}

// MoeGatingTopK's p into p[0, E): score 1 sigmoid(x), 2 sqrt(softplus(x)) per element, 0
// softmax(x) (MoeGatingWeights' too).
INLINE void top_k_probs_into(const __global storage_t *x, row_t xr, ulong E, uint score,
                             __global float *p) {
  if (score != 0) {
    for (ulong j = 0; j < E; ++j) p[j] = elementwise_p(score, X_AT(j));
  } else {
    softmax_into(x, xr, E, p);
  }
}

// MoeGatingTopK's y for the selection in expert_idx's row: y_i = (p_{s_i} / D) c, D = S + eps, S
// the p_{s_i} summed in order from +0 (MoeGatingWeights' too).
INLINE void top_k_weights(const __global float *p, const __global expert_index_t *expert_idx,
                          row_t ir, __global storage_t *y, row_t yr, ulong k, float S, float eps,
                          float c) {
  const float D = S + eps;
  for (ulong i = 0; i < k; ++i) {
    const ulong s = (ulong)expert_idx[element(ir, i)];
    store_value(y, element(yr, i), divide(p[s], D) * c);
  }
}

// MoeGatingTopK. scratch row r (at scratch_index + r * (E + groups)): p, then the group scores.
// Attributes: gsize = E / groups experts per group; k_group groups kept; best_of: a group's score
// is the sum of its best_of largest v (the host's RouterPlan::groupBest: 1, 2 or k / k_group);
// score 1: p = sigmoid(x), 2: p = sqrt(softplus(x)), 0: softmax(x); c = routed_scaling_factor.
__kernel void moe_gating_top_k(const __global long *geometry, __global storage_t *y, ulong y_index,
                               __global expert_index_t *expert_idx, ulong expert_idx_index,
                               __global float *probs, ulong probs_index,
                               const __global storage_t *x, ulong x_index,
                               const __global bias_t *bias, ulong bias_index,
                               __global float *scratch, ulong scratch_index, ulong E, ulong k,
                               ulong groups, ulong k_group, ulong best_of, uint score, float c,
                               float eps, uint has_probs, uint has_bias) {
  const ulong r = get_global_id(0);
  const row_t xr = row_of(geometry, VIEW_X, x_index, r);
  const row_t yr = row_of(geometry, VIEW_Y, y_index, r);
  const row_t ir = row_of(geometry, VIEW_EXPERT_IDX, expert_idx_index, r);
  const row_t br = has_bias ? row_of(geometry, VIEW_BIAS, bias_index, 0) : xr;
  __global float *p = scratch + scratch_index + r * (E + groups);
  __global float *group_score = p + E;
  top_k_probs_into(x, xr, E, score, p);
  if (has_probs) {
    const row_t pr = row_of(geometry, VIEW_PROBS, probs_index, r);
    for (ulong j = 0; j < E; ++j) store_f32(probs, element(pr, j), p[j]);
  }
  // v_j = p_j + bias_j, the selection's key.
#define V_AT(j) (has_bias ? p[j] + load_bias(bias, element(br, (j))) : p[j])
  const ulong gsize = E / groups;
  // The groups kept: the first k_group in the selection order of their scores; (last_key, last)
  // is the last kept, so group g is kept when it ranks at or before it.
  ulong last = 0;
  float last_key = 0.0f;
  if (groups > 1) {
    // A group's score: its largest v (best_of 1), or the sum of its best_of largest in selection
    // order from the first (one F32 add each).
    for (ulong g = 0; g < groups; ++g) {
      float sum = 0.0f;
#define GROUP_V(j) V_AT(g *gsize + (j))
#define EMIT_SCORE(i, j, key) sum = (i) == 0 ? (key) : sum + (key);
      FOR_EACH_TOP(gsize, GROUP_V, ALWAYS, best_of, EMIT_SCORE);
#undef EMIT_SCORE
#undef GROUP_V
      group_score[g] = sum;
    }
#define SCORE_AT(g) group_score[g]
#define EMIT_LAST(i, j, key) \
  {                          \
    last = (j);              \
    last_key = (key);        \
  }
    FOR_EACH_TOP(groups, SCORE_AT, ALWAYS, k_group, EMIT_LAST);
#undef EMIT_LAST
#undef SCORE_AT
  }
  // Expert j is selectable when its group was kept.
#define KEPT(j) \
  (groups == 1 || !ranks_before(last_key, last, group_score[(j) / gsize], (j) / gsize))
  float S = 0.0f;
#define EMIT_EXPERT(i, j, key)                          \
  {                                                     \
    expert_idx[element(ir, (i))] = (expert_index_t)(j); \
    S += p[j];                                          \
  }
  FOR_EACH_TOP(E, V_AT, KEPT, k, EMIT_EXPERT);
#undef EMIT_EXPERT
#undef KEPT
#undef V_AT
  top_k_weights(p, expert_idx, ir, y, yr, k, S, eps, c);
}

// MoeGatingWeights: MoeGatingTopK's p (into scratch row r, at scratch_index + r * E) and y for the
// given expert_idx (checked on the host to be in [0, E)).
__kernel void moe_gating_weights(const __global long *geometry, __global storage_t *y,
                                 ulong y_index, const __global expert_index_t *expert_idx,
                                 ulong expert_idx_index, const __global storage_t *x, ulong x_index,
                                 __global float *scratch, ulong scratch_index, ulong E, ulong k,
                                 uint score, float c, float eps) {
  const ulong r = get_global_id(0);
  const row_t xr = row_of(geometry, VIEW_X, x_index, r);
  const row_t yr = row_of(geometry, VIEW_Y, y_index, r);
  const row_t ir = row_of(geometry, VIEW_EXPERT_IDX, expert_idx_index, r);
  __global float *p = scratch + scratch_index + r * E;
  top_k_probs_into(x, xr, E, score, p);
  float S = 0.0f;
  for (ulong i = 0; i < k; ++i) S += p[(ulong)expert_idx[element(ir, i)]];
  top_k_weights(p, expert_idx, ir, y, yr, k, S, eps, c);
}

// g_i, the grads' grad_y[r, i].
#define LOAD_G(i) load_value(grad_y, element(gr, (i)))
// s_i, the grads' expert_idx[r, i] (checked on the host to be in [0, E)).
#define LOAD_S(i) ((ulong)expert_idx[element(ir, (i))])
// The grads read s_i and g_i once per (j, i): up to SMALL_K of them are staged in private arrays
// first (the selection's size in the forwards), beyond that read where used.
#define STAGE_SELECTION              \
  ulong s_[SMALL_K];                 \
  float g_[SMALL_K];                 \
  const bool staged_ = k <= SMALL_K; \
  if (staged_)                       \
    for (ulong i = 0; i < k; ++i) {  \
      s_[i] = LOAD_S(i);             \
      g_[i] = LOAD_G(i);             \
    }
#define S_AT(i) (staged_ ? s_[i] : LOAD_S(i))
#define G_AT(i) (staged_ ? g_[i] : LOAD_G(i))

// MoeGatingTopKSoftmaxGrad.
__kernel void moe_gating_top_k_softmax_grad(const __global long *geometry,
                                            __global storage_t *grad_x, ulong grad_x_index,
                                            const __global storage_t *grad_y, ulong grad_y_index,
                                            const __global storage_t *x, ulong x_index,
                                            const __global expert_index_t *expert_idx,
                                            ulong expert_idx_index, const __global uchar *finished,
                                            ulong finished_index, ulong E, ulong k, uint renorm,
                                            uint has_finished) {
  const ulong r = get_global_id(0);
  const row_t xr = row_of(geometry, VIEW_X, x_index, r);
  const row_t gxr = row_of(geometry, VIEW_GRAD_X, grad_x_index, r);
  const row_t gr = row_of(geometry, VIEW_GRAD_Y, grad_y_index, r);
  const row_t ir = row_of(geometry, VIEW_EXPERT_IDX, expert_idx_index, r);
  if (has_finished && finished[element(row_of(geometry, VIEW_FINISHED, finished_index, r), 0)]) {
    for (ulong j = 0; j < E; ++j) store_value(grad_x, element(gxr, j), 0.0f);
    return;
  }
  STAGE_SELECTION
  if (!renorm) {
    // d = sum_i g_i p_{s_i}; grad_x_j = p_j (G_j - d), G_j the g_i of the slots selecting j.
    const float m = row_max(x, xr, E);
    const float S = softmax_denominator(x, xr, E, m);
    float d = 0.0f;
    for (ulong i = 0; i < k; ++i) d += G_AT(i) * SOFTMAX_AT(S_AT(i));
    for (ulong j = 0; j < E; ++j) {
      float G = 0.0f;
      for (ulong i = 0; i < k; ++i)
        if (S_AT(i) == j) G += G_AT(i);
      store_value(grad_x, element(gxr, j), SOFTMAX_AT(j) * (G - d));
    }
    return;
  }
  // renorm 1: y_i = e_i / S over the given indices, m the max of their x; d = sum_i g_i y_i;
  // grad_x_j = sum over the slots selecting j of y_i (g_i - d), 0 elsewhere.
  float m = -INFINITY;
  bool nan = false;
  for (ulong i = 0; i < k; ++i) {
    const float v = X_AT(S_AT(i));
    nan = nan || isnan(v);
    m = v > m ? v : m;
  }
  m = nan ? CANONICAL_NAN : m;
  float S = 0.0f;
  for (ulong i = 0; i < k; ++i) S += exp_minus(m - X_AT(S_AT(i)));
#define Y_AT(i) divide(exp_minus(m - X_AT(S_AT(i))), S)
  float d = 0.0f;
  for (ulong i = 0; i < k; ++i) d += G_AT(i) * Y_AT(i);
  for (ulong j = 0; j < E; ++j) {
    float sum = 0.0f;
    for (ulong i = 0; i < k; ++i)
      if (S_AT(i) == j) sum += Y_AT(i) * (G_AT(i) - d);
    store_value(grad_x, element(gxr, j), sum);
  }
#undef Y_AT
}

// MoeGatingTopKGrad: p recomputed from x; w_i = p_{s_i}; D = sum_i w_i + eps; t = sum_i g_i w_i;
// grad_w_i = (c / D) (g_i - t / D); grad_p_j = the grad_w_i of the slots selecting j; sigmoid:
// grad_x_j = grad_p_j ((e_j p_j) p_j), e_j = exp(-x_j); sqrtsoftplus: grad_p_j times
// sqrt_softplus_slope; softmax: grad_x_j = p_j (grad_p_j - q), q =
// sum_i grad_w_i p_{s_i}.
__kernel void moe_gating_top_k_grad(const __global long *geometry, __global storage_t *grad_x,
                                    ulong grad_x_index, const __global storage_t *grad_y,
                                    ulong grad_y_index, const __global storage_t *x, ulong x_index,
                                    const __global expert_index_t *expert_idx,
                                    ulong expert_idx_index, ulong E, ulong k, uint score, float c,
                                    float eps) {
  const ulong r = get_global_id(0);
  const row_t xr = row_of(geometry, VIEW_X, x_index, r);
  const row_t gxr = row_of(geometry, VIEW_GRAD_X, grad_x_index, r);
  const row_t gr = row_of(geometry, VIEW_GRAD_Y, grad_y_index, r);
  const row_t ir = row_of(geometry, VIEW_EXPERT_IDX, expert_idx_index, r);
  STAGE_SELECTION
  float m = 0.0f, S = 1.0f;
  if (score == 0) {
    m = row_max(x, xr, E);
    S = softmax_denominator(x, xr, E, m);
  }
#define P_AT(j) (score != 0 ? elementwise_p(score, X_AT(j)) : SOFTMAX_AT(j))
  float sum = 0.0f, t = 0.0f;
  for (ulong i = 0; i < k; ++i) {
    const float w = P_AT(S_AT(i));
    sum += w;
    t += G_AT(i) * w;
  }
  const float D = sum + eps, c_over_D = divide(c, D), t_over_D = divide(t, D);
#define GRAD_W_AT(i) (c_over_D * (G_AT(i) - t_over_D))
  float q = 0.0f;
  if (score == 0)
    for (ulong i = 0; i < k; ++i) q += GRAD_W_AT(i) * P_AT(S_AT(i));
  for (ulong j = 0; j < E; ++j) {
    float grad_p = 0.0f;
    for (ulong i = 0; i < k; ++i)
      if (S_AT(i) == j) grad_p += GRAD_W_AT(i);
    const float pj = P_AT(j);
    const float value =
        score != 0 ? grad_p * elementwise_slope(score, X_AT(j), pj) : pj * (grad_p - q);
    store_value(grad_x, element(gxr, j), value);
  }
#undef GRAD_W_AT
#undef P_AT
}
