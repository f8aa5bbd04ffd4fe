// SPDX-License-Identifier: Apache-2.0
// What the eight MoE operators share (MoeFinalizeRoutingV2, MoeInitRoutingV2, their grads and
// the four routers, whose own checks are ops/moe_gating_checks.h): the checks of the contract
// (at creation: NULLs, device, dtypes, shapes; per call: pointers, alignment, overlap, index
// values read to the host), with messages prefixed by the operator's name.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/handle.h"
#include "core/overlap.h"
#include "core/tensor.h"
#include "ops/moe_finalize_routing.h"
#include "kernels/list.h"

namespace infiniop::moe_checks {
using infiniop::fail;
using infiniop::Tensor;
namespace gather = infiniop::gather;
namespace moe = infiniop::moe;

inline constexpr const char *kForward = "MoeFinalizeRoutingV2";
inline constexpr const char *kGrad = "MoeFinalizeRoutingV2Grad";

// An index tensor as the host checks (and a device's grad may invert) it: on host-memory
// devices the data itself; elsewhere a copy of its span, read once the work queued before on the
// stream is done (API.md lets a call wait for such a check before it writes anything).
class HostIndex {
 public:
  infiniStatus_t read(const char *op, infiniopHandle_t handle, void *stream,
                      const gather::IndexView &view, const void *data) {
    base_ = data;
    if (handle->device->host_memory || !view.present || view.rows * view.cols == 0)
      return INFINI_STATUS_SUCCESS;
    // span.lowest <= 0 <= span.highest: element 0 lies at element -lowest of the copy.
    const size_t size = view.elementSize();
    const auto elements = static_cast<size_t>(view.span.highest - view.span.lowest + 1);
    copy_.resize((elements * size + 7) / 8);  // aligned for INT64
    INFINIOP_CHECK(infiniop::readForCheck(
        op, handle, stream, static_cast<const char *>(data) + view.span.lowest * ptrdiff_t(size),
        elements * size, copy_.data()));
    base_ = reinterpret_cast<const char *>(copy_.data()) - view.span.lowest * ptrdiff_t(size);
    return INFINI_STATUS_SUCCESS;
  }
  // Read through the view: view.at(data(), r, c).
  const void *data() const { return base_; }

 private:
  std::vector<int64_t> copy_;
  const void *base_ = nullptr;
};

// The checks every descriptor makes, with messages prefixed by the operator's name.
class Checker {
 public:
  explicit Checker(const char *op) : op_(op) {}
  const char *name() const { return op_.c_str(); }

