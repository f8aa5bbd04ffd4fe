# SPDX-License-Identifier: Apache-2.0
"""MoeExpertCounts and MoeBiasUpdate: tokens per expert and DeepSeek-V3's auxiliary-loss-free
bias update (docs/moe_expert_counts.md, docs/moe_bias_update.md).

MoeExpertCounts: counts (E,) int32 or int64 from expert_idx (..., k) int32 or int64, any
    strides: counts[e] = the number of elements equal to e, torch.bincount(expert_idx.flatten(),
    minlength=E). A value E (a finished row of moe_gating_top_k_softmax) is not counted; any
    other value outside [0, E) is BAD_PARAM, nothing written. int32 counts need expert_idx to
    have at most 2^31 - 1 elements (BAD_TENSOR_DTYPE). num_experts E >= 1.
MoeBiasUpdate: bias (E,) float32 in place, bias[e] += u * sign(mean - counts[e]) with
    mean = sum(counts) / E compared exactly (a rational, in integers: no rounding), sign(0) = 0
    (bias[e] untouched) and one float32 addition of +u or -u: the same bits on every device.
    u (update_rate) is rounded to float32 and must be finite there; counts must be >= 0 with a
    sum below 2^63 (BAD_PARAM at the call, nothing written). DeepSeek-V3: u = 0.001.

Errors raise InfiniopError with the library's status and reason.
"""

import math
import numbers

from ._dispatch import output_names, run
from ._operator import AttributeOperator, array_views, check_int64, index_dtype_of
from .core import array_view, output

__all__ = ["MoeBiasUpdate", "MoeExpertCounts", "moe_bias_update", "moe_expert_counts"]


def _check_double(name, value):
    """A real number as a Python float (the C API's double; its validity is the library's)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, not {type(value).__name__}")
    return float(value)


class MoeExpertCounts(AttributeOperator):
    """An infiniopMoeExpertCountsDescriptor_t: MoeExpertCounts(handle, counts_desc,
    expert_idx_desc, num_experts=...), or MoeExpertCounts.for_arrays(handle, counts,
    expert_idx, num_experts=...). Call it as op(counts, expert_idx)."""

    _NAME = "MoeExpertCounts"
    _ARGUMENTS = ("counts", "expert_idx")
    _OUTPUTS = ("counts",)

    @classmethod
    def _attributes(cls, *, num_experts):
        num_experts = check_int64("num_experts", num_experts)
        return {"num_experts": num_experts}, [num_experts]


class MoeBiasUpdate(AttributeOperator):
    """An infiniopMoeBiasUpdateDescriptor_t: MoeBiasUpdate(handle, bias_desc, counts_desc,
    update_rate=...), or MoeBiasUpdate.for_arrays(handle, bias, counts, update_rate=...). Call
    it as op(bias, counts): bias is updated in place."""

    _NAME = "MoeBiasUpdate"
    _ARGUMENTS = ("bias", "counts")
    _OUTPUTS = ("bias",)

    @classmethod
    def _attributes(cls, *, update_rate):
        update_rate = _check_double("update_rate", update_rate)
        return {"update_rate": update_rate}, [update_rate]


def moe_expert_counts(expert_idx, num_experts, *, counts_dtype="int64", sequences=None,
                      device="cpu", out=None, handle=None, _stage=None):
    """counts (num_experts,): tokens per expert of expert_idx (see the module docstring), as
    torch.bincount(expert_idx.flatten(), minlength=num_experts) with E (finished rows) left out.

    expert_idx (..., k): int32 or int64, a NumPy array or a torch CPU tensor, any strides.
    counts_dtype: int64 (the default, as torch.bincount) or int32 (a torch or NumPy dtype, a
    DType or a name). sequences: B for counts (B, E) per sequence, row r of expert_idx (its
    leading dims flattened, Megatron's (seq, batch) order) counted in sequence r % B (the
    sequence-level aux loss, moe_aux_loss); None: counts (E,). out: where to write ((E,) or
    (B, E), any strides; its shape decides), allocated when None. device:
    'cpu', 'cpu_reference', 'opencl' or a Device; ignored when a Handle is given. Raises
    InfiniopError (BAD_PARAM for num_experts < 1 or a value outside [0, E], nothing written).
    """
    attributes = MoeExpertCounts._attributes(num_experts=num_experts)[0]
    view = array_view(expert_idx, "expert_idx")
    dtype = index_dtype_of(counts_dtype, None, view.kind)
    names = output_names(out, "expert_idx", "counts")
    shape = (max(attributes["num_experts"], 0),)
    if sequences is not None:
        shape = (check_int64("sequences", sequences),) + shape
    out, out_view = output(out, expert_idx, view, shape, dtype, "out")
    run(MoeExpertCounts, [out_view, view], attributes, device, handle, _stage, names=names)
    return out


def moe_bias_update(bias, counts, update_rate=0.001, *, device="cpu", handle=None, _stage=None):
    """bias, updated in place: bias[e] += update_rate * sign(mean(counts) - counts[e]) (see the
    module docstring; the mean compared exactly, ties untouched).

    bias (E,) float32 and counts (E,) int32 or int64, NumPy arrays or torch CPU tensors of one
    kind, any strides. device, handle: as in moe_expert_counts(). Returns bias. Raises
    InfiniopError (BAD_PARAM for a negative count, a sum of 2^63 or more, or an update_rate
    not finite in float32, nothing written).
    """
    attributes = MoeBiasUpdate._attributes(update_rate=update_rate)[0]
    b_view = array_view(bias, "bias")
    c_view = array_views(b_view.kind, counts=counts)["counts"]
    u = attributes["update_rate"]
    # -0.0 == 0.0 as a cache key, yet -0 + -0.0 keeps the sign where -0 + 0.0 does not.
    key_extra = (math.copysign(1.0, u),) if u == 0 else ()
    run(MoeBiasUpdate, [b_view, c_view], attributes, device, handle, _stage,
        key_extra=key_extra, names=[("bias", "bias", True)])
    return bias
