# SPDX-License-Identifier: Apache-2.0
"""MoeExpertCapacity: expert capacity with a drop policy (docs/moe_expert_capacity.md):
Megatron-LM's apply_router_token_dropping, GShard's and Switch's capacity, on the (..., k)
expert indices a router gives.

expert_idx (..., k) int32 or int64, any strides: each element an expert in [0, E) or E (already
dropped, or a finished row: it stays E and takes no capacity); any other value is BAD_PARAM,
nothing written. Slot s = r k + j (row r of the leading dims flattened, column j). Each expert
keeps at most C = capacity of its slots:
    drop_policy 0, 'position': its first C slots in s order (the ones MoeInitRoutingV2's
        drop_pad_mode 1 keeps at expert_capacity C; Megatron's --moe-token-drop-policy position);
    drop_policy 1, 'probability' ('probs'): its C slots of the largest weight, ties to the lower
        s, a NaN weight ranking first, -0 equal to +0 (Megatron's default, probs).
kept_idx[s] = expert_idx[s] where kept, E where dropped; weights_out[s] = weights[s] (the same
bits) where kept, +0 where dropped. Exact (comparisons only): the same bits on every device.
The gradient of weights_out in weights is grad * (kept_idx != E).

expert_capacity(): Megatron-LM's capacity of each expert for T tokens routed to k of E experts.
Errors raise InfiniopError with the library's status and reason.
"""

import math

from ._dispatch import output_names, run
from ._operator import NullableOperator, array_views, check_int64, check_real
from .core import array_view, check_out, output

__all__ = ["DROP_POLICIES", "MoeExpertCapacity", "drop_policy_code", "expert_capacity",
           "moe_expert_capacity"]

# drop_policy names -> the C attribute (Megatron's --moe-token-drop-policy names included).
DROP_POLICIES = {"position": 0, "probability": 1, "probs": 1}


def drop_policy_code(drop_policy):
    """drop_policy as the C attribute: 'position' (0) or 'probability' / 'probs' (1), or the
    int itself (its range is the library's to check: BAD_PARAM)."""
    if isinstance(drop_policy, str):
        code = DROP_POLICIES.get(drop_policy.strip().lower())
        if code is None:
            raise ValueError(f"drop_policy={drop_policy!r}: expected 'position', 'probability' "
                             "('probs'), 0 or 1")
        return code
    return check_int64("drop_policy", drop_policy)


def expert_capacity(num_tokens, num_experts, topk, capacity_factor, min_capacity=None):
    """The capacity C of each expert, as Megatron-LM's apply_router_token_dropping computes it:
    get_capacity(num_tokens=num_tokens * topk, num_experts, capacity_factor), that is
    math.ceil((num_tokens * topk / num_experts) * capacity_factor) in Python's float arithmetic
    (the int product, one true division, one multiplication, each rounded to double), raised to
    min_capacity when that is given and larger. num_tokens (T) >= 0, num_experts (E) >= 1,
    topk >= 1, capacity_factor a finite real (GShard 1.0, Switch 1.25)."""
    num_tokens = check_int64("num_tokens", num_tokens)
    num_experts = check_int64("num_experts", num_experts)
    topk = check_int64("topk", topk)
    capacity_factor = check_real("capacity_factor", capacity_factor)
    if num_tokens < 0 or num_experts < 1 or topk < 1:
        raise ValueError(f"expert_capacity: num_tokens={num_tokens} must be >= 0, "
                         f"num_experts={num_experts} and topk={topk} >= 1")
    if not math.isfinite(capacity_factor):
        raise ValueError(f"capacity_factor={capacity_factor} must be finite")
    capacity = math.ceil((num_tokens * topk / num_experts) * capacity_factor)
    if min_capacity is not None:
        min_capacity = check_int64("min_capacity", min_capacity)
        if capacity < min_capacity:
            capacity = min_capacity
    return capacity


class MoeExpertCapacity(NullableOperator):
    """An infiniopMoeExpertCapacityDescriptor_t: MoeExpertCapacity(handle, kept_idx_desc,
    weights_out_desc, expert_idx_desc, weights_desc, num_experts=..., capacity=...,
    drop_policy=0) (weights_out_desc and weights_desc may be None), or
    MoeExpertCapacity.for_arrays(handle, kept_idx, weights_out, expert_idx, weights, ...). Call
    it as op(kept_idx, weights_out, expert_idx, weights) (an absent one as None)."""

    _NAME = "MoeExpertCapacity"
    _ARGUMENTS = ("kept_idx", "weights_out", "expert_idx", "weights")
    _OPTIONAL = ("weights_out", "weights")
    _OUTPUTS = ("kept_idx", "weights_out")

    @classmethod
    def _attributes(cls, *, num_experts, capacity, drop_policy=0):
        checked = {"num_experts": check_int64("num_experts", num_experts),
                   "capacity": check_int64("capacity", capacity),
                   "drop_policy": drop_policy_code(drop_policy)}
        return checked, list(checked.values())  # the C order: the dict's


def moe_expert_capacity(expert_idx, num_experts, capacity, *, weights=None,
                        drop_policy="position", device="cpu", out=None, weights_out=None,
                        handle=None, _stage=None):
    """(kept_idx, weights_out or None): each expert keeps at most `capacity` of the slots of
    expert_idx routed to it, the others become num_experts (see the module docstring).

    expert_idx (..., k) int32 or int64, values in [0, E] (E = num_experts: already dropped);
    weights (optional) of expert_idx's shape, float32, float16 or bfloat16, required with
    drop_policy 'probability'. NumPy arrays or torch CPU tensors of one kind, any strides.
    drop_policy: 'position' (0, the default) or 'probability' ('probs', 1). out: where to write
    kept_idx (expert_idx's shape, int32 or int64, any strides); allocated like expert_idx
    (its dtype) when None. weights_out: where to write the kept weights (weights' shape and
    dtype); allocated when weights is given and it is None; returned None without weights.
    device: 'cpu', 'cpu_reference', 'opencl' or a Device; ignored when a Handle is given.
    Raises InfiniopError (BAD_PARAM for num_experts outside [1, 2^24], capacity < 0, a bad
    drop_policy or a value outside [0, E], nothing written; NULL_POINTER for the probability
    policy or weights_out without weights; BAD_TENSOR_SHAPE, BAD_TENSOR_DTYPE, ...).
    """
    attributes = MoeExpertCapacity._attributes(num_experts=num_experts, capacity=capacity,
                                               drop_policy=drop_policy)[0]
    i_view = array_view(expert_idx, "expert_idx")
    w_view = array_views(i_view.kind, weights=weights)["weights"]
    names = (output_names(out, "expert_idx", "kept_idx")
             + output_names(weights_out, "weights", "weights_out", out_name="weights_out"))
    out, out_view = output(out, expert_idx, i_view, i_view.shape, None, "out")
    wo_view = None
    if weights_out is not None or w_view is not None:  # given without weights: NULL_POINTER
        if weights_out is not None:
            wo_view = check_out(weights_out, i_view.kind, "weights_out")
        else:
            weights_out, wo_view = output(None, weights, w_view, w_view.shape, None,
                                          "weights_out")
    run(MoeExpertCapacity, [out_view, wo_view, i_view, w_view], attributes, device, handle,
        _stage, names=names)
    return out, weights_out
