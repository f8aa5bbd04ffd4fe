// SPDX-License-Identifier: Apache-2.0
// GeluBackwardV2 (erf): grad_input <- (input, grad_output), grad_input = grad_output
// gelu_erf'(input): the fast path (common.cl's gelu_erf_at), and where input is not finite or the
// result fails fast_path_holds the exact one. The tanh form is gelu_backward.cl.
#define NUM_OUTPUTS 1
#define NUM_INPUTS 2
INLINE void apply(float *out, const float *in, uint16 attributes) {
  const float input = in[0], grad_output = in[1];
  float grad_input = gelu_erf_at_slope(gelu_erf_at(input), grad_output, 0.0f, false);
  if (!(isfinite(input) && input >= GELU_ERF_TAIL_BOUND &&
        fast_path_holds(grad_input))) {  // exact path
    float derivative, unscale;
    gelu_erf(input, &derivative, &unscale);
    grad_input = unscale_tail(derivative * grad_output, unscale);
  }
  out[0] = grad_input;
}
