# SPDX-License-Identifier: Apache-2.0
"""Running an operator on arrays: the descriptor from the handle's cache, raw pointers into the
C call, and staging through device memory where device pointers are not host pointers."""

import re
import sys

from ._library import InfiniopError
from .core import default_handle, run_staged
from .enums import Status


def renamed(error, names):
    """The InfiniopError `error` with the C API's argument names in its message replaced by the
    caller's (names: {C name: the caller's name}): the library names the descriptor's
    arguments, the user wrote others."""
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    message = pattern.sub(lambda m: names[m.group(1)], error.message or "")
    return InfiniopError(error.status, message, error.function)


def output_names(out, allocated_like, *c_names, out_name="out"):
    """run()'s names for outputs c_names: [(C name, the caller's name, given)]. Given (out=),
    an output is out_name in every message; allocated by the package, it is the input it was
    allocated like, in a dtype message only (the output copied that input's dtype; its shape is
    the package's own guess where the library rejects the inputs' shapes). A list, made on every
    call: the mapping itself is built only for an error."""
    given = out is not None
    return [(name, out_name if given else allocated_like, given) for name in c_names]


def run(cls, views, attributes, device="cpu", handle=None, stage=None, key_extra=(),
        names=None, record=None):
    """run_named() with the library's messages in the caller's argument names (output_names),
    and the outputs given as torch tensors (out=) marked as written in place (written())."""
    try:
        run_named(cls, views, attributes, device, handle, stage, key_extra, record)
    except InfiniopError as error:
        dtype = error.status == Status.BAD_TENSOR_DTYPE
        mapping = {c: user for c, user, given in names or () if c != user and (given or dtype)}
        if not mapping:
            raise
        raise renamed(error, mapping) from None
    for c_name, _, given in names or ():
        if given:
            view = views[cls._ARGUMENTS.index(c_name)]
            if view is not None and view.kind == "torch":
                written(view.obj)


def written(tensor):
    """Bump the version counter of a torch tensor the library wrote, as every in-place torch op
    does: autograd then refuses a backward that saved the tensor's old values ("modified by an
    inplace operation"), instead of using the new ones. PyTorch 2 has the call; PyTorch 1.x only
    bumps it from an in-place op, so there it is one that keeps every bit: an OR with 0 on the
    tensor's integer view (a view shares the counter; x * 1 would quiet a signaling NaN)."""
    torch = sys.modules["torch"]
    if tensor.is_inference():  # no version counter
        return
    increment = getattr(getattr(torch.autograd, "graph", None), "increment_version", None)
    if increment is not None:
        increment(tensor)
        return
    if tensor.is_floating_point():
        tensor = tensor.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[
            tensor.element_size()])
    with torch.no_grad():
        tensor.bitwise_or_(False if tensor.dtype == torch.bool else 0)


def run_named(cls, views, attributes, device="cpu", handle=None, stage=None, key_extra=(),
              record=None):
    """Run operator class cls on `views` (ArrayViews in the C call's order, None for an absent
    optional tensor) with `attributes` (cls's keywords). The handle defaults to the device's
    default_handle(); the descriptor comes from its cache, keyed by everything the descriptor
    is made from. stage: copy through device memory (default: when the handle's pointers are
    not host pointers); the views named in cls._OUTPUTS (default: the first) come back.
    key_extra: what else tells descriptors apart where attributes compare equal but differ
    (float attributes of -0.0 and 0.0). record: None, or a list the descriptor's cache key is
    appended to when it ran on host pointers (infiniop.torch's autograd layer replays it:
    Handle.cached_descriptor(key))."""
    if handle is None:
        handle = default_handle(device)
    key = (cls, tuple([None if v is None else v[3:6] for v in views]),  # (shape, strides, dtype)
           tuple(attributes.items()), key_extra)
    # The cached descriptor refers to its handle weakly: the handle's cache refers to it, and
    # a strong reference back would keep a dropped handle alive until the cyclic collector.
    op = handle.cached_descriptor(
        key, lambda: cls.for_arrays(handle.weak_reference, *views, **attributes))
    if stage is None:
        stage = not handle.host_memory
    if not stage:
        op.launch([None if v is None else v[2] for v in views])  # v[2]: v.ptr
        if record is not None:
            record.append(key)
        return
    # run_staged copies back its first num_outputs views: put the outputs first.
    outputs = getattr(cls, "_OUTPUTS", cls._ARGUMENTS[:1])
    is_output = [name in outputs for name in cls._ARGUMENTS]
    order = sorted((i for i, v in enumerate(views) if v is not None), key=lambda i: not is_output[i])

    def launch(pointers):
        data = [None] * len(views)
        for index, pointer in zip(order, pointers):
            data[index] = pointer
        op.launch(data)

    run_staged(handle, [views[i] for i in order], sum(is_output[i] for i in order), launch)
