// SPDX-License-Identifier: Apache-2.0
// tensor_buffer.h's functions but the per-element accessors, compiled once into the test support
// library (tests/CMakeLists.txt).
#include "tensor_buffer.h"

namespace infiniop_test {

TensorBuffer::TensorBuffer(std::vector<size_t> shape, std::vector<ptrdiff_t> strides,
                           infiniDtype_t dtype)
    : shape_(std::move(shape)), strides_(std::move(strides)), dtype_(dtype) {
  if (strides_.empty() && !shape_.empty()) {  // contiguous
    strides_.resize(shape_.size());
    ptrdiff_t step = 1;
    for (size_t d = shape_.size(); d-- > 0;) {
      strides_[d] = step;
      step *= static_cast<ptrdiff_t>(shape_[d] ? shape_[d] : 1);
    }
  }
  numel_ = 1;
  ptrdiff_t lowest = 0, highest = 0;
  for (size_t d = 0; d < shape_.size(); ++d) {
    numel_ *= shape_[d];
    if (shape_[d] == 0) continue;
    const ptrdiff_t reach = strides_[d] * static_cast<ptrdiff_t>(shape_[d] - 1);
    (reach < 0 ? lowest : highest) += reach;
  }
  // One guard element each side catches writes just outside the view.
  const size_t elements = numel_ ? static_cast<size_t>(highest - lowest + 1) : 0;
  bytes_.assign((elements + 2) * elementSize(), 0xAB);
  // Without elements every view is just the origin, kept inside the storage (between the
  // guards) so that it maps to device memory like any other view.
  origin_offset_ = static_cast<size_t>(numel_ ? -lowest + 1 : 1) * elementSize();
}

void TensorBuffer::fill(const std::function<float(size_t)> &value) {
  for (size_t i = 0; i < numel_; ++i) set(i, value(i));
}

void TensorBuffer::poison() {
  fill([](size_t) { return std::numeric_limits<float>::quiet_NaN(); });
}

infiniopTensorDescriptor_t TensorBuffer::descriptor() const {
  infiniopTensorDescriptor_t desc = nullptr;
  infiniopCreateTensorDescriptor(&desc, shape_.size(), shape_.data(), strides_.data(), dtype_);
  return desc;
}

std::vector<ptrdiff_t> columnMajorStrides(const std::vector<size_t> &shape) {
  std::vector<ptrdiff_t> strides(shape.size());
  ptrdiff_t step = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    strides[d] = step;
    step *= static_cast<ptrdiff_t>(shape[d] ? shape[d] : 1);
  }
  return strides;
}

std::vector<ptrdiff_t> paddedStrides(const std::vector<size_t> &shape) {
  std::vector<ptrdiff_t> strides(shape.size());
  ptrdiff_t step = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = step;
    step *= static_cast<ptrdiff_t>(shape[d]) + 1;
  }
  return strides;
}

}  // namespace infiniop_test
