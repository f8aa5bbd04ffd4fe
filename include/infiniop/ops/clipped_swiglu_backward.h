// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_CLIPPED_SWIGLU_BACKWARD_H
#define INFINIOP_OPS_CLIPPED_SWIGLU_BACKWARD_H

#include <stdbool.h>

#include "../handle.h"
#include "../tensor_descriptor.h"

/* The gradient of ClippedSwiglu (same split, attributes and group_index). With a, b as in the
 * forward, s = sigmoid(alpha * a):
 *   dA = y_grad * (b + bias) * s * (1 + alpha * a * (1 - s))  where A <= limit, else 0
 *   dB = y_grad * a * s                                     where -limit <= B <= limit, else 0
 * x_grad has x's shape and is merged from dA, dB exactly as x is split; y_grad has y's shape.
 * Rows past the group_index sum are zero-filled. x_grad may be exactly the memory of x. The
 * workspace is as for ClippedSwiglu: 0 bytes unless a layout needs staging. */
typedef struct InfiniopClippedSwigluBackwardDescriptor *infiniopClippedSwigluBackwardDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateClippedSwigluBackwardDescriptor(
    infiniopHandle_t handle, infiniopClippedSwigluBackwardDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t x_grad_desc, infiniopTensorDescriptor_t y_grad_desc,
    infiniopTensorDescriptor_t x_desc, infiniopTensorDescriptor_t group_index_desc /* nullable */,
    int64_t dim, float alpha, float limit, float bias, bool interleaved);
/* The gradient of ClippedSwigluV2 (clamp_mode 0: the operator above; the create function above is
 * this one with clamp_mode 0). clamp_mode 1, with g = silu(A), s = sigmoid(A), b as above:
 *   dA = y_grad * b * s * (1 + A * (1 - s))   where g <= limit, else 0
 *   dB = y_grad * min(g, limit)               where -limit <= B <= limit, else 0
 * alpha and bias ignored (validated); other clamp_mode values are BAD_PARAM. */
__INFINI_C infiniStatus_t infiniopCreateClippedSwigluBackwardV2Descriptor(
    infiniopHandle_t handle, infiniopClippedSwigluBackwardDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t x_grad_desc, infiniopTensorDescriptor_t y_grad_desc,
    infiniopTensorDescriptor_t x_desc, infiniopTensorDescriptor_t group_index_desc /* nullable */,
    int64_t dim, float alpha, float limit, float bias, bool interleaved, int64_t clamp_mode);
__INFINI_C infiniStatus_t infiniopGetClippedSwigluBackwardWorkspaceSize(
    infiniopClippedSwigluBackwardDescriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopClippedSwigluBackward(
    infiniopClippedSwigluBackwardDescriptor_t desc, void *workspace, size_t workspace_size,
    void *x_grad, const void *y_grad, const void *x, const void *group_index, void *stream);
__INFINI_C infiniStatus_t
infiniopDestroyClippedSwigluBackwardDescriptor(infiniopClippedSwigluBackwardDescriptor_t desc);

#endif /* INFINIOP_OPS_CLIPPED_SWIGLU_BACKWARD_H */
