"""``deepspeed.moe.utils``: telling expert parameters apart, for optimizers and clipping."""
from __future__ import annotations

from collections import defaultdict

__all__ = ["has_moe_layers", "is_moe_param", "split_params_into_shared_and_expert_params",
           "split_params_grads_into_shared_and_expert_params",
           "split_params_into_different_moe_groups_for_optimizer"]


def has_moe_layers(m) -> tuple[bool, int]:
    """``(True, num_experts)`` of the first MoE layer in ``m``, else ``(False, 0)``.

    Args:
        m: a module.
    """
    from .layer import MoE
    for module in m.modules():
        if isinstance(module, MoE):
            return True, module.num_experts
    return False, 0


def is_moe_param(param) -> bool:
    """Whether ``param`` belongs to an expert (``allreduce`` is False).

    Args:
        param: a parameter.
    """
    return getattr(param, "allreduce", True) is False


def split_params_into_shared_and_expert_params(params) -> tuple[list, list]:
    """``(shared, expert)`` parameters.

    Args:
        params: parameters.
    """
    params = list(params)
    return ([p for p in params if not is_moe_param(p)], [p for p in params if is_moe_param(p)])


def split_params_grads_into_shared_and_expert_params(group) -> tuple[list, list]:
    """``(shared gradients, expert gradients)`` of the parameters that have one.

    Args:
        group: parameters.
    """
    shared, expert = split_params_into_shared_and_expert_params(
        p for p in group if p.grad is not None)
    return [p.grad for p in shared], [p.grad for p in expert]


def split_params_into_different_moe_groups_for_optimizer(param_groups, max_group_size=178956971):
    """Give expert parameters parameter groups of their own (DeepSpeed's helper): each group
    keeps its shared parameters, and per expert-group name a copy of the group's options with
    ``moe=True``, ``name=<group name>`` holds its expert parameters (split into groups of at
    most ``max_group_size`` numbers).

    Args:
        param_groups: a dict, or a list/tuple of dicts, each with ``params`` and a ``name``.
        max_group_size: most numbers in one expert group (None: no limit).

    Returns:
        The list of groups: the originals (shared parameters), then the expert groups.

    Raises:
        ValueError: ``param_groups`` of another type.

    Example:
        >>> import tensorbrain as tb
        >>> from tensorbrain.deepspeed.moe.layer import MoE
        >>> moe = MoE(4, tb.nn.Linear(4, 4), num_experts=2)
        >>> groups = split_params_into_different_moe_groups_for_optimizer(
        ...     {"params": list(moe.parameters()), "name": "all", "lr": 0.1})
        >>> [(g["name"], g.get("moe", False), len(g["params"])) for g in groups]
        [('all', False, 1), ('ep_size_1', True, 4)]
    """
    if isinstance(param_groups, tuple):
        param_groups = list(param_groups)
    elif isinstance(param_groups, dict):
        param_groups = [param_groups]
    elif not isinstance(param_groups, list):
        raise ValueError(f"Unknown param group type of {type(param_groups)}")
    names = sorted({p.group_name for g in param_groups for p in g["params"] if is_moe_param(p)})
    moe: dict = defaultdict(dict)
    for g in param_groups:
        for key in names:
            moe[g["name"]][key] = {**g, "name": key, "moe": True, "params": []}
    for g in param_groups:
        shared = []
        for p in g["params"]:
            (moe[g["name"]][p.group_name]["params"] if is_moe_param(p) else shared).append(p)
        g["params"] = shared
    out = list(param_groups)
    for per_name in moe.values():
        for g in per_name.values():
            if max_group_size is None:
                out.append(g)
                continue
            chunk: list = []
            size = 0
            for p in g["params"]:
                n = int(getattr(p, "ds_numel", p.numel()))
                if chunk and size + n > max_group_size:
                    out.append({**g, "params": chunk})
                    chunk, size = [], 0
                chunk.append(p)
                size += n
            if chunk:
                out.append({**g, "params": chunk})
    return out
