# SPDX-License-Identifier: Apache-2.0
"""MoeZLoss and MoeZLossGrad: the router z-loss of ST-MoE as Megatron-LM's z_loss_func defines
it (docs/moe_z_loss.md).

MoeZLoss: loss () float32 = coeff * mean over the T rows of x (..., E) of logsumexp(x_t)^2,
    x float32, float16 or bfloat16 (numpy: float32, float16), rank >= 2, E >= 1, any strides;
    T = 0 gives 0. Exact float32 arithmetic (the routers' max, exp and 16-slot sum, the
    library's log, the rows summed in fixed blocks of 256 in order): the same bits on every
    device, target and thread count. Rows whose max is +-inf give lse = +-inf, a NaN gives NaN.
MoeZLossGrad: grad_x (x's shape and dtype) = g * (2 coeff / T) * lse_t * softmax(x_t), g the
    0-D float32 grad_loss; NaN on rows whose lse is not finite.
coeff must be finite in float32 and coeff / T (2 coeff / T) finite there and, unless coeff is 0,
at least 2^-126 in magnitude (BAD_PARAM).
No padding mask: Megatron's masked form is this on the valid rows only.

Errors raise InfiniopError with the library's status and reason.
"""

from ._dispatch import output_names, run
from ._operator import AttributeOperator, array_views, check_real
from .core import array_view, output

__all__ = ["MoeZLoss", "MoeZLossGrad", "moe_z_loss", "moe_z_loss_grad"]


class MoeZLoss(AttributeOperator):
    """An infiniopMoeZLossDescriptor_t: MoeZLoss(handle, loss_desc, x_desc, coeff=...), or
    MoeZLoss.for_arrays(handle, loss, x, coeff=...). Call it as op(loss, x)."""

    _NAME = "MoeZLoss"
    _ARGUMENTS = ("loss", "x")
    _OUTPUTS = ("loss",)

    @classmethod
    def _attributes(cls, *, coeff):
        coeff = check_real("coeff", coeff)
        return {"coeff": coeff}, [coeff]


class MoeZLossGrad(AttributeOperator):
    """An infiniopMoeZLossGradDescriptor_t: MoeZLossGrad(handle, grad_x_desc, grad_loss_desc,
    x_desc, coeff=...), or MoeZLossGrad.for_arrays(handle, grad_x, grad_loss, x, coeff=...).
    Call it as op(grad_x, grad_loss, x)."""

    _NAME = "MoeZLossGrad"
    _ARGUMENTS = ("grad_x", "grad_loss", "x")
    _OUTPUTS = ("grad_x",)

    @classmethod
    def _attributes(cls, *, coeff):
        coeff = check_real("coeff", coeff)
        return {"coeff": coeff}, [coeff]


def _float32(kind):
    if kind == "torch":
        import torch

        return torch.float32
    import numpy as np

    return np.dtype(np.float32)


def _key_extra(coeff):
    # -0.0 == 0.0 as a cache key, yet the loss's zero takes coeff's sign.
    return (str(coeff),) if coeff == 0 else ()


def moe_z_loss(x, coeff, *, device="cpu", out=None, handle=None, _stage=None):
    """loss, a 0-D float32 array or tensor (as x): coeff * mean_t logsumexp(x_t)^2 (see the
    module docstring).

    x (..., E): a NumPy array or a torch CPU tensor, any strides. out: a 0-D float32 array to
    write, allocated when None. device: 'cpu', 'cpu_reference', 'opencl' or a Device; ignored
    when a Handle is given. Raises InfiniopError.
    """
    attributes = MoeZLoss._attributes(coeff=coeff)[0]
    view = array_view(x, "x")
    names = output_names(out, "x", "loss")
    out, out_view = output(out, x, view, (), _float32(view.kind), "out")
    run(MoeZLoss, [out_view, view], attributes, device, handle, _stage, names=names,
        key_extra=_key_extra(attributes["coeff"]))
    return out


def moe_z_loss_grad(grad_loss, x, coeff, *, device="cpu", out=None, handle=None, _stage=None):
    """grad_x (x's shape and dtype): the gradient of moe_z_loss(x, coeff) times grad_loss, a
    0-D float32 array or tensor (see the module docstring).

    NumPy arrays or torch CPU tensors of one kind, any strides. out: where to write, x's shape
    and dtype, any strides; allocated contiguous like x when None. device, handle: as in
    moe_z_loss(). Returns out. Raises InfiniopError.
    """
    attributes = MoeZLossGrad._attributes(coeff=coeff)[0]
    g_view = array_view(grad_loss, "grad_loss")
    views = array_views(g_view.kind, x=x)
    names = output_names(out, "x", "grad_x")
    out, out_view = output(out, x, views["x"], views["x"].shape, name="out")
    run(MoeZLossGrad, [out_view, g_view, views["x"]], attributes, device, handle, _stage,
        names=names, key_extra=_key_extra(attributes["coeff"]))
    return out
