// SPDX-License-Identifier: Apache-2.0
#include "elementwise/descriptor.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>

#include "core/dtype.h"
#include "core/error.h"
#include "core/overlap.h"
#include "elementwise/operands.h"
#include "kernels/list.h"

namespace infiniop::elementwise {
namespace {

// The staging buffers start at the first 64-byte boundary of the user's workspace.
constexpr size_t kWorkspaceAlignment = 64;
char *alignUp(char *p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  return p + ((kWorkspaceAlignment - address % kWorkspaceAlignment) % kWorkspaceAlignment);
}

}  // namespace

infiniStatus_t failNullDescriptorPointer(const char *op_name) {
  return fail(INFINI_STATUS_NULL_POINTER, std::string(op_name) + ": desc_ptr is NULL");
}

infiniStatus_t Descriptor::create(infiniopHandle_t handle, const char *op, KernelId kernel,
                                  std::initializer_list<UserTensor> outputs,
                                  std::initializer_list<UserTensor> inputs, Descriptor **result,
                                  const Options &options) {
  const std::string prefix = std::string(op) + ": ";
  INFINIOP_CHECK(checkHandle(op, handle));
  std::vector<UserTensor> users(outputs);
  users.insert(users.end(), inputs.begin(), inputs.end());
  for (const UserTensor &u : users)
    INFINIOP_CHECK(checkTensor(op, (std::string(u.name) + " descriptor").c_str(), u.tensor));
  const Device &device = *handle->device;
  if (!device.supports(kernel))
    return fail(INFINI_STATUS_DEVICE_TYPE_NOT_SUPPORTED,
                prefix + "not available on device " + device.name);

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
  desc->plan_.relaxed =
      dtype == INFINI_DTYPE_F32 && handle->fpmath_mode.load() == INFINIOP_FPMATH_RELAXED;
  desc->plan_.kernel = kernel;
  INFINIOP_CHECK(device.runner(op, handle, desc->plan_, &desc->runner_));
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
    plan.kernel = KernelId::copy;
    std::unique_ptr<Runner> runner;
    INFINIOP_CHECK(device.runner(op, handle, plan, &runner));
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
    INFINIOP_CHECK(checkAligned(name(), layouts_[i].name.c_str(), pointers[i], plan_.element_size));
  }
  if (plan_.numel == 0) {
    // Nothing to compute, but data that exists is still checked (group_index's counts).
    size_t active = 0;
    if (active_rows) INFINIOP_CHECK(active_rows(rows_, &active));
    return succeed();
  }

  const size_t needed = OperatorDescriptor::workspace_size;
  if (workspace_size < needed)
    return failWith(INFINI_STATUS_INSUFFICIENT_WORKSPACE,
                    "workspace of " + std::to_string(workspace_size) + " bytes; " +
                        std::to_string(needed) + " are needed");
  char *scratch = static_cast<char *>(workspace);
  if (needed > 0 && !scratch)
    return failWith(INFINI_STATUS_NULL_POINTER, "workspace pointer is NULL");
  // Outputs may be exactly an input (in place); nothing else written may share a byte.
  const size_t n_outputs = static_cast<size_t>(num_user_outputs_);
  CallExtent extents[kMaxOperands + 1];
  for (size_t i = 0; i < n; ++i) {
    const Layout &l = layouts_[i];
    extents[i] = {l.name.c_str(),
                  l.empty ? nullptr : pointers[i] + l.lowest_byte,
                  l.empty ? nullptr : pointers[i] + l.end_byte,
                  i < n_outputs,
                  &l.shape,
                  &l.strides};
  }
  extents[n] = {"the workspace", scratch, needed > 0 ? scratch + needed : scratch, true};
  INFINIOP_CHECK(checkNoOverlap(name(), extents, n + 1));
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
