// SPDX-License-Identifier: Apache-2.0
// ClippedSwiglu: y <- (A, B), y = g (clamp(B) + bias), g = a sigmoid(alpha a), a = min(A, limit):
// the fast path (common.cl's clipped_at), and where a is not finite or y fails fast_path_holds the
// exact one (clipped_gate); the interleaved or halved split reaches the functor as two operands.
// The attributes are ClippedSwigluAttributes (src/ops/clipped_swiglu.h): alpha, limit, bias,
// far_left_a, tail_a.
#define NUM_OUTPUTS 1
#define NUM_INPUTS 2
INLINE void apply(float *out, const float *in, uint16 attributes) {
  const float alpha = as_float(attributes.s0), limit = as_float(attributes.s1);
  const float bias = as_float(attributes.s2);
  const float far_left_a = as_float(attributes.s3), tail_a = as_float(attributes.s4);
  const clipped_at_t fast = clipped_at(alpha, limit, bias, far_left_a, in[0], in[1]);
#ifdef RELAXED  // the relaxed mode's F32 value (common.cl)
  float y = over_one_plus_exp_relaxed(fast.b_bias * fast.at.x, fmin(fast.z, 60.0f));
#else
  float y = sigmoid_at_value(fast.at, fast.b_bias);
#endif
  const bool exact = !(isfinite(fast.a) && !fast.far_left && fast_path_holds(y));
  if (exact) {  // the exact path
    const clipped_gate_t c = clipped_gate(alpha, limit, far_left_a, tail_a, in[0], in[1], false);
    y = unscale_tail(clipped_times_gate(c, c.b + bias), c.unscale);
  }
#ifdef ROUND_ONCE  // correctly rounded F16/BF16 (common.cl): the exact path's lanes always
  const float condition = sigmoid_argument_condition(fast.at.sigmoid, fast.z, fmin(fast.z, 40.0f));
  if (near_within(y, exact ? INFINITY : error_bound(4.0f, fabs(y), condition))) {
    const clipped_exact_t c = clipped_exact(alpha, limit, in[0], in[1]);
    y = round_to_odd_float(times_gate_exact(c.b + bias, c.g, c.a));
  }
#endif
  out[0] = y;
}
