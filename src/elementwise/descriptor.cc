// SPDX-License-Identifier: Apache-2.0
#include "elementwise/descriptor.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/kernels.h"

namespace infiniop::elementwise {
namespace {

struct Operand {
  std::string name;
  int source;
  std::vector<size_t> shape;
  std::vector<ptrdiff_t> strides;
  ptrdiff_t offset;
};

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

// The staging buffers start at the first 64-byte boundary of the user's workspace.
constexpr size_t kWorkspaceAlignment = 64;
char *alignUp(char *p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  return p + ((kWorkspaceAlignment - address % kWorkspaceAlignment) % kWorkspaceAlignment);
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

constexpr KernelTable kCopyKernels = INFINIOP_KERNEL_TABLE(copy);

bool sameLayout(const std::vector<size_t> &shape_a, const std::vector<ptrdiff_t> &strides_a,
                const std::vector<size_t> &shape_b, const std::vector<ptrdiff_t> &strides_b) {
  return shape_a == shape_b && strides_a == strides_b;
}

}  // namespace

infiniStatus_t failNullDescriptorPointer(const char *op_name) {
  return fail(INFINI_STATUS_NULL_POINTER, std::string(op_name) + ": desc_ptr is NULL");
}

infiniStatus_t Descriptor::create(infiniopHandle_t handle, const char *op,
                                  const KernelTable &kernels,
                                  std::initializer_list<UserTensor> outputs,
                                  std::initializer_list<UserTensor> inputs, Descriptor **result,
                                  const Options &options) {
  const std::string prefix = std::string(op) + ": ";
  INFINIOP_CHECK(checkHandle(op, handle));
  std::vector<UserTensor> users(outputs);
  users.insert(users.end(), inputs.begin(), inputs.end());
  for (const UserTensor &u : users)
    INFINIOP_CHECK(checkTensor(op, (std::string(u.name) + " descriptor").c_str(), u.tensor));
  if (!hasKernel(kernels, handle->device))
    return fail(INFINI_STATUS_DEVICE_TYPE_NOT_SUPPORTED,
                prefix + "not available on device " + deviceName(handle->device));

  const infiniDtype_t dtype = users[0].tensor->dtype;
  for (const UserTensor &u : users) {
    if (!isFloatStorage(u.tensor->dtype))
      return fail(INFINI_STATUS_BAD_TENSOR_DTYPE, prefix + u.name + " has dtype " +
                                                      dtypeName(u.tensor->dtype) +
                                                      "; F32, F16 or BF16 is required");
    if (u.tensor->dtype != dtype)
      return fail(INFINI_STATUS_BAD_TENSOR_DTYPE, prefix + u.name + " has dtype " +
                                                      dtypeName(u.tensor->dtype) + " but " +
                                                      users[0].name + " has " + dtypeName(dtype));
  }

  std::vector<Operand> operands;
  std::vector<size_t> iteration_shape;
  std::vector<bool> staged(users.size(), false);
  if (std::any_of(users.begin(), users.end(), [](const UserTensor &u) { return u.interleaved; })) {
    INFINIOP_CHECK(addInterleavedOperands(op, users, operands, iteration_shape, staged));
  } else {
    for (size_t i = 0; i < users.size(); ++i)
      INFINIOP_CHECK(addOperands(op, users[i], static_cast<int>(i), operands));
    for (const Operand &o : operands)
      if (o.shape != operands[0].shape)
        return fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                    prefix + o.name + " shape " + shapeString(o.shape) + " does not match " +
                        operands[0].name + " shape " + shapeString(operands[0].shape));
    iteration_shape = operands[0].shape;
  }
  if (operands.size() > static_cast<size_t>(kMaxOperands))
    return fail(INFINI_STATUS_INTERNAL_ERROR, prefix + "too many operands");
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor &t = *users[i].tensor;
    if (hasSelfOverlap(t.shape, t.strides))
      return fail(INFINI_STATUS_BAD_TENSOR_STRIDES,
                  prefix + "output " + users[i].name + " (shape " + shapeString(t.shape) +
                      ", strides " + stridesString(t.strides) + ") has overlapping elements");
  }
  if (options.attributes_size > kMaxAttributeBytes)
    return fail(INFINI_STATUS_INTERNAL_ERROR, prefix + "attributes too large");

