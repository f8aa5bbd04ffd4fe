// SPDX-License-Identifier: Apache-2.0
// The router operators (MoeGatingTopKSoftmax, MoeGatingTopK and their grads) on the cpu device:
// OpenMP over rows, each row on its own. The exponentials and sigmoids over E are vectorized
// with the library's ExpOfMinus and Sigmoid (math-inl.h), the row sums go through 16 fixed slots
// (docs/moe_gating_top_k_softmax.md), every other operation is a plain IEEE F32 operation in the
// documented order: the same bits on every Highway target, thread count and on opencl.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/moe_gating.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cmath>
#include <vector>

#include "cpu/math-inl.h"
#include "cpu/moe_gating_select.h"
#include "cpu/parallel.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace {
namespace hn = hwy::HWY_NAMESPACE;
using namespace gating;  // NOLINT: the scalar half

// exp(-a) for a = m - x >= 0; 0 where a > 87 (beyond ExpOfMinus's range, e^-a < 2^-125.5); NaN
// stays NaN.
template <class D, class V>
HWY_INLINE V ExpFloor(D d, V a) {
  const auto beyond = hn::Gt(a, hn::Set(d, 87.0f));
  const V e = ExpOfMinus(d, hn::IfThenZeroElse(beyond, a));
  return hn::IfThenElse(hn::IsNaN(a), a, hn::IfThenZeroElse(beyond, e));
}

// sigmoid(x): the library's Sigmoid::s, 0 below -87 (below 2^-125.5), NaN stays NaN.
template <class D, class V>
HWY_INLINE V SigmoidFloor(D d, V x) {
  const auto below = hn::Lt(x, hn::Set(d, -87.0f));
  const Sigmoid<V> sigmoid(d, hn::IfThenElse(below, hn::Set(d, -87.0f), x));
  return hn::IfThenElse(hn::IsNaN(x), x, hn::IfThenZeroElse(below, sigmoid.s));
}

// sigmoid's slope p (1 - p) as (e p) p, e = exp(-x): 1 - p = e p without the cancellation of
// 1 - p, which lost every digit from x = 17 (as the elementwise operators' Sigmoid::Slope). For
// |x| <= 87 (ExpOfMinus's range); 0 beyond (below 2^-125.5: p's floor); NaN stays NaN. p is
// SigmoidFloor's.
template <class D, class V>
HWY_INLINE V SigmoidSlopeFloor(D d, V x, V p) {
  const auto beyond = hn::Gt(hn::Abs(x), hn::Set(d, 87.0f));
  const V e = ExpOfMinus(d, hn::IfThenZeroElse(beyond, x));
  return hn::IfThenElse(hn::IsNaN(x), x, hn::IfThenZeroElse(beyond, hn::Mul(hn::Mul(e, p), p)));
}

// out[j] = f(d, in[j]) over n elements: whole vectors, then one lane at a time (the same
// operations per lane, so the same bits).
template <class F>
HWY_INLINE void MapRow(const float *in, float *out, size_t n, const F &f) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  const size_t N = hn::Lanes(d);
  size_t j = 0;
  for (; j + N <= n; j += N) hn::StoreU(f(d, hn::LoadU(d, in + j)), d, out + j);
  for (; j < n; ++j) hn::StoreU(f(d1, hn::LoadU(d1, in + j)), d1, out + j);
}
// out[j] = f(d, a[j], b[j]), the same way.
template <class F>
HWY_INLINE void MapRow2(const float *a, const float *b, float *out, size_t n, const F &f) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  const size_t N = hn::Lanes(d);
  size_t j = 0;
  for (; j + N <= n; j += N) hn::StoreU(f(d, hn::LoadU(d, a + j), hn::LoadU(d, b + j)), d, out + j);
  for (; j < n; ++j) hn::StoreU(f(d1, hn::LoadU(d1, a + j), hn::LoadU(d1, b + j)), d1, out + j);
}

// The fixed-order row sum: element j into slot j % 16, each slot from +0 in increasing j, then
// the slots pairwise (i += i + 8, i += i + 4, i += i + 2, 0 += 1).
float SlotSum(const float *e, size_t n) {
  HWY_ALIGN float slots[16] = {};
  const hn::CappedTag<float, 16> d;
  const size_t N = hn::Lanes(d);  // a power of two up to 16: whole slots
  size_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (size_t s = 0; s < 16; s += N)
      hn::Store(hn::Add(hn::Load(d, slots + s), hn::LoadU(d, e + j + s)), d, slots + s);
  for (; j < n; ++j) slots[j % 16] += e[j];
  for (size_t half = 8; half >= 1; half /= 2)
    for (size_t i = 0; i < half; ++i) slots[i] += slots[i + half];
  return slots[0];
}

