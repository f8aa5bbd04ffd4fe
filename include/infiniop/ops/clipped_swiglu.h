// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_CLIPPED_SWIGLU_H
#define INFINIOP_OPS_CLIPPED_SWIGLU_H

#include <stdbool.h>

#include "../handle.h"
#include "../tensor_descriptor.h"

/* The clipped SwiGLU of GPT-OSS. x is viewed as [pre, cut*after] around `dim` (cut = x.shape[dim],
 * even); each merged row is split into A and B: interleaved = true: A = row[0::2], B = row[1::2];
 * false: A = row[:L/2], B = row[L/2:]. Then
 *   a = min(A, limit), b = clamp(B, -limit, limit), y = a * sigmoid(alpha * a) * (b + bias),
 * y has x's shape with dim halved. group_index (optional, INT64, 1-D) holds row counts: only the
 * first min(sum, pre) rows are computed and the rest of y is zero-filled; a negative count is
 * BAD_PARAM. limit > 0 (+inf: no clipping); alpha and bias finite. Defaults in the vendor API:
 * dim = -1, alpha = 1.702, limit = 7.0, bias = 1.0, interleaved = true.
 * The group_index pointer is ignored when its descriptor was NULL. The workspace is 0 bytes
 * unless x's dims dim.. do not form one strided row and neither do y's (then x, or x_grad, is
 * staged through a contiguous copy in the workspace). */
typedef struct InfiniopClippedSwigluDescriptor *infiniopClippedSwigluDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateClippedSwigluDescriptor(
    infiniopHandle_t handle, infiniopClippedSwigluDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t y_desc, infiniopTensorDescriptor_t x_desc,
    infiniopTensorDescriptor_t group_index_desc /* nullable */, int64_t dim, float alpha,
    float limit, float bias, bool interleaved);
/* aclnnClippedSwigluV2: the same, with clamp_mode. 0 is the operator above (the create function
 * above is this one with clamp_mode 0). 1 clamps after the activation, and ignores alpha and bias
 * (still validated, finite):
 *   y = min(silu(A), limit) * clamp(B, -limit, limit),  silu(A) = A * sigmoid(A),
 * the clamp decided exactly (silu(A) in double against limit); NaN passes both clamps. Any other
 * clamp_mode is BAD_PARAM. The descriptor is an infiniopClippedSwigluDescriptor_t for the
 * functions below. */
__INFINI_C infiniStatus_t infiniopCreateClippedSwigluV2Descriptor(
    infiniopHandle_t handle, infiniopClippedSwigluDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t y_desc, infiniopTensorDescriptor_t x_desc,
    infiniopTensorDescriptor_t group_index_desc /* nullable */, int64_t dim, float alpha,
    float limit, float bias, bool interleaved, int64_t clamp_mode);
__INFINI_C infiniStatus_t
infiniopGetClippedSwigluWorkspaceSize(infiniopClippedSwigluDescriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopClippedSwiglu(infiniopClippedSwigluDescriptor_t desc,
                                                void *workspace, size_t workspace_size, void *y,
                                                const void *x, const void *group_index,
                                                void *stream);
__INFINI_C infiniStatus_t
infiniopDestroyClippedSwigluDescriptor(infiniopClippedSwigluDescriptor_t desc);

#endif /* INFINIOP_OPS_CLIPPED_SWIGLU_H */
