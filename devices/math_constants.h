// SPDX-License-Identifier: Apache-2.0
// The constants of the activations' F32 maths, written once for both devices: included by
// devices/cpu/math-inl.h and embedded in front of devices/opencl/kernels/math.cl (see
// devices/opencl/CMakeLists.txt), so that the two round the same way. Plain `#define`s of float
// literals: valid C++ and OpenCL C alike.
#ifndef INFINIOP_MATH_CONSTANTS_H_
#define INFINIOP_MATH_CONSTANTS_H_

// exp(-a), a in [-87, 87] (callers clamp, so that every result is a normal F32): the shifter
// 1.5 * 2^23 + 127 (the sum's low bits are then n + 127, the biased exponent of 2^n), 1 / ln 2,
// ln 2 in two parts (n * INFINIOP_LN2_HI exact for |n| <= 126) and the polynomial q of
// e^-t = 1 - t (1 - t q(-t)), fitted on Chebyshev nodes of [-ln2/2, ln2/2].
#define INFINIOP_EXP_SHIFTER 12583039.0f
#define INFINIOP_LOG2E 1.44269504088896341f
#define INFINIOP_LN2_HI 0.693145751953125f
#define INFINIOP_LN2_LO 1.428606765330187e-6f
#define INFINIOP_EXP_Q4 0.0013933645095676184f
#define INFINIOP_EXP_Q3 -0.008363175205886364f
#define INFINIOP_EXP_Q2 0.04166646674275398f
#define INFINIOP_EXP_Q1 -0.16666576266288757f
#define INFINIOP_EXP_Q0 0.5f

// gelu_tanh's v = 2u = 2a (x + b x^3): 2a = 2 sqrt(2/pi), b = 0.044715.
#define INFINIOP_GELU_TANH_TWO_A 1.5957691216057308f
#define INFINIOP_GELU_TANH_B 0.044715f

// gelu_erf: Phi(-a) = exp(-a^2 / 2) / (k a + 2 + a R(a) / P(a)) for a = |x| in [0, 13.19]
// (scripts/fit_erf.py: a rational fit of 0.5 erfcx(a / sqrt 2), relative error 0.08 u before
// F32 rounding), and phi(x) = exp(-x^2 / 2) / sqrt(2 pi). Beyond 13.19 (a^2 / 2 = 86.99)
// exp would leave its range: a is clamped there, where Phi is below 6e-39.
#define INFINIOP_ERF_CLAMP 13.19f
#define INFINIOP_ERF_K 2.506592035293579f
#define INFINIOP_ERF_R0 -0.4554111063480377f
#define INFINIOP_ERF_R1 -0.26000481843948364f
#define INFINIOP_ERF_R2 -0.06995760649442673f
#define INFINIOP_ERF_R3 -0.008014480583369732f
#define INFINIOP_ERF_P0 0.5f
#define INFINIOP_ERF_P1 0.43545326590538025f
#define INFINIOP_ERF_P2 0.1811351180076599f
#define INFINIOP_ERF_P3 0.03992656245827675f
#define INFINIOP_ERF_P4 0.00401169853284955f
#define INFINIOP_INV_SQRT_2PI 0.3989422804014327f
// 1 / sqrt(2 pi) - (float)INFINIOP_INV_SQRT_2PI: the constant as a pair, for x phi(x) on the left.
#define INFINIOP_INV_SQRT_2PI_LO -1.1335170105263179e-8f

// log(v) = k ln2 + log(f), v = 2^k f with f in [sqrt(1/2), sqrt(2)) (f's bits: v's minus k << 23,
// k from v's bits minus INFINIOP_LOG_SQRT_HALF_BITS, the bits of the F32 just below sqrt(1/2)),
// and log1p(t) the same way with f = 1 + t or (1 + t) / 2. log(f) = 2 atanh(s), s = (f - 1) /
// (f + 1), |s| <= 0.2 (log1p's f up to 1.5), as 2 s + s^3 P(s^2): P fitted to (2 atanh(s) - 2 s) /
// s^3 on z = s^2 in [0, 0.04], weighted by z (scripts/fit_log.py: 0.0005 u of log(f) after F32
// rounding). ln 2 is INFINIOP_LN2_HI + INFINIOP_LN2_LO above (the high part has 15 bits, so k
// ln2_hi is exact for |k| < 512).
#define INFINIOP_LOG_SQRT_HALF_BITS 0x3F3504F3
#define INFINIOP_LOG_P0 0.6666666f
#define INFINIOP_LOG_P1 0.40000933f
#define INFINIOP_LOG_P2 0.28503522f
#define INFINIOP_LOG_P3 0.2415133f

#endif  // INFINIOP_MATH_CONSTANTS_H_
