# SPDX-License-Identifier: Apache-2.0
"""Python ctypes binding of libinfiniop (include/infiniop.h).

The shared library is found through $INFINIOP_LIBRARY (a file or a folder), else next to the
package, else (from a source checkout) in build/ or build-*/, else by the dynamic loader, else in
the install prefixes ($INFINIOP_PREFIX, $CMAKE_PREFIX_PATH, sys.prefix, /usr/local, /usr,
/opt/infiniop; _library.py says how); it is loaded on first use, so importing this package never
fails for that. __version__ is this
package's version, library_version() the loaded library's (major, minor, patch).

    import infiniop, torch
    grad_input = infiniop.gelu_backward(grad_output, x, device="cpu")
    y = infiniop.swiglu(x, dim=-1)
    out = infiniop.gelu_mul(x, approximate="tanh")
    y = infiniop.gelu(x, approximate="none")
    dx = infiniop.gelu_backward_v2(dy, x, approximate="none")
    y = infiniop.clipped_swiglu(x, dim=-1, limit=7.0, group_index=counts)
    out = infiniop.moe_finalize_routing_v2(expanded_x, expanded_row_idx, scales=s, ...)
    grad_expanded_x, grad_scales = infiniop.moe_finalize_routing_v2_grad(grad_y, idx, ...)
    expanded_x, idx, counts, _ = infiniop.moe_init_routing_v2(x, topk_ids, expert_num=E, ...)
    grad_x = infiniop.moe_init_routing_v2_grad(grad_expanded_x, idx, top_k=K, ...)
    y, expert_idx, row_idx = infiniop.moe_gating_top_k_softmax(logits, k, renorm=1)
    grad_logits = infiniop.moe_gating_top_k_softmax_grad(grad_y, logits, expert_idx, renorm=1)
    y, expert_idx, _ = infiniop.moe_gating_top_k(logits, 8, bias, k_group=4, group_count=8, ...)
    grad_logits = infiniop.moe_gating_top_k_grad(grad_y, logits, expert_idx, ...)
    y = infiniop.moe_gating_weights(logits, tid2eid[token_ids], norm_type=1, ...)
    kept_idx, kept_w = infiniop.moe_expert_capacity(expert_idx, E, C, weights=y,
                                                    drop_policy="probability")
    y, scale = infiniop.swiglu_quant(x, dtype=torch.int8)             # dynamic, per-token
    y, scale = infiniop.gelu_mul_quant(x, dtype="fp8", group_size=128)  # FP8, per-group
    y, _ = infiniop.swiglu_quant(x, scale=torch.tensor(0.05).expand(x.shape[0], 1))  # static
"""

