# SPDX-License-Identifier: Apache-2.0
"""infiniop.torch.moe: a mixture-of-experts layer's dispatch and combine, without the glue.

    import infiniop.torch.moe as moe

    scales, ids = torch.topk(torch.softmax(x @ W_r, dim=-1), K)     # router (torch), or
    scales, ids, _ = infiniop.torch.moe_gating_top_k_softmax(x @ W_r, K)   # the library's
    d = moe.dispatch(x, ids, E)                                      # tokens grouped by expert
    h = d.map_experts(lambda e, rows: rows @ W1[e] + b1[e])          # each expert on its rows
    act = infiniop.torch.swiglu(h)                                   # any row-wise op
    y = d.map_experts(lambda e, rows: rows @ W2[e], act)
    out = moe.combine(y, d, scales, x1=x)                            # (T, H), x1: a residual
    out.sum().backward()    # x, W1, b1, W2, b2, W_r (through scales) all get gradients

The library's router gives W_r its gradient through MoeGatingTopKSoftmaxGrad; its int32
expert_idx (torch.topk's is int64) is what dispatch takes. examples/python/moe_router.py routes
GPT-OSS and DeepSeek-V3 layers this way.

`dispatch` runs infiniop.torch.moe_init_routing_v2 (MoeInitRoutingV2, differentiable in x) and
returns a `Dispatched`: the expanded rows, the routing index and each expert's rows as plain
Python ints (`counts`, `offsets`, `spans`), with `expert_rows(e)`, `experts()` and
`map_experts(fn)` to run the experts on their rows. `combine` runs
infiniop.torch.moe_finalize_routing_v2 (MoeFinalizeRoutingV2, differentiable in the expert
outputs, scales, x1, x2 and bias) with the finalize mode that reads what the dispatch wrote, so
that no caller picks a drop_pad_mode for the combine by hand. Nothing here computes the routing:
both halves are the library's operators (and their gradients the library's grad operators,
MoeInitRoutingV2Grad and MoeFinalizeRoutingV2Grad, through infiniop.torch's autograd
functions); this module only chooses their modes and shapes and slices by the counts.

The pairing it encodes (docs/moe_init_routing_v2.md, "Pairing with the combine and the grads";
docs/moe_finalize_routing_v2.md, "Index layouts"; SEMANTICS.md, MoeInitRoutingV2 item 6):

    dispatch drop_pad_mode     expanded_x   combine: MoeFinalizeRoutingV2      backward (autograd)
    0 dropless, A = R*K        (R*K, H)     mode 2 (row layout), as is         FinalizeGrad 0,
                                                                               InitGrad 0
    0 with 0 < active_num      (A, H)       mode 2 on the rows padded with     FinalizeGrad 0,
      < R*K (A rows kept)                   R*K - A zero rows (the positions   InitGrad 0 (same
                                            the Init left out: s(p) >= A)      active_num)
    1 drop/pad, capacity C     (E, C, H)    mode 3 (row layout, -1 = dropped)  FinalizeGrad 1
                                                                               (E, C), InitGrad 1

MoeInitRoutingV2 writes expanded_row_idx in the row layout (position r*K + k) in both of its
modes, so the combine's column-layout modes 0 and 1 never apply; mode 2 reads index values in
[0, R*K) and mode 3 reads -1 as a dropped token (a zero row). The grads' modes follow from the
finalize mode (infiniop.torch.MoeFinalizeRoutingV2Function) and the dispatch's own attributes
(MoeInitRoutingV2Function).

A token position the dispatch dropped (over capacity, or beyond active_num) contributes nothing
from the experts; combine's `bias` (the library's per-expert bias) is still added, scaled, for
every (token, k) pair, dropped ones included, as MoeFinalizeRoutingV2 defines it (the vendor's
behaviour). Put a per-expert bias inside the expert function instead where dropped tokens should
get nothing.
"""

import operator
from dataclasses import dataclass
from typing import Any, Iterator, List, Tuple

import torch

from ._autograd import _check_tensor
from ._compile import compiling
from .moe_router import Router, RouterOutput

__all__ = ["FINALIZE_MODE", "Dispatched", "Router", "RouterOutput", "combine", "dispatch"]

# The dispatch's drop_pad_mode (MoeInitRoutingV2) -> the combine's (MoeFinalizeRoutingV2).
FINALIZE_MODE = {0: 2, 1: 3}


