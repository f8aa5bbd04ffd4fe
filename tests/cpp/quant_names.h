// SPDX-License-Identifier: Apache-2.0
// The short names the quantized operators' tests (gated_quant_test.cc,
// dequant_swiglu_quant_test.cc, moe_init_routing_quant_test.cc) give the dtypes and the quant
// attributes they use.
#pragma once

#include "infiniop.h"

namespace infiniop_test::quant_names {

constexpr auto F32 = INFINI_DTYPE_F32;
constexpr auto F16 = INFINI_DTYPE_F16;
constexpr auto BF16 = INFINI_DTYPE_BF16;
constexpr auto I8 = INFINI_DTYPE_I8;
constexpr auto F8 = INFINI_DTYPE_F8;
constexpr auto I32 = INFINI_DTYPE_I32;
constexpr auto I64 = INFINI_DTYPE_I64;
constexpr auto kDynamic = INFINIOP_QUANT_DYNAMIC;
constexpr auto kStatic = INFINIOP_QUANT_STATIC;
constexpr auto kScaleF32 = INFINIOP_QUANT_SCALE_F32;
constexpr auto kUe8m0 = INFINIOP_QUANT_SCALE_UE8M0;

}  // namespace infiniop_test::quant_names
