// SPDX-License-Identifier: Apache-2.0
// GeluBackwardV2 (erf): grad_input <- (input, grad_output), grad_input = grad_output
// gelu_erf'(input): the fast path (math.cl's gelu_erf_at), and where input is not finite or the
// result fails fast_path_holds the exact one. The tanh form is gelu_backward.cl.
#define NUM_OUTPUTS 1
#define NUM_INPUTS 2
INLINE void apply(float *out, const float *in, uint16 attributes) {
  const float input = in[0], grad_output = in[1];
#ifdef RELAXED  // the relaxed mode's F32 gradient (math.cl)
  float derivative;
  gelu_erf_relaxed(input, &derivative);
  float grad_input = derivative * grad_output;
#else
  const gelu_erf_at_t at = gelu_erf_at(input);
  float grad_input = gelu_erf_at_slope(at, grad_output, 0.0f, false);
#endif
  const bool exact =
      !(isfinite(input) && input >= GELU_ERF_TAIL_BOUND && fast_path_holds(grad_input));
  if (exact) {
    float derivative, unscale;
    gelu_erf(input, &derivative, &unscale);
    grad_input = unscale_tail(derivative * grad_output, unscale);
  }
#ifdef ROUND_ONCE  // correctly rounded F16/BF16 (rounded.cl): the exact path's lanes always
  const float bound =
      exact ? INFINITY : error_bound(4.0f, fabs(grad_output) * gelu_erf_slope_terms(at), 0.0f);
  if (near_within(grad_input, bound))
    grad_input = round_to_odd_float(
        times_negative_tail_exact(grad_output, gelu_erf_derivative_exact(input), input));
#endif
  out[0] = grad_input;
}