def _api():
    from infiniop import torch as api  # the package's functions (this module is imported by it)

    return api


def _int(value, name):
    """An integer argument (bool and float refused), by operator.index."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, not {type(value).__name__}") from None


def _shape(t):
    return list(t.shape)


@dataclass(frozen=True, eq=False)
class Dispatched:
    """What `dispatch` returns: the dispatched rows and what `combine` needs.

    expanded_x        MoeInitRoutingV2's expanded_x, differentiable in x: (A, H) with
                      drop_pad_mode 0 (A = R*K, or active_num when 0 < active_num < R*K);
                      (E, C, H) with drop_pad_mode 1 (unfilled slots are zero).
    expanded_row_idx  (R*K) in the row layout: where the copy of (token r, its k-th expert)
                      went (an index into `rows`), -1 for one dropped over capacity.
    expert_idx        (R, K): the routing dispatch was given.
    routed            (E,) tensor: the (token, k) pairs routed to each expert before any cut
                      (the Init's count output, expanded_row_idx's dtype).
    expert_num, drop_pad_mode, active_num, expert_capacity: the dispatch's attributes.
    device, handle    where the dispatch ran; `combine` runs there too unless told otherwise.

    and, read from `routed` when first asked for (each expert's rows are data: the layer's
    tensors and `combine` never need them, so a model that does not slice by expert is traced
    and compiled with no data-dependent size):
    counts            E Python ints: the rows expert e holds (after the capacity or active_num
                      cut); they sum to the number of dispatched copies.
    offsets           E Python ints: expert e's first row in `rows`.
    routed_counts     E Python ints: `routed` as a list; routed_counts[e] - counts[e] were
                      dropped.

    Expert e's rows are rows[offsets[e] : offsets[e] + counts[e]] (`spans`, `expert_rows`),
    where `rows` is expanded_x as a 2-D (N, H) view, N = A (mode 0) or E*C (mode 1).
    Under torch.compile these ints are the graph's data-dependent sizes (SymInts), which
    Dynamo traces with torch._dynamo.config.capture_scalar_outputs = True (else it breaks the
    graph there); under torch.jit.trace they are refused (a trace would keep the example's
    counts and replay another routing wrong).
    """

    expanded_x: torch.Tensor
    expanded_row_idx: torch.Tensor
    expert_idx: torch.Tensor
    routed: torch.Tensor
    expert_num: int
    drop_pad_mode: int
    active_num: int
    expert_capacity: int
    device: Any = "cpu"
    handle: Any = None

    # ------------------------------------------------------------------------------------------
    @property
    def routed_counts(self) -> List[int]:
        """E Python ints: the pairs routed to each expert before any cut."""
        return self._rows_per_expert()[0]

    @property
    def counts(self) -> List[int]:
        """E Python ints: the rows expert e holds after the cut."""
        return self._rows_per_expert()[1]

    @property
    def offsets(self) -> List[int]:
        """E Python ints: expert e's first row in `rows`."""
        return self._rows_per_expert()[2]

    def _rows_per_expert(self):
        """(routed_counts, counts, offsets), read from `routed` once (kept on the instance)."""
        known = self.__dict__.get("_known")
        if known is None:
            known = _rows_per_expert(self.routed, self.drop_pad_mode, self.active_num,
                                     self.expert_capacity, self.expanded_row_idx.shape[0])
            object.__setattr__(self, "_known", known)
        return known

    @property
    def tokens(self) -> int:
        """R, the number of tokens (expert_idx's rows)."""
        return self.expert_idx.shape[0]

    @property
    def top_k(self) -> int:
        """K, the experts per token (expert_idx's columns)."""
        return self.expert_idx.shape[1]

    @property
    def finalize_mode(self) -> int:
        """The MoeFinalizeRoutingV2 drop_pad_mode that reads this dispatch (2 or 3)."""
        return FINALIZE_MODE[self.drop_pad_mode]

    @property
    def spans(self) -> List[Tuple[int, int]]:
        """[(start, end)] per expert (Python ints): expert e's rows are rows[start:end]."""
        return [(o, o + c) for o, c in zip(self.offsets, self.counts)]

    @property
    def num_rows(self) -> int:
        """N, the rows of `rows`: A in mode 0, E*C in mode 1 (padding slots included)."""
        return self.expanded_x.shape[0] * (self.expanded_x.shape[1]
                                           if self.drop_pad_mode == 1 else 1)

    @property
    def dropped(self) -> int:
        """The (token, k) pairs the dispatch left out (over capacity, or beyond active_num)."""
        return sum(self.routed_counts) - sum(self.counts)

    @property
    def rows(self) -> torch.Tensor:
        """expanded_x as a 2-D (N, H) view (differentiable in x)."""
        return self.flat(self.expanded_x, "expanded_x")

    # ------------------------------------------------------------------------------------------
    def flat(self, tensor, name="tensor") -> torch.Tensor:
        """`tensor` in the 2-D row layout of `rows`: (N, ...) as it is, or in mode 1 the
        (E, C, ...) shape of expanded_x viewed as (E*C, ...)."""
        _check_tensor(tensor, name)
        n = self.num_rows
        if self.drop_pad_mode == 1 and tensor.dim() >= 3 \
                and tuple(tensor.shape[:2]) == tuple(self.expanded_x.shape[:2]):
            return tensor.reshape((n,) + tuple(tensor.shape[2:]))
        if tensor.dim() >= 1 and tensor.shape[0] == n:
            return tensor
        want = f"({n}, ...)"
        if self.drop_pad_mode == 1:
            e, c = self.expanded_x.shape[:2]
            want += f" or ({e}, {c}, ...) (E, C, ...)"
        raise ValueError(f"{name} shape {_shape(tensor)} is not in the dispatched row layout: "
                         f"want {want}")

    def expert_rows(self, e, tensor=None) -> torch.Tensor:
        """Expert e's rows of `tensor` (default: the dispatched rows), a (counts[e], ...) slice
        of the row layout (see `flat`)."""
        e = _int(e, "e")
        if not 0 <= e < self.expert_num:
            raise IndexError(f"e = {e} is not an expert: want 0 <= e < {self.expert_num}")
        flat = self.rows if tensor is None else self.flat(tensor)
        return flat.narrow(0, self.offsets[e], self.counts[e])

    def experts(self, tensor=None) -> Iterator[Tuple[int, torch.Tensor]]:
        """(e, expert e's rows of `tensor`) for every expert e in order, empty ones included."""
        flat = self.rows if tensor is None else self.flat(tensor)
        for e, (start, count) in enumerate(zip(self.offsets, self.counts)):
            yield e, flat.narrow(0, start, count)  # not a slice: no clamped (Max/Min) sizes

    def map_experts(self, fn, tensor=None) -> torch.Tensor:
        """fn(e, rows) for every expert e in order (empty ones too, with 0 rows), each giving a
        (counts[e], ...) tensor, put back in the row layout: an (N, ...) tensor, mode 1's
        unfilled slots zero. `tensor` defaults to the dispatched rows; pass an earlier
        map_experts result (or any tensor in the row layout) to run the next stage. torch.cat
        assembles the result, so it is differentiable in what fn's results are."""
        if not callable(fn):
            raise TypeError(f"fn must be callable, not {type(fn).__name__}")
        pieces = []
        for e, rows in self.experts(tensor):
            result = fn(e, rows)
            if not isinstance(result, torch.Tensor):
                raise TypeError(f"fn(e={e}, rows) must return a torch.Tensor, "
                                f"not {type(result).__name__}")
            if result.dim() < 1 or result.shape[0] != rows.shape[0]:
                raise ValueError(f"fn(e={e}, rows) returned shape {_shape(result)}: want "
                                 f"{rows.shape[0]} rows, one per row it was given")
            pieces.append(result)
            if self.drop_pad_mode == 1:  # zero rows for the unfilled slots (maybe none)
                pieces.append(result.new_zeros((self.expert_capacity - result.shape[0],)
                                               + tuple(result.shape[1:])))
        trailing = {tuple(p.shape[1:]) for p in pieces}
        if len(trailing) > 1:
            raise ValueError(f"fn's results differ in shape beyond the rows: {sorted(trailing)}")
        result = torch.cat(pieces)
        if compiling():  # the rows kept sum to N (after an active_num cut: a sum of mins)
            torch._check(result.shape[0] == self.num_rows)
        return result


