"""``deepspeed.moe.layer.MoE``: a mixture-of-experts layer with expert parallelism."""
from __future__ import annotations

from ...nn.modules.linear import Linear
from ...nn.modules.module import Module
from .experts import Experts
from .sharded_moe import MOELayer, TopKGate, expert_groups

__all__ = ["MoE"]


class MoE(Module):
    """DeepSpeed's MoE layer: ``num_experts`` copies of ``expert`` behind a top-1 or top-2
    gate, split over expert-parallel groups of ``ep_size`` ranks (each rank holds
    ``num_experts / ep_size`` of them; tokens travel by all_to_all). ``forward`` returns
    ``(output, l_aux, exp_counts)``; add ``l_aux`` (times a coefficient) to the loss. Expert
    parameters carry ``allreduce=False`` and ``group_name="ep_size_<n>"``: the DeepSpeed engine
    averages their gradients over the ranks that hold the same experts only, and
    :func:`~tensorbrain.deepspeed.moe.utils.split_params_into_different_moe_groups_for_optimizer`
    gives them parameter groups of their own. Names of parameters are DeepSpeed's
    (``deepspeed_moe.gate.wg.weight``, ``deepspeed_moe.experts.deepspeed_experts.0...``).

    Args:
        hidden_size: token size.
        expert: the expert module (``[tokens, hidden_size] -> [tokens, hidden_size]``).
        num_experts: experts in all.
        ep_size: ranks per expert-parallel group (must divide ``num_experts`` and the world).
        k: 1 or 2.
        capacity_factor: training capacity multiplier.
        eval_capacity_factor: evaluation capacity multiplier.
        min_capacity: smallest capacity per expert.
        use_residual: Residual MoE: mix with a dense copy of the expert through a learned
            2-way coefficient.
        noisy_gate_policy: None, ``"Jitter"`` or ``"RSample"``.
        drop_tokens: keep at most the capacity per expert (False: raise it to the largest count).
        use_rts: random token selection.
        use_tutel: must be False (Tutel kernels are CUDA-only).
        enable_expert_tensor_parallelism: must be False.
        top2_2nd_expert_sampling: Gumbel noise on top-2's second choice.

    Raises:
        ValueError: ``num_experts`` not divisible by ``ep_size``, or a bad ``k``.
        NotImplementedError: ``use_tutel`` or expert tensor parallelism.

    Example:
        >>> import tensorbrain as tb
        >>> moe = MoE(hidden_size=4, expert=tb.nn.Linear(4, 4), num_experts=2, k=1,
        ...           min_capacity=0)
        >>> out, l_aux, counts = moe(tb.randn(3, 5, 4))
        >>> out.shape, int(counts.sum())
        (tb.Size([3, 5, 4]), 15)
    """

    def __init__(self, hidden_size: int, expert, num_experts: int = 1, ep_size: int = 1, k=1,
                 capacity_factor=1.0, eval_capacity_factor=1.0, min_capacity: int = 4,
                 use_residual: bool = False, noisy_gate_policy=None, drop_tokens: bool = True,
                 use_rts: bool = True, use_tutel: bool = False,
                 enable_expert_tensor_parallelism: bool = False,
                 top2_2nd_expert_sampling: bool = True):
        super().__init__()
        if use_tutel or enable_expert_tensor_parallelism:
            raise NotImplementedError("MoE(use_tutel=True / enable_expert_tensor_parallelism="
                                      "True) is not supported by tensorbrain.deepspeed")
        if num_experts % ep_size:
            raise ValueError(f"Number of experts ({num_experts}) should be divisible by expert "
                             f"parallel size ({ep_size})")
        self.use_residual = use_residual
        self.ep_size, self.num_experts = ep_size, num_experts
        self.num_local_experts = num_experts // ep_size
        self.expert_group_name = f"ep_size_{ep_size}"
        ep_group, _ = expert_groups(ep_size)
        experts = Experts(expert, self.num_local_experts, self.expert_group_name)
        gate = TopKGate(hidden_size, num_experts, k, capacity_factor, eval_capacity_factor,
                        min_capacity, noisy_gate_policy, drop_tokens, use_rts, ep_group,
                        top2_2nd_expert_sampling)
        self.deepspeed_moe = MOELayer(gate, experts, self.expert_group_name, ep_size,
                                      self.num_local_experts)
        if use_residual:
            import copy
            self.mlp = copy.deepcopy(expert)
            self.coefficient = Linear(hidden_size, 2)

    def forward(self, hidden_states, used_token=None):
        """``(output, l_aux, exp_counts)``.

        Args:
            hidden_states: ``[..., hidden_size]``.
            used_token: optional ``[tokens]`` 0/1 mask of the tokens to route.
        """
        import tensorbrain as tb
        args = (hidden_states,) if used_token is None else (hidden_states, used_token)
        output = self.deepspeed_moe(*args)
        if self.use_residual:
            mlp = self.mlp(hidden_states)
            mlp = mlp[0] if isinstance(mlp, tuple) else mlp
            coef = tb.softmax(self.coefficient(hidden_states), dim=-1)
            output = output * coef[..., 0:1] + mlp * coef[..., 1:]
        return output, self.deepspeed_moe.l_aux, self.deepspeed_moe.exp_counts
