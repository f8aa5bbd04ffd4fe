// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_QUANT_H
#define INFINIOP_OPS_QUANT_H

/* The quantized outputs of the *Quant operators (docs/quantization.md). The quantized tensor's
 * dtype says the format: INFINI_DTYPE_I8 is INT8, symmetric, qmax 127 (-128 never written);
 * INFINI_DTYPE_F8 is FP8 E4M3 (OCP's e4m3fn: bias 7, no infinities, max 448, NaN 0x7F), qmax
 * 448. A value z (the exact activation, times its smooth scale) is quantized as z / s rounded
 * once to nearest even and saturated to [-qmax, qmax]; a NaN is 0 in INT8 and 0x7F in FP8. */
typedef enum {
  INFINIOP_QUANT_STATIC = 0,  /* s given: the scale tensor is read */
  INFINIOP_QUANT_DYNAMIC = 1, /* s = amax / qmax of each group, computed and written */
} infiniopQuantMode_t;

/* The dynamic scale's rounding: amax / qmax of the exact values rounded once to nearest F32, or
 * rounded up to a power of two (UE8M0, DeepSeek-V3's FP8 recipe, DeepGEMM's scales); either is
 * at least 2^-126 (a group of zeros gets 2^-126). Static scales are used as given: F32 only. */
typedef enum {
  INFINIOP_QUANT_SCALE_F32 = 0,
  INFINIOP_QUANT_SCALE_UE8M0 = 1,
} infiniopQuantScaleFormat_t;

#endif /* INFINIOP_OPS_QUANT_H */
