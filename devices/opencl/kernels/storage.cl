// SPDX-License-Identifier: Apache-2.0
// The start of every OpenCL program (then math.cl and rounded.cl: the embedded `common`, see
// devices/opencl/CMakeLists.txt): the storage dtype chosen by the build options (-DSTORAGE_F32,
// -DSTORAGE_F16 or -DSTORAGE_BF16) and its loads and stores (one element, or 8 consecutive ones
// as a float8). OpenCL 1.2 C, no extension: F16 and BF16 are `ushort` bits converted here, round
// to nearest even, NaN canonical, exactly as src/core/dtype.h does it.

// Contraction would change the results per driver; every fused multiply-add here is an fma().
#pragma OPENCL FP_CONTRACT OFF

// Every helper is inlined, whatever the driver's cost model says: a functor left as a call
// keeps its in/out arrays in memory, and PoCL then vectorizes nothing across work-items.
#define INLINE inline __attribute__((always_inline))

// Every NaN a store writes is the canonical quiet NaN, positive (F32 0x7fc00000, F16 0x7e00, BF16
// 0x7fc0), as devices/cpu/convert-inl.h's: which NaN an operation passes on differs by device.
#define CANONICAL_NAN as_float(0x7fc00000u)

#if defined(STORAGE_F32)
typedef float storage_t;
INLINE float load_value(const __global storage_t *p, ulong i) {
  return p[i];
}
INLINE void store_value(__global storage_t *p, ulong i, float v) {
  p[i] = isnan(v) ? CANONICAL_NAN : v;
}
INLINE float8 load8(const __global storage_t *p, ulong i) {
  return vload8(0, p + i);
}
INLINE void store8(__global storage_t *p, ulong i, float8 v) {
  vstore8(select(v, (float8)CANONICAL_NAN, isnan(v)), 0, p + i);
}
#elif defined(STORAGE_BF16)
typedef ushort storage_t;
INLINE float load_value(const __global storage_t *p, ulong i) {
  return as_float((uint)p[i] << 16);
}
// Branch-free (a select), so that PoCL vectorizes the store across work-items.
INLINE ushort bf16_from_f32(float f) {
  const uint u = as_uint(f);
  const uint rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint quiet_nan = 0x7fc0u;
  return (ushort)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}
INLINE void store_value(__global storage_t *p, ulong i, float v) {
  p[i] = bf16_from_f32(v);
}
// One vector load and widening shift (the per-lane loop ran the MoE forward at 0.5x the cpu
// device); the store stays a loop, which PoCL turns into better code than convert_ushort8.
INLINE float8 load8(const __global storage_t *p, ulong i) {
  return as_float8(convert_uint8(vload8(0, p + i)) << 16);
}
INLINE void store8(__global storage_t *p, ulong i, float8 v) {
  for (int l = 0; l < 8; ++l) p[i + l] = bf16_from_f32(((float *)&v)[l]);
}
#elif defined(STORAGE_F16) && defined(__F16C__)
typedef ushort storage_t;
// x86 with F16C (PoCL on the CPU): the compiler's _Float16 conversions, one vcvtph2ps or
// vcvtps2ph per 8 work-items, exact, round to nearest even. The bit code below is long enough
// that clang's SLP vectorizer packs two operands' conversions into 2-lane vectors, which PoCL
// then cannot vectorize across work-items (F16 ran 4-12x slower than the cpu device).
// The load also quiets a signaling NaN, which no result can show: F32 arithmetic quiets it, and
// every store writes a NaN as 0x7e00.
INLINE float load_value(const __global storage_t *p, ulong i) {
  return (float)((const __global _Float16 *)p)[i];
}
INLINE void store_value(__global storage_t *p, ulong i, float v) {
  const ushort bits = as_ushort((_Float16)v);
  p[i] = isnan(v) ? 0x7e00u : bits;
}
INLINE float8 load8(const __global storage_t *p, ulong i) {
  float8 v;
  for (int l = 0; l < 8; ++l) ((float *)&v)[l] = load_value(p, i + l);
  return v;
}
INLINE void store8(__global storage_t *p, ulong i, float8 v) {
  for (int l = 0; l < 8; ++l) store_value(p, i + l, ((float *)&v)[l]);
}
#elif defined(STORAGE_F16)
typedef ushort storage_t;
// Both conversions are branch-free (selects) so that PoCL vectorizes them across work-items.
INLINE float load_value(const __global storage_t *p, ulong i) {
  const uint h = p[i];
  const uint sign = (h & 0x8000u) << 16;
  const uint exponent = (h >> 10) & 0x1fu;
  const uint mantissa = h & 0x3ffu;
  const float normal = as_float(((exponent + 112u) << 23) | (mantissa << 13));
  const float inf_or_nan = as_float(0x7f800000u | (mantissa << 13));
  const float subnormal = (float)mantissa * 0x1p-24f;  // or zero; exact
  float magnitude = exponent == 0x1fu ? inf_or_nan : normal;
  magnitude = exponent == 0u ? subnormal : magnitude;
  return as_float(as_uint(magnitude) | sign);
}
INLINE ushort f16_from_f32(float f) {
  const uint u = as_uint(f);
  const uint sign = (u >> 16) & 0x8000u;
  const uint a = u & 0x7fffffffu;
  const uint normal = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
  // Below 2^-14 (F16 subnormal or zero): adding 0.5 rounds at 2^-24, nearest even.
  const uint subnormal = as_uint(as_float(a) + 0.5f) - as_uint(0.5f);
  uint bits = a < 0x38800000u ? subnormal : normal;
  bits = a >= 0x477ff000u ? 0x7c00u : bits;                  // rounds to >= 65520: infinity
  return a > 0x7f800000u ? 0x7e00u : (ushort)(sign | bits);  // NaN: canonical
}
INLINE void store_value(__global storage_t *p, ulong i, float v) {
  p[i] = f16_from_f32(v);
}
INLINE float8 load8(const __global storage_t *p, ulong i) {
  return vload_half8(0, (const __global half *)(p + i));  // exact; core OpenCL 1.2
}
INLINE void store8(__global storage_t *p, ulong i, float8 v) {
  for (int l = 0; l < 8; ++l) p[i + l] = f16_from_f32(((float *)&v)[l]);
}
#else
#error "build with -DSTORAGE_F32, -DSTORAGE_F16 or -DSTORAGE_BF16"
#endif