def dispatch(x, expert_idx, expert_num, *, active_num=0, expert_capacity=0, drop_pad_mode=0,
             index_dtype=None, device="cpu", handle=None) -> Dispatched:
    """Group the tokens of x by expert: infiniop.torch.moe_init_routing_v2 (MoeInitRoutingV2),
    differentiable in x (backward: MoeInitRoutingV2Grad).

    x (R, H) float32, float16 or bfloat16; expert_idx (R, K) int32 or int64, each value in
    [0, expert_num) (torch.topk's indices); expert_num (E) >= 1.
    drop_pad_mode 0 (dropless, the default): every (token, k) pair gets a row, expert by
        expert (stable: in token order within an expert); active_num > 0 keeps only the first
        active_num rows of that order (the rest are left out; 0 keeps all). expert_capacity
        must be 0.
    drop_pad_mode 1 (drop/pad): each expert gets expert_capacity (C >= 1) slots, filled in token
        order; a pair routed to a full expert is dropped. active_num must be 0.
    index_dtype: expanded_row_idx's dtype (None: expert_idx's). device, handle: as in
    infiniop.torch (the combine runs there too).

    Returns a Dispatched (its docstring has the fields): expanded_x, expanded_row_idx and
    each expert's rows as Python ints (counts, offsets, spans). Bad arguments raise TypeError
    or ValueError naming the argument; an expert_idx value out of range raises
    infiniop.InfiniopError (the library's check, which names expert_idx, row and column)."""
    _check_tensor(x, "x")
    _check_tensor(expert_idx, "expert_idx")
    if x.dim() != 2:
        raise ValueError(f"x shape {_shape(x)} must be (tokens, hidden): 2-D")
    if expert_idx.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"expert_idx has dtype {expert_idx.dtype}: torch.int32 or torch.int64 "
                        "is required (torch.topk gives int64)")
    if expert_idx.dim() != 2 or expert_idx.shape[0] != x.shape[0]:
        raise ValueError(f"expert_idx shape {_shape(expert_idx)} must be (tokens, top_k) with "
                         f"x's {x.shape[0]} tokens")
    expert_num = _int(expert_num, "expert_num")
    active_num = _int(active_num, "active_num")
    expert_capacity = _int(expert_capacity, "expert_capacity")
    drop_pad_mode = _int(drop_pad_mode, "drop_pad_mode")
    if expert_num < 1:
        raise ValueError(f"expert_num={expert_num} must be >= 1")
    if drop_pad_mode not in FINALIZE_MODE:
        raise ValueError(f"drop_pad_mode={drop_pad_mode} is not 0 (dropless) or 1 (drop/pad); "
                         "combine() picks the combine's own mode (2 or 3) itself")
    if active_num < 0:
        raise ValueError(f"active_num={active_num} is negative (0 keeps every row)")
    if drop_pad_mode == 1:
        if expert_capacity < 1:
            raise ValueError(f"expert_capacity={expert_capacity} must be >= 1 with "
                             "drop_pad_mode=1 (the slots per expert)")
        if active_num != 0:
            raise ValueError(f"active_num={active_num} is used only with drop_pad_mode=0; "
                             "drop_pad_mode=1 cuts by expert_capacity")
    elif expert_capacity != 0:
        raise ValueError(f"expert_capacity={expert_capacity} is used only with drop_pad_mode=1 "
                         "(drop/pad); drop_pad_mode=0 is dropless (pass drop_pad_mode=1 to cut "
                         "at a capacity)")

    if drop_pad_mode == 0:
        flags = {"expert_tokens_count_or_cumsum_flag": 2}  # counts
    else:
        flags = {"expert_tokens_before_capacity_flag": True}
    expanded_x, row_idx, counts, before = _api().moe_init_routing_v2(
        x, expert_idx, expert_num=expert_num, active_num=active_num,
        expert_capacity=expert_capacity, drop_pad_mode=drop_pad_mode, index_dtype=index_dtype,
        device=device, handle=handle, **flags)
    return Dispatched(expanded_x=expanded_x, expanded_row_idx=row_idx, expert_idx=expert_idx,
                      routed=counts if drop_pad_mode == 0 else before, expert_num=expert_num,
                      drop_pad_mode=drop_pad_mode, active_num=active_num,
                      expert_capacity=expert_capacity, device=device, handle=handle)


