// SPDX-License-Identifier: Apache-2.0
// MoeZLoss and MoeZLossGrad as the formulas read (docs/moe_z_loss.md): plain loops in double
// (exact/z_loss.h), the loss coeff * sum_t lse_t^2 / T and each grad element
// g * 2 coeff / T * lse_t * softmax(x_t)_j rounded once when stored. The oracle of the other
// devices, so nothing here is clever.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "exact/z_loss.h"
#include "ops/moe_z_loss.h"

namespace infiniop::cpu_reference {
namespace {

double loadFloat(const moe::RouterView &v, const void *data, size_t r, size_t c) {
  double value = 0;
  visitFloatStorage(v.dtype, [&](auto t) {
    value = toFloat(static_cast<const decltype(t) *>(data)[v.offset(r, c)]);
  });
  return value;
}

}  // namespace

void moe_z_loss(const moe::ZLossPlan &p, const moe::ZLossData &d) {
  double total = 0.0;
  for (size_t r = 0; r < p.rows; ++r) {
    double m = 0, s = 0;
    const double lse = exact::logSumExp(
        p.experts, [&](size_t j) { return loadFloat(p.x, d.x, r, j); }, &m, &s);
    total += lse * lse;
  }
  const double loss = total * p.coeff / static_cast<double>(std::max<size_t>(p.rows, 1));
  static_cast<float *>(d.loss)[p.loss.offset(0, 0)] = fromDouble<float>(loss);
}

void moe_z_loss_grad(const moe::ZLossPlan &p, const moe::ZLossData &d) {
  const double g = static_cast<const float *>(d.grad_loss)[p.grad_loss.offset(0, 0)];
  const double c = g * 2.0 * p.coeff / static_cast<double>(p.rows);
  std::vector<double> grad(p.experts);
  for (size_t r = 0; r < p.rows; ++r) {
    const auto x = [&](size_t j) { return loadFloat(p.x, d.x, r, j); };
    double m = 0, s = 0;
    const double lse = exact::logSumExp(p.experts, x, &m, &s);
    for (size_t j = 0; j < p.experts; ++j)
      grad[j] = std::isfinite(lse) ? c * lse * (std::exp(x(j) - m) / s) : NAN;
    visitFloatStorage(p.grad_x.dtype, [&](auto t) {
      using T = decltype(t);
      for (size_t j = 0; j < p.experts; ++j)
        static_cast<T *>(d.grad_x)[p.grad_x.offset(r, j)] = fromDouble<T>(grad[j]);
    });
  }
}

}  // namespace infiniop::cpu_reference
