// SPDX-License-Identifier: Apache-2.0
// Per-target loads of F32/F16/BF16 storage into F32 vectors and stores back, rounding to
// nearest even. Highway 1.0.3's own BF16 DemoteTo truncates, and its F16 conversions on
// targets without F16C (SSE4 and below) truncate and mishandle Inf/NaN, so those paths are done
// here with integer operations; targets with F16C use the hardware instructions, which round
// to nearest even.
#if defined(INFINIOP_CPU_CONVERT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef INFINIOP_CPU_CONVERT_INL_H_
#undef INFINIOP_CPU_CONVERT_INL_H_
#else
#define INFINIOP_CPU_CONVERT_INL_H_
#endif

#include <type_traits>

#include "cpu/x86_bf16-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#undef INFINIOP_HWY_NATIVE_F16
#if HWY_ARCH_X86 && HWY_TARGET < HWY_SSE4
#define INFINIOP_HWY_NATIVE_F16 1
#else
#define INFINIOP_HWY_NATIVE_F16 0
#endif

// F16 bits (in the low 16 bits of U32 lanes) to F32, and back rounded to nearest even.
template <class DF>
HWY_INLINE hn::Vec<DF> F16BitsToF32(DF df, hn::Vec<hn::RebindToUnsigned<DF>> bits) {
#if INFINIOP_HWY_NATIVE_F16
  const hn::Rebind<uint16_t, DF> du16;
  return hn::PromoteTo(df,
                       hn::BitCast(hn::Rebind<hwy::float16_t, DF>(), hn::TruncateTo(du16, bits)));
#else
  const hn::RebindToUnsigned<DF> du32;
  const hn::RebindToSigned<DF> di32;
  const auto magnitude = hn::And(bits, hn::Set(du32, 0x7fff));
  const auto shifted = hn::ShiftLeft<13>(magnitude);
  // Normal and subnormal halves: rebias the exponent by multiplying with 2^112 (exact).
  const auto finite = hn::Mul(hn::BitCast(df, shifted), hn::Set(df, 0x1p112f));
  const auto special = hn::BitCast(df, hn::Or(shifted, hn::Set(du32, 0x7f800000)));
  const auto is_special =
      hn::RebindMask(df, hn::Gt(hn::BitCast(di32, magnitude), hn::Set(di32, 0x7bff)));
  const auto sign = hn::ShiftLeft<16>(hn::And(bits, hn::Set(du32, 0x8000)));
  return hn::Or(hn::IfThenElse(is_special, special, finite), hn::BitCast(df, sign));
#endif
}

template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> F32ToF16Bits(DF df, hn::Vec<DF> v) {
  const hn::RebindToUnsigned<DF> du32;
#if INFINIOP_HWY_NATIVE_F16
  const hn::Rebind<hwy::float16_t, DF> df16;
  return hn::PromoteTo(du32,
                       hn::BitCast(hn::RebindToUnsigned<decltype(df16)>(), hn::DemoteTo(df16, v)));
#else
  const hn::RebindToSigned<DF> di32;
  const auto bits = hn::BitCast(du32, v);
  const auto sign = hn::And(hn::ShiftRight<16>(bits), hn::Set(du32, 0x8000));
  const auto magnitude = hn::And(bits, hn::Set(du32, 0x7fffffff));
  const auto m = hn::BitCast(di32, magnitude);  // < 2^31: signed compares are exact
  // Below 2^-14 the result is subnormal: adding 0.5 lets the FPU round at 2^-24 granularity.
  const auto subnormal =
      hn::Sub(hn::BitCast(du32, hn::Add(hn::BitCast(df, magnitude), hn::Set(df, 0.5f))),
              hn::Set(du32, 0x3f000000));
  // Normal: rebias the exponent (-112) and round the 13 dropped bits to nearest even.
  const auto odd = hn::And(hn::ShiftRight<13>(magnitude), hn::Set(du32, 1));
  const auto normal =
      hn::ShiftRight<13>(hn::Add(hn::Sub(magnitude, hn::Set(du32, 0x37fff001)), odd));
  auto result =
      hn::IfThenElse(hn::RebindMask(du32, hn::Lt(m, hn::Set(di32, 0x38800000))), subnormal, normal);
  result = hn::IfThenElse(hn::RebindMask(du32, hn::Gt(m, hn::Set(di32, 0x477fefff))),
                          hn::Set(du32, 0x7c00), result);
  result = hn::IfThenElse(hn::RebindMask(du32, hn::Gt(m, hn::Set(di32, 0x7f800000))),
                          hn::Set(du32, 0x7e00), result);
  return hn::Or(result, sign);
#endif
}

