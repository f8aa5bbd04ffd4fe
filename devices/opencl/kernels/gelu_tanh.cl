// SPDX-License-Identifier: Apache-2.0
// output <- input: output = gelu_tanh(input) (devices/cpu/gelu.cc): the fast path (math.cl's
// gelu_tanh_at, x / (1 + e) as one corrected quotient), and where input is not finite or the
// result fails fast_path_holds the exact one.
#define NUM_OUTPUTS 1
#define NUM_INPUTS 1
INLINE void apply(float *out, const float *in, uint16 attributes) {
  const float x = in[0];
#ifdef RELAXED  // the relaxed mode's F32 value (math.cl)
  float y = gelu_tanh_relaxed(x, 0);
#else
  const sigmoid_at_t at = gelu_tanh_at(x);
  float y = sigmoid_times(at.sigmoid, at.x);
#endif
  if (!(isfinite(x) && x >= GELU_TANH_TAIL_BOUND && fast_path_holds(y))) {  // the exact path
    float unscale;
    y = unscale_tail(gelu_tanh(x, 0, &unscale), unscale);
  }
  out[0] = y;
}
#ifdef ROUND_ONCE  // correctly rounded F16/BF16 (rounded.cl)
#define HAS_ORACLE 1
INLINE uint rounding_window(const float *in) {
  return gelu_tanh_window(in[0]);
}
// x2 is unused by a one-input functor.
INLINE float rounded_oracle(float x1, float x2, uint16 attributes) {
  return round_to_odd_float(gelu_tanh_exact(x1));
}
#endif
