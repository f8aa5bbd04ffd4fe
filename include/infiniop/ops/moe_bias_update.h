// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_OPS_MOE_BIAS_UPDATE_H
#define INFINIOP_OPS_MOE_BIAS_UPDATE_H

#include "../handle.h"
#include "../tensor_descriptor.h"

/* DeepSeek-V3's auxiliary-loss-free balancing step, in place: bias (E) F32,
 * bias[e] += u * sign(mean - counts[e]), mean = (sum of counts) / E, from counts (E) INT32 or
 * INT64 (MoeExpertCounts). The comparison is exact (the rational mean, integers only), sign(0) = 0
 * leaves bias[e] untouched, and the update is one F32 addition of +u or -u: the same bits on
 * every device. update_rate u is rounded to F32 at creation and must be finite there
 * (DeepSeek-V3: 0.001). Every count must be >= 0 and their sum below 2^63 (BAD_PARAM at the
 * call, nothing written). docs/moe_bias_update.md. */
typedef struct InfiniopMoeBiasUpdateDescriptor *infiniopMoeBiasUpdateDescriptor_t;

__INFINI_C infiniStatus_t infiniopCreateMoeBiasUpdateDescriptor(
    infiniopHandle_t handle, infiniopMoeBiasUpdateDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t bias_desc, infiniopTensorDescriptor_t counts_desc,
    double update_rate);
__INFINI_C infiniStatus_t
infiniopGetMoeBiasUpdateWorkspaceSize(infiniopMoeBiasUpdateDescriptor_t desc, size_t *size);
__INFINI_C infiniStatus_t infiniopMoeBiasUpdate(infiniopMoeBiasUpdateDescriptor_t desc,
                                                void *workspace, size_t workspace_size, void *bias,
                                                const void *counts, void *stream);
__INFINI_C infiniStatus_t
infiniopDestroyMoeBiasUpdateDescriptor(infiniopMoeBiasUpdateDescriptor_t desc);

#endif /* INFINIOP_OPS_MOE_BIAS_UPDATE_H */
