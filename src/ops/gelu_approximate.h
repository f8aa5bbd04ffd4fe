// SPDX-License-Identifier: Apache-2.0
// The kernel of a gelu approximation, for the operators that take one (GeluMul, Gelu, ...).
#pragma once

#include <string>

#include "core/error.h"
#include "infiniop/ops/gelu_mul.h"
#include "kernels/list.h"

namespace infiniop {

// `raw` is the approximation as an int: C callers may pass any value (see enumValue).
inline infiniStatus_t chooseGeluKernel(const char *op, int raw, KernelId erf, KernelId tanh,
                                       KernelId *kernel) {
  if (raw != INFINIOP_GELU_APPROXIMATE_NONE && raw != INFINIOP_GELU_APPROXIMATE_TANH)
    return fail(INFINI_STATUS_BAD_PARAM, std::string(op) + ": approximate " + std::to_string(raw) +
                                             " is neither NONE (0) nor TANH (1)");
  *kernel = raw == INFINIOP_GELU_APPROXIMATE_TANH ? tanh : erf;
  return INFINI_STATUS_SUCCESS;
}

}  // namespace infiniop
