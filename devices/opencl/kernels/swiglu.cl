// SPDX-License-Identifier: Apache-2.0
// out <- (x1, x2): out = silu(x1) x2 (the gated activation; devices/cpu/gated-inl.h).
#define NUM_OUTPUTS 1
#define NUM_INPUTS 2
INLINE void apply(float *out, const float *in, uint16 attributes) {
  out[0] = silu(in[0], 0) * in[1];
}
