// SPDX-License-Identifier: Apache-2.0
// The quantized formats in double (src/exact/quant.h restated, the same operations), for the
// *Quant kernels built after `common` (gated_quant.cl, moe_init_routing.cl with -DQUANT). Needs
// cl_khr_fp64: the host refuses a device without it before building a program with this file.
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

// exact/quant.h's quantizeByte: v (z / s) rounded once to nearest even and saturated; NaN is 0
// (INT8) or 0x7F (FP8); FP8 keeps the sign of -0 and of what rounds to 0 from below.
INLINE uchar quantize_byte(double v, uint fp8) {
  if (!fp8) {
    if (isnan(v)) return 0;
    const double q = rint(fmin(fmax(v, -127.0), 127.0));
    return (uchar)(char)(int)q;
  }
  if (isnan(v)) return 0x7f;
  const uchar sign = signbit(v) ? 0x80 : 0x00;
  const double a = fabs(v);
  if (a >= 448.0) return sign | 0x7e;
  if (a < 0x1p-6) return sign | (uchar)(int)rint(a * 0x1p9);
  int e = 0;
  const double f = frexp(a, &e);  // a = f 2^e, f in [0.5, 1)
  const double k = rint((2.0 * f - 1.0) * 8.0);
  const int code = ((e - 1 + 7) << 3) + (int)k;  // k = 8 carries into the exponent
  return sign | (uchar)code;
}

// exact/quant.h's dynamicScale: amax / qmax rounded once to F32 (or up to a power of two), at
// least 2^-126; a NaN amax gives 0x7FC00000.
INLINE float dynamic_scale(double amax, uint fp8, uint power_of_two) {
  if (isnan(amax)) return as_float(0x7fc00000u);
  const double q = amax / (fp8 ? 448.0 : 127.0);
  double s = q;
  if (power_of_two && q > 0.0 && isfinite(q)) {
    int e = 0;
    const double f = frexp(q, &e);
    s = ldexp(1.0, f == 0.5 ? e - 1 : e);
  }
  const float rounded = (float)s;
  return rounded < 0x1p-126f ? 0x1p-126f : rounded;
}
