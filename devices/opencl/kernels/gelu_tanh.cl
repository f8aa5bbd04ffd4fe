// SPDX-License-Identifier: Apache-2.0
// output <- input: output = gelu_tanh(input) (devices/cpu/gelu.cc): the fast path (common.cl's
// gelu_tanh_at, x / (1 + e) as one corrected quotient), and where input is not finite or the
// result fails fast_path_holds the exact one.
#define NUM_OUTPUTS 1
#define NUM_INPUTS 1
INLINE void apply(float *out, const float *in, uint16 attributes) {
  const float x = in[0];
  const sigmoid_at_t at = gelu_tanh_at(x);
  float y = sigmoid_times(at.sigmoid, at.x);
  if (!(isfinite(x) && x >= GELU_TANH_TAIL_BOUND && fast_path_holds(y))) {  // the exact path
    float unscale;
    y = unscale_tail(gelu_tanh(x, 0, &unscale), unscale);
  }
  out[0] = y;
}
