"""The gate and the expert-parallel dispatch of ``deepspeed.moe`` (DeepSpeed's
``sharded_moe.py``: GShard's top-1/top-2 gating with a capacity per expert, tokens moved to
their experts' ranks by all_to_all).

Gating, for ``S`` tokens and ``E`` experts: ``gates = softmax(wg(x))``; capacity
``C = max(ceil(S / E * capacity_factor), min_capacity)`` (top-2: ``2 * capacity_factor``);
top-1 picks ``argmax`` (plus Gumbel noise with ``noisy_gate_policy="RSample"``), keeps at most
``C`` tokens per expert (chosen at random with ``use_rts``, else the first ones), and weights an
expert's output by its gate; top-2 adds the second choice (on Gumbel-perturbed logits with
``top2_2nd_expert_sampling``), weights the two normalised to sum 1, and keeps tokens in arrival
order, first choices first. ``drop_tokens=False`` raises ``C`` to the largest expert count
(agreed over the expert-parallel group). The auxiliary loss: top-1 ``E * sum(mean(gates) *
mean(first-choice mask))``, top-2 ``E * E * mean(...)``. Which tokens go where is decided on the
values (NumPy); the gate weights and the loss stay differentiable.
"""
from __future__ import annotations

import math

import numpy as np

from ...autograd.function import Function
from ...nn.modules.linear import Linear
from ...nn.modules.module import Module

__all__ = ["MOELayer", "TopKGate", "top1gating", "top2gating", "expert_groups"]

_GROUPS: dict = {}


def _dist():
    from ... import distributed
    return distributed


def expert_groups(ep_size: int) -> tuple:
    """``(expert-parallel group, expert-data-parallel group)`` of this rank for ``ep_size``,
    as DeepSpeed makes them: ranks ``[0, ep_size)``, ``[ep_size, 2 ep_size)``, ... hold the
    experts between them; ranks ``i, i + ep_size, ...`` hold the same experts. Made once per
    ``ep_size`` (every rank creates them in the same order; a collective).

    Args:
        ep_size: ranks per expert-parallel group.

    Raises:
        ValueError: ``ep_size`` does not divide the world size.
    """
    dist = _dist()
    world = dist.get_world_size() if dist.is_initialized() else 1
    if ep_size < 1 or world % ep_size:
        raise ValueError(f"MoE ep_size={ep_size} must divide the world size {world}")
    if world == 1:
        return None, None
    if ep_size not in _GROUPS:
        me = dist.get_rank()
        ep = dp = None
        for start in range(0, world, ep_size):
            g = dist.new_group(list(range(start, start + ep_size)))
            if start <= me < start + ep_size:
                ep = g
        for first in range(ep_size):
            g = dist.new_group(list(range(first, world, ep_size)))
            if me % ep_size == first:
                dp = g
        _GROUPS[ep_size] = (ep, dp)
    return _GROUPS[ep_size]


def _capacity(num_tokens: int, num_experts: int, factor: float, min_capacity: int) -> int:
    return max(int(math.ceil(num_tokens / num_experts * factor)), int(min_capacity))