  auto desc = std::make_unique<Descriptor>(op);
  desc->handle = handle;
  if (options.attributes_size)
    std::memcpy(desc->attributes_, options.attributes, options.attributes_size);
  for (int d = 0; d < options.row_dim; ++d) desc->rows_ *= iteration_shape[static_cast<size_t>(d)];
  desc->num_user_outputs_ = static_cast<int>(outputs.size());
  const size_t element_size = dtypeSize(dtype);
  for (const UserTensor &u : users) {
    const Tensor &t = *u.tensor;
    const ElementSpan span = elementSpan(t.shape, t.strides);
    const auto bytes = static_cast<ptrdiff_t>(element_size);
    desc->layouts_.push_back({u.name, t.shape, t.strides, span.lowest * bytes,
                              (span.highest + 1) * bytes, t.numel() == 0});
  }
  desc->plan_ = buildPlan(dtype, operands, static_cast<int>(outputs.size()), iteration_shape,
                          options.row_dim >= 0);
  INFINIOP_CHECK(makeRunner(op, handle, kernels, desc->plan_, &desc->runner_));
  // Staged tensors: copied in before the kernel (inputs) or out after it (outputs), by the
  // device's copy kernel, between the user's layout and a contiguous workspace buffer.
  for (size_t i = 0; i < users.size(); ++i) {
    if (!staged[i]) continue;
    const Tensor &t = *users[i].tensor;
    const bool output = i < outputs.size();
    const int user = static_cast<int>(i);
    const Operand user_side{users[i].name, output ? 0 : 1, t.shape, t.strides, 0};
    const Operand buffer_side{"workspace", output ? 1 : 0, t.shape, contiguousStrides(t.shape), 0};
    std::vector<Operand> copy = {output ? user_side : buffer_side,
                                 output ? buffer_side : user_side};
    Plan plan = buildPlan(dtype, copy, 1, t.shape, false);
    std::unique_ptr<Runner> runner;
    INFINIOP_CHECK(makeRunner(op, handle, kCopyKernels, plan, &runner));
    desc->staging_.push_back({user, desc->workspace_size, output, plan.numel, std::move(runner)});
    // 64-byte aligned buffers, one per staged tensor.
    desc->workspace_size += (t.numel() * element_size + 63) / 64 * 64;
  }
  if (desc->workspace_size > 0) desc->workspace_size += kWorkspaceAlignment - 1;  // any pointer
  *result = desc.release();
  return succeed();
}

