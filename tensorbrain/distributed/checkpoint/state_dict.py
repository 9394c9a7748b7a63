"""Model and optimizer state dicts keyed by parameter name (torch's
``torch.distributed.checkpoint.state_dict``), ready for ``dcp.save`` / ``dcp.load``.

* Model state dicts drop the ``module.`` prefix of ``DistributedDataParallel``, so a checkpoint
  saved from a DDP model loads into the plain model and the reverse.
* Optimizer state dicts are keyed by the parameter's name instead of its index:
  ``{"state": {"fc.weight": {"exp_avg": ..., "step": 3.0}}, "param_groups": [{"lr": ...,
  "params": ["fc.weight", ...]}]}``. Several optimizers merge into one such dict.
* The state of a DTensor parameter (``fully_shard``'s sharded parameters) is a DTensor laid out
  as the parameter, so each rank saves its shard and any world size loads it.
* A ``ZeroRedundancyOptimizer`` gives only the state of the parameters this rank owns, so
  ``dcp.save`` writes each piece once, from its owner, and ``dcp.load`` at another world size
  reads each rank's new share.
* An optimizer that has not stepped yet gets its state created first by one step with zero
  gradients and learning rate 0 (torch's ``_init_optim_state``), so that ``dcp.load`` has
  tensors to fill; the parameters do not change.
* Tensors in the returned dicts share memory with the model and the optimizer, so ``dcp.load``
  into them updates both in place; ``set_*`` then also restores the non-tensor values.
"""
from __future__ import annotations

import dataclasses

from dataclasses import dataclass

from ...tensor import Tensor

__all__ = ["StateDictOptions", "get_model_state_dict", "get_optimizer_state_dict",
           "get_state_dict", "set_model_state_dict", "set_optimizer_state_dict",
           "set_state_dict"]


@dataclass
class StateDictOptions:
    """Options of the state dict helpers (torch's fields).

    Attributes:
        full_state_dict: DTensors are gathered into full tensors and a ZeRO optimizer's state
            from every rank is merged (collectives: call on every rank).
        cpu_offload: tensors are copied to the CPU; with ``full_state_dict`` only rank 0 gets
            the values, the other ranks an empty dict.
        ignore_frozen_params: leave out parameters with ``requires_grad=False``.
        keep_submodule_prefixes: must be True (``submodules`` is not supported).
        strict: ``set_model_state_dict`` raises on missing or unexpected keys.
        broadcast_from_rank0: ``set_*`` only (needs ``full_state_dict``): rank 0's full state
            dict is broadcast to every rank (the others may pass ``{}``), then loaded.
        flatten_optimizer_state_dict: not supported (must be False).
    """

    full_state_dict: bool = False
    cpu_offload: bool = False
    ignore_frozen_params: bool = False
    keep_submodule_prefixes: bool = True
    strict: bool = True
    broadcast_from_rank0: bool = False
    flatten_optimizer_state_dict: bool = False


def _options(options, submodules=None) -> StateDictOptions:
    options = options or StateDictOptions()
    if submodules is not None or not options.keep_submodule_prefixes:
        raise NotImplementedError("submodules / keep_submodule_prefixes=False are not supported "
                                  "(torch deprecates them); pass the whole model")
    if options.broadcast_from_rank0 and not options.full_state_dict:
        raise ValueError("StateDictOptions(broadcast_from_rank0=True) needs "
                         "full_state_dict=True (as torch)")
    if options.flatten_optimizer_state_dict:
        raise NotImplementedError("StateDictOptions(flatten_optimizer_state_dict=True) is not "
                                  "supported; dcp.save flattens nested dicts itself")
    return options


def _unwrap(model):
    from ...nn.parallel.distributed import DistributedDataParallel
    while isinstance(model, DistributedDataParallel):
        model = model.module
    return model


