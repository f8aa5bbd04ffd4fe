// SPDX-License-Identifier: Apache-2.0
// Tensor descriptors: validated once at creation, then read by operator descriptors.
#pragma once

#include <string>
#include <vector>

#include "core/object.h"
#include "infiniop/tensor_descriptor.h"

struct InfiniopTensorDescriptor {
  InfiniopTensorDescriptor(infiniDtype_t t, std::vector<size_t> dims, std::vector<ptrdiff_t> steps)
      : dtype(t), shape(std::move(dims)), strides(std::move(steps)) {}
  ~InfiniopTensorDescriptor() { header.magic = 0; }

  infiniop::ObjectHeader header{infiniop::ObjectHeader::kLive,
                                infiniop::ObjectHeader::tensorKind()};
  infiniDtype_t dtype;
  std::vector<size_t> shape;
  std::vector<ptrdiff_t> strides;  // in elements, one per dim; zeros when there is no element

  size_t ndim() const { return shape.size(); }
  size_t numel() const;
};

namespace infiniop {

using Tensor = InfiniopTensorDescriptor;

// NULL_POINTER for NULL, BAD_PARAM for anything that is not a live tensor descriptor; the
// message reads "<where>: <name> is ...".
infiniStatus_t checkTensor(const char *where, const char *name, const Tensor *tensor);

std::string shapeString(const std::vector<size_t> &shape);  // "[4,5]"
std::string stridesString(const std::vector<ptrdiff_t> &strides);

// Row-major strides of a contiguous tensor of this shape; zeros for an empty one.
std::vector<ptrdiff_t> contiguousStrides(const std::vector<size_t> &shape);

// Element offsets of the lowest and highest element relative to element [0,...,0]; {0, 0} for an
// empty tensor. Creation guarantees both fit in ptrdiff_t bytes.
struct ElementSpan {
  ptrdiff_t lowest = 0, highest = 0;
};
ElementSpan elementSpan(const std::vector<size_t> &shape, const std::vector<ptrdiff_t> &strides);

// True when two different indices of the view address the same element (a broadcast stride, or
// strides that interleave). Decided by sorting the dims by |stride|: each must step over the
// whole extent of the smaller ones.
bool hasSelfOverlap(const std::vector<size_t> &shape, const std::vector<ptrdiff_t> &strides);

}  // namespace infiniop
