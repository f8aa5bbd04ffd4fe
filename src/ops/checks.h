// SPDX-License-Identifier: Apache-2.0
// The checks of the contract that no operator family owns: the opening checks of a create
// function (out-pointer, handle), required descriptors, the device's kernel table, dtypes, ranks,
// shapes and self-overlapping outputs; per call, NULL and misaligned pointers, overlaps and the
// workspace. Every message starts with the operator's name. Families add their own rules on top
// (ops/moe_checks.h).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/handle.h"
#include "core/overlap.h"
#include "core/tensor.h"
#include "kernels/list.h"

namespace infiniop::checks {

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
  infiniStatus_t device(infiniopHandle_t handle, infiniop::KernelId kernel) const {
    if (!handle->device->supports(kernel))
      return fail(INFINI_STATUS_DEVICE_TYPE_NOT_SUPPORTED,
                  std::string("not available on device ") + handle->device->name);
    return INFINI_STATUS_SUCCESS;
  }
  // An INT32 or INT64 tensor (if present).
  infiniStatus_t index(const char *name, const Tensor *t) const {
    if (!t) return INFINI_STATUS_SUCCESS;
    INFINIOP_CHECK(infiniop::checkTensor(op_.c_str(), name, t));
    if (t->dtype == INFINI_DTYPE_I32 || t->dtype == INFINI_DTYPE_I64) return INFINI_STATUS_SUCCESS;
    return fail(INFINI_STATUS_BAD_TENSOR_DTYPE, std::string(name) + " has dtype " +
                                                    infiniop::dtypeName(t->dtype) +
                                                    "; I32 or I64 is required");
  }
  // A tensor (if present) of exactly dtype `wanted`.
  infiniStatus_t exactDtype(const char *name, const Tensor *t, infiniDtype_t wanted) const {
    if (!t) return INFINI_STATUS_SUCCESS;
    INFINIOP_CHECK(infiniop::checkTensor(op_.c_str(), name, t));
    if (t->dtype == wanted) return INFINI_STATUS_SUCCESS;
    return fail(INFINI_STATUS_BAD_TENSOR_DTYPE, std::string(name) + " has dtype " +
                                                    infiniop::dtypeName(t->dtype) + "; " +
                                                    infiniop::dtypeName(wanted) + " is required");
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

 private:
  std::string op_;
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

// A tensor's operand: present when its descriptor was given.
inline Operand tensorOperand(const char *name, const void *data, const Tensor *t) {
  if (!t) return {name, data, false, {}, 1, 0};
  return {name,
          data,
          true,
          infiniop::elementSpan(t->shape, t->strides),
          infiniop::dtypeSize(t->dtype),
          t->numel()};
}

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
// when one is last) overlapping anything else.
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
      return infiniop::fail(INFINI_STATUS_NULL_POINTER,
                            std::string(op) + ": " + o.name + " pointer is NULL");
    INFINIOP_CHECK(infiniop::checkAligned(op, o.name, o.data, o.element_size));
    const auto bytes = static_cast<ptrdiff_t>(o.element_size);
    const char *data = static_cast<const char *>(o.data);
    extents.push_back(
        {o.name, data + o.span.lowest * bytes, data + (o.span.highest + 1) * bytes, written});
  }
  return infiniop::checkNoOverlap(op, extents.data(), extents.size());
}

}  // namespace infiniop::checks
