// SPDX-License-Identifier: Apache-2.0
// GeluBackward: grad_input <- (input, grad_output), grad_input = grad_output gelu_tanh'(input): the
// fast path (common.cl's gelu_tanh_at), and where input is not finite or the result fails
// fast_path_holds the exact one.
#define NUM_OUTPUTS 1
#define NUM_INPUTS 2
INLINE void apply(float *out, const float *in, uint16 attributes) {
  const float input = in[0], grad_output = in[1];
  float grad_input = gelu_tanh_at_slope(gelu_tanh_at(input), grad_output, 0.0f, false);
  if (!(isfinite(input) && input >= GELU_TANH_TAIL_BOUND &&
        fast_path_holds(grad_input))) {  // exact path
    float derivative, unscale;
    gelu_tanh(input, &derivative, &unscale);
    grad_input = unscale_tail(derivative * grad_output, unscale);
  }
  out[0] = grad_input;
}
