// SPDX-License-Identifier: Apache-2.0
// Integer elements of an I32 or I64 TensorBuffer as int64 (the MoE index and count tensors), and
// a buffer's poison (every storage byte 0xA5, so that an unwritten output shows).
#pragma once

#include <cstdint>
#include <cstring>

#include "tensor_buffer.h"

namespace infiniop_test {

inline int64_t getInt(TensorBuffer &b, size_t i) {
  if (b.dtype() == INFINI_DTYPE_I64) {
    int64_t v;
    std::memcpy(&v, b.at(i), 8);
    return v;
  }
  int32_t v;
  std::memcpy(&v, b.at(i), 4);
  return v;
}
inline void setInt(TensorBuffer &b, size_t i, int64_t value) {
  if (b.dtype() == INFINI_DTYPE_I64) {
    std::memcpy(b.at(i), &value, 8);
  } else {
    const auto v = static_cast<int32_t>(value);
    std::memcpy(b.at(i), &v, 4);
  }
}
inline void poisonBytes(TensorBuffer &b) {
  std::memset(b.storageBytes(), 0xA5, b.storage().size());
}

}  // namespace infiniop_test
