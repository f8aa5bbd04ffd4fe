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
#include "ops/checks.h"
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

// The checks every MoE descriptor makes: the family-neutral ones (ops/checks.h) and the MoE
// operators' dtype rules, modes and index limits, with messages prefixed by the operator's name.
class Checker : public checks::Checker {
 public:
  using checks::Checker::Checker;
  // drop_pad_mode of the operators with two modes: 0 (dropless) or 1 (drop/pad).
  infiniStatus_t dropPadMode(int64_t mode, bool *drop_pad) const {
    if (mode != 0 && mode != 1)
      return fail(INFINI_STATUS_BAD_PARAM,
                  "drop_pad_mode " + std::to_string(mode) + " is not 0 or 1");
    *drop_pad = mode == 1;
    return INFINI_STATUS_SUCCESS;
  }
  // A float tensor (if present) of the call's dtype, which the first one sets.
  infiniStatus_t floating(const char *name, const Tensor *t) {
    if (!t) return INFINI_STATUS_SUCCESS;
    INFINIOP_CHECK(infiniop::checkTensor(checks::Checker::name(), name, t));
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
  // scales or grad_scales (if present): the activations' dtype, or F32 (SEMANTICS.md's one
  // mixture); grad_scales has the dtype of scales. Call after floating() of the activations.
  infiniStatus_t scales(const char *name, const Tensor *t) {
    if (!t) return INFINI_STATUS_SUCCESS;
    INFINIOP_CHECK(infiniop::checkTensor(checks::Checker::name(), name, t));
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
  infiniDtype_t dtype_ = INFINI_DTYPE_INVALID, scales_dtype_ = INFINI_DTYPE_INVALID;
  const char *dtype_source_ = "", *scales_source_ = "";
};

using checks::checkOperands;
using checks::checkWorkspaceSize;
using checks::Operand;
using checks::workspaceOperand;

inline Operand indexOperand(const char *name, const void *data, const gather::IndexView &view) {
  return {name, data, view.present, view.span, view.elementSize(), view.rows * view.cols};
}

template <class View>
Operand floatOperand(const char *name, const void *data, const View &view, size_t element_size,
                     size_t numel) {
  return {name, data, view.present, view.span, element_size, numel};
}

}  // namespace infiniop::moe_checks