// F32 bits with the BF16 result, rounded to nearest even, in the high 16 bits, for `v` whose
// NaNs are canonical (CanonicalNaN, as every store makes them): 0x7fc00000 has no low bits to
// round, so it stays the canonical BF16 NaN 0x7fc0, and a NaN needs no test of its own here.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> RoundToBF16High(DF /*df*/, hn::Vec<DF> v) {
  const hn::RebindToUnsigned<DF> du32;
  const auto bits = hn::BitCast(du32, v);
  const auto odd = hn::And(hn::ShiftRight<16>(bits), hn::Set(du32, 1));
  return hn::Add(bits, hn::Add(odd, hn::Set(du32, 0x7fff)));
}

// The lanes of `v` that may round to a different 16-bit value than the exact result they stand
// for, given that the exact result lies within `bound_u` u (u = 2^-24; absolute, per lane) of v:
// the bound of an output that may cancel (a gradient), which no window of F32 steps expresses
// (table-inl.h tests the tables' products, whose bounds are windows of steps, in fewer
// operations). BF16's boundaries are the F32 values whose low 16 bits are 0x8000, in every
// binade, subnormals and the overflow threshold included. A rounding boundary (a midpoint between
// two 16-bit values) lies within the bound of v: the one inside v's 16-bit interval (`below` the
// magnitude truncated to the storage type, `below` + half its step), or the one under `below` (half
// a step of the binade below, so 2^15 F32 steps under `below` for BF16 also where `below` starts a
// binade): nearer than the first only there, within an eighth of a step above `below`. The
// differences are exact (within a factor 2). No operand or result may be subnormal (each costs x86
// a microcode assist: the test ran the gradients at 0.2x where masked-out zeros met a subnormal
// midpoint), so the magnitude is scaled by 2^24 first (the bound is in u; its boundaries stay where
// they were, an exponent apart) and an F32 subnormal v is near unless it is an exact zero with a
// zero bound. A NaN bound or v, and |v| from 2^104 on (the scaled magnitude overflows), count as
// near: the oracle decides.
template <class DF>
HWY_INLINE auto NearRoundingBoundaryWithin(DF df, hn::Vec<DF> v, hn::Vec<DF> bound_u,
                                           const hwy::bfloat16_t *) {
  const hn::RebindToUnsigned<DF> du32;
  const auto bits = hn::BitCast(du32, hn::Abs(v));
  const auto smallest_normal = hn::Set(du32, 0x00800000u);
  const auto scaled =
      hn::Mul(hn::BitCast(df, hn::Max(bits, smallest_normal)), hn::Set(df, 0x1p24f));
  const auto below = hn::And(hn::BitCast(du32, scaled), hn::Set(du32, 0xffff0000u));
  const auto midpoint = hn::BitCast(df, hn::Or(below, hn::Set(du32, 0x8000u)));
  const auto under = hn::BitCast(df, hn::Sub(below, hn::Set(du32, 0x8000u)));
  const auto normal_near = hn::Or(hn::Not(hn::Gt(hn::Abs(hn::Sub(scaled, midpoint)), bound_u)),
                                  hn::Not(hn::Gt(hn::Sub(scaled, under), bound_u)));
  const auto subnormal = hn::RebindMask(df, hn::Lt(bits, smallest_normal));
  const auto subnormal_near =
      hn::Or(hn::RebindMask(df, hn::Ne(bits, hn::Zero(du32))), hn::Gt(bound_u, hn::Zero(df)));
  return hn::Or(hn::AndNot(subnormal, normal_near), hn::And(subnormal, subnormal_near));
}