def _rows_per_expert(routed, drop_pad_mode, active_num, capacity, total):
    """(routed_counts, counts, offsets) as Python ints from the Init's (E,) count tensor:
    drop_pad_mode 0 cuts the expert-ordered rows at active_num (no cut when it is 0 or at least
    `total` = R*K pairs), mode 1 each expert at `capacity`. Under torch.compile the ints are
    SymInts: torch._check tells the compiler what the routing guarantees (counts >= 0, summing
    to R*K), so that slices by them and torch.cat of the experts' results have known sizes."""
    if torch.jit.is_tracing():
        raise RuntimeError(
            "infiniop.torch.moe: the rows per expert (counts, offsets, spans, expert_rows, "
            "experts, map_experts, combine(experts=...)) are the routing's data, which "
            "torch.jit.trace would record as constants and replay wrong for another batch; "
            "trace a model that runs the experts on Dispatched.expanded_x as a whole (e.g. "
            "drop_pad_mode=1 and a batched matmul over (E, C, H)), or use torch.compile")
    routed = routed.tolist()
    if compiling() and routed:
        # The last count as what the others leave of R*K (the Init's guarantee, checked at run
        # time): sizes built from the counts then sum to R*K by algebra, which stays true when
        # the compiler later specializes R (an axiom about R would not).
        last = total - sum(routed[:-1])
        for c in routed[:-1] + [last]:
            torch._check(c >= 0)
        torch._check(routed[-1] == last)
        routed = routed[:-1] + [last]
    smaller = getattr(torch, "sym_min", min)
    if drop_pad_mode == 1:
        return routed, [smaller(c, capacity) for c in routed], [e * capacity
                                                                for e in range(len(routed))]
    offsets, start = [], 0
    for c in routed:
        offsets.append(start)
        start += c
    if not 0 < active_num < total:
        return routed, routed, offsets
    ends = [smaller(o + c, active_num) for o, c in zip(offsets, routed)]
    offsets = [smaller(o, active_num) for o in offsets]
    return routed, [end - o for o, end in zip(offsets, ends)], offsets