  infiniStatus_t fail(infiniStatus_t status, const std::string &what) const {
    return infiniop::fail(status, op_ + ": " + what);
  }
  infiniStatus_t required(const char *name, const void *p) const {
    return p ? INFINI_STATUS_SUCCESS
             : fail(INFINI_STATUS_NULL_POINTER, std::string(name) + " is NULL");
  }
  // The first checks of every create function: the out-pointer and the handle.
  infiniStatus_t opening(const void *desc_ptr, infiniopHandle_t handle) const {
    INFINIOP_CHECK(required("desc_ptr", desc_ptr));
    return infiniop::checkHandle(op_.c_str(), handle);
  }
  // drop_pad_mode of the operators with two modes: 0 (dropless) or 1 (drop/pad).
  infiniStatus_t dropPadMode(int64_t mode, bool *drop_pad) const {
    if (mode != 0 && mode != 1)
      return fail(INFINI_STATUS_BAD_PARAM,
                  "drop_pad_mode " + std::to_string(mode) + " is not 0 or 1");
    *drop_pad = mode == 1;
    return INFINI_STATUS_SUCCESS;
  }
  infiniStatus_t device(infiniopHandle_t handle, infiniop::KernelId kernel) const {
    if (!handle->device->supports(kernel))
      return fail(INFINI_STATUS_DEVICE_TYPE_NOT_SUPPORTED,
                  std::string("not available on device ") + handle->device->name);
    return INFINI_STATUS_SUCCESS;
  }
  // A float tensor (if present) of the call's dtype, which the first one sets.
  infiniStatus_t floating(const char *name, const Tensor *t) {
    if (!t) return INFINI_STATUS_SUCCESS;
    INFINIOP_CHECK(infiniop::checkTensor(op_.c_str(), name, t));
    if (!infiniop::isFloatStorage(t->dtype))
      return fail(INFINI_STATUS_BAD_TENSOR_DTYPE, std::string(name) + " has dtype " +
                                                      infiniop::dtypeName(t->dtype) +
                                                      "; F32, F16 or BF16 is required");
    if (dtype_ == INFINI_DTYPE_INVALID) {
      dtype_ = t->dtype;
      dtype_source_ = name;
    } else if (t->dtype != dtype_) {
      return fail(INFINI_STATUS_BAD_TENSOR_DTYPE,
                  std::string(name) + " has dtype " + infiniop::dtypeName(t->dtype) + " but " +
                      dtype_source_ + " has " + infiniop::dtypeName(dtype_));
    }
    return INFINI_STATUS_SUCCESS;
  }
  infiniStatus_t index(const char *name, const Tensor *t) const {
    if (!t) return INFINI_STATUS_SUCCESS;
    INFINIOP_CHECK(infiniop::checkTensor(op_.c_str(), name, t));
    if (t->dtype == INFINI_DTYPE_I32 || t->dtype == INFINI_DTYPE_I64) return INFINI_STATUS_SUCCESS;
    return fail(INFINI_STATUS_BAD_TENSOR_DTYPE, std::string(name) + " has dtype " +
                                                    infiniop::dtypeName(t->dtype) +
                                                    "; I32 or I64 is required");
  }
  // scales or grad_scales (if present): the activations' dtype, or F32 (SEMANTICS.md's one
  // mixture); grad_scales has the dtype of scales. Call after floating() of the activations.
  infiniStatus_t scales(const char *name, const Tensor *t) {
    if (!t) return INFINI_STATUS_SUCCESS;
    INFINIOP_CHECK(infiniop::checkTensor(op_.c_str(), name, t));
    const infiniDtype_t wanted = scales_dtype_ != INFINI_DTYPE_INVALID ? scales_dtype_ : dtype_;
    if (t->dtype == wanted ||
        (scales_dtype_ == INFINI_DTYPE_INVALID && t->dtype == INFINI_DTYPE_F32)) {
      if (scales_dtype_ == INFINI_DTYPE_INVALID) {
        scales_dtype_ = t->dtype;
        scales_source_ = name;
      }
      return INFINI_STATUS_SUCCESS;
    }
    const bool first = scales_dtype_ == INFINI_DTYPE_INVALID;
    return fail(INFINI_STATUS_BAD_TENSOR_DTYPE,
                std::string(name) + " has dtype " + infiniop::dtypeName(t->dtype) + "; " +
                    (first ? (dtype_ == INFINI_DTYPE_F32
                                  ? std::string("F32 (as ") + dtype_source_ + ") is required"
                                  : std::string(dtype_source_) + "'s " +
                                        infiniop::dtypeName(dtype_) + " or F32 is required")
                           : std::string(scales_source_) + "'s " +
                                 infiniop::dtypeName(scales_dtype_) + " is required"));
  }
  infiniStatus_t rank(const char *name, const Tensor *t, size_t ndim, const char *layout) const {
    if (!t || t->ndim() == ndim) return INFINI_STATUS_SUCCESS;
    return fail(
        INFINI_STATUS_BAD_TENSOR_SHAPE,
        std::string(name) + " shape " + infiniop::shapeString(t->shape) + " must be " + layout);
  }
  infiniStatus_t shape(const char *name, const Tensor *t, const std::vector<size_t> &expected,
                       const char *why) const {
    if (!t || t->shape == expected) return INFINI_STATUS_SUCCESS;
    return fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                std::string(name) + " shape " + infiniop::shapeString(t->shape) + " should be " +
                    infiniop::shapeString(expected) + " " + why);
  }
  infiniStatus_t output(const char *name, const Tensor *t) const {
    if (!t || !infiniop::hasSelfOverlap(t->shape, t->strides)) return INFINI_STATUS_SUCCESS;
    return fail(INFINI_STATUS_BAD_TENSOR_STRIDES,
                std::string("output ") + name + " (shape " + infiniop::shapeString(t->shape) +
                    ", strides " + infiniop::stridesString(t->strides) +
                    ") has overlapping elements");
  }
  // Positions (r * K + k) are int32 workspace entries, whatever the index dtype.
  infiniStatus_t positions(size_t tokens, size_t topk) const {
    if (topk == 0 || tokens <= static_cast<size_t>(std::numeric_limits<int32_t>::max()) / topk)
      return INFINI_STATUS_SUCCESS;
    return fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                std::to_string(tokens) + " x " + std::to_string(topk) +
                    " routed tokens exceed the 2^31 - 1 positions index values may address");
  }
  // E x C slots of a drop/pad layout, whose index values are below 2^31 on every operator.
  infiniStatus_t slots(size_t experts, size_t capacity) const {
    if (capacity == 0 ||
        experts <= static_cast<size_t>(std::numeric_limits<int32_t>::max()) / capacity)
      return INFINI_STATUS_SUCCESS;
    return fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                std::to_string(experts) + " x " + std::to_string(capacity) +
                    " expert slots exceed the 2^31 - 1 that index values may address");
  }
  infiniDtype_t dtype() const { return dtype_; }
  // The dtype of scales: the activations' where there are none.
  infiniDtype_t scalesDtype() const {
    return scales_dtype_ != INFINI_DTYPE_INVALID ? scales_dtype_ : dtype_;
  }

 private:
  std::string op_;
  infiniDtype_t dtype_ = INFINI_DTYPE_INVALID, scales_dtype_ = INFINI_DTYPE_INVALID;
  const char *dtype_source_ = "", *scales_source_ = "";
};