// F16: its boundaries are the F32 values whose low 13 bits are 0x1000 from 2^-14 on, |v| below
// 2^-14 shifted by 2^-14 (F16's subnormal spacing is its spacing at 2^-14; the shift's rounding,
// at most 2^-38, added to the bound); there the step is F16's subnormal one on both sides. The
// differences are multiples of 2^-37 at least, so only v itself may be subnormal: taken as 2^-126.
template <class DF>
HWY_INLINE auto NearRoundingBoundaryWithin(DF df, hn::Vec<DF> v, hn::Vec<DF> bound_u,
                                           const hwy::float16_t *) {
  const hn::RebindToUnsigned<DF> du32;
  const auto scale = hn::Set(df, 0x1p24f);
  const auto magnitude =
      hn::BitCast(df, hn::Max(hn::BitCast(du32, hn::Abs(v)), hn::Set(du32, 0x00800000u)));
  const auto small = hn::Lt(magnitude, hn::Set(df, 0x1p-14f));
  const auto shifted = hn::IfThenElse(small, hn::Add(magnitude, hn::Set(df, 0x1p-14f)), magnitude);
  const auto widened = hn::IfThenElse(small, hn::Add(bound_u, hn::Set(df, 0x1p-14f)), bound_u);
  const auto below =
      hn::BitCast(df, hn::And(hn::BitCast(du32, shifted), hn::Set(du32, 0xffffe000u)));
  const auto midpoint = hn::BitCast(df, hn::Or(hn::BitCast(du32, below), hn::Set(du32, 0x1000u)));
  const auto under = hn::BitCast(df, hn::Sub(hn::BitCast(du32, below), hn::Set(du32, 0x1000u)));
  const auto at_midpoint =
      hn::Not(hn::Gt(hn::Mul(hn::Abs(hn::Sub(shifted, midpoint)), scale), widened));
  const auto at_under =
      hn::AndNot(small, hn::Not(hn::Gt(hn::Mul(hn::Sub(shifted, under), scale), widened)));
  return hn::Or(at_midpoint, at_under);
}

// One vector: Lanes(df) elements.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadF32(DF df, const float *p) {
  return hn::LoadU(df, p);
}

template <class DF>
HWY_INLINE hn::Vec<DF> LoadF32(DF df, const hwy::bfloat16_t *p) {
  return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::bfloat16_t, DF>(), p));
}

template <class DF>
HWY_INLINE hn::Vec<DF> LoadF32(DF df, const hwy::float16_t *p) {
#if INFINIOP_HWY_NATIVE_F16
  return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::float16_t, DF>(), p));
#else
  const hn::Rebind<uint16_t, DF> du16;
  return F16BitsToF32(df, hn::PromoteTo(hn::RebindToUnsigned<DF>(),
                                        hn::LoadU(du16, reinterpret_cast<const uint16_t *>(p))));
#endif
}

// Every NaN a store writes is the canonical quiet NaN, positive (F32 0x7fc00000, F16 0x7e00,
// BF16 0x7fc0): which operand's NaN an instruction passes on, and the sign of a NaN it creates,
// differ between x86 and Arm and with the compiler's operand order, so a NaN's bits would be the
// one result that depends on the target (docs/accuracy.md).
template <class DF>
HWY_INLINE hn::Vec<DF> CanonicalNaN(DF df, hn::Vec<DF> v) {
  return hn::IfThenElse(hn::IsNaN(v),
                        hn::BitCast(df, hn::Set(hn::RebindToUnsigned<DF>(), 0x7fc00000u)), v);
}

template <class DF>
HWY_INLINE void StoreF32(DF df, hn::Vec<DF> v, float *p) {
  hn::StoreU(CanonicalNaN(df, v), df, p);
}

// One vector rounded to 16-bit storage: Lanes(df) U16 lanes, what StoreF32 writes.
template <class DF>
HWY_INLINE hn::Vec<hn::Rebind<uint16_t, DF>> Bits16(DF df, hn::Vec<DF> v, const hwy::bfloat16_t *) {
#if INFINIOP_X86_BF16
  hn::Vec<hn::Rebind<uint16_t, DF>> bits;
  if (X86Bf16Bits(df, v, bits)) return bits;
#endif
  v = CanonicalNaN(df, v);
  return hn::TruncateTo(hn::Rebind<uint16_t, DF>(), hn::ShiftRight<16>(RoundToBF16High(df, v)));
}

template <class DF>
HWY_INLINE hn::Vec<hn::Rebind<uint16_t, DF>> Bits16(DF df, hn::Vec<DF> v, const hwy::float16_t *) {
  const hn::Rebind<uint16_t, DF> du16;
  v = CanonicalNaN(df, v);
#if INFINIOP_HWY_NATIVE_F16
  return hn::BitCast(du16, hn::DemoteTo(hn::Rebind<hwy::float16_t, DF>(), v));
#else
  return hn::TruncateTo(du16, F32ToF16Bits(df, v));
#endif
}