def _expert_range(experts, expert_num):
    """(first, stop) of `experts`: a range or slice of consecutive expert ids, or a pair."""
    if isinstance(experts, range):
        first, stop, step = experts.start, experts.stop, experts.step
    elif isinstance(experts, slice):
        first, stop, step = experts.start or 0, experts.stop, experts.step or 1
    elif isinstance(experts, tuple) and len(experts) == 2:
        (first, stop), step = experts, 1
    else:
        raise TypeError(f"experts must be a range, a slice or a (first, stop) pair of expert "
                        f"ids, not {type(experts).__name__}")
    first = _int(first, "experts' start")
    stop = _int(stop if stop is not None else expert_num, "experts' stop")
    if step != 1 or not 0 <= first < stop <= expert_num:
        raise ValueError(f"experts={experts!r} must be consecutive expert ids first..stop-1 with "
                         f"0 <= first < stop <= expert_num = {expert_num}")
    return first, stop


def combine(expert_out, dispatched, scales, *, x1=None, x2=None, bias=None, experts=None,
            device=None, handle=None) -> torch.Tensor:
    """out[r] = x1[r] + x2[r] + sum_k scales[r, k] * (y[r, k] + bias[expert_idx[r, k]]), y[r, k]
    the expert output of token r's k-th copy (zero for a dropped one): infiniop.torch.
    moe_finalize_routing_v2 (MoeFinalizeRoutingV2) with the mode that reads `dispatched`
    (2 after a dropless dispatch, 3 after drop/pad; see the module docstring), differentiable in
    expert_out and scales (MoeFinalizeRoutingV2Grad), x1, x2 and bias.

    expert_out: the experts' outputs in the dispatched row layout, (N, H') or in mode 1
        (E, C, H'): what map_experts returns (H' may differ from x's H).
    dispatched: what dispatch() returned.
    scales: (R, K) weights of the activations' dtype or float32 (e.g. the router's top-k
        probabilities), or None when K = 1 (every weight 1).
    x1, x2: optional (R, H') residuals (x2 only with x1).
    bias: optional (E, H') per-expert bias, added for every (token, k) pair, dropped ones too.
    experts: None (every expert), or a range / slice / (first, stop) pair of consecutive expert
        ids whose outputs expert_out holds alone (expert parallel: a rank's own experts): then
        expert_out has just those experts' rows (mode 1: (stop - first, C, H')), every other
        copy counts as dropped, and summing the partial outputs of all ranks gives the layer's
        combine. No bias then (it would count once per part); x1, x2 are added to each part.
    device, handle: default the dispatch's.

    Returns out (R, H'), expert_out's dtype. Bad arguments raise TypeError or ValueError naming
    the argument."""
    if not isinstance(dispatched, Dispatched):
        raise TypeError(f"dispatched must be what infiniop.torch.moe.dispatch returned, not "
                        f"{type(dispatched).__name__}")
    _check_tensor(expert_out, "expert_out")
    for value, name in ((scales, "scales"), (x1, "x1"), (x2, "x2"), (bias, "bias")):
        _check_tensor(value, name, optional=True)
    d = dispatched
    tokens, top_k, mode = d.tokens, d.top_k, d.drop_pad_mode
    if device is None and handle is None:
        device, handle = d.device, d.handle
    elif device is None:
        device = "cpu"  # the handle decides

    if scales is None:
        if top_k != 1:
            raise ValueError(f"scales is None, but dispatch's expert_idx has K = {top_k} "
                             f"experts per token: pass the ({tokens}, {top_k}) weights")
    elif tuple(scales.shape) != (tokens, top_k):
        raise ValueError(f"scales shape {_shape(scales)} should be ({tokens}, {top_k}) "
                         "(tokens, top_k), expert_idx's shape")
    if x2 is not None and x1 is None:
        raise ValueError("x2 is given without x1: pass a single residual as x1")

    if experts is None:
        flat = d.flat(expert_out, "expert_out")
        if flat.dim() != 2:
            raise ValueError(f"expert_out shape {_shape(expert_out)} must be (rows, hidden)"
                             + (" or (E, C, hidden)" if mode == 1 else ""))
        hidden = flat.shape[1]
        if bias is not None and tuple(bias.shape) != (d.expert_num, hidden):
            raise ValueError(f"bias shape {_shape(bias)} should be ({d.expert_num}, {hidden}) "
                             "(expert_num, expert_out's hidden)")
        idx = d.expanded_row_idx
        if mode == 0:
            missing = tokens * top_k - flat.shape[0]  # the rows active_num left out
            if missing:
                flat = torch.cat([flat, flat.new_zeros(missing, hidden)])
            rows = flat
        else:
            rows = flat.reshape(d.expert_num, d.expert_capacity, hidden)
        finalize_mode = FINALIZE_MODE[mode]
    else:
        first, stop = _expert_range(experts, d.expert_num)
        if bias is not None:
            raise ValueError("bias cannot be combined with experts=: it would count once per "
                             "part; add it in one part's expert function, or combine it whole")
        if mode == 1:
            lo, hi = first * d.expert_capacity, stop * d.expert_capacity
        else:
            lo, hi = d.offsets[first], d.offsets[stop - 1] + d.counts[stop - 1]
        n = hi - lo
        if mode == 1 and expert_out.dim() == 3 \
                and tuple(expert_out.shape[:2]) == (stop - first, d.expert_capacity):
            flat = expert_out.reshape(n, expert_out.shape[2])
        elif expert_out.dim() == 2 and mode == 0 and compiling():
            # n is data (the experts' rows): asserted when the graph runs, not guarded on
            torch._check(expert_out.shape[0] == n)
            flat = expert_out
        elif expert_out.dim() == 2 and expert_out.shape[0] == n:
            flat = expert_out
        else:
            want = f"({n}, hidden)"
            if mode == 1:
                want += f" or ({stop - first}, {d.expert_capacity}, hidden)"
            raise ValueError(f"expert_out shape {_shape(expert_out)} does not hold experts "
                             f"{first}..{stop - 1}'s rows: want {want}")
        hidden = flat.shape[1]
        # No rows: one zero slot keeps the drop/pad shape valid (E, C >= 1). While compiling n
        # is a data-dependent size, so the slot is always added (no slot is ever read).
        if compiling() or n == 0:
            flat = torch.cat([flat, flat.new_zeros(1, hidden)])
        rows = flat.unsqueeze(0)  # (1, n, H'): one "expert" whose slots are the part's rows
        idx = d.expanded_row_idx
        idx = torch.where((idx >= lo) & (idx < hi), idx - lo, torch.full_like(idx, -1))
        finalize_mode = 3  # -1: a copy another part holds (or a dropped one): a zero row
    for value, name in ((x1, "x1"), (x2, "x2")):
        if value is not None and tuple(value.shape) != (tokens, hidden):
            raise ValueError(f"{name} shape {_shape(value)} should be ({tokens}, {hidden}) "
                             "(tokens, expert_out's hidden)")
    return _api().moe_finalize_routing_v2(
        rows, idx, x1, x2, bias, scales, d.expert_idx if bias is not None else None,
        drop_pad_mode=finalize_mode, device=device, handle=handle)
