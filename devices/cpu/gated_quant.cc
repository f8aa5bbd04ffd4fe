// SPDX-License-Identifier: Apache-2.0
// TEMPORARY: being written.
#include "ops/gated_quant.h"

namespace infiniop::cpu {
void swiglu_quant(const quant::GatedQuantPlan &, const quant::GatedQuantData &) {}
void gelu_mul_quant(const quant::GatedQuantPlan &, const quant::GatedQuantData &) {}
}  // namespace infiniop::cpu
