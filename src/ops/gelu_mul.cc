// SPDX-License-Identifier: Apache-2.0
// GeluMul and GeluMulBackward: wiring only. The approximation picks the kernel at creation, so
// the inner loops never branch on it.
#include "core/dtype.h"
#include "elementwise/descriptor.h"
#include "infiniop/ops/gelu_mul.h"
#include "infiniop/ops/gelu_mul_backward.h"
#include "ops/gelu_approximate.h"
#include "kernels/list.h"

namespace ew = infiniop::elementwise;

namespace {
constexpr const char *kForward = "GeluMul";
constexpr const char *kBackward = "GeluMulBackward";
constexpr infiniop::KernelId kForwardErf = infiniop::KernelId::gelu_mul_erf;
constexpr infiniop::KernelId kForwardTanh = infiniop::KernelId::gelu_mul_tanh;
constexpr infiniop::KernelId kBackwardErf = infiniop::KernelId::gelu_mul_backward_erf;
constexpr infiniop::KernelId kBackwardTanh = infiniop::KernelId::gelu_mul_backward_tanh;

// Validates the approximation and the input's rank; gives the kernel and the split dim.
infiniStatus_t choose(const char *op, infiniopTensorDescriptor_t input, int raw,
                      infiniop::KernelId erf, infiniop::KernelId tanh, infiniop::KernelId *kernel,
                      int *last_dim) {
  INFINIOP_CHECK(infiniop::chooseGeluKernel(op, raw, erf, tanh, kernel));
  if (!input)
    return infiniop::fail(INFINI_STATUS_NULL_POINTER,
                          std::string(op) + ": input descriptor is NULL");
  if (input->ndim() == 0)
    return infiniop::fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                          std::string(op) + ": input must have at least one dim to split");
  *last_dim = static_cast<int>(input->ndim()) - 1;
  return INFINI_STATUS_SUCCESS;
}
}  // namespace

extern "C" infiniStatus_t infiniopCreateGeluMulDescriptor(infiniopHandle_t handle,
                                                          infiniopGeluMulDescriptor_t *desc_ptr,
                                                          infiniopTensorDescriptor_t out_desc,
                                                          infiniopTensorDescriptor_t input_desc,
                                                          infiniopGeluApproximate_t approximate) {
  return infiniop::guarded(kForward, [&] {
    infiniop::KernelId kernel{};
    int dim = 0;
    INFINIOP_CHECK(choose(kForward, input_desc, infiniop::enumValue(approximate), kForwardErf,
                          kForwardTanh, &kernel, &dim));
    return ew::createInto(desc_ptr, handle, kForward, kernel, {{"out", out_desc}},
                          {{"input", input_desc, dim}});
  });
}

INFINIOP_DESCRIPTOR_QUERIES(GeluMul, kForward)

extern "C" infiniStatus_t infiniopGeluMul(infiniopGeluMulDescriptor_t desc, void *workspace,
                                          size_t workspace_size, void *out, const void *input,
                                          void *stream) {
  return ew::calculate(kForward, desc, workspace, workspace_size, {out}, {input}, stream);
}

extern "C" infiniStatus_t infiniopCreateGeluMulBackwardDescriptor(
    infiniopHandle_t handle, infiniopGeluMulBackwardDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t input_grad_desc, infiniopTensorDescriptor_t out_grad_desc,
    infiniopTensorDescriptor_t input_desc, infiniopGeluApproximate_t approximate) {
  return infiniop::guarded(kBackward, [&] {
    infiniop::KernelId kernel{};
    int dim = 0;
    INFINIOP_CHECK(choose(kBackward, input_desc, infiniop::enumValue(approximate), kBackwardErf,
                          kBackwardTanh, &kernel, &dim));
    // Operands: (grad1, grad2) <- (out_grad, x1, x2).
    return ew::createInto(desc_ptr, handle, kBackward, kernel,
                          {{"input_grad", input_grad_desc, dim}},
                          {{"out_grad", out_grad_desc}, {"input", input_desc, dim}});
  });
}

INFINIOP_DESCRIPTOR_QUERIES(GeluMulBackward, kBackward)

extern "C" infiniStatus_t infiniopGeluMulBackward(infiniopGeluMulBackwardDescriptor_t desc,
                                                  void *workspace, size_t workspace_size,
                                                  void *input_grad, const void *out_grad,
                                                  const void *input, void *stream) {
  return ew::calculate(kBackward, desc, workspace, workspace_size, {input_grad}, {out_grad, input},
                       stream);
}
