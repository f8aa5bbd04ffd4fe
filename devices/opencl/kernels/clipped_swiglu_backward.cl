// SPDX-License-Identifier: Apache-2.0
// ClippedSwigluBackward: (dA, dB) <- (dy, A, B); dA is 0 where A > limit, dB where B is outside
// [-limit, limit] (the clamps' zero slopes). The fast path (math.cl's clipped_at) with dy (b +
// bias) from b + bias as a pair, and where a is not finite or a result fails fast_path_holds the
// exact one (clipped_gate). clamp_mode 1: dy b times silu's slope, dA 0 where A > a_pass (silu(A)
// > limit), and dB = dy min(silu(A), limit). Attributes as clipped_swiglu.cl.
#define NUM_OUTPUTS 2
#define NUM_INPUTS 3
INLINE void apply(float *out, const float *in, uint16 attributes) {
  const float alpha = as_float(attributes.s0), limit = as_float(attributes.s1);
  const float bias = as_float(attributes.s2);
  const float far_left_a = as_float(attributes.s3), tail_a = as_float(attributes.s4);
  const float a_limit = as_float(attributes.s5), a_pass = as_float(attributes.s6);
  const int clamp_mode = as_int(attributes.s7);
  const float dy = in[0], A = in[1], B = in[2];
  const clipped_at_t fast = clipped_at(alpha, limit, a_limit, bias, clamp_mode, far_left_a, A, B);
#ifdef RELAXED  // the relaxed mode's F32 gradients (cpu's ClippedSwigluBackward::Relaxed)
  const sigmoid_t sigmoid = fast.at.sigmoid;
  const float slope = fma(fmin(fast.z, 40.0f), sigmoid_slope(sigmoid), sigmoid.s);
  float dA = dy * fast.b_bias * slope;
  float dB = gate_clamped(clamp_mode, a_pass, limit, A, dy, dy * (fast.at.x * sigmoid.s));
#else
  // b + bias as a pair: its rounding would count in full where b is small (clamp_mode 1: b).
  float b_bias_lo = 0.0f, g_lo;
  const float b_bias = clamp_mode == 1 ? fast.b_bias : sum_pair(fast.b, bias, &b_bias_lo);
  const float g = product_pair(dy, b_bias, &g_lo);
  g_lo = fma(dy, b_bias_lo, g_lo);
  float dA = clipped_at_slope(fast, g, g_lo, true);
  float dB = gate_clamped(clamp_mode, a_pass, limit, A, dy, sigmoid_at_value(fast.at, dy));
#endif
  // the special values' exact path
  const bool exact =
      !(isfinite(fast.a) && !fast.far_left && fast_path_holds(dA) && fast_path_holds(dB));
  if (exact) {
    const clipped_gate_t c = clipped_gate(alpha, limit, a_limit, far_left_a, tail_a, A, B, true);
    // dy (b + bias) first, unless that alone overflows from finite factors (bias near
    // FLT_MAX): then dy slope first, which overflows only where dA does.
    const float b_bias_exact = clamp_mode == 1 ? c.b : c.b + bias, g_exact = dy * b_bias_exact;
    dA = unscale_tail((!isfinite(g_exact) && isfinite(dy) && isfinite(b_bias_exact))
                          ? dy * c.slope * b_bias_exact
                          : g_exact * c.slope,
                      c.unscale);
    dB = unscale_tail(gate_clamped(clamp_mode, a_pass, limit, A, dy, clipped_times_gate(c, dy)),
                      c.unscale);
  }
  const bool keep_a = A <= a_pass, keep_b = B >= -limit && B <= limit;
#ifdef ROUND_ONCE  // correctly rounded F16/BF16 (rounded.cl): the exact path's lanes always
  const float slope_factor = fmin(fast.z, 40.0f);
  const float condition = sigmoid_argument_condition(fast.at.sigmoid, fast.z, slope_factor);
  const float bound_a =
      exact ? INFINITY
            : error_bound(6.0f, fabs(g) * sigmoid_slope_terms(fast.at.sigmoid, slope_factor),
                          condition);
  const float bound_b = exact ? INFINITY : error_bound(6.0f, fabs(dB), condition);
  if ((keep_a && near_within(dA, bound_a)) || (keep_b && near_within(dB, bound_b))) {
    const clipped_exact_t c = clipped_exact(alpha, limit, a_limit, A, B);
    const double scale = clamp_mode == 1 ? (double)dy * c.b : (double)dy * (c.b + bias);
    const double gate = clamp_mode == 1 && A > a_pass ? (double)limit : c.g;
    dA = round_to_odd_float(times_negative_tail_exact(scale, silu_derivative_exact(c.z), c.z));
    dB = round_to_odd_float(times_gate_exact(dy, gate, c.a));
  }
#endif
  out[0] = keep_a ? dA : 0.0f;
  out[1] = keep_b ? dB : 0.0f;
}