// One tensor of a call for the per-call checks: pointer and overlap.
struct Operand {
  const char *name;
  const void *data;
  bool present;  // its descriptor was given and the kernel uses it
  infiniop::ElementSpan span;
  size_t element_size;
  size_t numel;
};

// The call's workspace as the last operand: `needed` bytes (absent when none are).
inline Operand workspaceOperand(const void *workspace, size_t needed) {
  return {"the workspace", workspace, needed > 0, {0, static_cast<ptrdiff_t>(needed) - 1}, 1,
          needed};
}
// INSUFFICIENT_WORKSPACE unless the caller's `given` bytes hold the `needed` ones.
inline infiniStatus_t checkWorkspaceSize(const char *op, size_t given, size_t needed) {
  if (given >= needed) return INFINI_STATUS_SUCCESS;
  return infiniop::fail(INFINI_STATUS_INSUFFICIENT_WORKSPACE,
                        std::string(op) + ": workspace of " + std::to_string(given) + " bytes; " +
                            std::to_string(needed) + " are needed");
}

// NULL data pointers, then what the call writes (the first `num_outputs`, and the workspace
// when one is last) overlapping anything else: MoE outputs never alias an input.
inline infiniStatus_t checkOperands(const char *op, const std::vector<Operand> &operands,
                                    size_t num_outputs, bool last_is_workspace = false) {
  std::vector<infiniop::CallExtent> extents;
  for (size_t i = 0; i < operands.size(); ++i) {
    const Operand &o = operands[i];
    const bool written = i < num_outputs || (last_is_workspace && i + 1 == operands.size());
    if (!o.present || o.numel == 0) {
      extents.push_back({o.name, nullptr, nullptr, written});
      continue;
    }
    if (!o.data)
      return fail(INFINI_STATUS_NULL_POINTER, std::string(op) + ": " + o.name + " pointer is NULL");
    INFINIOP_CHECK(infiniop::checkAligned(op, o.name, o.data, o.element_size));
    const auto bytes = static_cast<ptrdiff_t>(o.element_size);
    const char *data = static_cast<const char *>(o.data);
    extents.push_back(
        {o.name, data + o.span.lowest * bytes, data + (o.span.highest + 1) * bytes, written});
  }
  return infiniop::checkNoOverlap(op, extents.data(), extents.size());
}

inline Operand indexOperand(const char *name, const void *data, const gather::IndexView &view) {
  return {name, data, view.present, view.span, view.elementSize(), view.rows * view.cols};
}

template <class View>
Operand floatOperand(const char *name, const void *data, const View &view, size_t element_size,
                     size_t numel) {
  return {name, data, view.present, view.span, element_size, numel};
}

}  // namespace infiniop::moe_checks