infiniStatus_t Descriptor::calculate(void *workspace, size_t workspace_size,
                                     std::initializer_list<void *> outputs,
                                     std::initializer_list<const void *> inputs, void *stream,
                                     const ActiveRows &active_rows) const {
  // No allocation on the way to the kernel: the pointers fit the operand table, and error
  // messages are built only on failure.
  char *pointers[kMaxOperands];
  size_t n = 0;
  for (void *p : outputs) pointers[n++] = static_cast<char *>(p);
  for (const void *p : inputs) pointers[n++] = const_cast<char *>(static_cast<const char *>(p));
  const auto failWith = [&](infiniStatus_t status, const std::string &why) {
    return fail(status, std::string(name()) + ": " + why);
  };
  for (size_t i = 0; i < n; ++i) {
    if (layouts_[i].empty) continue;
    if (!pointers[i])
      return failWith(INFINI_STATUS_NULL_POINTER, layouts_[i].name + " pointer is NULL");
    if (!isAligned(pointers[i], plan_.element_size))
      return failWith(INFINI_STATUS_BAD_PARAM,
                      misalignedMessage(layouts_[i].name.c_str(), pointers[i], plan_.element_size));
  }
  if (plan_.numel == 0) {
    // Nothing to compute, but data that exists is still checked (group_index's counts).
    size_t active = 0;
    if (active_rows) INFINIOP_CHECK(active_rows(rows_, &active));
    return succeed();
  }

  // Whether user tensor i shares a byte with [lo, hi).
  const auto touches = [&](size_t i, const char *lo, const char *hi) {
    return !layouts_[i].empty && pointers[i] + layouts_[i].lowest_byte < hi &&
           lo < pointers[i] + layouts_[i].end_byte;
  };
  // An output may alias an input only exactly; any other shared byte is an error.
  const size_t n_out = static_cast<size_t>(num_user_outputs_);
  for (size_t o = 0; o < n_out; ++o) {
    for (size_t other = 0; other < n; ++other) {
      if (other == o || (other < o && other < n_out)) continue;
      if (!touches(other, pointers[o] + layouts_[o].lowest_byte,
                   pointers[o] + layouts_[o].end_byte))
        continue;
      const bool exact_alias = other >= n_out && pointers[o] == pointers[other] &&
                               sameLayout(layouts_[o].shape, layouts_[o].strides,
                                          layouts_[other].shape, layouts_[other].strides);
      if (!exact_alias)
        return failWith(INFINI_STATUS_BAD_TENSOR_STRIDES,
                        "output " + layouts_[o].name + " overlaps " + layouts_[other].name +
                            " without being exactly the same memory and layout");
    }
  }

  const size_t needed = OperatorDescriptor::workspace_size;
  if (workspace_size < needed)
    return failWith(INFINI_STATUS_INSUFFICIENT_WORKSPACE,
                    "workspace of " + std::to_string(workspace_size) + " bytes; " +
                        std::to_string(needed) + " are needed");
  char *scratch = static_cast<char *>(workspace);
  if (needed > 0) {
    if (!scratch) return failWith(INFINI_STATUS_NULL_POINTER, "workspace pointer is NULL");
    for (size_t i = 0; i < n; ++i)
      if (touches(i, scratch, scratch + needed))
        return failWith(INFINI_STATUS_BAD_TENSOR_STRIDES,
                        "the workspace overlaps " + layouts_[i].name);
  }
  size_t active = rows_;
  if (active_rows) INFINIOP_CHECK(active_rows(rows_, &active));
  const size_t computed = active >= rows_ ? plan_.numel : plan_.numel / rows_ * active;

  // Staged tensors live in the workspace for the kernel; inputs are copied there first.
  char *data[kMaxOperands];
  std::copy(pointers, pointers + n, data);
  for (const Staging &stage : staging_) {
    char *buffer = alignUp(scratch) + stage.offset;
    if (!stage.output) {
      char *copy_operands[2] = {buffer, pointers[stage.user]};
      INFINIOP_CHECK(stage.copy->run(nullptr, copy_operands, 0, stage.numel, false, stream));
    }
    data[stage.user] = buffer;
  }
  char *operands[kMaxOperands];
  for (int k = 0; k < plan_.numOperands(); ++k)
    operands[k] =
        data[plan_.source[k]] + plan_.offset[k] * static_cast<ptrdiff_t>(plan_.element_size);
  if (computed > 0) INFINIOP_CHECK(runner_->run(attributes_, operands, 0, computed, false, stream));
  if (computed < plan_.numel)
    INFINIOP_CHECK(runner_->run(attributes_, operands, computed, plan_.numel, true, stream));
  for (const Staging &stage : staging_) {
    if (!stage.output) continue;
    char *copy_operands[2] = {pointers[stage.user], data[stage.user]};
    INFINIOP_CHECK(stage.copy->run(nullptr, copy_operands, 0, stage.numel, false, stream));
  }
  return succeed();
}

infiniStatus_t calculate(const char *op_name, const void *public_desc, void *workspace,
                         size_t workspace_size, std::initializer_list<void *> outputs,
                         std::initializer_list<const void *> inputs, void *stream,
                         const ActiveRows &active_rows) {
  Descriptor *desc = nullptr;
  INFINIOP_CHECK(unwrapDescriptor(op_name, public_desc, &desc));
  return guarded(op_name, [&] {
    return desc->calculate(workspace, workspace_size, outputs, inputs, stream, active_rows);
  });
}

}  // namespace infiniop::elementwise
