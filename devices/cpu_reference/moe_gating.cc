// SPDX-License-Identifier: Apache-2.0
// The router operators (MoeGatingTopKSoftmax, MoeGatingTopK and their grads) as the formulas
// read: plain loops in double, the selection in double with the total order of the spec (key
// descending, NaN above +inf, ties lower index first), each result rounded once when stored.
// The oracle of the other devices, so nothing here is clever.
#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "exact/softplus.h"
#include "ops/moe_gating.h"

namespace infiniop::cpu_reference {
namespace {

using moe::RouterPlan;
using moe::RouterView;

// Element (r, c) of a view of storage type T (F32/F16/BF16), as a double.
template <class T>
double load(const RouterView &v, const void *data, size_t r, size_t c) {
  return toFloat(static_cast<const T *>(data)[v.offset(r, c)]);
}
double loadFloat(const RouterView &v, const void *data, size_t r, size_t c) {
  double value = 0;
  visitFloatStorage(v.dtype, [&](auto t) { value = load<decltype(t)>(v, data, r, c); });
  return value;
}
void storeFloat(const RouterView &v, void *data, size_t r, size_t c, double value) {
  visitFloatStorage(v.dtype, [&](auto t) {
    using T = decltype(t);
    static_cast<T *>(data)[v.offset(r, c)] = fromDouble<T>(value);
  });
}
int64_t loadIndex(const RouterView &v, const void *data, size_t r, size_t c) {
  return v.dtype == INFINI_DTYPE_I64 ? static_cast<const int64_t *>(data)[v.offset(r, c)]
                                     : static_cast<const int32_t *>(data)[v.offset(r, c)];
}
void storeIndex(const RouterView &v, void *data, size_t r, size_t c, int64_t value) {
  if (v.dtype == INFINI_DTYPE_I64)
    static_cast<int64_t *>(data)[v.offset(r, c)] = value;
  else
    static_cast<int32_t *>(data)[v.offset(r, c)] = static_cast<int32_t>(value);
}

// Every result of a call, kept until all are computed and then stored: a failure (out of memory)
// leaves the outputs untouched.
class Writer {
 public:
  void value(const RouterView &v, void *data, size_t r, size_t c, double x) {
    pending_.push_back({&v, data, r, c, x, 0, false});
  }
  void index(const RouterView &v, void *data, size_t r, size_t c, int64_t i) {
    pending_.push_back({&v, data, r, c, 0, i, true});
  }
  void store() const {
    for (const Pending &w : pending_)
      if (w.is_index)
        storeIndex(*w.view, w.data, w.r, w.c, w.index);
      else
        storeFloat(*w.view, w.data, w.r, w.c, w.value);
  }

