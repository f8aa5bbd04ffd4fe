// SPDX-License-Identifier: Apache-2.0
// Gelu and GeluBackwardV2: wiring only. The approximation picks the kernel at creation; the tanh
// gradient is GeluBackward's own kernel, so the two operators agree bit for bit.
#include "core/dtype.h"
#include "elementwise/descriptor.h"
#include "infiniop/ops/gelu.h"
#include "infiniop/ops/gelu_backward_v2.h"
#include "ops/gelu_approximate.h"
#include "kernels/list.h"

namespace ew = infiniop::elementwise;

namespace {
constexpr const char *kForward = "Gelu";
constexpr const char *kBackward = "GeluBackwardV2";
}  // namespace

extern "C" infiniStatus_t infiniopCreateGeluDescriptor(infiniopHandle_t handle,
                                                       infiniopGeluDescriptor_t *desc_ptr,
                                                       infiniopTensorDescriptor_t output_desc,
                                                       infiniopTensorDescriptor_t input_desc,
                                                       infiniopGeluApproximate_t approximate) {
  return infiniop::guarded(kForward, [&] {
    infiniop::KernelId kernel{};
    INFINIOP_CHECK(infiniop::chooseGeluKernel(kForward, infiniop::enumValue(approximate),
                                              infiniop::KernelId::gelu_erf,
                                              infiniop::KernelId::gelu_tanh, &kernel));
    return ew::createInto(desc_ptr, handle, kForward, kernel, {{"output", output_desc}},
                          {{"input", input_desc}});
  });
}

INFINIOP_DESCRIPTOR_QUERIES(Gelu, kForward)

extern "C" infiniStatus_t infiniopGelu(infiniopGeluDescriptor_t desc, void *workspace,
                                       size_t workspace_size, void *output, const void *input,
                                       void *stream) {
  return ew::calculate(kForward, desc, workspace, workspace_size, {output}, {input}, stream);
}

extern "C" infiniStatus_t infiniopCreateGeluBackwardV2Descriptor(
    infiniopHandle_t handle, infiniopGeluBackwardV2Descriptor_t *desc_ptr,
    infiniopTensorDescriptor_t grad_input_desc, infiniopTensorDescriptor_t input_desc,
    infiniopTensorDescriptor_t grad_output_desc, infiniopGeluApproximate_t approximate) {
  return infiniop::guarded(kBackward, [&] {
    infiniop::KernelId kernel{};
    INFINIOP_CHECK(infiniop::chooseGeluKernel(kBackward, infiniop::enumValue(approximate),
                                              infiniop::KernelId::gelu_backward_erf,
                                              infiniop::KernelId::gelu_backward, &kernel));
    return ew::createInto(desc_ptr, handle, kBackward, kernel, {{"grad_input", grad_input_desc}},
                          {{"input", input_desc}, {"grad_output", grad_output_desc}});
  });
}

INFINIOP_DESCRIPTOR_QUERIES(GeluBackwardV2, kBackward)

extern "C" infiniStatus_t infiniopGeluBackwardV2(infiniopGeluBackwardV2Descriptor_t desc,
                                                 void *workspace, size_t workspace_size,
                                                 void *grad_input, const void *input,
                                                 const void *grad_output, void *stream) {
  return ew::calculate(kBackward, desc, workspace, workspace_size, {grad_input},
                       {input, grad_output}, stream);
}
