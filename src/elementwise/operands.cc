// SPDX-License-Identifier: Apache-2.0
#include "elementwise/operands.h"

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "core/dtype.h"
#include "core/error.h"

namespace infiniop::elementwise {
namespace {
// The stride with which dims [from, ndim) walk the tensor as one flat row, if they do.
std::optional<ptrdiff_t> mergedStride(const Tensor &t, size_t from) {
  std::optional<ptrdiff_t> stride;
  ptrdiff_t expected = 0;
  for (size_t d = t.ndim(); d-- > from;) {
    if (t.shape[d] == 1) continue;
    if (stride && t.strides[d] != expected) return std::nullopt;
    if (!stride) stride = t.strides[d];
    expected = t.strides[d] * static_cast<ptrdiff_t>(t.shape[d]);
  }
  return stride.value_or(1);
}

// Strides that walk `shape` row-major over dims [from, ndim) as one flat row of step `step`,
// and as `own` over the dims before.
std::vector<ptrdiff_t> flatRowStrides(const std::vector<size_t> &shape, size_t from,
                                      const std::vector<ptrdiff_t> &own, ptrdiff_t step) {
  std::vector<ptrdiff_t> strides(own.begin(), own.begin() + static_cast<ptrdiff_t>(from));
  strides.resize(shape.size());
  for (size_t d = shape.size(); d-- > from;) {
    strides[d] = step;
    step *= static_cast<ptrdiff_t>(shape[d]);
  }
  return strides;
}

// Marks interleaved pairs: operands k, k+1 of one tensor that share a stride-1 run.
void findPairs(Plan &plan) {
  const int inner = plan.ndim - 1;
  bool paired = false, all = true;
  for (int k = 0; k < plan.numOperands(); ++k) {
    plan.role[k] = Plan::kAlone;
    if (plan.strides[k][inner] == 1) continue;
    const bool same_side = (k < plan.num_outputs) == (k + 1 < plan.num_outputs);
    if (k + 1 < plan.numOperands() && same_side && plan.source[k] == plan.source[k + 1] &&
        plan.strides[k][inner] == 2 && plan.strides[k + 1][inner] == 2 &&
        plan.offset[k + 1] == plan.offset[k] + 1) {
      plan.role[k] = Plan::kPairFirst;
      plan.role[++k] = Plan::kPairSecond;
      paired = true;
    } else {
      all = false;
    }
  }
  plan.inner_paired = paired && all;
}

// Drops size-1 dims, orders dims by the first operand's |stride| (outermost first) unless
// `keep_order`, and merges neighbours that every operand traverses as one.
void foldDims(const std::vector<Operand> &operands, bool keep_order, Plan &plan) {
  const size_t rank = operands[0].shape.size();
  std::vector<size_t> dims;
  for (size_t d = 0; d < rank; ++d)
    if (operands[0].shape[d] != 1) dims.push_back(d);
  const auto &key = operands[0].strides;
  if (!keep_order)
    std::stable_sort(dims.begin(), dims.end(),
                     [&](size_t a, size_t b) { return std::abs(key[a]) > std::abs(key[b]); });
  const int n_ops = static_cast<int>(operands.size());
  plan.ndim = 0;
  for (size_t d : dims) {
    const size_t size = operands[0].shape[d];
    bool merge = plan.ndim > 0;
    for (int k = 0; merge && k < n_ops; ++k)
      merge =
          plan.strides[k][plan.ndim - 1] == operands[k].strides[d] * static_cast<ptrdiff_t>(size);
    if (merge) {
      plan.shape[plan.ndim - 1] *= size;
      for (int k = 0; k < n_ops; ++k) plan.strides[k][plan.ndim - 1] = operands[k].strides[d];
    } else {
      plan.shape[plan.ndim] = size;
      for (int k = 0; k < n_ops; ++k) plan.strides[k][plan.ndim] = operands[k].strides[d];
      ++plan.ndim;
    }
  }
  if (plan.ndim == 0) {  // a single element
    plan.ndim = 1;
    plan.shape[0] = 1;
    for (int k = 0; k < n_ops; ++k) plan.strides[k][0] = 1;
  }
  plan.inner_contiguous = true;
  for (int k = 0; k < n_ops; ++k)
    plan.inner_contiguous = plan.inner_contiguous && plan.strides[k][plan.ndim - 1] == 1;
  if (!plan.inner_contiguous) findPairs(plan);
}
}  // namespace

// Expands user tensors into operands, halving split ones.
infiniStatus_t addOperands(const char *op, const UserTensor &user, int source,
                           std::vector<Operand> &operands) {
  const Tensor &t = *user.tensor;
  if (user.split_dim < 0) {
    operands.push_back({user.name, source, t.shape, t.strides, 0});
    return INFINI_STATUS_SUCCESS;
  }
  const size_t dim = static_cast<size_t>(user.split_dim);
  if (dim >= t.ndim())
    return fail(INFINI_STATUS_BAD_TENSOR_SHAPE, std::string(op) + ": " + user.name + " shape " +
                                                    shapeString(t.shape) + " has no dim " +
                                                    std::to_string(dim) + " to split");
  if (t.shape[dim] % 2 != 0)
    return fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                std::string(op) + ": " + user.name + " shape " + shapeString(t.shape) +
                    " has size " + std::to_string(t.shape[dim]) + " along dim " +
                    std::to_string(dim) + ", which must be even to split into two halves");
  std::vector<size_t> half = t.shape;
  half[dim] /= 2;
  const ptrdiff_t second = static_cast<ptrdiff_t>(half[dim]) * t.strides[dim];
  const std::string where = " along dim " + std::to_string(dim) + ")";
  operands.push_back({std::string(user.name) + " (first half" + where, source, half, t.strides, 0});
  operands.push_back(
      {std::string(user.name) + " (second half" + where, source, half, t.strides, second});
  return INFINI_STATUS_SUCCESS;
}

