// SPDX-License-Identifier: Apache-2.0
// Per-target lookups in the 16-bit activation tables (activation_table.h): one gather per vector.
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

// The F32 steps within which a product of one factor table entry and exact F32 operands lies of
// the oracle's value: the entry's rounding and the product's, each half an ulp, K = 1
// (gated-inl.h's RoundingWindow; the double's own 2^-53 is far inside its spare step).
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
template <class D, class V>
HWY_INLINE auto TableBoundaryNear(D d, V product, const hwy::bfloat16_t *) {
  const hn::RebindToSigned<D> di;
  const auto offset =
      hn::And(hn::Add(hn::BitCast(di, product), hn::Set(di, kTableProductWindow - 0x8000)),
              hn::Set(di, 0xffff));
  return hn::RebindMask(d, hn::Gt(hn::Set(di, 2 * kTableProductWindow + 1), offset));
}
// F16: its boundaries are the F32 values whose low 13 bits are 0x1000 from F16's smallest normal
// 2^-14 on (its overflow threshold 65520 among them); below, |v| + 2^-14 has them there too
// (F16's subnormal spacing 2^-24 is its spacing at 2^-14), and the addition's rounding (half a
// step of the sum) is within the window's spare steps. The same signed compare as BF16's.
template <class D, class V>
HWY_INLINE auto TableBoundaryNear(D d, V product, const hwy::float16_t *) {
  const hn::RebindToSigned<D> di;
  const V magnitude = hn::Abs(product);
  const V smallest_normal = hn::Set(d, 0x1p-14f);
  const V shifted = hn::IfThenElse(hn::Lt(magnitude, smallest_normal),
                                   hn::Add(magnitude, smallest_normal), magnitude);
  const auto offset =
      hn::And(hn::Add(hn::BitCast(di, shifted), hn::Set(di, kTableProductWindow - 0x1000)),
              hn::Set(di, 0x1fff));
  return hn::RebindMask(d, hn::Gt(hn::Set(di, 2 * kTableProductWindow + 1), offset));
}

// TableBoundaryNear, and the NaN lanes.
template <class D, class V, class T>
HWY_INLINE auto TableNear(D d, V product, const T *storage) {
  return hn::Or(TableBoundaryNear(d, product, storage), hn::IsNaN(product));
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // INFINIOP_CPU_TABLE_INL_H_
