// SPDX-License-Identifier: Apache-2.0
// The router operators (MoeGatingTopKSoftmax, MoeGatingTopK, their grads, MoeGatingWeights) on
// the cpu device: OpenMP over rows, each row on its own.
// The exponentials and sigmoids over E are vectorized
// with the library's ExpOfMinus and Sigmoid (math-inl.h), the row sums go through 16 fixed slots
// (docs/moe_gating_top_k_softmax.md), every other operation is a plain IEEE F32 operation in the
// documented order: the same bits on every Highway target, thread count and on opencl. Rows move
// as vectors (convert-inl.h: exact widening, one rounding to nearest even, canonical NaN), and
// the selection's vector comparisons only choose which keys reach its scalar insertion.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/moe_gating.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <atomic>
#include <cmath>
#include <type_traits>
#include <vector>

#include "cpu/convert-inl.h"
#include "cpu/math-inl.h"
#include "cpu/moe_gating_select.h"
#include "cpu/parallel.h"
#include "cpu/softmax_row-inl.h"
#include "hwy/highway.h"
#include "ops/moe_aux_loss.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace {
namespace hn = hwy::HWY_NAMESPACE;
using namespace gating;  // NOLINT: the scalar half

// sigmoid(x): the library's Sigmoid::s, 0 below -87 (below 2^-125.5), NaN stays NaN.
template <class D, class V>
HWY_INLINE V SigmoidFloor(D d, V x) {
  const auto below = hn::Lt(x, hn::Set(d, -87.0f));
  const V v = hn::IfThenElse(below, hn::Set(d, -87.0f), x);
  return WithSigmoid(
      d, v, [&](const Sigmoid<V> &sigmoid) __attribute__((always_inline)) {
        return hn::IfThenElse(hn::IsNaN(x), x, hn::IfThenZeroElse(below, sigmoid.s));
      });
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

// sqrt(softplus(x))'s slope sigmoid(x) / (2 p), p = SqrtSoftplus(x): for x >= -87 the library's
// sigmoid (SigmoidFloor) over p + p (exact), one IEEE division of two positive normal numbers (p
// >= e^-43.5), nothing cancelling; below -87, where softplus(x) = e^x within 2^-125 relatively, the
// slope is p / 2 (exact), down to x = -172, and 0 below (the true slope is below e^-86 / 2 <
// 2^-125, and p / 2 would be subnormal). 0 at +inf (1 / inf) and -inf, NaN stays NaN. The same
// operations as opencl's sqrt_softplus_slope.
template <class D, class V>
HWY_INLINE V SqrtSoftplusSlope(D d, V x, V p) {
  const auto tail = hn::Lt(x, hn::Set(d, -87.0f));
  const auto beyond = hn::Lt(x, hn::Set(d, -172.0f));
  const V ratio = hn::Div(SigmoidFloor(d, x), hn::Add(p, p));
  return hn::IfThenElse(tail, hn::IfThenZeroElse(beyond, hn::Mul(p, hn::Set(d, 0.5f))), ratio);
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

// The selection of the k <= 32 best ranks (RankOf: key, then the lower index) in one pass: the
// held ranks in order, a new one inserted where it beats the k-th. The order is total, so the
// held k are the top k of whatever was inserted, in any order.
class OnePass {
 public:
  explicit OnePass(size_t k) : k_(k) {}
  static bool Fits(size_t k, size_t end) { return k <= 32 && end - 1 <= 0xffffffffu; }

  HWY_INLINE void Insert(const float *key, size_t j) {
    const uint64_t rank = RankOf(key[j], j);
    if (n_ == k_ && rank <= best_[k_ - 1]) return;
    size_t slot = n_ < k_ ? n_++ : k_ - 1;
    for (; slot > 0 && rank > best_[slot - 1]; --slot) best_[slot] = best_[slot - 1];
    best_[slot] = rank;
  }
  void Result(size_t *top) const {
    for (size_t i = 0; i < k_; ++i) top[i] = 0xffffffffu - static_cast<uint32_t>(best_[i]);
  }

 private:
  uint64_t best_[32] = {};  // zeroed for -Wmaybe-uninitialized only
  size_t n_ = 0, k_;
};

// The top k (selection order) of key[0, size), or with `groups` (n_groups increasing group
// numbers) of the groups' members key[g * size, (g + 1) * size), into top[0, k).
//
// Two vector passes keep the scalar insertion (whose branches mispredict) to the few keys that
// may be selected. The first takes lane maxima over the whole vectors: A = ceil(k / N) slots of N
// lanes, vector i into slot i % A, each slot lane the key of a distinct element. The largest
// slot value T that at least k slot values reach is then at most the k-th best key, so no key
// below T is selected. The second compresses the indices of the lanes >= T (ties included: the
// insertion orders equal keys) into a list for the insertion; the tails go in whole. A NaN (it
// ranks first and the comparisons miss it) or fewer than A vectors: every key goes in.
void Select(const float *key, size_t k, const size_t *groups, size_t n_groups, size_t size,
            size_t *top, const Scratch &s) {
  const size_t ranges = groups ? n_groups : 1;
  const auto begin = [&](size_t r) { return groups ? groups[r] * size : 0; };
  if (ranges * size == 0 || !OnePass::Fits(k, begin(ranges - 1) + size)) {
    if (!groups) return TopK(key, nullptr, size, k, top, s.sort);
    size_t c = 0;
    for (size_t n = 0; n < n_groups; ++n)
      for (size_t j = groups[n] * size; j < (groups[n] + 1) * size; ++j) s.candidates[c++] = j;
    return TopK(key, s.candidates, c, k, top, s.sort);
  }
  const hn::ScalableTag<float> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  using V = hn::Vec<decltype(d)>;
  const size_t N = hn::Lanes(d), A = (k + N - 1) / N;
  HWY_ALIGN float slots[32 + HWY_MAX_BYTES / sizeof(float)];  // A N < k + N
  size_t vectors = 0;
  V nan = hn::Zero(d), max = hn::Set(d, -INFINITY);  // A = 1 (k <= N): one slot, in a register
  for (size_t r = 0; r < ranges; ++r)
    for (size_t j = begin(r); j + N <= begin(r) + size; j += N, ++vectors) {
      const V v = hn::LoadU(d, key + j);
      nan = hn::Or(nan, hn::VecFromMask(d, hn::IsNaN(v)));
      if (A == 1) {
        max = hn::IfThenElse(hn::Gt(v, max), v, max);
        continue;
      }
      float *slot = slots + vectors % A * N;
      const V m = vectors < A ? v : hn::Load(d, slot);
      hn::Store(hn::IfThenElse(hn::Gt(v, m), v, m), d, slot);
    }
  if (A == 1) hn::Store(max, d, slots);
  const bool filter = vectors >= A && hn::AllFalse(d, hn::MaskFromVec(nan));
  // Small k: first fold the slots pairwise (max) while at least 2k remain, each still a distinct
  // element's key, so that fewer values are ranked; the folded-away lanes become -inf, which only
  // a -inf value reaches (a floor of -inf keeps every key).
  size_t M = A * N;
  for (; filter && M % 2 == 0 && M / 2 >= 2 * k; M /= 2)
    for (size_t i = 0; i < M / 2; ++i) {
      slots[i] = std::max(slots[i], slots[i + M / 2]);
      slots[i + M / 2] = -INFINITY;
    }
  float floor = -INFINITY;
  for (size_t i = 0; filter && i < M; ++i) {
    size_t reach = 0;  // the slot values >= slots[i]
    for (size_t a = 0; a < A; ++a)
      reach += hn::CountTrue(d, hn::Ge(hn::Load(d, slots + a * N), hn::Set(d, slots[i])));
    floor = reach >= k && slots[i] > floor ? slots[i] : floor;
  }
  OnePass pass(k);
  constexpr size_t kFlush = 256;
  HWY_ALIGN uint32_t picked[kFlush + HWY_MAX_BYTES / sizeof(float)];
  size_t count = 0;
  for (size_t r = 0; r < ranges; ++r) {
    const size_t end = begin(r) + size;
    size_t j = begin(r);
    for (; filter && j + N <= end; j += N) {
      const auto above = hn::RebindMask(du, hn::Ge(hn::LoadU(d, key + j), hn::Set(d, floor)));
      const auto index = hn::Add(hn::Iota(du, 0), hn::Set(du, static_cast<uint32_t>(j)));
      hn::StoreU(hn::Compress(index, above), du, picked + count);  // a register compress:
      count += hn::CountTrue(du, above);  // AVX3's to memory is microcoded on some cores
      if (count >= kFlush) {
        for (size_t c = 0; c < count; ++c) pass.Insert(key, picked[c]);
        count = 0;
      }
    }
    for (; j < end; ++j) pass.Insert(key, j);
  }
  for (size_t c = 0; c < count; ++c) pass.Insert(key, picked[c]);
  pass.Result(top);
}

// A group's score (MoeGatingTopK, group_count > 1): the largest key (best 1) or the sum of the
// `best` largest (best >= 2: from the first, one F32 addition each, in selection order; best > 2,
// mode 2, through Select into s.top, which the row's selection fills only later). Only the scores'
// order is used, which their values decide up to the sign of a zero and a NaN's payload, and the
// values of the best two are those of the two largest of the multiset: per lane the two largest
// over the vectors, then the lanes' largest and the largest of the rest. A NaN among the keys: NaN
// (it ranks first). A group that is not whole vectors takes Select.
float GroupScore(const float *key, size_t size, size_t best, const Scratch &s) {
  const hn::ScalableTag<float> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  using V = hn::Vec<decltype(d)>;
  const size_t N = hn::Lanes(d);
  if (size % N != 0 || size < 2 || best > 2) {
    size_t two[2];
    size_t *top = best > 2 ? s.top : two;
    Select(key, best, nullptr, 0, size, top, s);
    float sum = key[top[0]];
    for (size_t i = 1; i < best; ++i) sum += key[top[i]];
    return sum;
  }
  V first = hn::Set(d, -INFINITY), second = first, nan = hn::Zero(d);
  for (size_t j = 0; j < size; j += N) {
    const V v = hn::LoadU(d, key + j);
    nan = hn::Or(nan, hn::VecFromMask(d, hn::IsNaN(v)));
    second = hn::Max(second, hn::Min(first, v));
    first = hn::Max(first, v);
  }
  if (!hn::AllFalse(d, hn::MaskFromVec(nan))) return NAN;
  const float top = hn::GetLane(hn::MaxOfLanes(d, first));
  if (best == 1) return top;
  const size_t lane = hn::FindKnownFirstTrue(d, hn::Eq(first, hn::Set(d, top)));
  const auto at =
      hn::RebindMask(d, hn::Eq(hn::Iota(du, 0), hn::Set(du, static_cast<uint32_t>(lane))));
  const V rest = hn::Max(second, hn::IfThenElse(at, hn::Set(d, -INFINITY), first));
  return top + hn::GetLane(hn::MaxOfLanes(d, rest));
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

// b[j] = a[j] + b[j] over n (the keys p + bias), one IEEE addition per element.
void AddRow(const float *a, float *b, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  size_t j = 0;
  for (; j + N <= n; j += N)
    hn::StoreU(hn::Add(hn::LoadU(d, a + j), hn::LoadU(d, b + j)), d, b + j);
  for (; j < n; ++j) b[j] = a[j] + b[j];
}

void SoftmaxForward(const moe::RouterPlan &p, const moe::RouterData &d, size_t r,
                    const Scratch &s) {
  const size_t E = p.experts, k = p.k;
  LoadRowVec(p.x, d.x, r, s.x);
  if (p.renorm) {
    Select(s.x, k, nullptr, 0, E, s.top, s);
    Renormalized(s.x, s.top, k, s.x[s.top[0]], s.y);
  } else {
    Softmax(s.x, s.probs, E);
    if (p.probs.present) StoreRowVec(p.probs, d.probs, r, s.probs);
    Select(s.probs, k, nullptr, 0, E, s.top, s);
    for (size_t i = 0; i < k; ++i) s.y[i] = s.probs[s.top[i]];
  }
  const bool finished = Finished(p, d.finished, r);
  if (finished) std::fill(s.y, s.y + k, 0.0f);
  StoreIndexRow(p.expert_idx, d.expert_idx, r, k,
                [&](size_t i) { return finished ? E : s.top[i]; });
  if (p.row_idx.present)
    StoreIndexRow(p.row_idx, d.row_idx, r, k, [&](size_t i) { return i * p.rows + r; });
  StoreRowVec(p.y, d.y, r, s.y);
}

// MoeGatingTopK's p: softmax, or sigmoid or sqrt(softplus) per element.
void Normalize(const moe::RouterPlan &p, const float *x, float *probs) {
  if (p.sigmoid)
    MapRow(x, probs, p.experts, [](auto d, auto v) HWY_ATTR { return SigmoidFloor(d, v); });
  else if (p.sqrt_softplus)
    MapRow(x, probs, p.experts, [](auto d, auto v) HWY_ATTR { return SqrtSoftplus(d, v); });
  else
    Softmax(x, probs, p.experts);
}

// MoeGatingTopK's y for the selection s.top: y_i = p_{s_i} / (S + eps) * c, S = the p_{s_i} summed
// in order from +0 (MoeGatingWeights' too).
void WeightsOf(const moe::RouterPlan &p, const Scratch &s) {
  float sum = 0.0f;
  for (size_t i = 0; i < p.k; ++i) sum += s.probs[s.top[i]];
  const float denominator = sum + p.eps;
  for (size_t i = 0; i < p.k; ++i) s.y[i] = s.probs[s.top[i]] / denominator * p.scale;
}

void TopKForward(const moe::RouterPlan &p, const moe::RouterData &d, size_t r, const Scratch &s) {
  const size_t E = p.experts, k = p.k;
  LoadRowVec(p.x, d.x, r, s.x);
  Normalize(p, s.x, s.probs);
  if (p.probs.present) StoreRowVec(p.probs, d.probs, r, s.probs);
  float *v = s.probs;  // the selection's keys: p + bias
  if (p.bias.present) {
    LoadRowVec(p.bias, d.bias, 0, s.buffer);
    AddRow(s.probs, s.buffer, E);
    v = s.buffer;
  }
  if (p.group_count > 1) {
    const size_t size = E / p.group_count, best = p.groupBest();
    for (size_t g = 0; g < p.group_count; ++g)
      s.scores[g] = GroupScore(v + g * size, size, best, s);
    Select(s.scores, p.k_group, nullptr, 0, p.group_count, s.groups, s);
    std::sort(s.groups, s.groups + p.k_group);  // members in increasing index: ties by index
    Select(v, k, s.groups, p.k_group, size, s.top, s);
  } else {
    Select(v, k, nullptr, 0, E, s.top, s);
  }
  WeightsOf(p, s);
  StoreIndexRow(p.expert_idx, d.expert_idx, r, k, [&](size_t i) { return s.top[i]; });
  StoreRowVec(p.y, d.y, r, s.y);
}

// MoeGatingWeights: MoeGatingTopK's p and y for the given expert_idx (no selection).
void WeightsForward(const moe::RouterPlan &p, const moe::RouterData &d, size_t r,
                    const Scratch &s) {
  LoadRowVec(p.x, d.x, r, s.x);
  LoadIndexRow(p.expert_idx, d.expert_idx_in, r, p.k, s.top);
  Normalize(p, s.x, s.probs);
  WeightsOf(p, s);
  StoreRowVec(p.y, d.y, r, s.y);
}

// The grads read k = grad_y's width of expert_idx into s.top and grad_y into s.g.
void LoadSelection(const moe::RouterPlan &p, const moe::RouterData &d, size_t r, const Scratch &s) {
  LoadIndexRow(p.expert_idx, d.expert_idx_in, r, p.k, s.top);
  LoadRowVec(p.grad_y, d.grad_y, r, s.g);
}

void SoftmaxGrad(const moe::RouterPlan &p, const moe::RouterData &d, size_t r, const Scratch &s) {
  const size_t E = p.experts, k = p.k;
  float *grad = s.buffer;
  std::fill(grad, grad + E, 0.0f);
  if (!Finished(p, d.finished, r)) {
    LoadRowVec(p.x, d.x, r, s.x);
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
  StoreRowVec(p.grad_x, d.grad_x, r, grad);
}

void TopKGrad(const moe::RouterPlan &p, const moe::RouterData &d, size_t r, const Scratch &s) {
  const size_t E = p.experts, k = p.k;
  LoadRowVec(p.x, d.x, r, s.x);
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
  if (p.elementwise()) {
    // x is spent: its row takes the slopes.
    if (p.sigmoid)
      MapRow2(s.x, probs, s.x, E,
              [](auto d, auto x, auto pr) HWY_ATTR { return SigmoidSlopeFloor(d, x, pr); });
    else
      MapRow2(s.x, probs, s.x, E,
              [](auto d, auto x, auto pr) HWY_ATTR { return SqrtSoftplusSlope(d, x, pr); });
    for (size_t j = 0; j < E; ++j) grad_p[j] = grad_p[j] * s.x[j];
  } else {
    for (size_t j = 0; j < E; ++j) grad_p[j] = probs[j] * (grad_p[j] - q);
  }
  StoreRowVec(p.grad_x, d.grad_x, r, grad_p);
}

// ---- MoeAuxLoss / MoeAuxLossGrad (docs/moe_aux_loss.md): the rows' scores as the routers' ----

// The aux-loss scores p of row r into p (x and s are scratch rows): softmax: the routers' Softmax;
// sigmoid: s = SigmoidFloor(x) (sqrtsoftplus: s = SqrtSoftplus(x)), D = SlotSum(s) + 1e-20f,
// p = s / D. Returns D (1 for softmax).
float AuxScores(const moe::AuxLossPlan &p, const moe::AuxLossData &d, size_t r, float *x, float *s,
                float *probs) {
  const size_t E = p.experts;
  LoadRowVec(p.x, d.x, r, x);
  if (p.score == moe::AuxScore::softmax) {
    Softmax(x, probs, E);
    return 1.0f;
  }
  if (p.score == moe::AuxScore::sigmoid)
    MapRow(x, s, E, [](auto d, auto v) HWY_ATTR { return SigmoidFloor(d, v); });
  else
    MapRow(x, s, E, [](auto d, auto v) HWY_ATTR { return SqrtSoftplus(d, v); });
  const float D = SlotSum(s, E) + moe::kAuxLossEps;
  MapRow(s, probs, E, [D](auto d, auto v) HWY_ATTR { return hn::Div(v, hn::Set(d, D)); });
  return D;
}

// v = SlotSum(p_e n_e) (q is scratch).
float AuxRowValue(const float *probs, const float *n, float *q, size_t E) {
  MapRow2(probs, n, q, E, [](auto, auto a, auto b) HWY_ATTR { return hn::Mul(a, b); });
  return SlotSum(q, E);
}

}  // namespace

// MoeAuxLoss: the block sums of rows' v_t, block b into sums[b] for b in [first, last): within a
// block the v_t in row order from +0. n: the counts as F32, B rows of E. scratch: 4 E floats.
void MoeAuxLossBlocks(const moe::AuxLossPlan &p, const moe::AuxLossData &d, const float *n,
                      float *scratch, float *sums, size_t first, size_t last) {
  const size_t E = p.experts, B = p.sequences;
  float *x = scratch, *s = scratch + E, *probs = scratch + 2 * E, *q = scratch + 3 * E;
  for (size_t b = first; b < last; ++b) {
    const size_t end = std::min(p.rows, (b + 1) * moe::kAuxLossBlock);
    float sum = 0.0f;
    for (size_t r = b * moe::kAuxLossBlock; r < end; ++r) {
      AuxScores(p, d, r, x, s, probs);
      sum += AuxRowValue(probs, n + (r % B) * E, q, E);
    }
    sums[b] = sum;
  }
}

// MoeAuxLossGrad, rows [first, last): w = SlotSum(p_e n_e); softmax: g_j = (p_j (n_j - w)) c;
// sigmoid, sqrtsoftplus: g_j = ((slope_j (n_j - w)) / D) c, slope_j = sigmoid's s (1 - s) without
// cancellation, or sqrtsoftplus's sigmoid(x) / (r + r) (r / 2 below -87, 0 where r = 0).
// c = grad_loss K (F32).
void MoeAuxLossGradRows(const moe::AuxLossPlan &p, const moe::AuxLossData &d, const float *n,
                        float c, float *scratch, size_t first, size_t last) {
  const size_t E = p.experts, B = p.sequences;
  float *x = scratch, *s = scratch + E, *probs = scratch + 2 * E, *q = scratch + 3 * E;
  const bool sigmoid = p.score != moe::AuxScore::softmax;
  for (size_t r = first; r < last; ++r) {
    const float D = AuxScores(p, d, r, x, s, probs);
    const float *nb = n + (r % B) * E;
    const float w = AuxRowValue(probs, nb, q, E);
    if (sigmoid) {
      // x is spent: its row takes the slopes.
      if (p.score == moe::AuxScore::sigmoid)
        MapRow2(x, s, x, E,
                [](auto d, auto v, auto pr) HWY_ATTR { return SigmoidSlopeFloor(d, v, pr); });
      else
        MapRow2(x, s, x, E, [](auto d, auto v, auto r) HWY_ATTR {
          // sigmoid(x) / (r + r); below -87, where the sigmoid's floor is 0, r / 2 (= e^(x/2) / 2,
          // the slope there to a factor 1 - e^x); 0 where r is 0.
          const auto slope = hn::Div(SigmoidFloor(d, v), hn::Add(r, r));
          const auto tail = hn::Lt(v, hn::Set(d, -87.0f));
          const auto value = hn::IfThenElse(tail, hn::Mul(r, hn::Set(d, 0.5f)),
                                            hn::IfThenElseZero(hn::Gt(r, hn::Zero(d)), slope));
          return hn::IfThenElse(hn::IsNaN(v), v, value);
        });
      MapRow2(nb, x, q, E, [w, D, c](auto d, auto nv, auto slope) HWY_ATTR {
        const auto t = hn::Mul(hn::Sub(nv, hn::Set(d, w)), slope);
        return hn::Mul(hn::Div(t, hn::Set(d, D)), hn::Set(d, c));
      });
    } else {
      MapRow2(nb, probs, q, E, [w, c](auto d, auto nv, auto pv) HWY_ATTR {
        return hn::Mul(hn::Mul(hn::Sub(nv, hn::Set(d, w)), pv), hn::Set(d, c));
      });
    }
    StoreRowVec(p.grad_x, d.grad_x, r, q);
  }
}

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
      case moe::RouterKind::weights:
        WeightsForward(p, d, r, s);
        break;
    }
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace infiniop::cpu {
HWY_EXPORT(MoeGatingRows);

namespace {
// The five kernels (kernels/list.h) share the row loop, which branches on plan.kind per row.
void runRows(const moe::RouterPlan &plan, const moe::RouterData &data) {
  const auto rows = &HWY_DYNAMIC_DISPATCH(MoeGatingRows);
  gating::ScratchPool pool(plan, static_cast<size_t>(std::max(1, callThreads())));
  // A row costs about 4 element-operations per expert (load, exp, divide, store).
  parallelRanges(plan.rows, 4 * plan.experts,
                 [&](size_t first, size_t last) { rows(plan, data, pool.Take(), first, last); });
}
}  // namespace

HWY_EXPORT(MoeAuxLossBlocks);
HWY_EXPORT(MoeAuxLossGradRows);

namespace {
// The counts as F32 (exact: the host checked them to be in [0, 2^24]), B rows of E; none for no
// rows (nothing reads them).
std::vector<float> auxCounts(const moe::AuxLossPlan &p, const void *counts) {
  if (p.rows == 0) return {};
  std::vector<float> n(p.sequences * p.experts);
  for (size_t b = 0; b < p.sequences; ++b)
    for (size_t e = 0; e < p.experts; ++e) {
      const ptrdiff_t at = p.counts.offset(b, e);
      n[b * p.experts + e] = p.counts.dtype == INFINI_DTYPE_I64
                                 ? static_cast<float>(static_cast<const int64_t *>(counts)[at])
                                 : static_cast<float>(static_cast<const int32_t *>(counts)[at]);
    }
  return n;
}

// Scratch rows (4 E floats) for every range a call may run, allocated before any is written.
// None for no rows: an empty x may have any E (SIZE_MAX: 4 E would wrap).
class AuxScratch {
 public:
  AuxScratch(size_t rows, size_t experts, size_t blocks)
      : per_(rows ? 4 * experts : 0), floats_(blocks * per_), blocks_(blocks) {}
  float *Take() { return floats_.data() + (next_.fetch_add(1) % blocks_) * per_; }

 private:
  size_t per_;
  std::vector<float> floats_;
  size_t blocks_;
  std::atomic<size_t> next_{0};
};
}  // namespace

void moe_aux_loss(const moe::AuxLossPlan &plan, const moe::AuxLossData &data) {
  const auto blocks_of = &HWY_DYNAMIC_DISPATCH(MoeAuxLossBlocks);
  const std::vector<float> n = auxCounts(plan, data.counts);
  const size_t blocks = (plan.rows + moe::kAuxLossBlock - 1) / moe::kAuxLossBlock;
  std::vector<float> sums(blocks);
  AuxScratch scratch(plan.rows, plan.experts, static_cast<size_t>(std::max(1, callThreads())));
  // A block costs about 6 element-operations per expert per row.
  parallelRanges(blocks, 6 * plan.experts * moe::kAuxLossBlock, [&](size_t first, size_t last) {
    blocks_of(plan, data, n.data(), scratch.Take(), sums.data(), first, last);
  });
  float total = 0.0f;
  for (size_t b = 0; b < blocks; ++b) total += sums[b];
  const float loss = total * plan.scale;
  static_cast<float *>(data.loss)[plan.loss.offset(0, 0)] = std::isnan(loss) ? NAN : loss;
}

void moe_aux_loss_grad(const moe::AuxLossPlan &plan, const moe::AuxLossData &data) {
  const auto rows = &HWY_DYNAMIC_DISPATCH(MoeAuxLossGradRows);
  const std::vector<float> n = auxCounts(plan, data.counts);
  const float g = static_cast<const float *>(data.grad_loss)[plan.grad_loss.offset(0, 0)];
  const float c = g * plan.scale;
  AuxScratch scratch(plan.rows, plan.experts, static_cast<size_t>(std::max(1, callThreads())));
  parallelRanges(plan.rows, 8 * plan.experts, [&](size_t first, size_t last) {
    rows(plan, data, n.data(), c, scratch.Take(), first, last);
  });
}

void moe_gating_top_k_softmax(const moe::RouterPlan &plan, const moe::RouterData &data) {
  runRows(plan, data);
}
void moe_gating_top_k_softmax_grad(const moe::RouterPlan &plan, const moe::RouterData &data) {
  runRows(plan, data);
}
void moe_gating_top_k(const moe::RouterPlan &plan, const moe::RouterData &data) {
  runRows(plan, data);
}
void moe_gating_top_k_grad(const moe::RouterPlan &plan, const moe::RouterData &data) {
  runRows(plan, data);
}
void moe_gating_weights(const moe::RouterPlan &plan, const moe::RouterData &data) {
  runRows(plan, data);
}
}  // namespace infiniop::cpu
#endif
