// SPDX-License-Identifier: Apache-2.0
// out <- (x1, x2): out = silu(x1) x2 (the gated activation; devices/cpu/gated-inl.h): the fast path
// (math.cl's silu_at), and where x1 is not finite or the result fails fast_path_holds the exact
// one.
#define NUM_OUTPUTS 1
#define NUM_INPUTS 2
INLINE void apply(float *out, const float *in, uint16 attributes) {
  const float x1 = in[0], x2 = in[1];
#ifdef RELAXED  // the relaxed mode's F32 value (math.cl)
  float y = silu_value_relaxed(x1, x2);
#else
  float y = sigmoid_at_value(silu_at(x1), x2);
#endif
  if (!(isfinite(x1) && x1 >= SILU_TAIL_BOUND && fast_path_holds(y))) {  // the exact path
    float unscale;
    y = unscale_product(silu(x1, 0, &unscale), x2, unscale);
  }
  out[0] = y;
}
#ifdef ROUND_ONCE  // correctly rounded F16/BF16 (rounded.cl)
#define HAS_ORACLE 1
INLINE uint rounding_window(const float *in) {
  return SILU_WINDOW;
}
INLINE float rounded_oracle(float x1, float x2, uint16 attributes) {
  return round_to_odd_float(times_negative_tail_exact(x2, silu_exact(x1), x1));
}
#endif
