# SPDX-License-Identifier: Apache-2.0
"""infiniop.torch.moe.Router: a Megatron-LM-style MoE router whose every step is the library's.

    router = moe.Router(hidden_size=1024, num_experts=256, topk=8, score_function="sigmoid",
                        num_groups=8, group_topk=4, group_score="top2", expert_bias=True,
                        aux_loss_type="seq", aux_loss_coeff=1e-4, seq_length=2048,
                        z_loss_coeff=1e-3, scaling_factor=2.5)         # DeepSeek-V3
    out = router(hidden)                           # hidden (T, H), T = seq_length * batch
    loss = task_loss + out.aux_loss + out.z_loss   # the losses are tensors with autograd
    loss.backward(); optimizer.step(); router.update_expert_bias()   # after each step

logits = hidden @ weight.T is torch's (an F32 matmul); from the logits on, each step is one of the
library's operators with its gradient: the selection and weights (MoeGatingTopKSoftmax,
MoeGatingTopK, or MoeGatingWeights for given indices), the balancing loss (MoeAuxLoss: switch
or sequence-level), the z-loss (MoeZLoss), the counts (MoeExpertCounts) and the
auxiliary-loss-free bias update (MoeBiasUpdate), so a training run gives the same bits at every
Highway target, thread count and on opencl (tests/python/test_router_training.py runs 100 steps
and compares). docs/moe_router.md maps every option to Megatron-LM, HF and DeepSeek.
"""

import math
from dataclasses import dataclass
from typing import Optional

import torch

__all__ = ["Router", "RouterOutput"]

SCORE_FUNCTIONS = {"softmax": 0, "sigmoid": 1, "sqrtsoftplus": 2}
GROUP_SCORES = {"max": 0, "top2": 1, "topk": 2}  # MoeGatingTopK's group_select_mode
AUX_LOSS_TYPES = (None, "switch", "seq")
DROP_POLICIES = {"probs": "probability", "position": "position"}  # Megatron's names


@dataclass
class RouterOutput:
    """What Router.forward returns. weights (T, topk) F32 and expert_idx (T, topk) (the router's
    index dtype) feed moe.dispatch / moe.combine; aux_loss and z_loss are 0-dim F32 tensors with
    autograd (None where the router has no such loss); tokens_per_expert (E) int64 are this
    call's counts of expert_idx (what the bias update accumulates). With capacity_factor set,
    expert_idx holds E (num_experts) at the slots dropped over capacity, weights +0 there (and a
    zero gradient), and tokens_per_expert counts the kept slots only."""
    weights: torch.Tensor
    expert_idx: torch.Tensor
    aux_loss: Optional[torch.Tensor]
    z_loss: Optional[torch.Tensor]
    tokens_per_expert: torch.Tensor


def _choice(name, value, allowed):
    if value not in allowed:
        raise ValueError(f"{name}={value!r}: expected one of {', '.join(map(repr, allowed))}")
    return value


