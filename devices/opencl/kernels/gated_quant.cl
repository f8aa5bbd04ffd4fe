// SPDX-License-Identifier: Apache-2.0
// SwiGluQuant, GeluMulQuant and ClippedSwigluQuant (src/ops/gated_quant.h; docs/swiglu_quant.md),
// built after `common` and quant.cl with -DEXACT_FORMULAS (rounded.cl's formulas in double, also
// for F32 x). Every value is devices/cpu_reference/gated_quant.cc's, the same double operations in
// the same order (src/exact/gated.h, quant.h restated), so every byte of y and every bit of a
// scale is the reference's. One work-item per (group, row) (global ids 0, 1): it recomputes its
// group's values twice, once for the amax (dynamic) and once for the bytes, as a group can be any
// length.

// The views (views.cl, in `common`), in the order the host uploads them:
#define QVIEW_X 0
#define QVIEW_Y 1
#define QVIEW_SCALE 2
#define QVIEW_SMOOTH 3
#define QVIEW_GROUP_INDEX 4

// The activation (GateActivation) and the output format (QuantFormat), as the host passes them.
#define ACT_SILU 0u
#define ACT_GELU_ERF 1u
#define ACT_GELU_TANH 2u
#define ACT_CLIPPED 3u

// ClippedSwigluQuant's gate (ClippedSwigluAttributes, clamp_mode 0): alpha, limit, bias, a_limit.
typedef struct {
  float alpha, limit, bias, a_limit;
} clipped_gate_attributes_t;

// ops/gated_quant.h's smoothRowOf: the smooth scales' row of x's row r, -1 past the counts' sum
// (which the host has checked: each >= 0, sum <= rows); 0 without group_index.
INLINE long smooth_row_of(const __global long *geometry, const __global long *group_index,
                          ulong group_index_index, ulong experts, ulong r) {
  if (experts == 0) return 0;
  const row_t counts = row_of(geometry, QVIEW_GROUP_INDEX, group_index_index, 0);
  ulong end = 0;
  for (ulong e = 0; e < experts; ++e) {
    end += (ulong)group_index[element(counts, e)];
    if (r < end) return (long)e;
  }
  return -1;
}

// exact::Gated<Act>: timesNegativeTail(x2, Act(x1), x1), x1 the activation's input; clipped:
// exact::ClippedSwiglu (clamp_mode 0) of (A, B) = (x1, x2).
INLINE double gated_exact(uint activation, clipped_gate_attributes_t at, float x1, float x2) {
  if (activation == ACT_CLIPPED) {
    const clipped_exact_t c = clipped_exact(at.alpha, at.limit, at.a_limit, x1, x2);
    return times_gate_exact(c.b + at.bias, c.g, c.a);
  }
  const double act = activation == ACT_SILU       ? silu_exact(x1)
                     : activation == ACT_GELU_ERF ? gelu_erf_exact(x1)
                                                  : gelu_tanh_exact(x1);
  return times_negative_tail_exact(x2, act, x1);
}

// z of column c: the gated value, times its smooth scale (F32 as double) where there is one.
// The columns are ops/gated_quant.h's gateColumn and multiplierColumn (split: 0 halves, 1
// interleaved, for the clipped gate; activate_left for the others).
INLINE double z_at(const __global storage_t *x, row_t xr, const __global float *smooth, row_t sr,
                   uint has_smooth, uint activation, clipped_gate_attributes_t at,
                   uint activate_left, uint interleaved, ulong H, ulong c) {
  const bool clipped = activation == ACT_CLIPPED;
  const ulong gate = clipped ? (interleaved ? 2 * c : c) : (activate_left ? c : H + c);
  const ulong multiplier =
      clipped ? (interleaved ? 2 * c + 1 : H + c) : (activate_left ? H + c : c);
  const double a = gated_exact(activation, at, load_value(x, element(xr, gate)),
                               load_value(x, element(xr, multiplier)));
  return has_smooth ? a * (double)smooth[element(sr, c)] : a;
}

__kernel void gated_quant(const __global long *geometry, __global uchar *y, ulong y_index,
                          __global float *scale, ulong scale_index, const __global storage_t *x,
                          ulong x_index, const __global float *smooth, ulong smooth_index,
                          const __global long *group_index, ulong group_index_index, ulong H,
                          ulong group_size, ulong experts, uint activation, uint activate_left,
                          uint fp8, uint dynamic, uint power_of_two, uint has_smooth,
                          uint interleaved, float alpha, float limit, float bias, float a_limit) {
  const clipped_gate_attributes_t at = {alpha, limit, bias, a_limit};
  const ulong g = get_global_id(0), r = get_global_id(1);
  const ulong begin = g * group_size, end = begin + group_size;
  const row_t yr = row_of(geometry, QVIEW_Y, y_index, r);
  const ulong scale_at = element(row_of(geometry, QVIEW_SCALE, scale_index, r), g);
  const long e = smooth_row_of(geometry, group_index, group_index_index, experts, r);
  if (e < 0) {  // past group_index's counts
    for (ulong c = begin; c < end; ++c) y[element(yr, c)] = 0;
    if (dynamic) scale[scale_at] = 0.0f;
    return;
  }
  const row_t xr = row_of(geometry, QVIEW_X, x_index, r);
  const row_t sr = row_of(geometry, QVIEW_SMOOTH, smooth_index, (ulong)e);
  float s;
  if (dynamic) {
    double amax = 0.0;
    for (ulong c = begin; c < end; ++c) {
      const double z =
          z_at(x, xr, smooth, sr, has_smooth, activation, at, activate_left, interleaved, H, c);
      amax = isnan(z) || isnan(amax) ? (double)NAN : fmax(amax, fabs(z));
    }
    s = dynamic_scale(amax, fp8, power_of_two);
    scale[scale_at] = s;
  } else {
    s = scale[scale_at];
  }
  for (ulong c = begin; c < end; ++c) {
    const double z =
        z_at(x, xr, smooth, sr, has_smooth, activation, at, activate_left, interleaved, H, c);
    y[element(yr, c)] = quantize_byte(z / (double)s, fp8);
  }
}
