// SPDX-License-Identifier: Apache-2.0
// ClippedSwiglu: y <- (A, B), y = g (clamp(B) + bias), g = a sigmoid(alpha a), a = min(A, limit):
// the fast path (math.cl's clipped_at), and where a is not finite or y fails fast_path_holds the
// exact one (clipped_gate); the interleaved or halved split reaches the functor as two operands.
// clamp_mode 1: y = min(silu(A), limit) b, the gate's clamp where A > a_pass (gate_clamped).
// The attributes are ClippedSwigluAttributes (src/ops/clipped_swiglu.h): alpha, limit, bias,
// far_left_a, tail_a, a_limit, a_pass, clamp_mode.
#define NUM_OUTPUTS 1
#define NUM_INPUTS 2
INLINE void apply(float *out, const float *in, uint16 attributes) {
  const float alpha = as_float(attributes.s0), limit = as_float(attributes.s1);
  const float bias = as_float(attributes.s2);
  const float far_left_a = as_float(attributes.s3), tail_a = as_float(attributes.s4);
  const float a_limit = as_float(attributes.s5), a_pass = as_float(attributes.s6);
  const int clamp_mode = as_int(attributes.s7);
  const float A = in[0], B = in[1];
  const clipped_at_t fast = clipped_at(alpha, limit, a_limit, bias, clamp_mode, far_left_a, A, B);
#ifdef RELAXED  // the relaxed mode's F32 value (math.cl)
  float y = over_one_plus_exp_relaxed(fast.b_bias * fast.at.x, fmin(fast.z, 60.0f));
#else
  float y = sigmoid_at_value(fast.at, fast.b_bias);
#endif
  y = gate_clamped(clamp_mode, a_pass, limit, A, fast.b, y);
  const bool exact = !(isfinite(fast.a) && !fast.far_left && fast_path_holds(y));
  if (exact) {  // the exact path
    const clipped_gate_t c = clipped_gate(alpha, limit, a_limit, far_left_a, tail_a, A, B, false);
    const float b_bias = clamp_mode == 1 ? c.b : c.b + bias;
    y = unscale_tail(gate_clamped(clamp_mode, a_pass, limit, A, c.b, clipped_times_gate(c, b_bias)),
                     c.unscale);
  }
#ifdef ROUND_ONCE  // correctly rounded F16/BF16 (rounded.cl): the exact path's lanes always
  const float condition = sigmoid_argument_condition(fast.at.sigmoid, fast.z, fmin(fast.z, 40.0f));
  if (near_within(y, exact ? INFINITY : error_bound(4.0f, fabs(y), condition))) {
    const clipped_exact_t c = clipped_exact(alpha, limit, a_limit, A, B);
    y = round_to_odd_float(clamp_mode != 1 ? times_gate_exact(c.b + bias, c.g, c.a)
                           : A > a_pass    ? (double)limit * c.b
                                           : times_gate_exact(c.b, c.g, c.a));
  }
#endif
  out[0] = y;
}
