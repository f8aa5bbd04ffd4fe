// SPDX-License-Identifier: Apache-2.0
// fmaf and fma for qemu-user on an x86-64 host (LD_PRELOAD, tests/emulated.cmake): the same
// results as libm's (one correctly rounded fused multiply-add), after a vzeroupper.
//
// Why: qemu 7.2 translates SVE code at 256 bits and above into 256-bit AVX instructions and never
// clears the registers' upper halves afterwards, and its floating-point helpers (C compiled for
// SSE) then run with them dirty, which Intel cores pay for on every SSE instruction (AMD's do
// not). qemu computes each emulated fused multiply-add with the host's fmaf/fma, so clearing the
// upper halves there makes the helpers that follow cheap again: on a 2-core Sapphire Rapids, a
// GeLU bench run at 512-bit SVE went from 5.5 s to 1.0 s. AVX and FMA are checked when the shim
// loads; without them each call goes on to libm's own.
#define _GNU_SOURCE
#include <dlfcn.h>

static int have_avx_fma;

__attribute__((constructor)) static void detect(void) {
  __builtin_cpu_init();
  have_avx_fma = __builtin_cpu_supports("avx") && __builtin_cpu_supports("fma");
}

__attribute__((target("avx,fma"))) static float fmaf_clean(float a, float b, float c) {
  __asm__ volatile("vzeroupper");
  return __builtin_fmaf(a, b, c);
}

__attribute__((target("avx,fma"))) static double fma_clean(double a, double b, double c) {
  __asm__ volatile("vzeroupper");
  return __builtin_fma(a, b, c);
}

float fmaf(float a, float b, float c) {
  if (have_avx_fma) return fmaf_clean(a, b, c);
  static float (*next)(float, float, float);
  if (!next) next = (float (*)(float, float, float))dlsym(RTLD_NEXT, "fmaf");
  return next(a, b, c);
}

double fma(double a, double b, double c) {
  if (have_avx_fma) return fma_clean(a, b, c);
  static double (*next)(double, double, double);
  if (!next) next = (double (*)(double, double, double))dlsym(RTLD_NEXT, "fma");
  return next(a, b, c);
}
