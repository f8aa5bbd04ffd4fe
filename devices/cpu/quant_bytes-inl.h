// SPDX-License-Identifier: Apache-2.0
// Per-target bytes of the quantized formats (exact/quant.h) from an F32 t = z / s within a bound
// of the exact one: its code, and whether a rounding boundary lies within that bound (the lanes
// the caller's oracle decides), and a walk over a mask's lanes. GatedQuant's and
// DequantSwigluQuant's cpu kernels.
#if defined(INFINIOP_CPU_QUANT_BYTES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef INFINIOP_CPU_QUANT_BYTES_INL_H_
#undef INFINIOP_CPU_QUANT_BYTES_INL_H_
#else
#define INFINIOP_CPU_QUANT_BYTES_INL_H_
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "exact/quant.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using exact::QuantFormat;

// Whether F32 bits lie within w (integer steps) of an FP8 E4M3 midpoint's, whose low 20 bits are
// 0x80000: ((bits + w) << 12) puts the distance in the top 20 bits, offset by 2^31 so that the
// near ones are the smallest signed values. Three operations, wrapping as integers do.
template <class VI>
HWY_INLINE auto Fp8MidpointNear(VI bits, VI w) {
  const hn::DFromV<VI> di;
  const VI at = hn::ShiftLeft<12>(hn::Add(bits, w));
  const VI limit = hn::Add(hn::ShiftLeft<12>(hn::Add(hn::Add(w, w), hn::Set(di, 1))),
                           hn::Set(di, std::numeric_limits<int32_t>::min()));
  return hn::Lt(at, limit);
}

// The test and bytes for one vector of t, within `steps` F32 steps of the exact z / s: the lanes
// near a rounding boundary of the grid (one within those steps of t), and the bytes of the
// others. t is first clamped to the largest magnitude, 127 or 448, where no boundary lies: every
// value beyond rounds to it with saturation (FP8: 464, between 448 and the missing 480,
// included), and a clamped lane is far from every boundary. So one sequence serves every lane, with
// no test for the common vector; a NaN lane's code depends on the target's min/max, and the caller
// marks it open.
template <QuantFormat kFormat, class D, class V, class VI>
HWY_INLINE auto NearAndCodes(D d, V t, VI steps, VI *codes) {
  const hn::RebindToSigned<D> di;
  if constexpr (kFormat == QuantFormat::int8) {
    const V clamped = hn::Min(hn::Max(t, hn::Set(d, -127.0f)), hn::Set(d, 127.0f));
    const V rounded = hn::Round(clamped);
    *codes = hn::ConvertTo(di, rounded);
    // |t - round(t)| is exact below 2^23; its distance to 1/2 against the bound (a step of t
    // is at most 2^-23 |t|).
    const V bound =
        hn::Mul(hn::Abs(clamped), hn::Mul(hn::ConvertTo(d, steps), hn::Set(d, 0x1p-23f)));
    const V gap = hn::Sub(hn::Set(d, 0.5f), hn::Abs(hn::Sub(clamped, rounded)));
    return hn::Le(gap, bound);
  } else {
    // FP8 E4M3's midpoints are the F32 values whose low 20 bits are 0x80000, from 2^-6 on; below,
    // |t| + 2^-6 puts the subnormals' (spacing 2^-9, the spacing at 2^-6) there, its rounding
    // within one more step, and its code 8 above theirs.
    const V a = hn::Min(hn::Abs(t), hn::Set(d, 448.0f));
    const V smallest_normal = hn::Set(d, 0x1p-6f);
    const auto sub = hn::Lt(a, smallest_normal);
    const VI bits = hn::BitCast(di, hn::IfThenElse(sub, hn::Add(a, smallest_normal), a));
    const VI base =
        hn::IfThenElse(hn::RebindMask(di, sub), hn::Set(di, 121 << 3), hn::Set(di, 120 << 3));
    // Rounded by adding half the kept step and truncating (no tie is left but in near lanes).
    const VI code = hn::Sub(hn::ShiftRight<20>(hn::Add(bits, hn::Set(di, 0x80000))), base);
    // The sign bit (t's bit 31) to the byte's bit 7.
    *codes = hn::OrAnd(code, hn::ShiftRight<24>(hn::BitCast(di, t)), hn::Set(di, 0x80));
    return hn::RebindMask(d, Fp8MidpointNear(bits, hn::Add(steps, hn::Set(di, 1))));
  }
}

// Whether the F32 path takes a group of scale s: a normal F32 (1 / s then is one too).
inline bool F32PathScale(float s) {
  return std::fabs(s) >= 0x1p-126f && std::fabs(s) <= 3.4028235e38f;
}

// A mask's lanes as bits, lane i at bit i (at most 64 lanes: SVE's widest F32 vectors).
template <class D, class M>
HWY_INLINE uint64_t MaskBits(D d, M lanes) {
  uint8_t bytes[8] = {};
  hn::StoreMaskBits(d, lanes, bytes);
  uint64_t bits;
  std::memcpy(&bits, bytes, sizeof bits);
  return bits;
}

// body(c + i) for each bit i of `bits`, in order.
template <class Body>
HWY_INLINE void ForEachBit(size_t c, uint64_t bits, const Body &body) {
  for (; bits; bits &= bits - 1) body(c + hwy::Num0BitsBelowLS1Bit_Nonzero64(bits));
}

// body(c + i) for each lane i that `lanes` holds of the vector at c, in order: the lanes a vector
// loop leaves to the oracle.
template <class D, class M, class Body>
HWY_INLINE void ForEachLane(D d, M lanes, size_t c, const Body &body) {
  ForEachBit(c, MaskBits(d, lanes), body);
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // INFINIOP_CPU_QUANT_BYTES_INL_H_
