// SPDX-License-Identifier: Apache-2.0
// MoeFinalizeRoutingV2 and its grad, as the formulas read: plain loops in double, each result
// rounded once when stored. The oracle of the cpu device, so nothing here is clever.
#include <vector>

#include "core/dtype.h"
#include "ops/moe_finalize_routing.h"

namespace infiniop::cpu_reference {
namespace {

using gather::RowView;
using gather::TableView;

template <class T>
double elementOf(const RowView &view, const void *data, size_t row, size_t j) {
  const T *p = static_cast<const T *>(data) + view.rowOffset(row) +
               static_cast<ptrdiff_t>(j) * view.col_stride;
  return toFloat(*p);
}

template <class T>
void store(const RowView &view, void *data, size_t row, size_t j, double value) {
  T *p = static_cast<T *>(data) + view.rowOffset(row) + static_cast<ptrdiff_t>(j) * view.col_stride;
  *p = fromFloat<T>(static_cast<float>(value));
}

// scales are T or F32 (`f32`); absent: weight 1.
template <class T>
double scaleOf(const TableView &scales, bool f32, const void *data, size_t r, size_t k) {
  if (!scales.present) return 1.0;
  return f32 ? static_cast<const float *>(data)[scales.offset(r, k)]
             : toFloat(static_cast<const T *>(data)[scales.offset(r, k)]);
}

template <class T>
void forward(const moe::ForwardPlan &p, const moe::ForwardData &data) {
  const bool f32_scales = p.scales_dtype == INFINI_DTYPE_F32;
  for (size_t r = 0; r < p.tokens; ++r)
    for (size_t j = 0; j < p.hidden; ++j) {
      double sum = 0.0;
      if (p.x1.present) sum += elementOf<T>(p.x1, data.x1, r, j);
      if (p.x2.present) sum += elementOf<T>(p.x2, data.x2, r, j);
      for (size_t k = 0; k < p.topk; ++k) {
        const int64_t index = p.row_index.at(data.row_index, r, k);
        double term = 0.0;  // a dropped (-1) or inactive (>= rows) token brings a zero row
        if (index >= 0 && static_cast<size_t>(index) < p.expanded_x.rows)
          term += elementOf<T>(p.expanded_x, data.expanded_x, index, j);
        if (p.bias.present)
          term += elementOf<T>(p.bias, data.bias, p.expert_index.at(data.expert_index, r, k), j);
        sum += scaleOf<T>(p.scales, f32_scales, data.scales, r, k) * term;
      }
      store<T>(p.out, data.out, r, j, sum);
    }
}

template <class T>
void grad(const moe::GradPlan &p, const moe::GradData &data) {
  const bool f32_scales = p.scales_dtype == INFINI_DTYPE_F32;
  const size_t rows = p.grad_expanded_x.rows;
  // Which positions i = r*K + k reach each destination row (skipped ones reach none).
  std::vector<std::vector<size_t>> sources(rows);
  for (size_t r = 0; r < p.tokens; ++r)
    for (size_t k = 0; k < p.topk; ++k) {
      const int64_t index = p.row_index.at(data.row_index, r, k);
      if (index >= 0 && static_cast<size_t>(index) < rows) sources[index].push_back(r * p.topk + k);
    }
  for (size_t d = 0; d < rows; ++d)
    for (size_t j = 0; j < p.hidden; ++j) {
      double sum = 0.0;
      for (size_t i : sources[d]) {
        const size_t r = i / p.topk, k = i % p.topk;
        sum += elementOf<T>(p.grad_y, data.grad_y, r, j) *
               scaleOf<T>(p.scales, f32_scales, data.scales, r, k);
      }
      store<T>(p.grad_expanded_x, data.grad_expanded_x, d, j, sum);
    }
  if (!p.grad_scales.present) return;
  for (size_t r = 0; r < p.tokens; ++r)
    for (size_t k = 0; k < p.topk; ++k) {
      const int64_t index = p.row_index.at(data.row_index, r, k);
      const bool reached = index >= 0 && static_cast<size_t>(index) < rows;
      double sum = 0.0;
      for (size_t j = 0; j < p.hidden; ++j) {
        double x = reached ? elementOf<T>(p.expanded_x, data.expanded_x, index, j) : 0.0;
        if (p.bias.present)
          x += elementOf<T>(p.bias, data.bias, p.expert_index.at(data.expert_index, r, k), j);
        sum += x * elementOf<T>(p.grad_y, data.grad_y, r, j);
      }
      const ptrdiff_t at = p.grad_scales.offset(r, k);
      if (f32_scales)
        static_cast<float *>(data.grad_scales)[at] = static_cast<float>(sum);
      else
        static_cast<T *>(data.grad_scales)[at] = fromFloat<T>(static_cast<float>(sum));
    }
}

}  // namespace

void moe_finalize_routing(const moe::ForwardPlan &plan, const moe::ForwardData &data) {
  visitFloatStorage(plan.dtype, [&](auto storage) { forward<decltype(storage)>(plan, data); });
}

// MoeInitRoutingV2Grad: the forward with weight 1 (its plan has no scales).
void moe_init_routing_grad(const moe::ForwardPlan &plan, const moe::ForwardData &data) {
  moe_finalize_routing(plan, data);
}

void moe_finalize_routing_grad(const moe::GradPlan &plan, const moe::GradData &data) {
  visitFloatStorage(plan.dtype, [&](auto storage) { grad<decltype(storage)>(plan, data); });
}

}  // namespace infiniop::cpu_reference