def _fsdp1(model):
    """``model`` itself when it holds ``FullyShardedDataParallel`` units (FSDP1), else None.
    FSDP1 keeps flat parameters, so its state dicts come from its own state-dict machinery."""
    from ..fsdp import FullyShardedDataParallel
    inner = _unwrap(model)
    return inner if any(isinstance(m, FullyShardedDataParallel) for m in inner.modules()) else None


def _fsdp1_context(model, options):
    """``FSDP.state_dict_type`` for ``options``: FULL_STATE_DICT (gathered) when
    ``full_state_dict``, else SHARDED_STATE_DICT (DTensor values, what ``dcp.save`` shards)."""
    from .. import fsdp as F
    off = bool(options.cpu_offload)
    if options.full_state_dict:
        return F.FullyShardedDataParallel.state_dict_type(
            model, F.StateDictType.FULL_STATE_DICT,
            F.FullStateDictConfig(offload_to_cpu=off, rank0_only=off),
            F.FullOptimStateDictConfig(offload_to_cpu=off, rank0_only=off))
    return F.FullyShardedDataParallel.state_dict_type(
        model, F.StateDictType.SHARDED_STATE_DICT, F.ShardedStateDictConfig(offload_to_cpu=off),
        F.ShardedOptimStateDictConfig(offload_to_cpu=off))


def _loading_options(options, state_dict) -> StateDictOptions:
    """For FSDP1 loads: sharded when the values are DTensors (what dcp.load filled), else full."""
    sharded = any(getattr(v, "_spec", None) is not None for v in _leaves(state_dict))
    return dataclasses.replace(options, full_state_dict=not sharded, cpu_offload=False)


def _leaves(tree):
    if isinstance(tree, dict):
        for v in tree.values():
            yield from _leaves(v)
    elif isinstance(tree, (list, tuple)):
        for v in tree:
            yield from _leaves(v)
    else:
        yield tree


def _fqns(model) -> dict:
    # the state-dict names: without activation-checkpoint wrappers (torch's _get_fqns)
    return {id(p): name.replace("_checkpoint_wrapped_module.", "")
            for name, p in _unwrap(model).named_parameters()}


def _optimizers(optimizers) -> list:
    from ...optim.optimizer import Optimizer
    return [optimizers] if isinstance(optimizers, Optimizer) else list(optimizers)


def _is_zero(optim) -> bool:
    from ..optim import ZeroRedundancyOptimizer
    return isinstance(optim, ZeroRedundancyOptimizer)


def _rank0_only(options) -> bool:
    from .. import distributed_c10d as c10d
    return (options.full_state_dict and options.cpu_offload and c10d.is_initialized()
            and c10d.get_rank() != 0)


def _finish(value, options):
    """Gather a DTensor when ``full_state_dict``; copy to the CPU when ``cpu_offload``."""
    if isinstance(value, Tensor):
        if options.full_state_dict and hasattr(value, "full_tensor"):
            value = value.full_tensor().detach()
        if options.cpu_offload and value.device.type != "cpu":
            value = value.to("cpu")
    return value


def _from_rank0(tree, what):
    """``broadcast_from_rank0``: every rank gets rank 0's (full) state dict; what the other
    ranks passed is ignored. One object broadcast (the safe codec carries Tensors, no pickle);
    a state dict rank 0 cannot send raises the same error on every rank."""
    from .. import distributed_c10d as c10d
    if not c10d.is_initialized() or c10d.get_world_size() == 1:
        return tree
    box: list = [None]
    if c10d.get_rank() == 0:
        try:
            box = [{"ok": _sendable(tree, "")}]
        except (TypeError, ValueError) as exc:
            box = [{"error": str(exc)}]
    c10d.broadcast_object_list(box, src=0)
    if "error" in box[0]:
        raise ValueError(f"{what}(options=StateDictOptions(broadcast_from_rank0=True)): rank "
                         f"0's state dict cannot be broadcast: {box[0]['error']}")
    return box[0]["ok"]