template <class DF, class T>
HWY_INLINE void StoreF32(DF df, hn::Vec<DF> v, T *p) {
  hn::StoreU(Bits16(df, v, p), hn::Rebind<uint16_t, DF>(), reinterpret_cast<uint16_t *>(p));
}

// Pairs: 2 Lanes(df) consecutive elements as `even` (elements 0, 2, ...) and `odd` (1, 3, ...),
// the lane order of an interleaved split. For 16-bit types this is also the cheapest way to
// move two whole vectors: one load viewed as U32 lanes splits into low and high halves with no
// cross-lane shuffle, and the store merges them back (little-endian lanes).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the 16-bit pair layout assumes little-endian lanes");

template <class DF>
HWY_INLINE void LoadPairF32(DF df, const float *p, hn::Vec<DF> &even, hn::Vec<DF> &odd) {
  hn::LoadInterleaved2(df, p, even, odd);
}

template <class DF>
HWY_INLINE void LoadPairF32(DF df, const hwy::bfloat16_t *p, hn::Vec<DF> &even, hn::Vec<DF> &odd) {
  const hn::RebindToUnsigned<DF> du32;
  const auto pairs = hn::LoadU(du32, reinterpret_cast<const uint32_t *>(p));
  even = hn::BitCast(df, hn::ShiftLeft<16>(pairs));
  odd = hn::BitCast(df, hn::And(pairs, hn::Set(du32, 0xffff0000u)));
}

template <class DF>
HWY_INLINE void LoadPairF32(DF df, const hwy::float16_t *p, hn::Vec<DF> &even, hn::Vec<DF> &odd) {
  const hn::RebindToUnsigned<DF> du32;
  const auto pairs = hn::LoadU(du32, reinterpret_cast<const uint32_t *>(p));
  even = F16BitsToF32(df, hn::And(pairs, hn::Set(du32, 0xffffu)));
  odd = F16BitsToF32(df, hn::ShiftRight<16>(pairs));
}

template <class DF>
HWY_INLINE void StorePairF32(DF df, hn::Vec<DF> even, hn::Vec<DF> odd, float *p) {
  hn::StoreInterleaved2(CanonicalNaN(df, even), CanonicalNaN(df, odd), df, p);
}

// hn::AverageRound, (a + b + 1) >> 1 without overflow. Highway 1.0.3's SVE and SVE_256 targets
// (not SVE2, whose rhadd it uses) compute it as ShiftRight<1>(a + b + 1) in the lanes' own width,
// which drops the carry that PairBits reads: there the same value comes from
// (a | b) - ((a ^ b) >> 1). Found by bit_identity under qemu (BF16 stores truncated, not rounded).
template <class V>
HWY_INLINE V AverageRoundExact(V a, V b) {
#if HWY_TARGET == HWY_SVE || HWY_TARGET == HWY_SVE_256
  return hn::Sub(hn::Or(a, b), hn::ShiftRight<1>(hn::Xor(a, b)));
#else
  return hn::AverageRound(a, b);
#endif
}

// The 16-bit pair of (even, odd) as one vector of U32 lanes: what StorePairF32 writes. Both
// vectors round at once in 16-bit lanes: the merged high halves round up when their low half +
// (high & 1) > 0x8000, which is the top bit of AverageRound(low, 0x7ffe + (high & 1)). Canonical
// NaNs (and infinities) have a zero low half, so they never carry into the exponent.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> PairBits(DF df, hn::Vec<DF> even, hn::Vec<DF> odd,
                                                      const hwy::bfloat16_t *) {
  const hn::RebindToUnsigned<DF> du32;
#if INFINIOP_X86_BF16
  hn::Vec<decltype(du32)> bits;
  if (X86Bf16PairBits(df, even, odd, bits)) return bits;
#endif
  even = CanonicalNaN(df, even);
  odd = CanonicalNaN(df, odd);
#if HWY_TARGET == HWY_SCALAR  // one lane has no 16-bit lanes to pair
  const auto high = hn::And(RoundToBF16High(df, odd), hn::Set(du32, 0xffff0000u));
  return hn::Or(high, hn::ShiftRight<16>(RoundToBF16High(df, even)));
#else
  const hn::Repartition<uint16_t, DF> du16;
  const auto high = hn::OddEven(hn::BitCast(du16, odd),
                                hn::BitCast(du16, hn::ShiftRight<16>(hn::BitCast(du32, even))));
  const auto low = hn::OddEven(hn::BitCast(du16, hn::ShiftLeft<16>(hn::BitCast(du32, odd))),
                               hn::BitCast(du16, even));
  const auto bias = hn::Or(hn::And(high, hn::Set(du16, 1)), hn::Set(du16, 0x7ffe));
  const auto carry = hn::ShiftRight<15>(AverageRoundExact(low, bias));
  return hn::BitCast(du32, hn::Add(high, carry));
#endif
}

