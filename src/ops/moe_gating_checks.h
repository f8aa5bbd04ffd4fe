// SPDX-License-Identifier: Apache-2.0
// What the four router operators share (src/ops/moe_gating_top_k{,_softmax}.cc): their
// descriptor, the views of their tensors, the shape checks against x's leading shape, and one
// calculate path (pointers, overlap, workspace, expert_idx values read to the host, then the
// device's runner).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ops/moe_checks.h"
#include "ops/moe_gating.h"

namespace infiniop::moe_gating {
using infiniop::moe_checks::Checker;

inline constexpr const char *kSoftmax = "MoeGatingTopKSoftmax";
inline constexpr const char *kSoftmaxGrad = "MoeGatingTopKSoftmaxGrad";
inline constexpr const char *kTopK = "MoeGatingTopK";
inline constexpr const char *kTopKGrad = "MoeGatingTopKGrad";
inline constexpr const char *kWeights = "MoeGatingWeights";

// A router view as an operand of the per-call checks (pointer, alignment, overlap).
inline moe_checks::Operand routerOperand(const char *name, const void *data,
                                         const moe::RouterView &v) {
  return {name, data, v.present, v.span, infiniop::dtypeSize(v.dtype), v.rows * v.cols};
}

// The descriptor of a family whose plan and runner are all it holds (the expert counts, the aux
// losses), and its publication once the device has made the runner.
template <class PlanT, class RunnerT>
struct RunnerDescriptor : infiniop::OperatorDescriptor {
  explicit RunnerDescriptor(const char *op) : OperatorDescriptor(op) {}
  PlanT plan;
  std::unique_ptr<RunnerT> runner;
};
template <class Descriptor, class Public>
infiniStatus_t publishRunner(const char *op, infiniopHandle_t handle, Public *desc_ptr,
                             std::unique_ptr<Descriptor> desc) {
  desc->handle = handle;
  INFINIOP_CHECK(handle->device->runner(op, handle, desc->plan, &desc->runner));
  desc->workspace_size = desc->runner->workspaceSize();
  infiniop::publishDescriptor(desc_ptr, desc.release());
  return infiniop::succeed();
}

// A view's bytes as the host reads them (the data checks): on host-memory devices the data
// itself; elsewhere a copy of its span, read once the work queued before on the stream is done.
class HostCopy {
 public:
  infiniStatus_t read(const char *op, infiniopHandle_t handle, void *stream,
                      const moe::RouterView &v, const void *data) {
    base_ = static_cast<const char *>(data);
    if (handle->device->host_memory || !v.present || v.rows * v.cols == 0)
      return INFINI_STATUS_SUCCESS;
    const size_t size = infiniop::dtypeSize(v.dtype);
    const auto elements = static_cast<size_t>(v.span.highest - v.span.lowest + 1);
    copy_.resize((elements * size + 7) / 8);  // aligned for INT64
    INFINIOP_CHECK(infiniop::readForCheck(op, handle, stream,
                                          base_ + v.span.lowest * static_cast<ptrdiff_t>(size),
                                          elements * size, copy_.data()));
    base_ = reinterpret_cast<const char *>(copy_.data()) - v.span.lowest * ptrdiff_t(size);
    return INFINI_STATUS_SUCCESS;
  }
  const char *data() const { return base_; }
  // Element (r, c) of an I32 or I64 view, whole as int64.
  int64_t integer(const moe::RouterView &v, size_t r, size_t c) const {
    const ptrdiff_t i = v.offset(r, c);
    return v.dtype == INFINI_DTYPE_I64 ? reinterpret_cast<const int64_t *>(base_)[i]
                                       : reinterpret_cast<const int32_t *>(base_)[i];
  }

 private:
  std::vector<int64_t> copy_;
  const char *base_ = nullptr;
};

struct RouterDescriptor : infiniop::OperatorDescriptor {
  explicit RouterDescriptor(const char *op) : OperatorDescriptor(op) {}
  moe::RouterPlan plan;
  std::unique_ptr<moe::RouterRunner> runner;
};

// The view of `t` (NULL: absent); `last_dim` false for finished (every dim leading). Fails
// (BAD_TENSOR_STRIDES) where more than kRouterMaxLeading leading dims remain after merging.
infiniStatus_t routerView(const Checker &check, const char *name, const Tensor *t, bool last_dim,
                          moe::RouterView *view);

// x: rank >= 2 and E >= 1 (BAD_TENSOR_SHAPE); sets *leading to its leading shape.
infiniStatus_t checkX(const Checker &check, const char *name, const Tensor *x,
                      std::vector<size_t> *leading);
// `t` (if present) has shape leading + {last}; `layout` names it for the message.
infiniStatus_t checkRows(const Checker &check, const char *name, const Tensor *t,
                         const std::vector<size_t> &leading, size_t last, const char *layout);
// A BOOL finished of x's leading shape (if present).
infiniStatus_t checkFinished(const Checker &check, const Tensor *finished,
                             const std::vector<size_t> &leading);
// An INT32 index output (if present) holds values up to `highest`.
infiniStatus_t indexFits(const Checker &check, const char *name, const Tensor *t, size_t highest);
// An F32 tensor (softmax_out, norm_out) if present.
infiniStatus_t checkF32(const Checker &check, const char *name, const Tensor *t);

// The grads' first checks: the four required descriptors, then the device.
infiniStatus_t gradOpening(const Checker &check, infiniopHandle_t handle, infiniop::KernelId kernel,
                           const Tensor *grad_x, const Tensor *grad_y, const Tensor *x,
                           const Tensor *expert_idx);
// The grads' tensors after the attributes: one float dtype for grad_x, grad_y and x; grad_x of
// x's shape; grad_y and expert_idx (x's leading shape, k), k = grad_y's last dim in [1, E]. Fills
// the plan's dtype, rows, experts, k and views; *leading is x's leading shape.
infiniStatus_t gradTensors(Checker &check, const Tensor *grad_x, const Tensor *grad_y,
                           const Tensor *x, const Tensor *expert_idx, std::vector<size_t> *leading,
                           moe::RouterPlan *p);

// Asks the device for the runner and hands the descriptor out.
template <class Public>
infiniStatus_t publish(const char *op, infiniopHandle_t handle, Public *desc_ptr,
                       std::unique_ptr<RouterDescriptor> desc) {
  desc->handle = handle;
  INFINIOP_CHECK(handle->device->runner(op, handle, desc->plan, &desc->runner));
  desc->workspace_size = desc->runner->workspaceSize();
  infiniop::publishDescriptor(desc_ptr, desc.release());
  return infiniop::succeed();
}

// One calculate call of any of the four, after unwrapping: NULL and misaligned pointers,
// overlaps, the workspace, the grads' expert_idx values (in [0, E) on rows finished does not
// mark) read through the device before anything is written, then the runner.
infiniStatus_t runRouter(const RouterDescriptor *desc, size_t workspace_size,
                         const moe::RouterData &data, void *stream);

}  // namespace infiniop::moe_gating