// Operands of an interleaved split (see UserTensor). Pairs (2p, 2p+1) of a merged row map to
// result p, which is linear in a tensor's coordinates only where its merged dims are one flat
// row. So the iteration shape is either the results' shape (split tensors then need flat rows)
// or the split tensors' shape with the last dim halved (pairs are then neighbours along it, and
// the unsplit tensors need flat rows).
infiniStatus_t addInterleavedOperands(const char *op, const std::vector<UserTensor> &users,
                                      std::vector<Operand> &operands,
                                      std::vector<size_t> &iteration_shape,
                                      std::vector<bool> &staged) {
  const UserTensor *first = nullptr;
  for (const UserTensor &u : users)
    if (u.split_dim >= 0 && !first) first = &u;
  const size_t dim = static_cast<size_t>(first->split_dim);
  const std::vector<size_t> &full = first->tensor->shape;
  const std::string prefix = std::string(op) + ": ";
  if (dim >= full.size() || full[dim] % 2 != 0)
    return fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                prefix + first->name + " shape " + shapeString(full) +
                    " needs an even size along dim " + std::to_string(dim) +
                    " to split into two halves");
  std::vector<size_t> half = full;
  half[dim] /= 2;
  bool split_rows_flat = true, unsplit_rows_flat = true;
  for (const UserTensor &u : users) {
    const Tensor &t = *u.tensor;
    const bool split = u.split_dim >= 0;
    if (t.shape != (split ? full : half))
      return fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                  prefix + u.name + " shape " + shapeString(t.shape) + " should be " +
                      shapeString(split ? full : half) + " (" + first->name + " shape " +
                      shapeString(full) +
                      (split ? ")" : " with dim " + std::to_string(dim) + " halved)"));
    (split ? split_rows_flat : unsplit_rows_flat) &= mergedStride(t, dim).has_value();
  }
  // Neither: the split tensors without flat rows go through a contiguous workspace copy.
  bool by_results = split_rows_flat;
  std::vector<Tensor> views;
  for (const UserTensor &u : users) views.push_back(*u.tensor);
  if (!by_results && !(unsplit_rows_flat && full.back() % 2 == 0)) {
    for (size_t i = 0; i < users.size(); ++i) {
      if (users[i].split_dim < 0 || mergedStride(views[i], dim)) continue;
      staged[i] = true;
      views[i].strides = contiguousStrides(views[i].shape);
    }
    by_results = true;
  }
  iteration_shape = by_results ? half : full;
  if (!by_results) iteration_shape.back() /= 2;
  for (size_t i = 0; i < users.size(); ++i) {
    const Tensor &t = views[i];
    const int source = static_cast<int>(i);
    if (users[i].split_dim < 0) {
      operands.push_back(
          {users[i].name, source, iteration_shape,
           by_results ? t.strides
                      : flatRowStrides(iteration_shape, dim, t.strides, *mergedStride(t, dim)),
           0});
      continue;
    }
    std::vector<ptrdiff_t> strides = t.strides;
    ptrdiff_t step = t.strides.back();
    if (by_results) {
      step = *mergedStride(t, dim);
      strides = flatRowStrides(iteration_shape, dim, t.strides, 2 * step);
    } else {
      strides.back() *= 2;
    }
    const std::string name = users[i].name;
    operands.push_back(
        {name + " (A: even elements of each merged row)", source, iteration_shape, strides, 0});
    operands.push_back(
        {name + " (B: odd elements of each merged row)", source, iteration_shape, strides, step});
  }
  return INFINI_STATUS_SUCCESS;
}

Plan buildPlan(infiniDtype_t dtype, const std::vector<Operand> &operands, int num_user_outputs,
               const std::vector<size_t> &iteration_shape, bool keep_order) {
  Plan plan;
  plan.dtype = dtype;
  plan.element_size = dtypeSize(dtype);
  plan.num_outputs = 0;
  for (const Operand &o : operands) plan.num_outputs += o.source < num_user_outputs;
  plan.num_inputs = static_cast<int>(operands.size()) - plan.num_outputs;
  plan.numel = 1;
  for (size_t size : iteration_shape) plan.numel *= size;
  for (size_t k = 0; k < operands.size(); ++k) {
    plan.source[k] = operands[k].source;
    plan.offset[k] = operands[k].offset;
  }
  foldDims(operands, keep_order, plan);
  return plan;
}

}  // namespace infiniop::elementwise
