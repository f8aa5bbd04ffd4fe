// SPDX-License-Identifier: Apache-2.0
// The router z-loss's row function in double, as the formula reads (docs/moe_z_loss.md): the
// reference device's, so nothing here is clever.
#pragma once

#include <cmath>
#include <cstddef>

namespace infiniop::exact {

// lse = logsumexp(x[0..n)) = m + log(sum_j exp(x_j - m)), m = max: NaN where any x_j is NaN, m
// itself where m = +-inf (the limit: every element -inf gives -inf, a +inf gives +inf).
// *sum takes the sum where m is finite.
template <class Load>
double logSumExp(size_t n, const Load &x, double *m_out, double *sum) {
  double m = -INFINITY;
  for (size_t j = 0; j < n; ++j) {
    const double v = x(j);
    if (std::isnan(v)) return NAN;
    m = v > m ? v : m;
  }
  *m_out = m;
  if (std::isinf(m)) return m;
  double s = 0.0;
  for (size_t j = 0; j < n; ++j) s += std::exp(x(j) - m);
  *sum = s;
  return m + std::log(s);
}

}  // namespace infiniop::exact