class Router(torch.nn.Module):
    """A Megatron-LM-style router (megatron/core/transformer/moe/router.py's TopKRouter) whose
    steps are the library's operators. Options (docs/moe_router.md has the framework table):

    score_function   'softmax', 'sigmoid' or 'sqrtsoftplus' (DeepSeek-V4)
    pre_softmax      softmax only: softmax over all experts, then top-k, weights not
                     renormalized (Megatron --moe-router-pre-softmax); False: top-k of the
                     logits, then softmax over the k (Megatron's default)
    num_groups, group_topk, group_score
                     group-limited routing: the experts in num_groups consecutive groups, only
                     the best group_topk groups selectable, a group scored by its 'max',
                     its 'top2' sum (DeepSeek-V3) or the sum of its top topk // group_topk
                     ('topk': Megatron-LM and TransformerEngine)
    expert_bias      a per-expert F32 bias (the buffer `expert_bias`) added to the scores for
                     the selection only, updated by update_expert_bias() (DeepSeek-V3's
                     auxiliary-loss-free balancing; bias_update_rate u)
    normalize        sigmoid / sqrtsoftplus: the k weights divided by their sum + eps. None
                     means Megatron's rule (only for topk > 1); True is HF's and DeepSeek's
    scaling_factor   the weights times this (routed_scaling_factor)
    aux_loss_type    None, 'switch' (Megatron's switch_load_balancing_loss_func over the call's
                     tokens) or 'seq' (its sequence_load_balancing_loss_func: rows in (seq,
                     batch) order, seq_length rows per sequence); aux_loss_coeff its weight
    aux_loss_counts  'router': the counts of the router's own selection; 'unbiased': of a
                     separate top-k of the scores without bias or groups (Megatron's current
                     compute_routing_scores_for_aux_loss)
    z_loss_coeff     ST-MoE's router z-loss weight (0: none)
    index_dtype      int32 (moe.dispatch's) or int64
    capacity_factor  None: dropless (the default). A real > 0: each expert keeps at most
                     C = infiniop.expert_capacity(T, E, topk, capacity_factor, min_capacity)
                     of the call's T * topk slots (Megatron --moe-expert-capacity-factor),
                     the others dropped by MoeExpertCapacity: expert_idx E, weight +0
    drop_policy      'probs' (Megatron's default: an expert keeps its slots of the largest
                     weight, ties to the earlier slot) or 'position' (its first slots in token
                     order) (--moe-token-drop-policy)
    min_capacity     None, or the least C (get_capacity's min_capacity)

    forward(hidden, expert_idx=None): expert_idx given replays that routing (Megatron's
    RouterReplay, DeepSeek-V4's hash layers: tid2eid[token_ids]): the weights are computed for
    those experts with the same score function and normalization, and get the same gradient.
    A replay applies no capacity (capacity_factor is ignored): the given expert_idx, values in
    [0, E), is the routing as it is. (Megatron's RouterReplay records the selection before its
    dropping and drops again after the replay; here, apply infiniop.torch.moe_expert_capacity
    to the replay's output for that.)
    """

    def __init__(self, hidden_size, num_experts, topk, *, score_function="softmax",
                 pre_softmax=False, num_groups=1, group_topk=1, group_score="max",
                 expert_bias=False, bias_update_rate=1e-3, normalize=None, scaling_factor=1.0,
                 eps=1e-20, aux_loss_type=None, aux_loss_coeff=0.0, aux_loss_counts="router",
                 seq_length=None, z_loss_coeff=0.0, index_dtype="int32", device="cpu",
                 dtype=torch.float32, capacity_factor=None, drop_policy="probs",
                 min_capacity=None):
        super().__init__()
        self.num_experts, self.topk = int(num_experts), int(topk)
        self.score_function = _choice("score_function", score_function, SCORE_FUNCTIONS)
        self.pre_softmax = bool(pre_softmax)
        self.num_groups, self.group_topk = int(num_groups), int(group_topk)
        self.group_score = _choice("group_score", group_score, GROUP_SCORES)
        self.normalize = (self.topk > 1) if normalize is None else bool(normalize)
        if score_function == "softmax" and normalize is not None:
            raise ValueError("normalize= applies to sigmoid and sqrtsoftplus scores; softmax "
                             "weights are chosen by pre_softmax")
        self.scaling_factor, self.eps = float(scaling_factor), float(eps)
        self.aux_loss_type = _choice("aux_loss_type", aux_loss_type, AUX_LOSS_TYPES)
        self.aux_loss_coeff = float(aux_loss_coeff)
        self.aux_loss_counts = _choice("aux_loss_counts", aux_loss_counts, ("router", "unbiased"))
        if aux_loss_type == "seq" and not seq_length:
            raise ValueError("aux_loss_type='seq' needs seq_length (rows per sequence)")
        self.seq_length = seq_length
        self.z_loss_coeff = float(z_loss_coeff)
        self.bias_update_rate = float(bias_update_rate)
        if capacity_factor is not None:
            capacity_factor = float(capacity_factor)
            if not capacity_factor > 0 or capacity_factor == float("inf"):
                raise ValueError(f"capacity_factor={capacity_factor}: a finite real > 0, or "
                                 "None (dropless)")
        self.capacity_factor = capacity_factor
        self.drop_policy = _choice("drop_policy", drop_policy, DROP_POLICIES)
        if min_capacity is not None and (isinstance(min_capacity, bool)
                                         or int(min_capacity) != min_capacity
                                         or min_capacity < 0):
            raise ValueError(f"min_capacity={min_capacity!r}: an int >= 0, or None")
        self.min_capacity = None if min_capacity is None else int(min_capacity)
        self.index_dtype, self.device_name = index_dtype, device
        self.weight = torch.nn.Parameter(torch.empty(self.num_experts, hidden_size, dtype=dtype))
        torch.nn.init.normal_(self.weight, std=hidden_size ** -0.5)
        self.register_buffer("expert_bias", torch.zeros(self.num_experts, dtype=torch.float32)
                             if expert_bias else None)
        # The counts since the last bias update (Megatron's local_tokens_per_expert).
        self.register_buffer("tokens_since_update",
                             torch.zeros(self.num_experts, dtype=torch.int64))

    # The library's operators, through infiniop.torch (imported late: it imports this module).
    def _iop(self):
        import infiniop.torch as iop
        return iop

    def _grouped(self):
        return self.num_groups > 1 or self.score_function != "softmax" or \
            self.expert_bias is not None

    def _norm_type(self):
        return SCORE_FUNCTIONS[self.score_function]

    def route(self, logits, expert_idx=None):
        """(weights, expert_idx): the selection (or the given expert_idx) and its weights."""
        iop, k, dev = self._iop(), self.topk, self.device_name
        norm_type, c = self._norm_type(), self.scaling_factor
        if expert_idx is not None:
            weights = self._replayed_weights(logits, expert_idx)
        elif not self._grouped():  # softmax, no bias, no groups: MoeGatingTopKSoftmax
            weights, expert_idx, _ = iop.moe_gating_top_k_softmax(
                logits, k, renorm=0 if self.pre_softmax else 1, index_dtype=self.index_dtype,
                device=dev)
            weights = weights * c if c != 1.0 else weights
        else:
            renormalized = self.normalize if norm_type else not self.pre_softmax
            weights, expert_idx, norm_out = iop.moe_gating_top_k(
                logits, k, self.expert_bias, k_group=self.group_topk,
                group_count=self.num_groups, group_select_mode=GROUP_SCORES[self.group_score],
                norm_type=norm_type, out_flag=not renormalized, routed_scaling_factor=c,
                eps=self._eps(), index_dtype=self.index_dtype, device=dev)
            if not renormalized:  # p of the selected experts, times c (one rounding)
                weights = self._scaled(norm_out.gather(-1, expert_idx.long()))
        return weights, expert_idx

    def _scaled(self, p):
        return p * self.scaling_factor if self.scaling_factor != 1.0 else p

    def _replayed_weights(self, logits, expert_idx):
        iop, norm_type = self._iop(), self._norm_type()
        renormalized = not self.pre_softmax if norm_type == 0 else self.normalize
        if not renormalized:  # p of the given experts: the router's own p (norm_out), times c
            _, _, p = iop.moe_gating_top_k(logits, 1, norm_type=norm_type, out_flag=True,
                                           device=self.device_name)
            return self._scaled(p.gather(-1, expert_idx.long()))
        return iop.moe_gating_weights(logits, expert_idx, norm_type=norm_type,
                                      routed_scaling_factor=self.scaling_factor,
                                      eps=self._eps(), device=self.device_name)

    def _eps(self):
        """Softmax renormalized over the k is p / S exactly (Megatron's softmax of the k
        logits); sigmoid and sqrtsoftplus add eps to the sum (Megatron's and HF's 1e-20)."""
        return 0.0 if self._norm_type() == 0 else self.eps

    def capacity(self, num_tokens):
        """The capacity C of each expert for a call of num_tokens rows (None: dropless):
        infiniop.expert_capacity(num_tokens, E, topk, capacity_factor, min_capacity), its
        expression written out (the options are checked once, in __init__) so that
        torch.compile traces it where num_tokens or the factor is symbolic."""
        if self.capacity_factor is None:
            return None
        capacity = math.ceil((num_tokens * self.topk / self.num_experts) * self.capacity_factor)
        if self.min_capacity is not None and capacity < self.min_capacity:
            capacity = self.min_capacity
        return capacity

    def forward(self, hidden, expert_idx=None):
        iop, dev = self._iop(), self.device_name
        logits = hidden.reshape(-1, hidden.shape[-1]) @ self.weight.t()
        replay = expert_idx is not None
        weights, expert_idx = self.route(logits, expert_idx)
        selected = expert_idx  # before dropping: what the aux loss counts
        if self.capacity_factor is not None and not replay:
            expert_idx, weights = iop.moe_expert_capacity(
                expert_idx, self.num_experts, self.capacity(logits.shape[0]), weights=weights,
                drop_policy=DROP_POLICIES[self.drop_policy], device=dev)
        counts = iop.moe_expert_counts(expert_idx, self.num_experts, device=dev)
        if self.training and self.expert_bias is not None:
            self.tokens_since_update += counts
        aux_counts = counts
        if selected is not expert_idx and self.aux_loss_type == "switch" \
                and self.aux_loss_counts == "router" and self.aux_loss_coeff:
            aux_counts = iop.moe_expert_counts(selected, self.num_experts, device=dev)
        aux_loss = self._aux_loss(logits, selected, aux_counts) \
            if self.aux_loss_type and self.aux_loss_coeff else None
        z_loss = iop.moe_z_loss(logits, self.z_loss_coeff, device=dev) \
            if self.z_loss_coeff else None
        return RouterOutput(weights, expert_idx, aux_loss, z_loss, counts)

    def _aux_loss(self, logits, expert_idx, counts):
        iop, dev, T = self._iop(), self.device_name, logits.shape[0]
        if self.aux_loss_counts == "unbiased" or self.aux_loss_type == "seq":
            if self.aux_loss_counts == "unbiased":  # a top-k of the scores alone
                _, expert_idx, _ = iop.moe_gating_top_k(
                    logits.detach(), self.topk, norm_type=self._norm_type(),
                    index_dtype=self.index_dtype, device=dev)
            sequences = T // self.seq_length if self.aux_loss_type == "seq" else None
            counts = iop.moe_expert_counts(expert_idx, self.num_experts, sequences=sequences,
                                           device=dev)
        return iop.moe_aux_loss(logits, counts, self.topk, score_function=self.score_function,
                                total_tokens=T, coeff=self.aux_loss_coeff, device=dev)

    @torch.no_grad()
    def update_expert_bias(self):
        """DeepSeek-V3's step (MoeBiasUpdate): expert_bias += u * sign(mean - counts) from the
        counts since the last update, which are then reset. Call it after the optimizer step."""
        if self.expert_bias is None:
            raise RuntimeError("update_expert_bias: this router has no expert_bias")
        self._iop().moe_bias_update(self.expert_bias, self.tokens_since_update,
                                    self.bias_update_rate, device=self.device_name)
        self.tokens_since_update.zero_()
