"""``torch.optim.swap_in_optimizer_params_and_state``: run an optimizer for a block on other
parameters and another state (an ``optimizer.state_dict()``-shaped dict), then restore it.

Each group's ``params`` is replaced by the next tensors of ``swapin_parameters`` (in the
optimizer's parameter order), its hyperparameters by the swap-in groups', and the state is
re-keyed from packed ids to those tensors. Per-parameter state dicts are shallow copies, so a
step's in-place updates of the state tensors land in the caller's dict (TensorBrain's
optimizers update a Tensor found in their state in its own memory), while entries added or
replaced during the block stay local, as torch's.
"""
from __future__ import annotations

import contextlib

from .optimizer import _state_dict_type

_NAME = "swap_in_optimizer_params_and_state"


@contextlib.contextmanager
def swap_in_optimizer_params_and_state(optimizer, swapin_parameters: dict,
                                       swapin_optim_state: dict):
    """Swap ``optimizer``'s parameters and state for the block, as torch's.

    Args:
        optimizer: an optimizer whose state is initialised (it has stepped once).
        swapin_parameters: tensors to use as the parameters, in the optimizer's order (most
            often ``model.named_parameters()``'s).
        swapin_optim_state: ``{"state": {id: {...}}, "param_groups": [...]}``, shaped as
            ``optimizer.state_dict()``.

    Yields:
        None; ``optimizer.step()`` in the block updates the swap-in tensors.

    Raises:
        RuntimeError: the optimizer has no state yet, the state dict is not shaped as
            ``state_dict()``, or the groups or parameter counts do not match.
    """
    if not optimizer.state:
        raise RuntimeError(f"{_NAME} requires initialized optimizer state.")
    if not isinstance(swapin_optim_state, dict) or not isinstance(
            swapin_optim_state.get("state"), dict) or not isinstance(
            swapin_optim_state.get("param_groups"), list):
        raise RuntimeError(f"{_NAME} requires a DCP-style optimizer state_dict.")
    groups = swapin_optim_state["param_groups"]
    if len(groups) != len(optimizer.param_groups):
        raise RuntimeError(f"{_NAME}: the state dict has {len(groups)} param_groups, the "
                           f"optimizer {len(optimizer.param_groups)}")
    flat = list(swapin_parameters.values())
    plan, offset = [], 0
    for i, (live, saved) in enumerate(zip(optimizer.param_groups, groups)):
        ids = list(saved["params"])
        if len(ids) != len(live["params"]):
            raise RuntimeError(f"{_NAME}: param_groups[{i}] has {len(ids)} params, the "
                               f"optimizer's {len(live['params'])}")
        params = flat[offset:offset + len(ids)]
        offset += len(ids)
        if len(params) != len(ids):
            raise RuntimeError(f"{_NAME} requires the explicit parameter state to match "
                               f"optimizer.param_groups ordering.")
        plan.append((live, saved, params, ids))
    original_state = optimizer.state
    snapshots = [dict(g) for g in optimizer.param_groups]
    try:
        state = _state_dict_type()
        for live, saved, params, ids in plan:
            live["params"] = params
            live.update({k: v for k, v in saved.items() if k != "params"})
            for p, i in zip(params, ids):
                entry = state[p]   # a shallow copy, in the optimizer's per-parameter dict type
                for k, v in swapin_optim_state["state"].get(i, {}).items():
                    entry[k] = v
        optimizer.state = state
        yield
    finally:
        for group, snap in zip(optimizer.param_groups, snapshots):
            group.clear()
            group.update(snap)
        optimizer.state = original_state


__all__ = ["swap_in_optimizer_params_and_state"]
