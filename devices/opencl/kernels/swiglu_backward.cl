// SPDX-License-Identifier: Apache-2.0
// (grad1, grad2) <- (out_grad, x1, x2): grad1 = out_grad x2 silu'(x1), grad2 = out_grad silu(x1).
#define NUM_OUTPUTS 2
#define NUM_INPUTS 3
INLINE void apply(float *out, const float *in, uint16 attributes) {
  float derivative;
  const float activation = silu(in[1], &derivative);
  out[0] = in[0] * in[2] * derivative;
  out[1] = in[0] * activation;
}