 private:
  struct Pending {
    const RouterView *view;
    void *data;
    size_t r, c;
    double value;
    int64_t index;
    bool is_index;
  };
  std::vector<Pending> pending_;
};

// Whether expert i (key a) is selected before expert j (key b).
bool before(double a, size_t i, double b, size_t j) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && (!std::isnan(b) || i < j);
  return a > b || (a == b && i < j);
}

// The first k of `candidates` (increasing indices) in selection order of key: k passes, each
// taking the first remaining candidate that nothing remaining precedes.
std::vector<size_t> topK(const std::vector<double> &key, std::vector<size_t> candidates, size_t k) {
  std::vector<size_t> chosen;
  for (size_t n = 0; n < k; ++n) {
    size_t best = 0;
    for (size_t c = 1; c < candidates.size(); ++c)
      if (before(key[candidates[c]], candidates[c], key[candidates[best]], candidates[best]))
        best = c;
    chosen.push_back(candidates[best]);
    candidates.erase(candidates.begin() + static_cast<ptrdiff_t>(best));
  }
  return chosen;
}
std::vector<size_t> allOf(size_t n) {
  std::vector<size_t> all(n);
  for (size_t j = 0; j < n; ++j) all[j] = j;
  return all;
}

std::vector<double> rowOf(const RouterView &v, const void *data, size_t r) {
  std::vector<double> row(v.cols);
  for (size_t j = 0; j < v.cols; ++j) row[j] = loadFloat(v, data, r, j);
  return row;
}

// softmax over the values: exp(x - max) / sum (NaN where any is NaN, as the F32 formula).
std::vector<double> softmax(const std::vector<double> &x) {
  double m = -INFINITY;
  for (double v : x) m = std::isnan(v) || std::isnan(m) ? NAN : std::fmax(m, v);
  std::vector<double> p(x.size());
  double sum = 0;
  for (size_t j = 0; j < x.size(); ++j) sum += p[j] = std::exp(x[j] - m);
  for (double &v : p) v /= sum;
  return p;
}

// MoeGatingTopK's p: softmax, or sigmoid (0 at -inf, 1 at +inf), or sqrt(softplus) (0 at -inf,
// +inf at +inf).
std::vector<double> normalized(const RouterPlan &p, const std::vector<double> &x) {
  if (!p.elementwise()) return softmax(x);
  std::vector<double> s(x.size());
  for (size_t j = 0; j < x.size(); ++j)
    s[j] = p.sigmoid ? 1.0 / (1.0 + std::exp(-x[j])) : exact::sqrtSoftplus(x[j]);
  return s;
}

// sigmoid's slope p (1 - p) as e / (1 + e)^2, e = exp(-|x|): 1 - p in double cancels too (it
// loses every digit from x = 37), and the oracle must not.
double sigmoidSlope(double x) {
  const double e = std::exp(-std::fabs(x));
  return e / ((1.0 + e) * (1.0 + e));
}

// The k values of a selection as a softmax over them (renorm 1).
std::vector<double> softmaxOf(const std::vector<double> &x, const std::vector<size_t> &s) {
  std::vector<double> picked;
  for (size_t j : s) picked.push_back(x[j]);
  return softmax(picked);
}

void writeProbs(Writer &w, const RouterPlan &p, const moe::RouterData &d, size_t r,
                const std::vector<double> &probs) {
  if (!p.probs.present) return;
  for (size_t j = 0; j < p.experts; ++j) w.value(p.probs, d.probs, r, j, probs[j]);
}

void softmaxForward(Writer &w, const RouterPlan &p, const moe::RouterData &d) {
  for (size_t r = 0; r < p.rows; ++r) {
    const std::vector<double> x = rowOf(p.x, d.x, r);
    const bool finished =
        p.finished.present && static_cast<const char *>(d.finished)[p.finished.rowOffset(r)] != 0;
    std::vector<size_t> s;
    std::vector<double> y(p.k);
    if (p.renorm) {
      s = topK(x, allOf(p.experts), p.k);
      y = softmaxOf(x, s);
    } else {
      const std::vector<double> probs = softmax(x);
      writeProbs(w, p, d, r, probs);
      s = topK(probs, allOf(p.experts), p.k);
      for (size_t i = 0; i < p.k; ++i) y[i] = probs[s[i]];
    }
    for (size_t i = 0; i < p.k; ++i) {
      w.value(p.y, d.y, r, i, finished ? 0.0 : y[i]);
      w.index(p.expert_idx, d.expert_idx, r, i,
              finished ? static_cast<int64_t>(p.experts) : static_cast<int64_t>(s[i]));
      if (p.row_idx.present)
        w.index(p.row_idx, d.row_idx, r, i, static_cast<int64_t>(i * p.rows + r));
    }
  }
}

// MoeGatingTopK: scores v = p + bias, the kept groups, then the top k of their experts.
void topKForward(Writer &w, const RouterPlan &p, const moe::RouterData &d) {
  const size_t size = p.experts / p.group_count;
  for (size_t r = 0; r < p.rows; ++r) {
    const std::vector<double> probs = normalized(p, rowOf(p.x, d.x, r));
    writeProbs(w, p, d, r, probs);
    std::vector<double> v = probs;
    if (p.bias.present)
      for (size_t j = 0; j < p.experts; ++j) v[j] += loadFloat(p.bias, d.bias, 0, j);
    std::vector<size_t> candidates = allOf(p.experts);
    if (p.group_count > 1) {
      std::vector<double> score(p.group_count);
      for (size_t g = 0; g < p.group_count; ++g) {
        std::vector<size_t> members;
        for (size_t j = g * size; j < (g + 1) * size; ++j) members.push_back(j);
        // the sum of the groupBest() largest, in selection order
        const std::vector<size_t> best = topK(v, members, p.groupBest());
        score[g] = 0;
        for (size_t j : best) score[g] += v[j];
      }
      std::vector<size_t> kept = topK(score, allOf(p.group_count), p.k_group);
      std::vector<bool> selectable(p.group_count, false);
      for (size_t g : kept) selectable[g] = true;
      candidates.clear();
      for (size_t j = 0; j < p.experts; ++j)
        if (selectable[j / size]) candidates.push_back(j);
    }
    const std::vector<size_t> s = topK(v, candidates, p.k);
    double sum = 0;
    for (size_t j : s) sum += probs[j];
    for (size_t i = 0; i < p.k; ++i) {
      w.value(p.y, d.y, r, i, probs[s[i]] / (sum + p.eps) * p.scale);
      w.index(p.expert_idx, d.expert_idx, r, i, static_cast<int64_t>(s[i]));
    }
  }
}

// MoeGatingWeights: MoeGatingTopK's y for the given expert_idx.
void weightsForward(Writer &w, const RouterPlan &p, const moe::RouterData &d) {
  for (size_t r = 0; r < p.rows; ++r) {
    const std::vector<double> probs = normalized(p, rowOf(p.x, d.x, r));
    std::vector<size_t> s(p.k);
    double sum = 0;
    for (size_t i = 0; i < p.k; ++i) {
      s[i] = static_cast<size_t>(loadIndex(p.expert_idx, d.expert_idx_in, r, i));
      sum += probs[s[i]];
    }
    for (size_t i = 0; i < p.k; ++i) w.value(p.y, d.y, r, i, probs[s[i]] / (sum + p.eps) * p.scale);
  }
}

// The grads: grad_x = J^T g for the given index list, J the Jacobian of y in x.
void softmaxGrad(Writer &w, const RouterPlan &p, const moe::RouterData &d) {
  for (size_t r = 0; r < p.rows; ++r) {
    const std::vector<double> x = rowOf(p.x, d.x, r);
    const std::vector<double> g = rowOf(p.grad_y, d.grad_y, r);
    std::vector<size_t> s(p.k);
    std::vector<double> grad(p.experts, 0.0);
    const bool finished =
        p.finished.present && static_cast<const char *>(d.finished)[p.finished.rowOffset(r)] != 0;
    if (!finished) {
      for (size_t i = 0; i < p.k; ++i)
        s[i] = static_cast<size_t>(loadIndex(p.expert_idx, d.expert_idx_in, r, i));
      if (p.renorm) {
        const std::vector<double> y = softmaxOf(x, s);
        double dot = 0;
        for (size_t i = 0; i < p.k; ++i) dot += g[i] * y[i];
        for (size_t i = 0; i < p.k; ++i) grad[s[i]] += y[i] * (g[i] - dot);
      } else {
        const std::vector<double> probs = softmax(x);
        double dot = 0;
        for (size_t i = 0; i < p.k; ++i) dot += g[i] * probs[s[i]];
        std::vector<double> G(p.experts, 0.0);
        for (size_t i = 0; i < p.k; ++i) G[s[i]] += g[i];
        for (size_t j = 0; j < p.experts; ++j) grad[j] = probs[j] * (G[j] - dot);
      }
    }
    for (size_t j = 0; j < p.experts; ++j) w.value(p.grad_x, d.grad_x, r, j, grad[j]);
  }
}

void topKGrad(Writer &w, const RouterPlan &p, const moe::RouterData &d) {
  for (size_t r = 0; r < p.rows; ++r) {
    const std::vector<double> x = rowOf(p.x, d.x, r);
    const std::vector<double> probs = normalized(p, x);
    const std::vector<double> g = rowOf(p.grad_y, d.grad_y, r);
    std::vector<size_t> s(p.k);
    double sum = 0, dot = 0;
    for (size_t i = 0; i < p.k; ++i) {
      s[i] = static_cast<size_t>(loadIndex(p.expert_idx, d.expert_idx_in, r, i));
      sum += probs[s[i]];
      dot += g[i] * probs[s[i]];
    }
    const double D = sum + p.eps;
    std::vector<double> grad_p(p.experts, 0.0);
    double q = 0;
    for (size_t i = 0; i < p.k; ++i) {
      const double grad_w = p.scale / D * (g[i] - dot / D);
      grad_p[s[i]] += grad_w;
      q += grad_w * probs[s[i]];
    }
    for (size_t j = 0; j < p.experts; ++j) {
      const double pj = probs[j];
      const double grad = p.sigmoid         ? grad_p[j] * sigmoidSlope(x[j])
                          : p.sqrt_softplus ? grad_p[j] * exact::sqrtSoftplusSlope(x[j])
                                            : pj * (grad_p[j] - q);
      w.value(p.grad_x, d.grad_x, r, j, grad);
    }
  }
}

// The kernels (kernels/list.h): each computes in doubles, then stores once.
template <void (*compute)(Writer &, const moe::RouterPlan &, const moe::RouterData &)>
void run(const moe::RouterPlan &p, const moe::RouterData &data) {
  Writer w;
  compute(w, p, data);
  w.store();
}

}  // namespace

void moe_gating_top_k_softmax(const moe::RouterPlan &p, const moe::RouterData &data) {
  run<softmaxForward>(p, data);
}
void moe_gating_top_k_softmax_grad(const moe::RouterPlan &p, const moe::RouterData &data) {
  run<softmaxGrad>(p, data);
}
void moe_gating_top_k(const moe::RouterPlan &p, const moe::RouterData &data) {
  run<topKForward>(p, data);
}
void moe_gating_top_k_grad(const moe::RouterPlan &p, const moe::RouterData &data) {
  run<topKGrad>(p, data);
}
void moe_gating_weights(const moe::RouterPlan &p, const moe::RouterData &data) {
  run<weightsForward>(p, data);
}

}  // namespace infiniop::cpu_reference