def _sendable(tree, path):
    from .. import _codec
    if isinstance(tree, dict):
        return {k: _sendable(v, f"{path}.{k}" if path else str(k)) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_sendable(v, f"{path}.{i}") for i, v in enumerate(tree))
    if isinstance(tree, Tensor):
        if getattr(tree, "_spec", None) is not None:
            raise ValueError(f"{path!r} is a DTensor; with broadcast_from_rank0 rank 0 passes "
                             f"full tensors (get them with full_state_dict=True)")
        if tree._data.dtype.name not in _codec._DTYPE_NAMES:   # bfloat16: exact in float32
            return Tensor._wrap(tree.detach().numpy().astype("float32"))
        return tree.detach()
    return tree


def _local_piece(value, spec):
    """This rank's part of the full tensor ``value`` under ``spec`` (no communication)."""
    from ..tensor import distribute_tensor
    return distribute_tensor(value.detach(), spec.mesh, spec.placements,
                             src_data_rank=None).to_local()


def _shard_full(value, target):
    """A full (plain) tensor meant for a DTensor ``target``: cut to the local piece."""
    spec = getattr(target, "_spec", None)
    if spec is None or not isinstance(value, Tensor) or getattr(value, "_spec", None) is not None \
            or tuple(value.shape) != tuple(spec.shape):
        return value
    return _local_piece(value, spec)


# ***** model *****
def get_model_state_dict(model, *, submodules=None, options=None) -> dict:
    """The model's state dict under the names of the unwrapped model.

    Args:
        model: a Module, a ``DistributedDataParallel`` or a ``FullyShardedDataParallel``.
        submodules: not supported (None).
        options: :class:`StateDictOptions`.

    Returns:
        ``{name: Tensor}`` sharing memory with the model (unless gathered or offloaded).
    """
    options = _options(options, submodules)
    fsdp = _fsdp1(model)
    if fsdp is not None:
        with _fsdp1_context(fsdp, options):
            sd = fsdp.state_dict()
        return {} if _rank0_only(options) else sd
    inner = _unwrap(model)
    frozen = {n for n, p in inner.named_parameters() if not p.requires_grad}
    sd = {k: _finish(v, options) for k, v in inner.state_dict().items()
          if not (options.ignore_frozen_params and k in frozen)}
    return {} if _rank0_only(options) else sd


def set_model_state_dict(model, model_state_dict: dict, *, options=None):
    """Load ``model_state_dict`` (names of the unwrapped model) into ``model``.

    Args:
        model: a Module, a ``DistributedDataParallel`` or a ``FullyShardedDataParallel``.
        model_state_dict: from :func:`get_model_state_dict` (filled by ``dcp.load``) or any
            state dict with the unwrapped model's names.
        options: :class:`StateDictOptions` (``strict``).

    Returns:
        ``(missing_keys, unexpected_keys)`` as ``Module.load_state_dict``.
    """
    options = _options(options)
    if options.broadcast_from_rank0:
        model_state_dict = _from_rank0(model_state_dict, "set_model_state_dict")
    fsdp = _fsdp1(model)
    if fsdp is not None:
        with _fsdp1_context(fsdp, _loading_options(options, model_state_dict)):
            return fsdp.load_state_dict(model_state_dict, strict=options.strict)
    inner = _unwrap(model)
    # full tensors for DTensor parameters (fully_shard's): each rank keeps its piece, as torch
    targets = inner.state_dict(keep_vars=True)
    model_state_dict = {k: _shard_full(v, targets.get(k)) for k, v in model_state_dict.items()}
    return inner.load_state_dict(model_state_dict, strict=options.strict)


# ***** optimizer *****
def _init_optim_state(optim) -> None:
    """Create the state of an optimizer that has not stepped (zero gradients, lr 0)."""
    local = optim.optim if _is_zero(optim) else optim
    if local.state:
        return
    params = [p for g in local.param_groups for p in g["params"] if p.requires_grad]
    if any(p.grad is not None for p in params):
        raise RuntimeError("state_dict can only be used if the optimizer states are initialized "
                           "(usually after one step() with gradients) or gradients are None; "
                           "call zero_grad(set_to_none=True) first")
    for p in params:
        p.grad = Tensor._wrap(p._data * 0)
    lrs = [g.get("lr") for g in local.param_groups]
    for g in local.param_groups:
        if "lr" in g:
            g["lr"] = 0.0
    try:
        local.step()  # local: a ZeRO rank steps its own share, no broadcast needed at lr 0
    finally:
        for g, lr in zip(local.param_groups, lrs, strict=True):
            if lr is not None:
                g["lr"] = lr
        for p in params:
            p.grad = None