// p = softmax(x) over n: m = max (NaN if any), e = exp(-(m - x)), S = SlotSum(e), p = e / S.
void Softmax(const float *x, float *p, size_t n) {
  float m = -INFINITY;
  for (size_t j = 0; j < n; ++j) {
    if (std::isnan(x[j])) {
      m = x[j];
      break;
    }
    m = x[j] > m ? x[j] : m;
  }
  MapRow(x, p, n, [m](auto d, auto v) HWY_ATTR { return ExpFloor(d, hn::Sub(hn::Set(d, m), v)); });
  const float sum = SlotSum(p, n);
  MapRow(p, p, n, [sum](auto d, auto v) HWY_ATTR { return hn::Div(v, hn::Set(d, sum)); });
}

// The scalar ExpFloor of the k-wide sums: one lane, the vector's bits.
float ExpOne(float a) {
  const hn::CappedTag<float, 1> d1;
  return hn::GetLane(ExpFloor(d1, hn::Set(d1, a)));
}

// renorm 1: y_i = e_i / S, e_i = exp(-(m - x[s_i])), S = sum of the e_i in order from +0.
// m = x[s_0] in the forward (the largest), the max of the selected x in the grad (given indices).
void Renormalized(const float *x, const size_t *s, size_t k, float m, float *y) {
  float sum = 0.0f;
  for (size_t i = 0; i < k; ++i) sum += y[i] = ExpOne(m - x[s[i]]);
  for (size_t i = 0; i < k; ++i) y[i] = y[i] / sum;
}

void SoftmaxForward(const moe::RouterPlan &p, const moe::RouterData &d, size_t r,
                    const Scratch &s) {
  const size_t E = p.experts, k = p.k;
  LoadRow(p.x, d.x, r, s.x);
  if (p.renorm) {
    TopK(s.x, nullptr, E, k, s.top, s.sort);
    Renormalized(s.x, s.top, k, s.x[s.top[0]], s.y);
  } else {
    Softmax(s.x, s.probs, E);
    if (p.probs.present) StoreRow(p.probs, d.probs, r, s.probs);
    TopK(s.probs, nullptr, E, k, s.top, s.sort);
    for (size_t i = 0; i < k; ++i) s.y[i] = s.probs[s.top[i]];
  }
  const bool finished = Finished(p, d.finished, r);
  for (size_t i = 0; i < k; ++i) {
    if (finished) s.y[i] = 0.0f;
    StoreIndex(p.expert_idx, d.expert_idx, r, i, static_cast<int64_t>(finished ? E : s.top[i]));
    if (p.row_idx.present)
      StoreIndex(p.row_idx, d.row_idx, r, i, static_cast<int64_t>(i * p.rows + r));
  }
  StoreRow(p.y, d.y, r, s.y);
}

// MoeGatingTopK's p: softmax, or sigmoid per element.
void Normalize(const moe::RouterPlan &p, const float *x, float *probs) {
  if (p.sigmoid)
    MapRow(x, probs, p.experts, [](auto d, auto v) HWY_ATTR { return SigmoidFloor(d, v); });
  else
    Softmax(x, probs, p.experts);
}

void TopKForward(const moe::RouterPlan &p, const moe::RouterData &d, size_t r, const Scratch &s) {
  const size_t E = p.experts, k = p.k;
  LoadRow(p.x, d.x, r, s.x);
  Normalize(p, s.x, s.probs);
  if (p.probs.present) StoreRow(p.probs, d.probs, r, s.probs);
  float *v = s.probs;  // the selection's keys: p + bias
  if (p.bias.present) {
    LoadRow(p.bias, d.bias, 0, s.buffer);
    for (size_t j = 0; j < E; ++j) s.buffer[j] = s.probs[j] + s.buffer[j];
    v = s.buffer;
  }
  const size_t *candidates = nullptr;
  size_t count = E;
  if (p.group_count > 1) {
    const size_t size = E / p.group_count, best = p.group_select_mode == 1 ? 2 : 1;
    size_t two[2];
    for (size_t g = 0; g < p.group_count; ++g) {
      TopK(v + g * size, nullptr, size, best, two, s.sort);  // indices within the group
      s.scores[g] = best == 2 ? v[g * size + two[0]] + v[g * size + two[1]] : v[g * size + two[0]];
    }
    TopK(s.scores, nullptr, p.group_count, p.k_group, s.groups, s.sort);
    std::sort(s.groups, s.groups + p.k_group);  // members in increasing index: ties by index
    count = 0;
    for (size_t n = 0; n < p.k_group; ++n)
      for (size_t j = s.groups[n] * size; j < (s.groups[n] + 1) * size; ++j)
        s.candidates[count++] = j;
    candidates = s.candidates;
  }
  TopK(v, candidates, count, k, s.top, s.sort);
  float sum = 0.0f;
  for (size_t i = 0; i < k; ++i) sum += s.probs[s.top[i]];
  const float denominator = sum + p.eps;
  for (size_t i = 0; i < k; ++i) {
    s.y[i] = s.probs[s.top[i]] / denominator * p.scale;
    StoreIndex(p.expert_idx, d.expert_idx, r, i, static_cast<int64_t>(s.top[i]));
  }
  StoreRow(p.y, d.y, r, s.y);
}

