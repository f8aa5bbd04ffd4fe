// SPDX-License-Identifier: Apache-2.0
// Reference functors of the gated activations, out = act(x1) * x2 and its gradient, in double.
// SwiGlu (silu) and GeluMul (gelu) are instances; the cpu and opencl devices round their 16-bit
// outputs from these where their own F32 value is too near a rounding boundary.
#pragma once

#include "exact/limits.h"

namespace infiniop::exact {

template <double (*Act)(double)>
struct Gated {
  static constexpr int kOutputs = 1, kInputs = 2;  // out <- (x1, x2)
  void operator()(double &out, float x1, float x2) const {
    out = timesNegativeTail(x2, Act(x1), x1);
  }
};

template <double (*Act)(double), double (*Derivative)(double)>
struct GatedBackward {
  static constexpr int kOutputs = 2, kInputs = 3;  // (grad1, grad2) <- (out_grad, x1, x2)
  void operator()(double &grad1, double &grad2, float out_grad, float x1, float x2) const {
    const double dy = out_grad;
    grad1 = timesNegativeTail(dy * x2, Derivative(x1), x1);
    grad2 = timesNegativeTail(dy, Act(x1), x1);
  }
};

}  // namespace infiniop::exact
