// SPDX-License-Identifier: Apache-2.0
// Test-side tensors: a strided view over owned storage of any floating dtype, with element
// access by logical index, so every layout can be filled and read the same way.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "infiniop.h"

namespace infiniop_test {

class TensorBuffer {
 public:
  TensorBuffer(std::vector<size_t> shape, std::vector<ptrdiff_t> strides, infiniDtype_t dtype);

  TensorBuffer(std::vector<size_t> shape, infiniDtype_t dtype) : TensorBuffer(shape, {}, dtype) {}

  size_t numel() const { return numel_; }
  const std::vector<size_t> &shape() const { return shape_; }
  const std::vector<ptrdiff_t> &strides() const { return strides_; }
  infiniDtype_t dtype() const { return dtype_; }
  size_t elementSize() const { return infiniop::dtypeSize(dtype_); }
  void *data() { return bytes_.data() + origin_offset_; }
  const std::vector<uint8_t> &storage() const { return bytes_; }
  // The first byte of the storage (a guard element), for copies of the whole storage.
  uint8_t *storageBytes() { return bytes_.data(); }

  // Address of the element with flat row-major logical index i.
  char *at(size_t i) {
    ptrdiff_t offset = 0;
    for (size_t d = shape_.size(); d-- > 0;) {
      offset += static_cast<ptrdiff_t>(i % shape_[d]) * strides_[d];
      i /= shape_[d];
    }
    return static_cast<char *>(data()) + offset * static_cast<ptrdiff_t>(elementSize());
  }

  float get(size_t i) {
    const char *p = at(i);
    uint16_t h;
    float f;
    switch (dtype_) {
      case INFINI_DTYPE_F16:
        std::memcpy(&h, p, 2);
        return infiniop::f32FromF16(h);
      case INFINI_DTYPE_BF16:
        std::memcpy(&h, p, 2);
        return infiniop::f32FromBf16(h);
      default:
        std::memcpy(&f, p, 4);
        return f;
    }
  }

  void set(size_t i, float v) {
    char *p = at(i);
    uint16_t h;
    switch (dtype_) {
      case INFINI_DTYPE_F16:
        h = infiniop::f16FromF32(v);
        std::memcpy(p, &h, 2);
        break;
      case INFINI_DTYPE_BF16:
        h = infiniop::bf16FromF32(v);
        std::memcpy(p, &h, 2);
        break;
      default:
        std::memcpy(p, &v, 4);
    }
  }

  void fill(const std::function<float(size_t)> &value);
  void poison();

  // A descriptor for this view; the caller destroys it.
  infiniopTensorDescriptor_t descriptor() const;

 private:
  std::vector<size_t> shape_;
  std::vector<ptrdiff_t> strides_;
  infiniDtype_t dtype_;
  size_t numel_ = 0;
  std::vector<uint8_t> bytes_;
  size_t origin_offset_ = 0;
};

// Strides of a column-major layout (the first dim moves fastest).
std::vector<ptrdiff_t> columnMajorStrides(const std::vector<size_t> &shape);

// Row-major strides with every dim padded by one element: nothing merges, nothing is dense.
std::vector<ptrdiff_t> paddedStrides(const std::vector<size_t> &shape);

// Distance between adjacent values of `dtype` at magnitude |v| (subnormal spacing below).
inline double ulpOf(infiniDtype_t dtype, double v) {
  const int mantissa_bits = dtype == INFINI_DTYPE_F16 ? 10 : dtype == INFINI_DTYPE_BF16 ? 7 : 23;
  const int min_exponent = dtype == INFINI_DTYPE_F16 ? -14 : -126;
  int e = v == 0 ? min_exponent : std::ilogb(v);
  if (e < min_exponent) e = min_exponent;
  return std::ldexp(1.0, e - mantissa_bits);
}

// True when a finite value rounds to an infinity when stored in `dtype` (round to nearest).
inline bool roundsToInfinity(infiniDtype_t dtype, double v) {
  const double limit = dtype == INFINI_DTYPE_F16    ? 65520.0
                       : dtype == INFINI_DTYPE_BF16 ? 0x1.ffp127
                                                    : 0x1.ffffffp127;
  return std::fabs(v) >= limit;
}

// Signed test inputs over [-range, range] with a share near zero, deterministic per seed.
inline float signedValue(uint64_t seed, size_t i, float range) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
  z ^= z >> 31;
  z *= 0x94D049BB133111EBull;
  z ^= z >> 29;
  const double unit = static_cast<double>(z >> 11) * 0x1p-53;  // [0, 1)
  const double signed_unit = 2.0 * unit - 1.0;
  if ((z & 7) == 0) return static_cast<float>(signed_unit * 1e-3);  // near zero
  return static_cast<float>(signed_unit * range);
}

}  // namespace infiniop_test
