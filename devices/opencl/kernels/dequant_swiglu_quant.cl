// SPDX-License-Identifier: Apache-2.0
// DequantSwigluQuant (src/ops/dequant_swiglu_quant.h; docs/dequant_swiglu_quant.md), built after
// `common` and gated_quant.cl (whose quantize_byte, dynamic_scale and smooth_row_of it uses) with
// -DEXACT_FORMULAS, storage_t being a float bias's dtype (F32 otherwise). Every value is
// devices/cpu_reference/dequant_swiglu_quant.cc's, the same double operations in the same order
// (src/exact/dequant.h restated; FP_CONTRACT is off in `common`), so every byte of y and every bit
// of a scale is the reference's. One work-item per (group, row), as gated_quant: it recomputes its
// group's values twice, for the amax (dynamic) and for the bytes.

// The views after gated_quant.cl's QVIEW_X .. QVIEW_GROUP_INDEX (0 .. 4), as the host uploads them.
#define QVIEW_WEIGHT 5
#define QVIEW_ACTIVATION 6
#define QVIEW_BIAS 7

// The bias, as the host passes it.
#define BIAS_NONE 0u
#define BIAS_FLOAT 1u  // storage_t, added after the scales
#define BIAS_INT 2u    // INT32, added to the accumulator

// exact/dequant.h's dequantValue of column c: ((x + bias_i) w) s_a (+ bias_f), each step one
// double rounding; x + bias_i is exact in long.
INLINE double dequant_at(const __global int *x, row_t xr, const __global float *weight, row_t wr,
                         uint has_weight, double s_a, const __global storage_t *bias_f,
                         const __global int *bias_i, row_t br, uint bias, ulong c) {
  long acc = (long)x[element(xr, c)];
  if (bias == BIAS_INT) acc += (long)bias_i[element(br, c)];
  double d = (double)acc;
  d = d * (has_weight ? (double)weight[element(wr, c)] : 1.0);
  d = d * s_a;
  if (bias == BIAS_FLOAT) d = d + (double)load_value(bias_f, element(br, c));
  return d;
}

// z of column c: exact/dequant.h's siluGated(gate, multiplier), times its smooth scale.
INLINE double dequant_z_at(const __global int *x, row_t xr, const __global float *weight, row_t wr,
                           uint has_weight, double s_a, const __global storage_t *bias_f,
                           const __global int *bias_i, row_t br, uint bias,
                           const __global float *smooth, row_t sr, uint has_smooth,
                           uint activate_left, ulong H, ulong c) {
  const ulong gate = activate_left ? c : H + c, multiplier = activate_left ? H + c : c;
  const double g = dequant_at(x, xr, weight, wr, has_weight, s_a, bias_f, bias_i, br, bias, gate);
  const double m =
      dequant_at(x, xr, weight, wr, has_weight, s_a, bias_f, bias_i, br, bias, multiplier);
  const double a = times_negative_tail_exact(m, silu_exact(g), g);
  return has_smooth ? a * (double)smooth[element(sr, c)] : a;
}

__kernel void dequant_swiglu_quant(const __global long *geometry, __global uchar *y, ulong y_index,
                                   __global float *scale, ulong scale_index, const __global int *x,
                                   ulong x_index, const __global float *smooth, ulong smooth_index,
                                   const __global long *group_index, ulong group_index_index,
                                   const __global float *weight, ulong weight_index,
                                   const __global float *activation, ulong activation_index,
                                   const __global storage_t *bias_f, const __global int *bias_i,
                                   ulong bias_index, ulong H, ulong group_size, ulong experts,
                                   uint activate_left, uint fp8, uint dynamic, uint power_of_two,
                                   uint has_smooth, uint has_weight, uint weight_per_expert,
                                   uint has_activation, uint bias, uint bias_per_expert) {
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
  const row_t wr = row_of(geometry, QVIEW_WEIGHT, weight_index, weight_per_expert ? (ulong)e : 0);
  const row_t br = row_of(geometry, QVIEW_BIAS, bias_index, bias_per_expert ? (ulong)e : 0);
  const double s_a =
      has_activation
          ? (double)activation[element(row_of(geometry, QVIEW_ACTIVATION, activation_index, r), 0)]
          : 1.0;
  float s;
  if (dynamic) {
    double amax = 0.0;
    for (ulong c = begin; c < end; ++c) {
      const double z = dequant_z_at(x, xr, weight, wr, has_weight, s_a, bias_f, bias_i, br, bias,
                                    smooth, sr, has_smooth, activate_left, H, c);
      amax = isnan(z) || isnan(amax) ? (double)NAN : fmax(amax, fabs(z));
    }
    s = dynamic_scale(amax, fp8, power_of_two);
    scale[scale_at] = s;
  } else {
    s = scale[scale_at];
  }
  for (ulong c = begin; c < end; ++c) {
    const double z = dequant_z_at(x, xr, weight, wr, has_weight, s_a, bias_f, bias_i, br, bias,
                                  smooth, sr, has_smooth, activate_left, H, c);
    y[element(yr, c)] = quantize_byte(z / (double)s, fp8);
  }
}
