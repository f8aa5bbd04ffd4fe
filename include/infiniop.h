// SPDX-License-Identifier: Apache-2.0
/* infiniop.h: the whole public C API of libinfiniop. */
#ifndef INFINIOP_H
#define INFINIOP_H

#include "infinicore.h"
#include "infiniop/handle.h"
#include "infiniop/tensor_descriptor.h"
#include "infiniop/runtime.h"
#include "infiniop/version.h"
#include "infiniop/ops/clipped_swiglu.h"
#include "infiniop/ops/clipped_swiglu_backward.h"
#include "infiniop/ops/gelu.h"
#include "infiniop/ops/gelu_backward.h"
#include "infiniop/ops/gelu_backward_v2.h"
#include "infiniop/ops/gelu_mul.h"
#include "infiniop/ops/gelu_mul_backward.h"
#include "infiniop/ops/gelu_mul_quant.h"
#include "infiniop/ops/moe_aux_loss.h"
#include "infiniop/ops/moe_bias_update.h"
#include "infiniop/ops/moe_expert_capacity.h"
#include "infiniop/ops/moe_expert_counts.h"
#include "infiniop/ops/moe_finalize_routing_v2.h"
#include "infiniop/ops/moe_finalize_routing_v2_grad.h"
#include "infiniop/ops/moe_gating_top_k.h"
#include "infiniop/ops/moe_gating_top_k_grad.h"
#include "infiniop/ops/moe_gating_top_k_softmax.h"
#include "infiniop/ops/moe_gating_top_k_softmax_grad.h"
#include "infiniop/ops/moe_gating_weights.h"
#include "infiniop/ops/moe_init_routing_v2.h"
#include "infiniop/ops/moe_init_routing_v2_grad.h"
#include "infiniop/ops/moe_z_loss.h"
#include "infiniop/ops/swiglu.h"
#include "infiniop/ops/swiglu_backward.h"
#include "infiniop/ops/swiglu_quant.h"

#endif /* INFINIOP_H */
