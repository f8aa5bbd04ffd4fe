# SPDX-License-Identifier: Apache-2.0
"""MoeGatingWeights: MoeGatingTopK's router weights for expert indices the caller gives
(docs/moe_gating_weights.md): a replayed routing (Megatron-LM's RouterReplay: the expert_idx
recorded in the forward, given back in the recomputation) or hash routing (DeepSeek-V4's hash
layers: expert_idx = tid2eid[token_ids]).

x (..., E) float32, float16 or bfloat16, expert_idx (..., k) int32 or int64 with every value in
[0, E) (else BAD_PARAM naming the row and column, nothing written; duplicates allowed, each slot
counts), 1 <= k <= E:
    p = softmax(x) (norm_type 0) or sigmoid(x) (norm_type 1), as MoeGatingTopK's;
    y_i = p[s_i] / (sum_i p[s_i] + eps) * routed_scaling_factor, s_i = expert_idx[..., i],
with MoeGatingTopK's F32 arithmetic and rounding: with expert_idx = MoeGatingTopK's own selection
(no bias), y has the same bits as MoeGatingTopK's y. renorm must be 0; routed_scaling_factor and
eps finite in float32, eps >= 0. MoeGatingTopKGrad at the same expert_idx is y's gradient in x.
Errors raise InfiniopError with the library's status and reason.
"""

from ._dispatch import output_names, run
from ._operator import NullableOperator, array_views
from .core import array_view, output
from .moe_gating import MoeGatingTopKGrad, _zero_signs

__all__ = ["MoeGatingWeights", "moe_gating_weights"]


class MoeGatingWeights(NullableOperator):
    """An infiniopMoeGatingWeightsDescriptor_t: MoeGatingWeights(handle, y_desc, x_desc,
    expert_idx_desc, norm_type=1, renorm=0, routed_scaling_factor=1.0, eps=1e-20), or
    MoeGatingWeights.for_arrays(handle, y, x, expert_idx, ...). Call it as
    op(y, x, expert_idx)."""

    _NAME = "MoeGatingWeights"
    _ARGUMENTS = ("y", "x", "expert_idx")
    _OUTPUTS = ("y",)

    # MoeGatingTopKGrad's attributes (norm_type=1, renorm=0, routed_scaling_factor=1.0,
    # eps=1e-20), checked the same way.
    _attributes = classmethod(MoeGatingTopKGrad._attributes.__func__)


def moe_gating_weights(x, expert_idx, norm_type=1, renorm=0, routed_scaling_factor=1.0,
                       eps=1e-20, *, device="cpu", out=None, handle=None, _stage=None):
    """y (..., k) of x's dtype: MoeGatingTopK's weights for the given expert_idx (see the module
    docstring).

    x (..., E), rank >= 2: float32, float16, bfloat16; expert_idx (..., k) int32 or int64 of x's
    leading shape, values in [0, E). NumPy arrays or torch CPU tensors of one kind, any strides.
    out: where to write, expert_idx's shape and x's dtype, any strides; allocated contiguous
    when None. device: 'cpu', 'cpu_reference', 'opencl' or a Device; ignored when a Handle is
    given. Returns out. Raises InfiniopError (BAD_PARAM for an index out of range or a bad
    attribute, nothing written; BAD_TENSOR_SHAPE, BAD_TENSOR_DTYPE, ...).
    """
    attributes = MoeGatingWeights._attributes(norm_type=norm_type, renorm=renorm,
                                              routed_scaling_factor=routed_scaling_factor,
                                              eps=eps)[0]
    x_view = array_view(x, "x")
    i_view = array_views(x_view.kind, expert_idx=expert_idx)["expert_idx"]
    names = output_names(out, "x", "y")
    out, out_view = output(out, x, x_view, i_view.shape, name="out")
    run(MoeGatingWeights, [out_view, x_view, i_view], attributes, device, handle, _stage,
        key_extra=_zero_signs(attributes), names=names)
    return out
