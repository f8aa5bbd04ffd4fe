// SPDX-License-Identifier: Apache-2.0
// (grad1, grad2) <- (out_grad, x1, x2): grad1 = out_grad x2 silu'(x1), grad2 = out_grad silu(x1)
// (devices/cpu/gated-inl.h): the fast path (math.cl's silu_at) with out_grad x2 as a pair, and
// where x1 is not finite or a result fails fast_path_holds the exact one.
#define NUM_OUTPUTS 2
#define NUM_INPUTS 3
INLINE void apply(float *out, const float *in, uint16 attributes) {
  const float out_grad = in[0], x1 = in[1], x2 = in[2];
#ifdef RELAXED  // the relaxed mode's F32 gradients (math.cl)
  float derivative;
  const float value = silu_relaxed(x1, &derivative);
  float grad1 = out_grad * x2 * derivative;
  float grad2 = out_grad * value;
#else
  const sigmoid_at_t at = silu_at(x1);
  float g_lo;
  const float g = product_pair(out_grad, x2, &g_lo);
  float grad1 = silu_at_slope(at, g, g_lo, true);
  float grad2 = sigmoid_at_value(at, out_grad);
#endif
  // the special values' exact path
  const bool exact =
      !(isfinite(x1) && x1 >= SILU_TAIL_BOUND && fast_path_holds(grad1) && fast_path_holds(grad2));
  if (exact) {
    float derivative, unscale;
    const float activation = silu(x1, &derivative, &unscale);
    grad1 = unscale_tail(out_grad * x2 * derivative, unscale);
    grad2 = unscale_product(activation, out_grad, unscale);
  }
#ifdef ROUND_ONCE  // correctly rounded F16/BF16 (rounded.cl): the exact path's lanes always
  const float c = 0.0f;
  const float bound1 =
      exact ? INFINITY
            : error_bound(6.0f, fabs(g) * sigmoid_slope_terms(at.sigmoid, fmin(at.x, 40.0f)), c);
  const float bound2 = exact ? INFINITY : error_bound(6.0f, fabs(grad2), c);
  if (near_within(grad1, bound1) || near_within(grad2, bound2)) {
    const double dy = out_grad;
    grad1 = round_to_odd_float(times_negative_tail_exact(dy * x2, silu_derivative_exact(x1), x1));
    grad2 = round_to_odd_float(times_negative_tail_exact(dy, silu_exact(x1), x1));
  }
#endif
  out[0] = grad1;
  out[1] = grad2;
}
