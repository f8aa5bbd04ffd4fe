// SPDX-License-Identifier: Apache-2.0
// GeluBackward: grad_input = grad_output * gelu_tanh'(input). All wiring; the maths lives in
// devices/*/gelu_backward.cc.
#include "elementwise/descriptor.h"
#include "infiniop/ops/gelu_backward.h"
#include "kernels/list.h"

namespace ew = infiniop::elementwise;

namespace {
constexpr const char *kName = "GeluBackward";
constexpr infiniop::KernelId kKernel = infiniop::KernelId::gelu_backward;
}  // namespace

extern "C" infiniStatus_t infiniopCreateGeluBackwardDescriptor(
    infiniopHandle_t handle, infiniopGeluBackwardDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t grad_input_desc, infiniopTensorDescriptor_t input_desc,
    infiniopTensorDescriptor_t grad_output_desc) {
  return infiniop::guarded(kName, [&] {
    return ew::createInto(desc_ptr, handle, kName, kKernel, {{"grad_input", grad_input_desc}},
                          {{"input", input_desc}, {"grad_output", grad_output_desc}});
  });
}

INFINIOP_DESCRIPTOR_QUERIES(GeluBackward, kName)

extern "C" infiniStatus_t infiniopGeluBackward(infiniopGeluBackwardDescriptor_t desc,
                                               void *workspace, size_t workspace_size,
                                               void *grad_input, const void *input,
                                               const void *grad_output, void *stream) {
  return ew::calculate(kName, desc, workspace, workspace_size, {grad_input}, {input, grad_output},
                       stream);
}
