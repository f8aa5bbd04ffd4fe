// SPDX-License-Identifier: Apache-2.0
// The `dim` attribute of the split operators: validated against the split tensor's rank.
#pragma once

#include <string>

#include "core/error.h"
#include "core/tensor.h"

namespace infiniop {

// Normalizes dim in [-ndim, ndim-1] to [0, ndim-1]; NULL tensor and bad dim are errors.
inline infiniStatus_t normalizeSplitDim(const char *op, const char *tensor_name,
                                        infiniopTensorDescriptor_t tensor, int64_t dim,
                                        int *normalized) {
  INFINIOP_CHECK(checkTensor(op, (std::string(tensor_name) + " descriptor").c_str(), tensor));
  const auto ndim = static_cast<int64_t>(tensor->ndim());
  if (dim < -ndim || dim >= ndim)
    return fail(INFINI_STATUS_BAD_PARAM, std::string(op) + ": dim " + std::to_string(dim) +
                                             " is out of range for " + tensor_name + " of rank " +
                                             std::to_string(ndim));
  *normalized = static_cast<int>(dim < 0 ? dim + ndim : dim);
  return INFINI_STATUS_SUCCESS;
}

}  // namespace infiniop
