// SPDX-License-Identifier: Apache-2.0
// MoeAuxLoss and MoeAuxLossGrad as the formulas read (docs/moe_aux_loss.md): plain loops in
// double, K in double, each result rounded once when stored. The oracle of the other devices, so
// nothing here is clever.
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "exact/softplus.h"
#include "ops/moe_aux_loss.h"

namespace infiniop::cpu_reference {
namespace {

using moe::AuxLossPlan;
using moe::RouterView;

double loadX(const RouterView &v, const void *data, size_t r, size_t c) {
  double value = 0;
  visitFloatStorage(v.dtype, [&](auto t) {
    using T = decltype(t);
    value = toFloat(static_cast<const T *>(data)[v.offset(r, c)]);
  });
  return value;
}
double loadCount(const RouterView &v, const void *data, size_t b, size_t e) {
  return v.dtype == INFINI_DTYPE_I64
             ? static_cast<double>(static_cast<const int64_t *>(data)[v.offset(b, e)])
             : static_cast<double>(static_cast<const int32_t *>(data)[v.offset(b, e)]);
}

// Row r's scores p, the sigmoids' normalizer D (1 for softmax) and the slopes s (1 - s).
struct Row {
  std::vector<double> x, p, slope;
  double D = 1;
};
void scores(const AuxLossPlan &pl, const void *xdata, size_t r, Row *row) {
  const size_t E = pl.experts;
  row->x.resize(E);
  row->p.resize(E);
  row->slope.resize(E);
  for (size_t e = 0; e < E; ++e) row->x[e] = loadX(pl.x, xdata, r, e);
  if (pl.score == moe::AuxScore::softmax) {
    double m = -INFINITY;
    bool nan = false;
    for (double v : row->x) {
      nan = nan || std::isnan(v);
      m = v > m ? v : m;
    }
    double S = 0;
    for (size_t e = 0; e < E; ++e) S += row->p[e] = nan ? NAN : std::exp(row->x[e] - m);
    for (size_t e = 0; e < E; ++e) row->p[e] /= S;
    row->D = 1;
    return;
  }
  double S = 0;
  for (size_t e = 0; e < E; ++e) {
    const double v = row->x[e];
    double s = 0;
    if (pl.score == moe::AuxScore::sigmoid) {
      s = 1 / (1 + std::exp(-v));
      row->slope[e] = s / (1 + std::exp(v));  // s (1 - s)
    } else {
      s = exact::sqrtSoftplus(v);
      row->slope[e] = std::isnan(v) ? v : exact::sqrtSoftplusSlope(v);
    }
    S += row->p[e] = s;
  }
  row->D = S + 1e-20;
  for (size_t e = 0; e < E; ++e) row->p[e] /= row->D;
}

}  // namespace

void moe_aux_loss(const AuxLossPlan &p, const moe::AuxLossData &d) {
  double total = 0;
  Row row;
  for (size_t r = 0; r < p.rows; ++r) {
    scores(p, d.x, r, &row);
    const size_t b = r % p.sequences;
    for (size_t e = 0; e < p.experts; ++e) total += row.p[e] * loadCount(p.counts, d.counts, b, e);
  }
  const auto loss = static_cast<float>(total * p.exact_scale);
  static_cast<float *>(d.loss)[p.loss.offset(0, 0)] = std::isnan(loss) ? NAN : loss;
}

void moe_aux_loss_grad(const AuxLossPlan &p, const moe::AuxLossData &d) {
  const double c =
      static_cast<double>(static_cast<const float *>(d.grad_loss)[p.grad_loss.offset(0, 0)]) *
      p.exact_scale;
  std::vector<double> out(p.rows * p.experts);
  Row row;
  const size_t E = p.experts;
  for (size_t r = 0; r < p.rows; ++r) {
    scores(p, d.x, r, &row);
    const size_t b = r % p.sequences;
    double w = 0;  // <p, n>
    for (size_t e = 0; e < E; ++e) w += row.p[e] * loadCount(p.counts, d.counts, b, e);
    for (size_t e = 0; e < E; ++e) {
      const double dn = loadCount(p.counts, d.counts, b, e) - w;
      out[r * E + e] =
          p.score == moe::AuxScore::softmax ? c * row.p[e] * dn : c * row.slope[e] * dn / row.D;
    }
  }
  for (size_t r = 0; r < p.rows; ++r)
    for (size_t e = 0; e < E; ++e)
      visitFloatStorage(p.grad_x.dtype, [&](auto t) {
        using T = decltype(t);
        static_cast<T *>(d.grad_x)[p.grad_x.offset(r, e)] = fromDouble<T>(out[r * E + e]);
      });
}

}  // namespace infiniop::cpu_reference
