// SPDX-License-Identifier: Apache-2.0
// SwiGluQuant, GeluMulQuant and ClippedSwigluQuant as the formulas read (docs/swiglu_quant.md):
// each row's values z = act(x1) x2 m in double (exact/gated.h's formula; ClippedSwiglu's,
// exact/clipped_swiglu.h, clamp_mode 0), each group's scale from their amax and each byte z / s
// rounded once (ops/gated_quant_exact.h). The oracle of the other devices.
#include <vector>

#include "exact/clipped_swiglu.h"
#include "exact/gated.h"
#include "exact/gelu.h"
#include "exact/sigmoid.h"
#include "ops/gated_quant.h"
#include "ops/gated_quant_exact.h"

namespace infiniop::cpu_reference {
namespace {

using quant::GatedQuantData;
using quant::GatedQuantPlan;

template <class Gate>
void gatedQuant(const GatedQuantPlan &p, const GatedQuantData &d, const Gate &gate) {
  std::vector<double> z(p.half);
  quant::exactGatedQuantRows(p, d, gate, 0, p.rows, z.data());
}

}  // namespace

void swiglu_quant(const GatedQuantPlan &p, const GatedQuantData &d) {
  gatedQuant(p, d, exact::Gated<exact::silu>());
}

void gelu_mul_quant(const GatedQuantPlan &p, const GatedQuantData &d) {
  if (p.activation == quant::GateActivation::gelu_tanh)
    gatedQuant(p, d, exact::Gated<exact::geluTanh>());
  else
    gatedQuant(p, d, exact::Gated<exact::geluErf>());
}

void clipped_swiglu_quant(const GatedQuantPlan &p, const GatedQuantData &d) {
  gatedQuant(p, d, exact::ClippedSwiglu{p.clipped});
}

}  // namespace infiniop::cpu_reference
