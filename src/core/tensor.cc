// SPDX-License-Identifier: Apache-2.0
#include "core/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <numeric>

#include "core/dtype.h"
#include "core/error.h"

size_t InfiniopTensorDescriptor::numel() const {
  return std::accumulate(shape.begin(), shape.end(), size_t{1}, std::multiplies<size_t>());
}

namespace infiniop {

template <class T>
static std::string listString(const std::vector<T> &values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? "," : "") + std::to_string(values[i]);
  return s + "]";
}
std::string shapeString(const std::vector<size_t> &shape) {
  return listString(shape);
}
std::string stridesString(const std::vector<ptrdiff_t> &strides) {
  return listString(strides);
}

std::vector<ptrdiff_t> contiguousStrides(const std::vector<size_t> &shape) {
  std::vector<ptrdiff_t> strides(shape.size());
  if (std::find(shape.begin(), shape.end(), size_t{0}) != shape.end()) return strides;  // zeros
  ptrdiff_t step = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = step;
    step *= static_cast<ptrdiff_t>(shape[d] == 0 ? 1 : shape[d]);
  }
  return strides;
}

ElementSpan elementSpan(const std::vector<size_t> &shape, const std::vector<ptrdiff_t> &strides) {
  ElementSpan span;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return ElementSpan{};
    const ptrdiff_t reach = strides[d] * static_cast<ptrdiff_t>(shape[d] - 1);
    (reach < 0 ? span.lowest : span.highest) += reach;
  }
  return span;
}

bool hasSelfOverlap(const std::vector<size_t> &shape, const std::vector<ptrdiff_t> &strides) {
  std::vector<size_t> dims;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return false;
    if (shape[d] > 1) dims.push_back(d);
  }
  std::sort(dims.begin(), dims.end(),
            [&](size_t a, size_t b) { return std::abs(strides[a]) < std::abs(strides[b]); });
  ptrdiff_t covered = 0;  // extent spanned by the dims already visited, in elements
  for (size_t d : dims) {
    const ptrdiff_t step = std::abs(strides[d]);
    if (step <= covered) return true;
    covered += step * static_cast<ptrdiff_t>(shape[d] - 1);
  }
  return false;
}

static infiniStatus_t createTensor(infiniopTensorDescriptor_t *desc, size_t ndim,
                                   const size_t *shape, const ptrdiff_t *strides, int dtype_value) {
  const char *where = "infiniopCreateTensorDescriptor: ";
  if (!desc) return fail(INFINI_STATUS_NULL_POINTER, std::string(where) + "desc is NULL");
  if (ndim > INFINIOP_MAX_NDIM)
    return fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                where + std::to_string(ndim) + " dimensions; at most " +
                    std::to_string(INFINIOP_MAX_NDIM) + " are supported");
  if (ndim > 0 && !shape)
    return fail(INFINI_STATUS_NULL_POINTER, std::string(where) + "shape is NULL");
  if (!isKnownDtype(dtype_value))
    return fail(INFINI_STATUS_BAD_TENSOR_DTYPE,
                where + std::string("unknown dtype ") + std::to_string(dtype_value));
  const auto dtype = static_cast<infiniDtype_t>(dtype_value);
  const size_t element_size = dtypeSize(dtype);

  std::vector<size_t> dims(shape, shape + ndim);
  std::vector<ptrdiff_t> steps(ndim);
  // Every element count, stride and byte offset of a tensor with elements fits in ptrdiff_t
  // with a factor 2 to spare, so that the frameworks' own arithmetic on them (an interleaved
  // split doubles a stride; an extent ends one past its last element) cannot overflow. An empty
  // tensor addresses nothing: its strides are not checked, and the frameworks never use them.
  const size_t limit =
      static_cast<size_t>(std::numeric_limits<ptrdiff_t>::max()) / element_size / 2;
  size_t count = 1;
  const bool empty = std::find(dims.begin(), dims.end(), size_t{0}) != dims.end();
  for (size_t d = 0; d < ndim && !empty; ++d) {
    if (count > limit / dims[d])
      return fail(INFINI_STATUS_BAD_TENSOR_SHAPE, where + std::string("element count of shape ") +
                                                      shapeString(dims) + " overflows");
    count *= dims[d];
  }
  if (strides) {
    steps.assign(strides, strides + ndim);
    // |stride| each, and 1 + sum of |stride| * (size - 1), bound every offset and extent.
    size_t reach = 1;
    for (size_t d = 0; d < ndim && !empty; ++d) {
      const size_t step = steps[d] < 0 ? 0 - static_cast<size_t>(steps[d]) : steps[d];
      const size_t span = dims[d] - 1;
      if (step > limit || (span != 0 && step > limit / span) || reach > limit - step * span)
        return fail(INFINI_STATUS_BAD_TENSOR_STRIDES,
                    where + std::string("strides ") + stridesString(steps) + " over shape " +
                        shapeString(dims) + " overflow byte offsets");
      reach += step * span;
    }
  } else {
    steps = contiguousStrides(dims);
  }
  if (empty) steps.assign(ndim, 0);  // addresses nothing: no stride is ever used
  *desc = new InfiniopTensorDescriptor(dtype, std::move(dims), std::move(steps));
  return succeed();
}

}  // namespace infiniop

infiniStatus_t infiniop::checkTensor(const char *where, const char *name, const Tensor *tensor) {
  return checkObject(where, name, tensor, ObjectHeader::tensorKind());
}

extern "C" infiniStatus_t infiniopCreateTensorDescriptor(infiniopTensorDescriptor_t *desc,
                                                         size_t ndim, const size_t *shape,
                                                         const ptrdiff_t *strides,
                                                         infiniDtype_t dtype) {
  return infiniop::guarded("infiniopCreateTensorDescriptor", [&] {
    return infiniop::createTensor(desc, ndim, shape, strides, infiniop::enumValue(dtype));
  });
}

extern "C" infiniStatus_t infiniopDestroyTensorDescriptor(infiniopTensorDescriptor_t desc) {
  return infiniop::guarded("infiniopDestroyTensorDescriptor", [&] {
    INFINIOP_CHECK(infiniop::checkTensor("infiniopDestroyTensorDescriptor", "desc", desc));
    delete desc;
    return infiniop::succeed();
  });
}
