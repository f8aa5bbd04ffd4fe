// SPDX-License-Identifier: Apache-2.0
// ClippedSwiglu and ClippedSwigluBackward: wiring. The attributes become the functor (see
// ops/clipped_swiglu.h); the split is the framework's (halves or interleaved); group_index only
// decides, per call, how many leading rows are computed and how many zero-filled.
#include "ops/clipped_swiglu.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "exact/sigmoid.h"
#include "elementwise/descriptor.h"
#include "infiniop/ops/clipped_swiglu.h"
#include "infiniop/ops/clipped_swiglu_backward.h"
#include "kernels/list.h"
#include "ops/split_dim.h"

namespace ew = infiniop::elementwise;
using infiniop::fail;

namespace {
constexpr const char *kForward = "ClippedSwiglu";
constexpr const char *kBackward = "ClippedSwigluBackward";
constexpr infiniop::KernelId kForwardKernel = infiniop::KernelId::clipped_swiglu;
constexpr infiniop::KernelId kBackwardKernel = infiniop::KernelId::clipped_swiglu_backward;

// Where group_index's counts are, when there is one.
struct Groups {
  bool has_groups = false;
  size_t group_count = 0;
  ptrdiff_t group_stride = 1;  // in elements
};

// The elementwise descriptor (of the same kind, so calls pass its check too) and the groups.
struct ClippedDescriptor : infiniop::OperatorDescriptor {
  using OperatorDescriptor::OperatorDescriptor;
  std::unique_ptr<ew::Descriptor> elementwise;
  Groups groups;
};

// clamp_mode 1's a_pass: the largest float A with silu(A) <= limit, silu in double as
// cpu_reference's. silu(A) <= 0 < limit for A <= 0 and silu rises for A >= 0, so a bisection over
// the non-negative floats' bits (ordered as their values) finds it.
float gatePassLimit(float limit) {
  if (std::isinf(limit)) return limit;
  const auto value = [](uint32_t bits) {
    float v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  };
  uint32_t below = 0, above = 0x7f800000u;  // silu(+0) <= limit < silu(+inf)
  while (above - below > 1) {
    const uint32_t middle = below + (above - below) / 2;
    if (infiniop::exact::silu(value(middle)) <= limit)
      below = middle;
    else
      above = middle;
  }
  return value(below);
}

}  // namespace

// ops/clipped_swiglu.h: alpha, limit and bias checked (clamp_mode 0 or 1, checked before), and the
// attributes the kernels receive; also ClippedSwigluQuant's (ops/gated_quant.cc).
infiniStatus_t infiniop::clippedSwigluAttributes(const char *op, float alpha, float limit,
                                                 float bias, int64_t clamp_mode,
                                                 ClippedSwigluAttributes *attributes) {
  const std::string prefix = std::string(op) + ": ";
  if (!(limit > 0.0f))  // NaN too
    return fail(INFINI_STATUS_BAD_PARAM,
                prefix + "limit " + std::to_string(limit) + " must be > 0 (+inf: no clipping)");
  if (!std::isfinite(alpha))
    return fail(INFINI_STATUS_BAD_PARAM,
                prefix + "alpha " + std::to_string(alpha) + " is not finite");
  if (!std::isfinite(bias))
    return fail(INFINI_STATUS_BAD_PARAM,
                prefix + "bias " + std::to_string(bias) + " is not finite");
  if (clamp_mode == 1)
    *attributes = {1.0f, limit, 0.0f, -87.0f, -175.0f, INFINITY, gatePassLimit(limit), 1};
  else
    *attributes = {alpha,
                   limit,
                   bias,
                   alpha == 0.0f ? 0.0f : -87.0f / alpha,
                   alpha == 0.0f ? 0.0f : -175.0f / alpha,
                   limit,
                   limit,
                   0};
  return INFINI_STATUS_SUCCESS;
}