// The grads read k = grad_y's width of expert_idx into s.top and grad_y into s.g.
void LoadSelection(const moe::RouterPlan &p, const moe::RouterData &d, size_t r, const Scratch &s) {
  for (size_t i = 0; i < p.k; ++i)
    s.top[i] = static_cast<size_t>(LoadIndex(p.expert_idx, d.expert_idx_in, r, i));
  LoadRow(p.grad_y, d.grad_y, r, s.g);
}

void SoftmaxGrad(const moe::RouterPlan &p, const moe::RouterData &d, size_t r, const Scratch &s) {
  const size_t E = p.experts, k = p.k;
  float *grad = s.buffer;
  std::fill(grad, grad + E, 0.0f);
  if (!Finished(p, d.finished, r)) {
    LoadRow(p.x, d.x, r, s.x);
    LoadSelection(p, d, r, s);
    const float *g = s.g;
    const size_t *top = s.top;
    float dot = 0.0f;
    if (p.renorm) {
      float m = -INFINITY;
      for (size_t i = 0; i < k; ++i) {
        const float xi = s.x[top[i]];
        if (std::isnan(xi) || std::isnan(m))
          m = NAN;
        else
          m = xi > m ? xi : m;
      }
      Renormalized(s.x, top, k, m, s.y);
      for (size_t i = 0; i < k; ++i) dot += g[i] * s.y[i];
      for (size_t i = 0; i < k; ++i) grad[top[i]] += s.y[i] * (g[i] - dot);
    } else {
      Softmax(s.x, s.probs, E);
      const float *probs = s.probs;
      for (size_t i = 0; i < k; ++i) dot += g[i] * probs[top[i]];
      for (size_t i = 0; i < k; ++i) grad[top[i]] += g[i];  // G
      for (size_t j = 0; j < E; ++j) grad[j] = probs[j] * (grad[j] - dot);
    }
  }
  StoreRow(p.grad_x, d.grad_x, r, grad);
}

void TopKGrad(const moe::RouterPlan &p, const moe::RouterData &d, size_t r, const Scratch &s) {
  const size_t E = p.experts, k = p.k;
  LoadRow(p.x, d.x, r, s.x);
  LoadSelection(p, d, r, s);
  Normalize(p, s.x, s.probs);
  const float *probs = s.probs, *g = s.g;
  const size_t *top = s.top;
  float sum = 0.0f, t = 0.0f;
  for (size_t i = 0; i < k; ++i) sum += probs[top[i]];
  for (size_t i = 0; i < k; ++i) t += g[i] * probs[top[i]];
  const float D = sum + p.eps, c_over_d = p.scale / D, t_over_d = t / D;
  float *grad_p = s.buffer;
  std::fill(grad_p, grad_p + E, 0.0f);
  float q = 0.0f;
  for (size_t i = 0; i < k; ++i) {
    const float grad_w = c_over_d * (g[i] - t_over_d);
    grad_p[top[i]] += grad_w;
    q += grad_w * probs[top[i]];
  }
  if (p.sigmoid) {
    // x is spent: its row takes the slopes.
    MapRow2(s.x, probs, s.x, E,
            [](auto d, auto x, auto pr) HWY_ATTR { return SigmoidSlopeFloor(d, x, pr); });
    for (size_t j = 0; j < E; ++j) grad_p[j] = grad_p[j] * s.x[j];
  } else {
    for (size_t j = 0; j < E; ++j) grad_p[j] = probs[j] * (grad_p[j] - q);
  }
  StoreRow(p.grad_x, d.grad_x, r, grad_p);
}

}  // namespace

void MoeGatingRows(const moe::RouterPlan &p, const moe::RouterData &d, const Scratch &s,
                   size_t first, size_t last) {
  for (size_t r = first; r < last; ++r) switch (p.kind) {
      case moe::RouterKind::top_k_softmax:
        SoftmaxForward(p, d, r, s);
        break;
      case moe::RouterKind::top_k_softmax_grad:
        SoftmaxGrad(p, d, r, s);
        break;
      case moe::RouterKind::top_k:
        TopKForward(p, d, r, s);
        break;
      case moe::RouterKind::top_k_grad:
        TopKGrad(p, d, r, s);
        break;
    }
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace infiniop::cpu {
HWY_EXPORT(MoeGatingRows);

void moeGating(const moe::RouterPlan &plan, const moe::RouterData &data) {
  const auto rows = &HWY_DYNAMIC_DISPATCH(MoeGatingRows);
  gating::ScratchPool pool(plan, static_cast<size_t>(std::max(1, callThreads())));
  // A row costs about 4 element-operations per expert (load, exp, divide, store).
  parallelRanges(plan.rows, 4 * plan.experts,
                 [&](size_t first, size_t last) { rows(plan, data, pool.Take(), first, last); });
}
}  // namespace infiniop::cpu
#endif