def _local_state(local, fqns) -> dict:
    return {fqns[id(p)]: {k: _state_value(p, v) for k, v in st.items() if not k.startswith("_")}
            for p, st in local.state.items()}


def _state_value(p, v):
    """A state array as a Tensor sharing its memory; the state of a DTensor parameter (FSDP2's
    sharded parameters: the optimizer sees their local shards) becomes a DTensor laid out as the
    parameter, so that ``dcp.save`` writes each rank's piece at its global offset."""
    if not hasattr(v, "shape"):
        return v
    spec = getattr(p, "_spec", None)
    if spec is not None and tuple(v.shape) == tuple(p._data.shape):
        from ..tensor import DTensor
        return DTensor._make(v, spec)
    return Tensor._wrap(v)


def _one_optim_state_dict(fqns, optim, options) -> dict:
    _init_optim_state(optim)
    local = optim.optim if _is_zero(optim) else optim
    state = _local_state(local, fqns)
    if _is_zero(optim) and options.full_state_dict:
        everyone: list[dict] = [{}] * optim.world_size
        from .. import distributed_c10d as c10d
        c10d.all_gather_object(everyone, state, group=optim.process_group)
        state = {k: v for part in everyone for k, v in part.items()}
    state = {k: {n: _finish(v, options) for n, v in st.items()} for k, st in state.items()}
    groups = [{**{k: v for k, v in g.items() if k != "params"},
               "params": [fqns[id(p)] for p in g["params"]]} for g in optim.param_groups]
    return {"state": state, "param_groups": groups}


def get_optimizer_state_dict(model, optimizers, *, submodules=None, options=None) -> dict:
    """The optimizers' state keyed by parameter name (merged when there are several).

    Args:
        model: the model the optimizers update (plain or DDP).
        optimizers: one optimizer or a list (``ZeroRedundancyOptimizer`` included).
        submodules: not supported (None).
        options: :class:`StateDictOptions`.

    Returns:
        ``{"state": {name: {...}}, "param_groups": [{..., "params": [names]}]}``.

    Raises:
        KeyError: an optimizer updates a tensor that is not a parameter of ``model``.
    """
    options = _options(options, submodules)
    fsdp = _fsdp1(model)
    if fsdp is not None:
        from ..fsdp import FullyShardedDataParallel
        out: dict = {"state": {}, "param_groups": []}
        with _fsdp1_context(fsdp, options):
            for optim in _optimizers(optimizers):
                _init_optim_state(optim)   # a fresh optimizer gets state for dcp.load to fill
                part = FullyShardedDataParallel.optim_state_dict(fsdp, optim)
                out["state"].update(part.get("state", {}))
                out["param_groups"].extend(part.get("param_groups", []))
        return {} if _rank0_only(options) else out
    fqns = _fqns(model)
    out = {"state": {}, "param_groups": []}
    for optim in _optimizers(optimizers):
        missing = [tuple(p.shape) for g in optim.param_groups for p in g["params"]
                   if id(p) not in fqns]
        if missing:
            raise KeyError(f"the optimizer updates {len(missing)} tensor(s) that are not "
                           f"parameters of the model (shapes {missing[:4]})")
        part = _one_optim_state_dict(fqns, optim, options)
        out["state"].update(part["state"])
        out["param_groups"].extend(part["param_groups"])
    return {} if _rank0_only(options) else out


