// SPDX-License-Identifier: Apache-2.0
// The C API's enum parameters with any int value, as a C caller may pass them: in C an enum is
// an int, while C++ (fuzz_operators.cc) may not even form an enum value outside the enumerators'
// range (UBSan's -fsanitize=enum). The harness passes attributes through these.
#include "infiniop.h"

infiniStatus_t fuzzCreateTensorDescriptor(infiniopTensorDescriptor_t *desc, size_t ndim,
                                          const size_t *shape, const ptrdiff_t *strides,
                                          int dtype) {
  return infiniopCreateTensorDescriptor(desc, ndim, shape, strides, (infiniDtype_t)dtype);
}

infiniStatus_t fuzzCreateGeluDescriptor(infiniopHandle_t handle, infiniopGeluDescriptor_t *desc,
                                        infiniopTensorDescriptor_t output,
                                        infiniopTensorDescriptor_t input, int approximate) {
  return infiniopCreateGeluDescriptor(handle, desc, output, input,
                                      (infiniopGeluApproximate_t)approximate);
}

infiniStatus_t fuzzCreateGeluMulDescriptor(infiniopHandle_t handle,
                                           infiniopGeluMulDescriptor_t *desc,
                                           infiniopTensorDescriptor_t out,
                                           infiniopTensorDescriptor_t input, int approximate) {
  return infiniopCreateGeluMulDescriptor(handle, desc, out, input,
                                         (infiniopGeluApproximate_t)approximate);
}

infiniStatus_t fuzzCreateGeluBackwardV2Descriptor(infiniopHandle_t handle,
                                                  infiniopGeluBackwardV2Descriptor_t *desc,
                                                  infiniopTensorDescriptor_t grad_input,
                                                  infiniopTensorDescriptor_t input,
                                                  infiniopTensorDescriptor_t grad_output,
                                                  int approximate) {
  return infiniopCreateGeluBackwardV2Descriptor(handle, desc, grad_input, input, grad_output,
                                                (infiniopGeluApproximate_t)approximate);
}

infiniStatus_t fuzzCreateGeluMulBackwardDescriptor(infiniopHandle_t handle,
                                                   infiniopGeluMulBackwardDescriptor_t *desc,
                                                   infiniopTensorDescriptor_t input_grad,
                                                   infiniopTensorDescriptor_t out_grad,
                                                   infiniopTensorDescriptor_t input,
                                                   int approximate) {
  return infiniopCreateGeluMulBackwardDescriptor(handle, desc, input_grad, out_grad, input,
                                                 (infiniopGeluApproximate_t)approximate);
}

infiniStatus_t fuzzCreateSwiGluQuantDescriptor(
    infiniopHandle_t handle, infiniopSwiGluQuantDescriptor_t *desc, infiniopTensorDescriptor_t y,
    infiniopTensorDescriptor_t scale, infiniopTensorDescriptor_t x,
    infiniopTensorDescriptor_t smooth_scales, infiniopTensorDescriptor_t group_index,
    int32_t activate_left, int quant_mode, int64_t group_size, int scale_format) {
  return infiniopCreateSwiGluQuantDescriptor(handle, desc, y, scale, x, smooth_scales, group_index,
                                             activate_left, (infiniopQuantMode_t)quant_mode,
                                             group_size, (infiniopQuantScaleFormat_t)scale_format);
}

infiniStatus_t fuzzCreateGeluMulQuantDescriptor(
    infiniopHandle_t handle, infiniopGeluMulQuantDescriptor_t *desc, infiniopTensorDescriptor_t y,
    infiniopTensorDescriptor_t scale, infiniopTensorDescriptor_t x,
    infiniopTensorDescriptor_t smooth_scales, infiniopTensorDescriptor_t group_index,
    int approximate, int32_t activate_left, int quant_mode, int64_t group_size, int scale_format) {
  return infiniopCreateGeluMulQuantDescriptor(handle, desc, y, scale, x, smooth_scales, group_index,
                                              (infiniopGeluApproximate_t)approximate, activate_left,
                                              (infiniopQuantMode_t)quant_mode, group_size,
                                              (infiniopQuantScaleFormat_t)scale_format);
}

infiniStatus_t fuzzCreateClippedSwigluQuantDescriptor(
    infiniopHandle_t handle, infiniopClippedSwigluQuantDescriptor_t *desc,
    infiniopTensorDescriptor_t y, infiniopTensorDescriptor_t scale, infiniopTensorDescriptor_t x,
    infiniopTensorDescriptor_t smooth_scales, infiniopTensorDescriptor_t group_index, float alpha,
    float limit, float bias, bool interleaved, int quant_mode, int64_t group_size,
    int scale_format) {
  return infiniopCreateClippedSwigluQuantDescriptor(
      handle, desc, y, scale, x, smooth_scales, group_index, alpha, limit, bias, interleaved,
      (infiniopQuantMode_t)quant_mode, group_size, (infiniopQuantScaleFormat_t)scale_format);
}

infiniStatus_t fuzzCreateDequantSwigluQuantDescriptor(
    infiniopHandle_t handle, infiniopDequantSwigluQuantDescriptor_t *desc,
    infiniopTensorDescriptor_t y, infiniopTensorDescriptor_t scale, infiniopTensorDescriptor_t x,
    infiniopTensorDescriptor_t weight_scale, infiniopTensorDescriptor_t activation_scale,
    infiniopTensorDescriptor_t bias, infiniopTensorDescriptor_t smooth_scales,
    infiniopTensorDescriptor_t group_index, int32_t activate_left, int quant_mode,
    int64_t group_size, int scale_format) {
  return infiniopCreateDequantSwigluQuantDescriptor(
      handle, desc, y, scale, x, weight_scale, activation_scale, bias, smooth_scales, group_index,
      activate_left, (infiniopQuantMode_t)quant_mode, group_size,
      (infiniopQuantScaleFormat_t)scale_format);
}

infiniStatus_t fuzzCreateMoeInitRoutingQuantV2Descriptor(
    infiniopHandle_t handle, infiniopMoeInitRoutingQuantV2Descriptor_t *desc,
    infiniopTensorDescriptor_t expanded_x, infiniopTensorDescriptor_t expanded_row_idx,
    infiniopTensorDescriptor_t counts, infiniopTensorDescriptor_t before_capacity,
    infiniopTensorDescriptor_t dynamic_quant_scale, infiniopTensorDescriptor_t x,
    infiniopTensorDescriptor_t expert_idx, infiniopTensorDescriptor_t scale,
    infiniopTensorDescriptor_t offset, int64_t active_num, int64_t expert_capacity,
    int64_t expert_num, int64_t drop_pad_mode, int64_t counts_flag, bool before_capacity_flag,
    int quant_mode) {
  return infiniopCreateMoeInitRoutingQuantV2Descriptor(
      handle, desc, expanded_x, expanded_row_idx, counts, before_capacity, dynamic_quant_scale, x,
      expert_idx, scale, offset, active_num, expert_capacity, expert_num, drop_pad_mode,
      counts_flag, before_capacity_flag, (infiniopQuantMode_t)quant_mode);
}
