// SPDX-License-Identifier: Apache-2.0
// MoeZLoss and MoeZLossGrad on the cpu device (docs/moe_z_loss.md). A row's lse = m + Log(S) is
// the routers' softmax denominator (softmax_row-inl.h: the max, ExpFloor, the 16-slot sum) and
// math-inl.h's F32 Log; the forward sums z_t = lse_t^2 in blocks of kZLossBlockRows rows (row
// order within a block, from +0), one block per thread at a time, then the blocks' sums in block
// order from +0, so the split over threads never shows in the bits. The grad is one row per
// thread at a time. Every operation is a plain IEEE F32 operation in the documented order: the
// same bits on every Highway target, thread count and on opencl.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/moe_z_loss.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "cpu/math-inl.h"
#include "cpu/parallel.h"
#include "cpu/softmax_row-inl.h"
#include "hwy/highway.h"
#include "ops/moe_z_loss.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {
namespace {
namespace hn = hwy::HWY_NAMESPACE;

// log(S) for one S: one lane, the vector's bits.
float LogOne(float s) {
  const hn::CappedTag<float, 1> d1;
  return hn::GetLane(Log(d1, hn::Set(d1, s)));
}

// Row r's lse = m + log(S) (m = +-inf: m itself; a NaN: NaN), with e_j = exp(-(m - x_j)) left in
// `e` and S in *sum where m is finite. `x` takes the row as F32.
float RowLse(const moe::ZLossPlan &p, const void *data, size_t r, float *x, float *e, float *sum) {
  const size_t E = p.experts;
  LoadRowVec(p.x, data, r, x);
  const float m = RowMax(x, E);
  if (std::isinf(m)) return m;
  MapRow(x, e, E, [m](auto d, auto v) HWY_ATTR { return ExpFloor(d, hn::Sub(hn::Set(d, m), v)); });
  *sum = SlotSum(e, E);
  return m + LogOne(*sum);
}

}  // namespace

// The sums of z_t over blocks [first, last) into block_sums.
void MoeZLossBlocks(const moe::ZLossPlan &p, const moe::ZLossData &d, float *block_sums,
                    float *scratch, size_t first, size_t last) {
  float *x = scratch, *e = scratch + p.experts;
  for (size_t b = first; b < last; ++b) {
    const size_t begin = b * moe::kZLossBlockRows;
    const size_t end = std::min(p.rows, begin + moe::kZLossBlockRows);
    float sum = 0.0f;
    for (size_t r = begin; r < end; ++r) {
      float s = 0.0f;
      const float lse = RowLse(p, d.x, r, x, e, &s);
      sum += lse * lse;
    }
    block_sums[b] = sum;
  }
}

// grad_x of rows [first, last): gs (lse_t (e_tj / S_t)), gs = g scale (lse p before gs, so that
// nothing overflows where the result does not); NaN where m is not finite.
void MoeZLossGradRows(const moe::ZLossPlan &p, const moe::ZLossData &d, float gs, float *scratch,
                      size_t first, size_t last) {
  const size_t E = p.experts;
  float *x = scratch, *e = scratch + E;
  for (size_t r = first; r < last; ++r) {
    float S = 0.0f;
    const float lse = RowLse(p, d.x, r, x, e, &S);
    if (!std::isfinite(lse)) {
      std::fill(e, e + E, NAN);
    } else {
      MapRow(e, e, E, [gs, lse, S](auto dd, auto v) HWY_ATTR {
        return hn::Mul(hn::Set(dd, gs), hn::Mul(hn::Set(dd, lse), hn::Div(v, hn::Set(dd, S))));
      });
    }
    StoreRowVec(p.grad_x, d.grad_x, r, e);
  }
}

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace infiniop::cpu {
HWY_EXPORT(MoeZLossBlocks);
HWY_EXPORT(MoeZLossGradRows);

namespace {
// Two rows of E floats per range, allocated before the OpenMP region; each range takes the next.
// None for no rows: an empty x may have any E (SIZE_MAX: 2 E would wrap).
class RowScratch {
 public:
  RowScratch(size_t rows, size_t experts, size_t ranges)
      : per_(rows ? 2 * experts : 0), floats_(per_ * ranges), ranges_(ranges) {}
  float *Take() { return floats_.data() + next_.fetch_add(1) % ranges_ * per_; }

 private:
  size_t per_;
  std::vector<float> floats_;
  size_t ranges_;
  std::atomic<size_t> next_{0};
};
}  // namespace

void moe_z_loss(const moe::ZLossPlan &p, const moe::ZLossData &d) {
  const size_t blocks = moe::zLossBlocks(p.rows);
  std::vector<float> block_sums(blocks);
  RowScratch scratch(p.rows, p.experts, static_cast<size_t>(std::max(1, callThreads())));
  const auto run = &HWY_DYNAMIC_DISPATCH(MoeZLossBlocks);
  parallelRanges(blocks, moe::kZLossBlockRows * 4 * p.experts, [&](size_t first, size_t last) {
    run(p, d, block_sums.data(), scratch.Take(), first, last);
  });
  float total = 0.0f;
  for (size_t b = 0; b < blocks; ++b) total += block_sums[b];
  const float loss = total * p.scale;
  static_cast<float *>(d.loss)[p.loss.offset(0, 0)] = gating::Canonical(loss);
}

void moe_z_loss_grad(const moe::ZLossPlan &p, const moe::ZLossData &d) {
  const float g = static_cast<const float *>(d.grad_loss)[p.grad_loss.offset(0, 0)];
  const float gs = g * p.scale;
  RowScratch scratch(p.rows, p.experts, static_cast<size_t>(std::max(1, callThreads())));
  const auto run = &HWY_DYNAMIC_DISPATCH(MoeZLossGradRows);
  parallelRanges(p.rows, 4 * p.experts,
                 [&](size_t first, size_t last) { run(p, d, gs, scratch.Take(), first, last); });
}
}  // namespace infiniop::cpu
#endif
