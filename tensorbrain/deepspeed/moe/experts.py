"""``deepspeed.moe.experts.Experts``: this rank's copies of the expert module."""
from __future__ import annotations

import copy

from ...nn.modules.container import ModuleList
from ...nn.modules.module import Module


class Experts(Module):
    """``num_local_experts`` copies of ``expert`` (deep copies: they start equal, as DeepSpeed's),
    their parameters marked as expert parameters (``allreduce=False``, ``group_name``): the
    engine averages their gradients over the ranks that hold the same experts only.

    Args:
        expert: the expert module.
        num_local_experts: the copies this rank holds.
        expert_group_name: the name of their expert-data-parallel group (``ep_size_<n>``).
    """

    def __init__(self, expert, num_local_experts: int = 1, expert_group_name=None):
        super().__init__()
        self.deepspeed_experts = ModuleList([copy.deepcopy(expert)
                                             for _ in range(num_local_experts)])
        self.num_local_experts = num_local_experts
        for e in self.deepspeed_experts:
            for p in e.parameters():
                p.allreduce = False
                p.group_name = expert_group_name

    def forward(self, inputs):
        """``inputs``: ``[num_local_experts, tokens, d]``; each expert takes its slice."""
        from ... import stack
        outs = []
        for i, expert in enumerate(self.deepspeed_experts):
            out = expert(inputs[i])
            outs.append(out[0] if isinstance(out, tuple) else out)
        return stack(outs)
