// SPDX-License-Identifier: Apache-2.0
// Per-target lookups in the 16-bit activation tables (activation_table.h): one gather per vector
// (or its loads, LookupCodes).
// A gather reads the same entries on every target, so what the 16-bit paths compute from it is
// one arithmetic everywhere.
#if defined(INFINIOP_CPU_TABLE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef INFINIOP_CPU_TABLE_INL_H_
#undef INFINIOP_CPU_TABLE_INL_H_
#else
#define INFINIOP_CPU_TABLE_INL_H_
#endif

#include <type_traits>

#include "cpu/activation_table.h"
#include "cpu/convert-inl.h"
#include "cpu/ieee-inl.h"
#include "cpu/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Whether the 16-bit storage type T is BF16 (activation_table.h's kBf16), else F16.
template <class T>
constexpr bool IsBf16() {
  return std::is_same_v<T, hwy::bfloat16_t>;
}

// table[bits of x] for x, a vector of 16-bit values widened exactly to F32: BF16's bits are the
// F32's high half, F16's come back from the exact conversion.
template <class D, class V>
HWY_INLINE V Lookup(D d, const float *table, V x, const hwy::bfloat16_t *) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  return hn::GatherIndex(d, table, hn::BitCast(di, hn::ShiftRight<16>(hn::BitCast(du, x))));
}
template <class D, class V>
HWY_INLINE V Lookup(D d, const float *table, V x, const hwy::float16_t *) {
  const hn::RebindToSigned<D> di;
  return hn::GatherIndex(d, table, hn::BitCast(di, F32ToF16Bits(d, x)));
}

// Lookup for the lanes' 16-bit codes as they lie in memory (BF16 and F16 storage alike): the
// entries loaded one by one into an aligned block, then read as one vector. Zen 4 takes about 18
// cycles for a 16-lane gather, more than the 16 loads and stores (0.39 against 0.30 ns an
// element in cache); callers where the gather dominated their loop use this.
template <class D>
HWY_INLINE hn::Vec<D> LookupCodes(D d, const float *HWY_RESTRICT table,
                                  const uint16_t *HWY_RESTRICT codes) {
  HWY_ALIGN float entries[hn::MaxLanes(d)];
  for (size_t i = 0; i < hn::Lanes(d); ++i) entries[i] = table[codes[i]];
  return hn::Load(d, entries);
}

// The F32 steps (their bits' integer distance) within which a product of one factor table entry
// and exact F32 operands lies of the oracle's value: the entry's rounding (u |value|, at most a
// step) and the product's (half a step), 3 steps where a binade boundary halves the step below,
// plus one to spare (the double's own 2^-53 is far inside it). A product with more rounded
// factors takes 2 steps more for each (ClippedSwiglu's b + bias and dy (b + bias)).
constexpr int32_t kTableProductWindow = 4;

// The lanes of a product from the factor tables whose exact value may round otherwise: near a
// rounding boundary of T. Callers add the lanes the oracle must take for another reason: a NaN (a
// marked entry's, or a NaN operand's or inf times 0, whose NaN the oracle gives too; TableNear). An
// overflow to infinity needs no test where the operands are exact: the exact value is then above
// every 16-bit type's overflow threshold.
//
// BF16: its boundaries are the F32 values whose low 16 bits are 0x8000, subnormals included, and
// a product is within the window there too (the entry's relative error is below half a subnormal
// step, the product's rounding half a step), so no tiny lanes need the oracle: two integer
// operations and a compare, the offsets small enough for a signed one.
template <int32_t kWindow = kTableProductWindow, class D, class V>
HWY_INLINE auto TableBoundaryNear(D d, V product, const hwy::bfloat16_t *) {
  const hn::RebindToSigned<D> di;
  const auto offset = hn::And(hn::Add(hn::BitCast(di, product), hn::Set(di, kWindow - 0x8000)),
                              hn::Set(di, 0xffff));
  return hn::RebindMask(d, hn::Gt(hn::Set(di, 2 * kWindow + 1), offset));
}
// F16: its boundaries are the F32 values whose low 13 bits are 0x1000 from F16's smallest normal
// 2^-14 on (its overflow threshold 65520 among them); below, |v| + 2^-14 has them there too
// (F16's subnormal spacing 2^-24 is its spacing at 2^-14), and the addition's rounding (half a
// step of the sum) is within the window's spare steps. The same signed compare as BF16's.
template <int32_t kWindow = kTableProductWindow, class D, class V>
HWY_INLINE auto TableBoundaryNear(D d, V product, const hwy::float16_t *) {
  const hn::RebindToSigned<D> di;
  const V magnitude = hn::Abs(product);
  const V smallest_normal = hn::Set(d, 0x1p-14f);
  const V shifted = hn::IfThenElse(hn::Lt(magnitude, smallest_normal),
                                   hn::Add(magnitude, smallest_normal), magnitude);
  const auto offset = hn::And(hn::Add(hn::BitCast(di, shifted), hn::Set(di, kWindow - 0x1000)),
                              hn::Set(di, 0x1fff));
  return hn::RebindMask(d, hn::Gt(hn::Set(di, 2 * kWindow + 1), offset));
}