from ._library import (
    InfiniopError,
    LibraryNotFoundError,
    get_library,
    last_error,
    library_candidates,
    library_version,
    load_library,
    status_string,
)
from ._version import __version__
from .clipped_swiglu import (
    ClippedSwiglu,
    ClippedSwigluBackward,
    clipped_swiglu,
    clipped_swiglu_backward,
)
from .core import (
    ArrayView,
    DeviceInfo,
    Handle,
    TensorDescriptor,
    array_view,
    cpu_isa_name,
    default_handle,
    device_info,
    devices,
    parse_device,
)
from .enums import Device, DType, GeluApproximate, QuantMode, QuantScaleFormat, Status
from .gated_quant import (
    ClippedSwigluQuant,
    DequantSwigluQuant,
    GeluMulQuant,
    SwiGluQuant,
    clipped_swiglu_quant,
    dequant_swiglu_quant,
    gelu_mul_quant,
    swiglu_quant,
)
from .gelu import Gelu, GeluBackwardV2, gelu, gelu_backward_v2
from .gelu_backward import GeluBackward, gelu_backward
from .gelu_mul import GeluMul, GeluMulBackward, gelu_mul, gelu_mul_backward
from .moe_aux_loss import MoeAuxLoss, MoeAuxLossGrad, moe_aux_loss, moe_aux_loss_grad
from .moe_counts import MoeBiasUpdate, MoeExpertCounts, moe_bias_update, moe_expert_counts
from .moe_capacity import MoeExpertCapacity, expert_capacity, moe_expert_capacity
from .moe_z_loss import MoeZLoss, MoeZLossGrad, moe_z_loss, moe_z_loss_grad
from .moe_finalize_routing import (
    MoeFinalizeRoutingV2,
    MoeFinalizeRoutingV2Grad,
    moe_finalize_routing_v2,
    moe_finalize_routing_v2_grad,
)
from .moe_gating import (
    MoeGatingTopK,
    MoeGatingTopKGrad,
    MoeGatingTopKSoftmax,
    MoeGatingTopKSoftmaxGrad,
    moe_gating_top_k,
    moe_gating_top_k_grad,
    moe_gating_top_k_softmax,
    moe_gating_top_k_softmax_grad,
)
from .moe_gating_weights import MoeGatingWeights, moe_gating_weights
from .moe_init_routing import (
    MoeInitRoutingQuantV2,
    MoeInitRoutingV2,
    MoeInitRoutingV2Grad,
    moe_init_routing_quant_v2,
    moe_init_routing_v2,
    moe_init_routing_v2_grad,
)
from .swiglu import SwiGlu, SwiGluBackward, swiglu, swiglu_backward

__all__ = [
    "ArrayView",
    "ClippedSwiglu",
    "ClippedSwigluBackward",
    "ClippedSwigluQuant",
    "DequantSwigluQuant",
    "Device",
    "DeviceInfo",
    "DType",
    "Gelu",
    "GeluApproximate",
    "GeluBackward",
    "GeluBackwardV2",
    "GeluMul",
    "GeluMulBackward",
    "GeluMulQuant",
    "Handle",
    "InfiniopError",
    "LibraryNotFoundError",
    "MoeAuxLoss",
    "MoeAuxLossGrad",
    "MoeBiasUpdate",
    "MoeExpertCapacity",
    "MoeExpertCounts",
    "MoeFinalizeRoutingV2",
    "MoeFinalizeRoutingV2Grad",
    "MoeGatingTopK",
    "MoeGatingTopKGrad",
    "MoeGatingTopKSoftmax",
    "MoeGatingTopKSoftmaxGrad",
    "MoeGatingWeights",
    "MoeInitRoutingQuantV2",
    "MoeInitRoutingV2",
    "MoeInitRoutingV2Grad",
    "MoeZLoss",
    "MoeZLossGrad",
    "QuantMode",
    "QuantScaleFormat",
    "Status",
    "SwiGlu",
    "SwiGluBackward",
    "SwiGluQuant",
    "TensorDescriptor",
    "array_view",
    "clipped_swiglu",
    "clipped_swiglu_backward",
    "cpu_isa_name",
    "clipped_swiglu_quant",
    "default_handle",
    "dequant_swiglu_quant",
    "device_info",
    "devices",
    "expert_capacity",
    "gelu",
    "gelu_backward",
    "gelu_backward_v2",
    "gelu_mul",
    "gelu_mul_backward",
    "gelu_mul_quant",
    "get_library",
    "last_error",
    "library_candidates",
    "library_version",
    "load_library",
    "moe_aux_loss",
    "moe_aux_loss_grad",
    "moe_bias_update",
    "moe_expert_capacity",
    "moe_expert_counts",
    "moe_finalize_routing_v2",
    "moe_finalize_routing_v2_grad",
    "moe_gating_top_k",
    "moe_gating_top_k_grad",
    "moe_gating_top_k_softmax",
    "moe_gating_top_k_softmax_grad",
    "moe_gating_weights",
    "moe_z_loss",
    "moe_z_loss_grad",
    "moe_init_routing_quant_v2",
    "moe_init_routing_v2",
    "moe_init_routing_v2_grad",
    "parse_device",
    "status_string",
    "swiglu",
    "swiglu_backward",
    "swiglu_quant",
]
