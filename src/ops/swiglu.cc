// SPDX-License-Identifier: Apache-2.0
// SwiGlu and SwiGluBackward: wiring only; the maths lives in devices/*/swiglu.cc.
#include "elementwise/descriptor.h"
#include "infiniop/ops/swiglu.h"
#include "infiniop/ops/swiglu_backward.h"
#include "kernels/list.h"
#include "ops/split_dim.h"

namespace ew = infiniop::elementwise;

namespace {
constexpr const char *kForward = "SwiGlu";
constexpr const char *kBackward = "SwiGluBackward";
constexpr infiniop::KernelId kForwardKernel = infiniop::KernelId::swiglu;
constexpr infiniop::KernelId kBackwardKernel = infiniop::KernelId::swiglu_backward;
}  // namespace

extern "C" infiniStatus_t infiniopCreateSwiGluDescriptor(infiniopHandle_t handle,
                                                         infiniopSwiGluDescriptor_t *desc_ptr,
                                                         infiniopTensorDescriptor_t y_desc,
                                                         infiniopTensorDescriptor_t x_desc,
                                                         int32_t dim) {
  return infiniop::guarded(kForward, [&] {
    int split = 0;
    INFINIOP_CHECK(infiniop::normalizeSplitDim(kForward, "x", x_desc, dim, &split));
    return ew::createInto(desc_ptr, handle, kForward, kForwardKernel, {{"y", y_desc}},
                          {{"x", x_desc, split}});
  });
}

INFINIOP_DESCRIPTOR_QUERIES(SwiGlu, kForward)

extern "C" infiniStatus_t infiniopSwiGlu(infiniopSwiGluDescriptor_t desc, void *workspace,
                                         size_t workspace_size, void *y, const void *x,
                                         void *stream) {
  return ew::calculate(kForward, desc, workspace, workspace_size, {y}, {x}, stream);
}

extern "C" infiniStatus_t infiniopCreateSwiGluBackwardDescriptor(
    infiniopHandle_t handle, infiniopSwiGluBackwardDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t x_grad_desc, infiniopTensorDescriptor_t y_grad_desc,
    infiniopTensorDescriptor_t x_desc, int32_t dim) {
  return infiniop::guarded(kBackward, [&] {
    int split = 0;
    INFINIOP_CHECK(infiniop::normalizeSplitDim(kBackward, "x", x_desc, dim, &split));
    // Operands: x_grad1, x_grad2 <- (y_grad, x1, x2).
    return ew::createInto(desc_ptr, handle, kBackward, kBackwardKernel,
                          {{"x_grad", x_grad_desc, split}},
                          {{"y_grad", y_grad_desc}, {"x", x_desc, split}});
  });
}

INFINIOP_DESCRIPTOR_QUERIES(SwiGluBackward, kBackward)

extern "C" infiniStatus_t infiniopSwiGluBackward(infiniopSwiGluBackwardDescriptor_t desc,
                                                 void *workspace, size_t workspace_size,
                                                 void *x_grad, const void *y_grad, const void *x,
                                                 void *stream) {
  return ew::calculate(kBackward, desc, workspace, workspace_size, {x_grad}, {y_grad, x}, stream);
}
