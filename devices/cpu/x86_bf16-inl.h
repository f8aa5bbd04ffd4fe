// SPDX-License-Identifier: Apache-2.0
// The cpu device's one use of x86 intrinsics: BF16 stores with the AVX512_BF16 instructions
// (Cooper Lake, Sapphire Rapids and later, Zen 4 and later), which Highway 1.0.3 has no op for
// (its DemoteTo to BF16 truncates). They round to nearest even exactly as convert-inl.h's integer
// rounding does, except that they flush subnormal inputs to zero and keep a NaN's payload: a
// vector with either takes the portable path, so the stored bits are the same with or without
// the instructions (bit_identity's cpu_AVX3 run uses them where the processor has them, its other
// targets never). Detected at load time; the AVX3 targets only (512-bit vectors), elsewhere the
// functions report false and convert-inl.h's portable path runs.
#ifndef INFINIOP_CPU_X86_BF16_ONCE_H_
#define INFINIOP_CPU_X86_BF16_ONCE_H_
#include "hwy/base.h"
#if HWY_ARCH_X86
namespace infiniop::cpu {
// Whether the processor has AVX512_BF16 (CPUID leaf 7 subleaf 1, EAX bit 5).
inline const bool kProcessorHasAvx512Bf16 = [] {
  __builtin_cpu_init();  // may run before libgcc's own constructor
  return __builtin_cpu_supports("avx512bf16") != 0;
}();
}  // namespace infiniop::cpu
#endif
#endif  // INFINIOP_CPU_X86_BF16_ONCE_H_

#if defined(INFINIOP_CPU_X86_BF16_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef INFINIOP_CPU_X86_BF16_INL_H_
#undef INFINIOP_CPU_X86_BF16_INL_H_
#else
#define INFINIOP_CPU_X86_BF16_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#undef INFINIOP_X86_BF16
#if HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL)
#define INFINIOP_X86_BF16 1

// The lanes of `v` that the instructions would not round as convert-inl.h does: NaNs and
// subnormals (vfpclassps: quiet NaN 0x01, subnormal 0x20, signalling NaN 0x80).
HWY_INLINE __mmask16 X86Bf16Special(__m512 v) {
  return _mm512_fpclass_ps_mask(v, 0xa1);
}

// (even, odd) as PairBits's U32 lanes of BF16 pairs, when the processor has the instructions and
// no lane is special; else false. The instruction's operands are not in the target's attributes
// (GCC's avx512bf16): inline assembly, which binutils assembles whatever the target.
template <class DF>
HWY_INLINE bool X86Bf16PairBits(DF /*df*/, hn::Vec<DF> even, hn::Vec<DF> odd,
                                hn::Vec<hn::RebindToUnsigned<DF>> &bits) {
  if constexpr (hn::MaxLanes(DF()) != 16) {
    return false;
  } else {
    if (!kProcessorHasAvx512Bf16 || (X86Bf16Special(even.raw) | X86Bf16Special(odd.raw)) != 0)
      return false;
    __m512i halves;  // words 0-15: even's BF16, 16-31: odd's
    asm("vcvtne2ps2bf16 %2, %1, %0" : "=v"(halves) : "v"(odd.raw), "v"(even.raw));
    // Word 2i <- i, 2i + 1 <- 16 + i: the pairs interleaved (one permute).
    const __m512i interleave =
        _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    bits.raw = _mm512_permutexvar_epi16(interleave, halves);
    return true;
  }
}

// One vector's BF16 bits (Bits16's U16 lanes), as X86Bf16PairBits.
template <class DF>
HWY_INLINE bool X86Bf16Bits(DF /*df*/, hn::Vec<DF> v, hn::Vec<hn::Rebind<uint16_t, DF>> &bits) {
  if constexpr (hn::MaxLanes(DF()) != 16) {
    return false;
  } else {
    if (!kProcessorHasAvx512Bf16 || X86Bf16Special(v.raw) != 0) return false;
    asm("vcvtneps2bf16 %1, %0" : "=v"(bits.raw) : "v"(v.raw));
    return true;
  }
}

#else
#define INFINIOP_X86_BF16 0
#endif

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // INFINIOP_CPU_X86_BF16_INL_H_
