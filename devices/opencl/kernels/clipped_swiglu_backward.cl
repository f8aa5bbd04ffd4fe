// SPDX-License-Identifier: Apache-2.0
// ClippedSwigluBackward: (dA, dB) <- (dy, A, B); dA is 0 where A > limit, dB where B is outside
// [-limit, limit] (the clamps' zero slopes). Attributes as clipped_swiglu.cl.
#define NUM_OUTPUTS 2
#define NUM_INPUTS 3
INLINE void apply(float *out, const float *in, uint16 attributes) {
  const float alpha = as_float(attributes.s0), limit = as_float(attributes.s1);
  const float bias = as_float(attributes.s2);
  const float dy = in[0], A = in[1], B = in[2];
  const clipped_gate_t c = clipped_gate(alpha, limit, A, B, true);
  out[0] = A <= limit ? dy * (c.b + bias) * c.slope : 0.0f;
  out[1] = (B >= -limit && B <= limit) ? dy * c.g : 0.0f;
}