namespace {

// Everything validated from the attributes and group_index before the tensors are looked at.
struct Setup {
  int split = 0;
  infiniop::ClippedSwigluAttributes attributes{};
  Groups groups;
};

// clamp_mode 1 ignores alpha and bias (the vendor's aclnnClippedSwigluV2), which are still
// validated.
infiniStatus_t prepare(const char *op, infiniopTensorDescriptor_t x,
                       infiniopTensorDescriptor_t group_index, int64_t dim, float alpha,
                       float limit, float bias, int64_t clamp_mode, Setup *setup) {
  const std::string prefix = std::string(op) + ": ";
  if (clamp_mode != 0 && clamp_mode != 1)
    return fail(INFINI_STATUS_BAD_PARAM,
                prefix + "clamp_mode " + std::to_string(clamp_mode) +
                    " must be 0 (clamp A, then the gate) or 1 (the gate silu(A), then clamp it)");
  INFINIOP_CHECK(infiniop::normalizeSplitDim(op, "x", x, dim, &setup->split));
  INFINIOP_CHECK(
      infiniop::clippedSwigluAttributes(op, alpha, limit, bias, clamp_mode, &setup->attributes));
  if (!group_index) return INFINI_STATUS_SUCCESS;
  INFINIOP_CHECK(infiniop::checkTensor(op, "group_index descriptor", group_index));
  if (group_index->dtype != INFINI_DTYPE_I64)
    return fail(INFINI_STATUS_BAD_TENSOR_DTYPE, prefix + "group_index has dtype " +
                                                    infiniop::dtypeName(group_index->dtype) +
                                                    "; I64 is required");
  if (group_index->ndim() != 1)
    return fail(INFINI_STATUS_BAD_TENSOR_SHAPE, prefix + "group_index shape " +
                                                    infiniop::shapeString(group_index->shape) +
                                                    " must have one dim");
  setup->groups.has_groups = true;
  setup->groups.group_count = group_index->shape[0];
  setup->groups.group_stride = group_index->strides[0];
  return INFINI_STATUS_SUCCESS;
}

template <class Public>
infiniStatus_t finish(Public *desc_ptr, infiniopHandle_t handle, const char *op,
                      infiniop::KernelId kernel, std::initializer_list<ew::UserTensor> outputs,
                      std::initializer_list<ew::UserTensor> inputs, Setup &setup) {
  if (!desc_ptr) return ew::failNullDescriptorPointer(op);
  ew::Options options;
  options.attributes = &setup.attributes;
  options.attributes_size = sizeof(setup.attributes);
  options.row_dim = setup.groups.has_groups ? setup.split : -1;
  ew::Descriptor *elementwise = nullptr;
  INFINIOP_CHECK(
      ew::Descriptor::create(handle, op, kernel, outputs, inputs, &elementwise, options));
  std::unique_ptr<ew::Descriptor> inner(elementwise);
  auto desc = std::make_unique<ClippedDescriptor>(op);
  desc->handle = handle;
  desc->workspace_size = inner->workspace_size;
  desc->elementwise = std::move(inner);
  desc->groups = setup.groups;
  infiniop::publishDescriptor(desc_ptr, desc.release());
  return infiniop::succeed();
}

// Rows to compute: min(sum of the counts, rows), read before anything is written.
infiniStatus_t activeRows(const char *op, const ClippedDescriptor &clipped, const void *group_index,
                          void *stream, size_t rows, size_t *active) {
  const Groups &desc = clipped.groups;
  if (!group_index && desc.group_count > 0)
    return fail(INFINI_STATUS_NULL_POINTER, std::string(op) + ": group_index pointer is NULL");
  if (desc.group_count > 0)
    INFINIOP_CHECK(infiniop::checkAligned(op, "group_index", group_index, sizeof(int64_t)));
  // The counts' span, read to the host (Device::readForCheck: a copy, or a blocking read).
  const ptrdiff_t reach =
      desc.group_count ? desc.group_stride * static_cast<ptrdiff_t>(desc.group_count - 1) : 0;
  const ptrdiff_t lowest = std::min<ptrdiff_t>(0, reach);
  std::vector<int64_t> span(static_cast<size_t>(std::abs(reach)) + 1);
  if (desc.group_count > 0)
    INFINIOP_CHECK(infiniop::readForCheck(op, clipped.handle, stream,
                                          static_cast<const int64_t *>(group_index) + lowest,
                                          span.size() * sizeof(int64_t), span.data()));
  size_t sum = 0;
  for (size_t i = 0; i < desc.group_count; ++i) {
    const int64_t count =
        span[static_cast<size_t>(static_cast<ptrdiff_t>(i) * desc.group_stride - lowest)];
    if (count < 0)
      return fail(INFINI_STATUS_BAD_PARAM, std::string(op) + ": group_index[" + std::to_string(i) +
                                               "] = " + std::to_string(count) + " is negative");
    sum = std::min(rows, sum + std::min(rows, static_cast<size_t>(count)));  // no overflow
  }
  *active = sum;
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t calculate(const char *op, const void *public_desc, void *workspace,
                         size_t workspace_size, std::initializer_list<void *> outputs,
                         std::initializer_list<const void *> inputs, const void *group_index,
                         void *stream) {
  // Guarded here too: the ActiveRows closure is allocated before ew::calculate's guard.
  return infiniop::guarded(op, [&] {
    ClippedDescriptor *desc = nullptr;
    INFINIOP_CHECK(infiniop::unwrapDescriptor(op, public_desc, &desc));
    ew::ActiveRows rows = nullptr;
    if (desc->groups.has_groups)
      rows = [&](size_t total, size_t *active) {
        return activeRows(op, *desc, group_index, stream, total, active);
      };
    return ew::calculate(op, desc->elementwise.get(), workspace, workspace_size, outputs, inputs,
                         stream, rows);
  });
}
}  // namespace

extern "C" infiniStatus_t infiniopCreateClippedSwigluV2Descriptor(
    infiniopHandle_t handle, infiniopClippedSwigluDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t y_desc, infiniopTensorDescriptor_t x_desc,
    infiniopTensorDescriptor_t group_index_desc, int64_t dim, float alpha, float limit, float bias,
    bool interleaved, int64_t clamp_mode) {
  return infiniop::guarded(kForward, [&] {
    Setup setup;
    INFINIOP_CHECK(
        prepare(kForward, x_desc, group_index_desc, dim, alpha, limit, bias, clamp_mode, &setup));
    return finish(desc_ptr, handle, kForward, kForwardKernel, {{"y", y_desc}},
                  {{"x", x_desc, setup.split, interleaved}}, setup);
  });
}

extern "C" infiniStatus_t infiniopCreateClippedSwigluDescriptor(
    infiniopHandle_t handle, infiniopClippedSwigluDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t y_desc, infiniopTensorDescriptor_t x_desc,
    infiniopTensorDescriptor_t group_index_desc, int64_t dim, float alpha, float limit, float bias,
    bool interleaved) {
  return infiniopCreateClippedSwigluV2Descriptor(handle, desc_ptr, y_desc, x_desc, group_index_desc,
                                                 dim, alpha, limit, bias, interleaved, 0);
}

INFINIOP_DESCRIPTOR_QUERIES(ClippedSwiglu, kForward)

extern "C" infiniStatus_t infiniopClippedSwiglu(infiniopClippedSwigluDescriptor_t desc,
                                                void *workspace, size_t workspace_size, void *y,
                                                const void *x, const void *group_index,
                                                void *stream) {
  return calculate(kForward, desc, workspace, workspace_size, {y}, {x}, group_index, stream);
}

extern "C" infiniStatus_t infiniopCreateClippedSwigluBackwardDescriptor(
    infiniopHandle_t handle, infiniopClippedSwigluBackwardDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t x_grad_desc, infiniopTensorDescriptor_t y_grad_desc,
    infiniopTensorDescriptor_t x_desc, infiniopTensorDescriptor_t group_index_desc, int64_t dim,
    float alpha, float limit, float bias, bool interleaved) {
  return infiniopCreateClippedSwigluBackwardV2Descriptor(handle, desc_ptr, x_grad_desc, y_grad_desc,
                                                         x_desc, group_index_desc, dim, alpha,
                                                         limit, bias, interleaved, 0);
}

extern "C" infiniStatus_t infiniopCreateClippedSwigluBackwardV2Descriptor(
    infiniopHandle_t handle, infiniopClippedSwigluBackwardDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t x_grad_desc, infiniopTensorDescriptor_t y_grad_desc,
    infiniopTensorDescriptor_t x_desc, infiniopTensorDescriptor_t group_index_desc, int64_t dim,
    float alpha, float limit, float bias, bool interleaved, int64_t clamp_mode) {
  return infiniop::guarded(kBackward, [&] {
    Setup setup;
    INFINIOP_CHECK(
        prepare(kBackward, x_desc, group_index_desc, dim, alpha, limit, bias, clamp_mode, &setup));
    // Operands: dA, dB <- (y_grad, A, B).
    return finish(desc_ptr, handle, kBackward, kBackwardKernel,
                  {{"x_grad", x_grad_desc, setup.split, interleaved}},
                  {{"y_grad", y_grad_desc}, {"x", x_desc, setup.split, interleaved}}, setup);
  });
}

INFINIOP_DESCRIPTOR_QUERIES(ClippedSwigluBackward, kBackward)

extern "C" infiniStatus_t infiniopClippedSwigluBackward(
    infiniopClippedSwigluBackwardDescriptor_t desc, void *workspace, size_t workspace_size,
    void *x_grad, const void *y_grad, const void *x, const void *group_index, void *stream) {
  return calculate(kBackward, desc, workspace, workspace_size, {x_grad}, {y_grad, x}, group_index,
                   stream);
}