def _one_hot(idx: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((idx.size, n), dtype=np.float32)
    out[np.arange(idx.size), idx] = 1.0
    return out


def _agreed_max(value: int, ep_group) -> int:
    if ep_group is None:
        return value
    import tensorbrain as tb
    t = tb.tensor([float(value)])
    _dist().all_reduce(t, op=_dist().ReduceOp.MAX, group=ep_group)
    return int(t.item())


def _gumbel(shape) -> np.ndarray:
    from ... import _random
    u = _random.uniform(0.0, 1.0, shape, np.float32)
    return -np.log(-np.log(np.clip(u, 1e-20, 1.0)) + 1e-20)


def top1gating(logits, capacity_factor: float, min_capacity: int, used_token=None,
               noisy_gate_policy=None, drop_tokens: bool = True, use_rts: bool = True,
               ep_group=None):
    """Top-1 gating (module doc).

    Args:
        logits: ``[S, E]`` Tensor.
        capacity_factor: capacity multiplier.
        min_capacity: smallest capacity.
        used_token: ``[S]`` 0/1 Tensor of the tokens to route (None: all).
        noisy_gate_policy: None, ``"RSample"`` (Gumbel noise on the choice) or ``"Jitter"``
            (applied to the input by the gate).
        drop_tokens: keep at most the capacity per expert.
        use_rts: choose the kept tokens at random.
        ep_group: the expert-parallel group (``drop_tokens=False`` agrees on the capacity).

    Returns:
        ``(l_aux, combine_weights [S, E, C], dispatch_mask [S, E, C], exp_counts [E])``.
    """
    import tensorbrain as tb
    gates = tb.softmax(logits, dim=1)
    s, e = gates.shape
    g = gates.detach().numpy()
    pick = logits.detach().numpy() + _gumbel(g.shape) if noisy_gate_policy == "RSample" else g
    mask = _one_hot(np.argmax(pick, axis=1), e)
    if used_token is not None:
        mask = mask * np.asarray(used_token.detach().numpy(), np.float32)[:, None]
    counts = mask.sum(axis=0).astype(np.int64)
    capacity = _capacity(s, e, capacity_factor, min_capacity)
    if not drop_tokens:
        capacity = min(_agreed_max(int(counts.max()), ep_group), s)
    l_aux = (gates.mean(dim=0) * tb.tensor(mask.mean(axis=0))).sum() * e
    if s < min_capacity:
        raise ValueError(f"MoE: {s} tokens, fewer than min_capacity={min_capacity}: lower "
                         f"min_capacity or give a larger batch")
    keep = min(capacity, s)
    if use_rts:   # which `keep` tokens of each expert survive: at random
        from ... import _random
        rank = mask * _random.uniform(0.0, 1.0, mask.shape, np.float32)
        order = np.argsort(-rank, axis=0, kind="stable")[:keep]
    else:         # the first ones
        order = np.argsort(-mask, axis=0, kind="stable")[:keep]
    kept = np.zeros_like(mask)
    np.put_along_axis(kept, order, 1.0, axis=0)
    mask = mask * kept
    locations = (np.cumsum(mask, axis=0) - 1) * mask
    sec = mask[:, :, None] * _one_hot(locations.sum(axis=1).astype(np.int64), capacity)[:, None, :]
    combine = (gates * tb.tensor(mask))[:, :, None] * tb.tensor(sec)
    return l_aux, combine, tb.tensor(sec > 0), tb.tensor(counts)


def top2gating(logits, capacity_factor: float, min_capacity: int, drop_tokens: bool = True,
               ep_group=None, top2_2nd_expert_sampling: bool = True):
    """Top-2 gating (module doc).

    Args:
        logits: ``[S, E]`` Tensor.
        capacity_factor: capacity multiplier (doubled for the two choices).
        min_capacity: smallest capacity.
        drop_tokens: keep at most the capacity per expert.
        ep_group: the expert-parallel group (``drop_tokens=False`` agrees on the capacity).
        top2_2nd_expert_sampling: Gumbel noise on the second choice.

    Returns:
        ``(l_aux, combine_weights [S, E, C], dispatch_mask [S, E, C], exp_counts [E])``.
    """
    import tensorbrain as tb
    gates = tb.softmax(logits, dim=1)
    s, e = gates.shape
    g = gates.detach().numpy()
    mask1 = _one_hot(np.argmax(g, axis=1), e)
    second = logits.detach().numpy().astype(np.float32)
    if top2_2nd_expert_sampling:
        second = second + _gumbel(second.shape)
    second = np.where(mask1 > 0, -np.inf, second)
    mask2 = _one_hot(np.argmax(second, axis=1), e)
    loc1 = np.cumsum(mask1, axis=0) - 1
    loc2 = np.cumsum(mask2, axis=0) - 1 + mask1.sum(axis=0, keepdims=True)
    l_aux = (gates.mean(dim=0) * tb.tensor(mask1.mean(axis=0))).mean() * e * e
    counts = (mask1 + mask2).sum(axis=0).astype(np.int64)
    if drop_tokens:
        capacity = _capacity(s, e, capacity_factor * 2, min_capacity)
        mask1 = mask1 * (loc1 < capacity)
        mask2 = mask2 * (loc2 < capacity)
    else:
        capacity = _agreed_max(int(counts.max()), ep_group)
    l1 = (loc1 * mask1).sum(axis=1).astype(np.int64)
    l2 = (loc2 * mask2).sum(axis=1).astype(np.int64)
    g1 = (gates * tb.tensor(mask1)).sum(dim=1)
    g2 = (gates * tb.tensor(mask2)).sum(dim=1)
    denom = (g1 + g2).clamp(min=float(np.finfo(np.float32).eps))
    sec1 = mask1[:, :, None] * _one_hot(l1, capacity)[:, None, :]
    sec2 = mask2[:, :, None] * _one_hot(l2, capacity)[:, None, :]
    combine = (g1 / denom)[:, None, None] * tb.tensor(sec1) + \
        (g2 / denom)[:, None, None] * tb.tensor(sec2)
    return l_aux, combine, tb.tensor((sec1 + sec2) > 0), tb.tensor(counts)


class TopKGate(Module):
    """The gate: ``wg`` (a float32 ``Linear(model_dim, num_experts, bias=False)``) and top-1 or
    top-2 gating (module doc).

    Args:
        model_dim: token size.
        num_experts: experts in all.
        k: 1 or 2.
        capacity_factor: training capacity multiplier.
        eval_capacity_factor: evaluation capacity multiplier.
        min_capacity: smallest capacity.
        noisy_gate_policy: None, ``"Jitter"`` or ``"RSample"``.
        drop_tokens: keep at most the capacity per expert.
        use_rts: random token selection (top-1).
        ep_group: the expert-parallel group.
        top2_2nd_expert_sampling: Gumbel noise on top-2's second choice.
    """

    def __init__(self, model_dim: int, num_experts: int, k: int = 1, capacity_factor=1.0,
                 eval_capacity_factor=1.0, min_capacity: int = 8, noisy_gate_policy=None,
                 drop_tokens: bool = True, use_rts: bool = True, ep_group=None,
                 top2_2nd_expert_sampling: bool = True):
        super().__init__()
        if k not in (1, 2):
            raise ValueError(f"MoE k={k}: only top-1 and top-2 gating are supported")
        if noisy_gate_policy not in (None, "None", "Jitter", "RSample"):
            raise ValueError(f"noisy_gate_policy={noisy_gate_policy!r}: expected None, "
                             f"'Jitter' or 'RSample'")
        import tensorbrain as tb
        self.wg = Linear(model_dim, num_experts, bias=False, dtype=tb.float32)
        self.k, self.capacity_factor = k, capacity_factor
        self.eval_capacity_factor, self.min_capacity = eval_capacity_factor, min_capacity
        self.noisy_gate_policy = None if noisy_gate_policy == "None" else noisy_gate_policy
        self.drop_tokens, self.use_rts, self.ep_group = drop_tokens, use_rts, ep_group
        self.top2_2nd_expert_sampling = top2_2nd_expert_sampling

    def forward(self, input, used_token=None):
        """``(l_aux, combine_weights, dispatch_mask, exp_counts)`` for ``input`` ``[S, d]``."""
        x = input.float()
        if self.noisy_gate_policy == "Jitter" and self.training:
            from ... import _random
            eps = 1e-2
            x = x * _tensor(_random.uniform(1.0 - eps, 1.0 + eps, tuple(x.shape), np.float32))
        logits = self.wg(x)
        factor = self.capacity_factor if self.training else self.eval_capacity_factor
        if self.k == 1:
            return top1gating(logits, factor, self.min_capacity, used_token,
                              self.noisy_gate_policy if self.training else None,
                              self.drop_tokens, self.use_rts, self.ep_group)
        return top2gating(logits, factor, self.min_capacity, self.drop_tokens, self.ep_group,
                          self.top2_2nd_expert_sampling)


def _tensor(array):
    import tensorbrain as tb
    return tb.tensor(array)


class _AllToAll(Function):
    """all_to_all_single over dim 0 that autograd goes through (the gradient travels back the
    same way)."""

    @staticmethod
    def forward(ctx, group, x):
        ctx.group = group
        return _exchange(group, x)

    @staticmethod
    def backward(ctx, grad):
        return None, _exchange(ctx.group, grad)


def _exchange(group, x):
    import tensorbrain as tb
    out = tb.empty_like(x)
    _dist().all_to_all_single(out, x.contiguous(), group=group)
    return out


class MOELayer(Module):
    """Dispatch ``[S, d]`` tokens to the experts (all_to_all over the expert-parallel group
    when ``ep_size > 1``), run this rank's experts, bring the outputs back and combine them with
    the gate's weights.

    Args:
        gate: the :class:`TopKGate`.
        experts: this rank's :class:`~tensorbrain.deepspeed.moe.experts.Experts`.
        ep_group_name: the expert group's name.
        ep_size: ranks sharing the experts.
        num_local_experts: experts on this rank.
    """

    def __init__(self, gate, experts, ep_group_name, ep_size: int, num_local_experts: int):
        super().__init__()
        self.gate, self.experts = gate, experts
        self.ep_group_name, self.ep_size = ep_group_name, ep_size
        self.num_local_experts = num_local_experts
        self.ep_group = gate.ep_group
        self.l_aux = self.exp_counts = None

    def forward(self, *input, **kwargs):
        import tensorbrain as tb
        x = input[0]
        d = x.shape[-1]
        tokens = x.reshape(-1, d)
        self.l_aux, combine, dispatch, self.exp_counts = self.gate(tokens, input[1] if
                                                                    len(input) > 1 else None)
        e, c = combine.shape[1], combine.shape[2]
        dispatched = tb.einsum("sec,sm->ecm", dispatch.to(tokens.dtype), tokens)
        if self.ep_group is not None and self.ep_size > 1:
            dispatched = _AllToAll.apply(self.ep_group, dispatched)
        # [ep_size * local experts, C, d] -> [local experts, ep_size * C, d]
        per = dispatched.reshape(self.ep_size, self.num_local_experts, c, d).transpose(0, 1)
        out = self.experts(per.reshape(self.num_local_experts, self.ep_size * c, d))
        out = out.reshape(self.num_local_experts, self.ep_size, c, -1).transpose(0, 1)
        out = out.reshape(e, c, out.shape[-1])
        if self.ep_group is not None and self.ep_size > 1:
            out = _AllToAll.apply(self.ep_group, out)
        combined = tb.einsum("sec,ecm->sm", combine.to(out.dtype), out)
        return combined.reshape(*x.shape[:-1], combined.shape[-1])
