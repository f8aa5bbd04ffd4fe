// SPDX-License-Identifier: Apache-2.0
// GeluBackward: grad_input <- (input, grad_output), grad_input = grad_output gelu_tanh'(input).
#define NUM_OUTPUTS 1
#define NUM_INPUTS 2
INLINE void apply(float *out, const float *in, uint16 attributes) {
  float derivative;
  gelu_tanh(in[0], &derivative);
  out[0] = derivative * in[1];
}