// TableBoundaryNear, and the NaN lanes.
template <class D, class V, class T>
HWY_INLINE auto TableNear(D d, V product, const T *storage) {
  return hn::Or(TableBoundaryNear(d, product, storage), hn::IsNaN(product));
}

// Where a rounding boundary of T lies: the bits kept of an F32 value to truncate it to T's
// interval (kHigh) and the boundary's low bits in it (kMid); and the smallest magnitude that
// DecideBeside decides (kSmallest: from 2^-60 on, its terms stay normal numbers, which x86 adds
// and multiplies without a microcode assist (gelu_tanh's far-left values near 1e-37 made BF16
// GeluMulBackward tanh 2x slower), and BF16's dy x2 is normal, so exact, as act' < 1.2; F16's
// values below 2^-14 sit on its subnormal grid).
template <class T>
struct Boundary;
template <>
struct Boundary<hwy::bfloat16_t> {
  static constexpr uint32_t kHigh = 0xffff0000u, kMid = 0x8000u;
  static constexpr float kSmallest = 0x1p-60f;
};
template <>
struct Boundary<hwy::float16_t> {
  static constexpr uint32_t kHigh = 0xffffe000u, kMid = 0x1000u;
  static constexpr float kSmallest = 0x1p-14f;
};

// A product p_in = RN(hi b) of a factor entry hi (b exact) whose lanes are near a boundary of T
// (TableBoundaryNear), decided without the oracle where the pair hi + lo (activation_table.h:
// within 2^-48 of the oracle's double) tells on which side of the nearest boundary m the
// oracle's value lies: (p - m) + (hi b - p) + lo b, the first term exact (p and m are steps
// apart), the second exact (ProductError), so that the sum is that side's distance to within
// about 2^-46 |m|; beyond 2^-44 |m| its sign decides, and the lane becomes the F32 one step from
// m on that side, which rounds to the oracle's 16-bit value. Returns p with the decided lanes
// replaced and adds the near lanes it leaves to *open: a distance within 2^-44 |m| (but for an
// exact tie, below), a magnitude below kSmallest, a NaN (lo is NaN where the pair holds no such
// bound).
template <class D, class V, class M, class T>
HWY_INLINE V DecideBeside(D d, V p_in, V hi, V lo, V b, M *open, const T *storage) {
  const hn::RebindToUnsigned<D> du;
  const auto near = TableBoundaryNear(d, p_in, storage);
  // The other lanes (NaN too) compute with ones: no subnormal term anywhere.
  const auto normal = hn::Ge(hn::Abs(p_in), hn::Set(d, Boundary<T>::kSmallest));
  const V one = hn::Set(d, 1.0f), zero = hn::Zero(d);
  const V p = hn::IfThenElse(normal, p_in, one);
  hi = hn::IfThenElse(normal, hi, one);
  lo = hn::IfThenElse(normal, lo, zero);
  b = hn::IfThenElse(normal, b, one);
  const auto m_bits = hn::Or(hn::And(hn::BitCast(du, p), hn::Set(du, Boundary<T>::kHigh)),
                             hn::Set(du, Boundary<T>::kMid));
  const V m = hn::BitCast(d, m_bits);
  const V error = ProductError(d, hi, b, p);
  const V side = hn::Add(hn::Sub(p, m), Fma(d, lo, b, error));
  const auto sided =
      hn::And(normal, hn::Gt(hn::Abs(side), hn::Mul(hn::Abs(m), hn::Set(d, 0x1p-44f))));
  // A tie: p is the boundary and the exact product of the double itself (lo = 0, error = 0), as
  // the oracle's double product is, which it rounds to even as the store does (act' = 1 far
  // right).
  const auto tie =
      hn::And(hn::And(normal, hn::Eq(p, m)), hn::And(hn::Eq(lo, zero), hn::Eq(error, zero)));
  // One step away from zero where side has m's sign, else toward it.
  const auto away = hn::RebindMask(
      du, hn::Eq(hn::ShiftRight<31>(hn::BitCast(du, hn::Xor(side, m))), hn::Zero(du)));
  const auto beside =
      hn::IfThenElse(away, hn::Add(m_bits, hn::Set(du, 1u)), hn::Sub(m_bits, hn::Set(du, 1u)));
  *open = hn::Or(*open, hn::AndNot(hn::Or(sided, tie), near));
  return hn::IfThenElse(hn::And(near, sided), hn::BitCast(d, beside), p_in);
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // INFINIOP_CPU_TABLE_INL_H_
