// SPDX-License-Identifier: Apache-2.0
// What the cpu device's MoeFinalizeRoutingV2 forward (moe_finalize_routing.cc) and grad
// (moe_finalize_routing_grad.cc) share beyond the row primitives of rows-inl.h: scalar loads and
// stores of one element, row and scale lookups, the dtype visit. Two translation units, so that
// neither takes more than about 22 s of the release build (issue 26).
#if defined(INFINIOP_CPU_MOE_FINALIZE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef INFINIOP_CPU_MOE_FINALIZE_INL_H_
#undef INFINIOP_CPU_MOE_FINALIZE_INL_H_
#else
#define INFINIOP_CPU_MOE_FINALIZE_INL_H_
#endif

#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "cpu/rows-inl.h"
#include "hwy/highway.h"
#include "ops/moe_finalize_routing.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {

HWY_INLINE float ScalarF32(const float *p) {
  return *p;
}
HWY_INLINE float ScalarF32(const hwy::bfloat16_t *p) {
  uint16_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return f32FromBf16(bits);
}
HWY_INLINE float ScalarF32(const hwy::float16_t *p) {
  uint16_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return f32FromF16(bits);
}
// A NaN stored is the canonical quiet NaN, as every vector store (convert-inl.h).
HWY_INLINE float CanonicalNaN(float v) {
  if (!std::isnan(v)) return v;
  const uint32_t bits = 0x7fc00000u;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}
HWY_INLINE void StoreScalar(float v, float *p) {
  *p = CanonicalNaN(v);
}
HWY_INLINE void StoreScalar(float v, hwy::bfloat16_t *p) {
  const uint16_t bits = bf16FromF32(CanonicalNaN(v));
  std::memcpy(p, &bits, sizeof(bits));
}
HWY_INLINE void StoreScalar(float v, hwy::float16_t *p) {
  const uint16_t bits = f16FromF32(CanonicalNaN(v));
  std::memcpy(p, &bits, sizeof(bits));
}

// Row `row` of a row view over `data` (nullptr when the view is absent).
template <class T>
HWY_INLINE T *RowOf(const gather::RowView &view, const void *data, size_t row) {
  return view.present ? const_cast<T *>(static_cast<const T *>(data)) + view.rowOffset(row)
                      : nullptr;
}

// scales[r, k] (of T, or F32 where `f32`), or 1 where the plan has no scales: presence is the
// plan's (the descriptor given at creation), never the data pointer's, which is ignored (never
// read) for an absent tensor.
template <class T>
HWY_INLINE float ScaleOf(const gather::TableView &scales, bool f32, const void *data, size_t r,
                         size_t k) {
  if (!scales.present) return 1.0f;
  return f32 ? static_cast<const float *>(data)[scales.offset(r, k)]
             : ScalarF32(static_cast<const T *>(data) + scales.offset(r, k));
}

// Whether a row view's rows can be read in place (and so prefetched).
HWY_INLINE bool Contiguous(const gather::RowView &view) {
  return view.col_stride == 1;
}

// Calls fn(T{}) with the Highway storage type of the dtype.
template <class Fn>
HWY_INLINE void VisitStorage(infiniDtype_t dtype, const Fn &fn) {
  if (dtype == INFINI_DTYPE_BF16) return fn(hwy::bfloat16_t{});
  if (dtype == INFINI_DTYPE_F16) return fn(hwy::float16_t{});
  return fn(float{});
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // INFINIOP_CPU_MOE_FINALIZE_INL_H_