template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> PairBits(DF df, hn::Vec<DF> even, hn::Vec<DF> odd,
                                                      const hwy::float16_t *) {
  return hn::Or(F32ToF16Bits(df, CanonicalNaN(df, even)),
                hn::ShiftLeft<16>(F32ToF16Bits(df, CanonicalNaN(df, odd))));
}

template <class DF, class T>
HWY_INLINE void StorePairF32(DF df, hn::Vec<DF> even, hn::Vec<DF> odd, T *p) {
  hn::StoreU(PairBits(df, even, odd, p), hn::RebindToUnsigned<DF>(),
             reinterpret_cast<uint32_t *>(p));
}

// Whether hn::Stream is a non-temporal store on this target: x86's movnt and SVE's stnt1 are;
// NEON's and the one-lane fallback's are plain stores, where the streamed rows' alignment split
// and fence would be cost without gain, so the callers store instead (streamOutputs' threshold
// applies where this is true).
#if (HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128) ||       \
    HWY_TARGET == HWY_SVE || HWY_TARGET == HWY_SVE2 || HWY_TARGET == HWY_SVE_256 || \
    HWY_TARGET == HWY_SVE2_128
constexpr bool kStreamingStores = true;
#else
constexpr bool kStreamingStores = false;
#endif

// Non-temporal stores of whole vectors: `p` aligned to a vector of DF. The writing thread calls
// hwy::FlushStream() before its results are read by another.
template <class DF>
HWY_INLINE void StreamF32(DF df, hn::Vec<DF> v, float *p) {
  hn::Stream(CanonicalNaN(df, v), df, p);
}

template <class DF, class T>
HWY_INLINE void StreamPairF32(DF df, hn::Vec<DF> even, hn::Vec<DF> odd, T *p) {
  hn::Stream(PairBits(df, even, odd, p), hn::RebindToUnsigned<DF>(),
             reinterpret_cast<uint32_t *>(p));
}

#if HWY_TARGET != HWY_SCALAR  // a single lane has no twice-as-wide vector

// `lo` then `hi` (2 Lanes(df) consecutive elements) streamed as whole vectors to aligned `p`: two
// vectors of F32, or one vector of 16-bit storage.
template <class DF>
HWY_INLINE void StreamTwoF32(DF df, hn::Vec<DF> lo, hn::Vec<DF> hi, float *p) {
  hn::Stream(CanonicalNaN(df, lo), df, p);
  hn::Stream(CanonicalNaN(df, hi), df, p + hn::Lanes(df));
}

template <class DF, class T>
HWY_INLINE void StreamTwoF32(DF df, hn::Vec<DF> lo, hn::Vec<DF> hi, T *p) {
  const hn::Twice<hn::Rebind<uint16_t, DF>> du16;
  hn::Stream(hn::Combine(du16, Bits16(df, hi, p), Bits16(df, lo, p)), du16,
             reinterpret_cast<uint16_t *>(p));
}

// StorePairF32 streamed to aligned `p` (whole vectors: 2 Lanes(df) F32 pairs are two).
template <class DF>
HWY_INLINE void StreamPairF32(DF df, hn::Vec<DF> even, hn::Vec<DF> odd, float *p) {
  HWY_ALIGN float pairs[2 * HWY_MAX_BYTES / sizeof(float)];
  hn::StoreInterleaved2(even, odd, df, pairs);  // same-size reloads: store forwarding holds
  StreamTwoF32(df, hn::Load(df, pairs), hn::Load(df, pairs + hn::Lanes(df)), p);
}

#endif

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // INFINIOP_CPU_CONVERT_INL_H_
