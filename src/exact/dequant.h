// SPDX-License-Identifier: Apache-2.0
// DequantSwigluQuant's values in double (docs/dequant_swiglu_quant.md): an INT32 accumulator
// dequantized, d = ((x + bias_i) w) s_a + bias_f, each step one double rounding in that order,
// then z = silu(gate) multiplier, exact::Gated<silu>'s formula on double inputs. The reference and
// cpu devices call these; kernels/dequant_swiglu_quant.cl restates them.
#pragma once

#include <cstdint>

#include "exact/limits.h"
#include "exact/sigmoid.h"

namespace infiniop::exact {

// One accumulator's dequantized value. x + bias_i is exact (in int64, then a double: below 2^33);
// w and s_a are 1 where absent (a product by 1 is exact, -0 and NaN kept); bias_f is added only
// where has_bias_f (adding a +0 would turn a -0 into +0).
inline double dequantValue(int32_t x, int32_t bias_i, float w, float s_a, bool has_bias_f,
                           double bias_f) {
  double d = static_cast<double>(static_cast<int64_t>(x) + static_cast<int64_t>(bias_i));
  d = d * static_cast<double>(w);
  d = d * static_cast<double>(s_a);
  if (has_bias_f) d = d + bias_f;
  return d;
}

// silu(gate) multiplier: exact::Gated<silu> on double inputs. Far left (gate below about -709)
// exp(-gate) overflows and silu is -0, the limit's sign: timesNegativeTail makes the product
// multiplier * -0 (the exact product's sign), or -multiplier for an infinite multiplier; at
// gate = -inf an infinite multiplier gives NaN, as for SwiGluQuant.
inline double siluGated(double gate, double multiplier) {
  return timesNegativeTail(multiplier, silu(gate), gate);
}

}  // namespace infiniop::exact