def set_optimizer_state_dict(model, optimizers, optim_state_dict: dict, *, options=None) -> None:
    """Load a name-keyed optimizer state dict into ``optimizers`` (each takes its own groups).

    Args:
        model: the model the optimizers update (plain or DDP).
        optimizers: one optimizer or a list (``ZeroRedundancyOptimizer`` included: each rank
            keeps the entries of the parameters it owns).
        optim_state_dict: from :func:`get_optimizer_state_dict`, possibly saved at another
            world size.
        options: :class:`StateDictOptions`.

    Raises:
        ValueError: an optimizer's groups are not found in ``optim_state_dict``.
    """
    options = _options(options)
    if options.broadcast_from_rank0:
        optim_state_dict = _from_rank0(optim_state_dict, "set_optimizer_state_dict")
    fsdp = _fsdp1(model)
    if fsdp is not None:
        from ..fsdp import FullyShardedDataParallel
        with _fsdp1_context(fsdp, _loading_options(options, optim_state_dict)):
            for optim in _optimizers(optimizers):
                optim.load_state_dict(FullyShardedDataParallel.optim_state_dict_to_load(
                    fsdp, optim, optim_state_dict))
        return
    fqns = _fqns(model)
    saved_groups = optim_state_dict["param_groups"]
    for optim in _optimizers(optimizers):
        names = [fqns[id(p)] for g in optim.param_groups for p in g["params"]]
        index = {n: i for i, n in enumerate(names)}
        groups = [g for g in saved_groups if g["params"] and g["params"][0] in index]
        if [len(g["params"]) for g in groups] != [len(g["params"]) for g in optim.param_groups]:
            raise ValueError(f"the optimizer state dict's parameter groups do not match this "
                             f"optimizer's: it has groups of {[len(g['params']) for g in optim.param_groups]} "
                             f"parameters, the state dict {[len(g['params']) for g in saved_groups]}")
        params = {fqns[id(p)]: p for g in optim.param_groups for p in g["params"]}
        state = {index[n]: {k: _shard_full(v, params[n]) for k, v in st.items()}
                 for n, st in optim_state_dict["state"].items() if n in index}
        packed = [{**{k: v for k, v in g.items() if k != "params"},
                   "params": [index[n] for n in g["params"]]} for g in groups]
        optim.load_state_dict({"state": state, "param_groups": packed})


# ***** both *****
def get_state_dict(model, optimizers, *, submodules=None, options=None) -> tuple:
    """``(get_model_state_dict(...), get_optimizer_state_dict(...))``.

    Args:
        model: a Module, a ``DistributedDataParallel`` or a ``FullyShardedDataParallel``.
        optimizers: one optimizer or a list.
        submodules: not supported (None).
        options: :class:`StateDictOptions`.

    Returns:
        ``(model_state_dict, optimizer_state_dict)``.

    Example::

        model_sd, optim_sd = get_state_dict(model, optimizer)
        dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id="ckpt")
    """
    return (get_model_state_dict(model, submodules=submodules, options=options),
            get_optimizer_state_dict(model, optimizers, submodules=submodules, options=options))


def set_state_dict(model, optimizers, *, model_state_dict: dict, optim_state_dict: dict,
                   options=None):
    """Load both state dicts (after ``dcp.load`` filled them).

    Args:
        model: a Module, a ``DistributedDataParallel`` or a ``FullyShardedDataParallel``.
        optimizers: one optimizer or a list.
        model_state_dict: the model's part.
        optim_state_dict: the optimizers' part.
        options: :class:`StateDictOptions`.

    Example::

        model_sd, optim_sd = get_state_dict(model, optimizer)
        dcp.load({"model": model_sd, "optim": optim_sd}, checkpoint_id="ckpt")
        set_state_dict(model, optimizer, model_state_dict=model_sd, optim_state_dict=optim_sd)

    Returns:
        The model's ``(missing_keys, unexpected_keys)``.
    """
    result = set_model_state_dict(model, model_state_dict, options=options)
    set_optimizer_state_dict(model, optimizers, optim_state_dict, options=options)
    return result
