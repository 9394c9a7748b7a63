"""``FullyShardedDataParallel`` (FSDP1): each wrapped unit's parameters as one flat parameter,
sharded across ranks, gathered only while the unit computes (torch's
``torch.distributed.fsdp.FullyShardedDataParallel``). See ``docs/fsdp.md``.
"""
from __future__ import annotations

import contextlib
import functools

from ...autograd import grad_mode
from ...nn.modules.module import Module
from ...nn.parameter import Parameter
from ...tensor import Tensor
from .. import distributed_c10d as c10d
# Imported for its hook: it gives clip_grad_norm_ the norm of the _grad_norm_parts shards.
from ..tensor import _factories as _dtensor_factories  # noqa: F401
from . import _runtime, _state_dict, _tp
from ._flat_param import FlatParamHandle, ParamEntry
from .api import (BackwardPrefetch, CPUOffload, FullOptimStateDictConfig, FullStateDictConfig,
                  LocalOptimStateDictConfig, LocalStateDictConfig, MixedPrecision,
                  OptimStateDictConfig, ShardedOptimStateDictConfig, ShardedStateDictConfig,
                  ShardingStrategy, StateDictConfig, StateDictSettings, StateDictType)
from .wrap import _as_policy, _recursive_wrap

# torch's module re-exports its option types: programs import them from here too
__all__ = ["BackwardPrefetch", "CPUOffload", "FullOptimStateDictConfig", "FullStateDictConfig",
           "FullyShardedDataParallel", "LocalOptimStateDictConfig", "LocalStateDictConfig",
           "MixedPrecision", "OptimStateDictConfig", "ShardedOptimStateDictConfig",
           "ShardedStateDictConfig", "ShardingStrategy", "StateDictConfig", "StateDictSettings",
           "StateDictType"]

_HYBRID = (ShardingStrategy.HYBRID_SHARD, ShardingStrategy._HYBRID_SHARD_ZERO2)
_HYBRID_MESHES: dict = {}


def _dtype(d):
    if d is None:
        return None
    import numpy as np
    return np.dtype(getattr(d, "np", d)) if not isinstance(d, np.dtype) else d


def _collect(module, is_unit, ignored, what="FSDP"):
    """``(entries, shared)``: parameters of ``module`` outside nested units and ignored
    modules, each Parameter once (later references to it are ``shared``)."""
    entries: list = []
    shared: list = []
    seen: dict = {}

    def walk(mod, prefix):
        for name, p in list(mod._parameters.items()):
            if p is None or id(p) in ignored:
                continue
            if id(p) in seen:
                shared.append((mod, name, seen[id(p)]))
                continue
            e = ParamEntry(mod, name, prefix + name, p)
            if getattr(p, "_spec", None) is not None:   # tensor parallel: shard the local part
                e.tp_spec = _tp.check_param(prefix + name, p, what)
            seen[id(p)] = e
            entries.append(e)
        for cname, child in mod._modules.items():
            if child is None or is_unit(child) or id(child) in ignored:
                continue
            walk(child, prefix + cname + ".")
    walk(module, "")
    return entries, shared


class FullyShardedDataParallel(Module):
    """Shard a module's parameters, gradients and optimizer state across ranks.

    Args:
        module (Module): the module to wrap; with ``auto_wrap_policy`` its submodules are
            wrapped first.
        process_group (ProcessGroup | tuple[ProcessGroup, ProcessGroup] | None): the group to
            shard over (default: the world), or for ``HYBRID_SHARD`` a pair
            ``(intra_node_group, inter_node_group)``.
        sharding_strategy (ShardingStrategy | None): default ``FULL_SHARD``.
        cpu_offload (CPUOffload | None): ``offload_params=True`` keeps shards and gradients in
            host memory.
        auto_wrap_policy (Callable | ModuleWrapPolicy | None): a policy from
            :mod:`~tensorbrain.distributed.fsdp.wrap`.
        backward_prefetch (BackwardPrefetch | None): default ``BACKWARD_PRE``.
        mixed_precision (MixedPrecision | None): parameter, reduction and buffer dtypes.
        ignored_modules (Iterable[Module] | None): modules whose parameters FSDP leaves alone
            (not sharded, not reduced).
        param_init_fn (Callable | None): not supported (raises).
        device_id (int | device | None): the device to move the module to before sharding
            (None: where it is).
        sync_module_states (bool): broadcast rank 0's parameters and buffers before sharding.
        forward_prefetch (bool): start the next unit's all-gather during this unit's forward.
        limit_all_gathers (bool): accepted (prefetching here is at most one unit ahead anyway).
        use_orig_params (bool): expose the original parameters (1-D views of this rank's shard)
            to ``parameters()`` instead of the flat parameters.
        ignored_states (Iterable[Module | Parameter] | None): like ``ignored_modules``
            (modules or parameters).
        device_mesh (DeviceMesh | None): a 1-D mesh (the shard group) or, for HYBRID_SHARD, a
            2-D mesh (dimension 0 replicates, dimension 1 shards).

    Raises:
        RuntimeError: no process group; different wrapping on different ranks (at the first
            forward, naming the rank and the unit).
        ValueError: bad strategy/group combinations, mixed dtypes inside one unit.

    Example:
        >>> from tensorbrain.distributed.fsdp import FullyShardedDataParallel as FSDP  # doctest: +SKIP
        >>> model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({Block}))          # doctest: +SKIP
        >>> opt = tb.optim.Adam(model.parameters(), lr=1e-3)                          # doctest: +SKIP
    """

    def __init__(self, module, process_group=None, sharding_strategy=None, cpu_offload=None,
                 auto_wrap_policy=None, backward_prefetch=BackwardPrefetch.BACKWARD_PRE,
                 mixed_precision=None, ignored_modules=None, param_init_fn=None, device_id=None,
                 sync_module_states=False, forward_prefetch=False, limit_all_gathers=True,
                 use_orig_params=False, ignored_states=None, device_mesh=None):
        super().__init__()
        if not c10d.is_initialized():
            raise RuntimeError("FullyShardedDataParallel needs a process group: call "
                               "tb.distributed.init_process_group(...) first")
        if param_init_fn is not None:
            raise NotImplementedError("FSDP(param_init_fn=...) is not supported: build the "
                                      "module with real parameters (meta device does not exist)")
        strategy = sharding_strategy or ShardingStrategy.FULL_SHARD
        if not isinstance(strategy, ShardingStrategy):
            raise TypeError(f"sharding_strategy must be a ShardingStrategy, got {strategy!r}")
        if device_id is not None:
            module = module.to(device_id if not isinstance(device_id, int) else f"cuda:{device_id}")
        mp = mixed_precision or MixedPrecision()
        offload = (cpu_offload or CPUOffload()).offload_params
        ignored = set()
        for obj in list(ignored_modules or ()) + list(ignored_states or ()):
            ignored.add(id(obj))
            if isinstance(obj, Module):
                ignored.update(id(p) for p in obj.parameters())
                ignored.update(id(m) for m in obj.modules())
        shard_group, replicate_group, mesh = self._groups(strategy, process_group, device_mesh)
        kwargs = dict(process_group=process_group, sharding_strategy=strategy,
                      cpu_offload=cpu_offload, backward_prefetch=backward_prefetch,
                      mixed_precision=mixed_precision, ignored_states=ignored_states,
                      ignored_modules=ignored_modules, sync_module_states=sync_module_states,
                      forward_prefetch=forward_prefetch, use_orig_params=use_orig_params,
                      device_mesh=device_mesh)
        if sync_module_states:   # before auto-wrapping: units created below sync nothing
            self._sync_module_states(module, ignored, shard_group, replicate_group)
        policy = _as_policy(auto_wrap_policy)
        if policy is not None:
            wrapper = functools.partial(FullyShardedDataParallel,
                                        **{**kwargs, "sync_module_states": False})
            _recursive_wrap(module, policy, wrapper, ignored,
                            lambda m: isinstance(m, FullyShardedDataParallel),
                            only_wrap_children=True)
        self.sharding_strategy = strategy
        self.process_group = shard_group if shard_group is not None else replicate_group
        self.mixed_precision, self.cpu_offload = mp, CPUOffload(offload)
        self._fsdp_wrapped_module = module
        entries, shared = _collect(module, lambda m: isinstance(m, FullyShardedDataParallel),
                                   ignored)
        handle = None
        if entries:
            handle = FlatParamHandle("", entries, shard_group, replicate_group, "flat",
                                     _dtype(mp.param_dtype), _dtype(mp.reduce_dtype), offload,
                                     mesh)
            _tp.attach(handle, "FSDP")
        pre = {BackwardPrefetch.BACKWARD_PRE: _runtime.BACKWARD_PRE,
               BackwardPrefetch.BACKWARD_POST: _runtime.BACKWARD_POST}.get(backward_prefetch)
        reshard = strategy in (ShardingStrategy.FULL_SHARD, ShardingStrategy.HYBRID_SHARD)
        state = _runtime.UnitState("", handle, kind="FSDP", reshard_after_forward=reshard,
                                   orig_params=use_orig_params, backward_prefetch=pre,
                                   forward_prefetch=forward_prefetch,
                                   cast_inputs=mp.cast_forward_inputs, shared=shared)
        self.__dict__["_fsdp_state"] = state
        self.__dict__["_ignored_param_ids"] = ignored
        if handle is not None:
            self._register_params(handle, state, use_orig_params, module)
        self.__dict__["_is_root"] = None
        self.__dict__["_root_state"] = None
        self.__dict__["_state_dict_type"] = StateDictType.FULL_STATE_DICT
        self.__dict__["_state_dict_config"] = None
        self.__dict__["_optim_state_dict_config"] = None

    # ***** construction helpers *****
    @staticmethod
    def _groups(strategy, process_group, device_mesh):
        if strategy in _HYBRID:
            if device_mesh is not None:
                if device_mesh.ndim != 2:
                    raise ValueError(f"FSDP {strategy.name}: device_mesh must be 2-D "
                                     f"(replicate, shard), got {device_mesh.ndim}-D")
                return device_mesh.get_group(1), device_mesh.get_group(0), device_mesh
            if isinstance(process_group, tuple):
                if len(process_group) != 2:
                    raise ValueError("FSDP HYBRID_SHARD: process_group must be the pair "
                                     "(intra_node_group, inter_node_group)")
                return process_group[0], process_group[1], None
            from ..device_mesh import init_device_mesh
            from .._env import get_local_world_size
            world, local = c10d.get_world_size(), get_local_world_size()
            if local <= 0 or world % local:
                raise ValueError(f"FSDP {strategy.name}: cannot derive node groups (world size "
                                 f"{world}, local world size {local}); pass device_mesh= a 2-D "
                                 f"mesh or process_group=(intra, inter)")
            key = (world, local)
            if key not in _HYBRID_MESHES:
                _HYBRID_MESHES[key] = init_device_mesh("cpu", (world // local, local))
            mesh = _HYBRID_MESHES[key]
            return mesh.get_group(1), mesh.get_group(0), mesh
        if isinstance(process_group, tuple):
            raise ValueError(f"FSDP {strategy.name}: a (intra, inter) group pair is only for "
                             f"HYBRID_SHARD")
        group = process_group
        if device_mesh is not None:
            if device_mesh.ndim != 1:
                raise ValueError(f"FSDP {strategy.name}: device_mesh must be 1-D (use "
                                 f"HYBRID_SHARD for a 2-D mesh)")
            group = device_mesh.get_group(0)
        if strategy == ShardingStrategy.NO_SHARD:
            return None, group if group is not None else c10d._default("FSDP"), device_mesh
        return (group if group is not None else c10d._default("FSDP")), None, device_mesh

    @staticmethod
    def _sync_module_states(module, ignored, shard_group, replicate_group):
        """Broadcast rank 0's parameters and buffers, except those of units already built (they
        synced themselves) and of ignored modules."""
        from ... import distributed as dist
        from ...nn.parallel.distributed import broadcast_coalesced
        state: list = []

        def walk(mod):
            state.extend(p for p in mod._parameters.values()
                         if p is not None and id(p) not in ignored)
            state.extend(b for b in mod._buffers.values() if b is not None)
            for child in mod._modules.values():
                if child is not None and not isinstance(child, FullyShardedDataParallel) \
                        and id(child) not in ignored:
                    walk(child)
        walk(module)
        with grad_mode.no_grad():
            for group in (shard_group, replicate_group):   # HYBRID: within, then across
                if group is not None and c10d.get_world_size(group) > 1:
                    src = c10d.get_global_rank(group, 0)
                    broadcast_coalesced(dist, state, src, group)

    def _register_params(self, handle, state, use_orig_params, module):
        if not use_orig_params:
            flat = Parameter(Tensor._wrap(handle.shard), requires_grad=handle.requires_grad)
            handle.shard = flat._data
            for e in handle.entries:
                e.module.__dict__["_parameters"].pop(e.attr, None)
                e.orig = None
            for mod, attr, _ in state.shared:
                mod.__dict__["_parameters"].pop(attr, None)
            module.__dict__["_parameters"]["_flat_param"] = flat
            flat._grad_norm_parts = [handle.local_slice(e) + (_tp.norm_groups(handle, e),)
                                     for e in handle.entries]
            state.flat_param = flat
            state.install()
            return
        for e in handle.entries:
            lo, hi = handle.local_slice(e)
            p = Parameter(Tensor._wrap(handle.shard[lo:hi]), requires_grad=e.requires_grad)
            p._grad_norm_parts = [(0, hi - lo, _tp.norm_groups(handle, e))]
            e.module.__dict__["_parameters"][e.attr] = p
            e.orig = p
        for mod, attr, e in state.shared:
            mod.__dict__["_parameters"][attr] = e.orig

    # ***** attribute forwarding (torch: FSDP is transparent to attribute access) *****
    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            inner = (self.__dict__.get("_modules") or {}).get("_fsdp_wrapped_module")
            if inner is None:
                raise
            return getattr(inner, name)

    def __getitem__(self, key):
        return self._fsdp_wrapped_module[key]

    @property
    def module(self):
        """The wrapped module."""
        return self._fsdp_wrapped_module

    # ***** lazy root initialisation *****
    def _lazy_init(self):
        if self._root_state is not None:
            return self._root_state
        units = [m for m in self.modules() if isinstance(m, FullyShardedDataParallel)]
        for m in units:
            if m._root_state is not None and m is not self:
                raise RuntimeError("FSDP: a nested FSDP unit already ran as a root; call the "
                                   "outermost FSDP module")
        states = [m._fsdp_state for m in units]
        names = dict((id(m), n) for n, m in self.named_modules())
        for m in units:
            m._fsdp_state.name = _state_dict.clean_name(names[id(m)])
            m.__dict__["_is_root"] = m is self
        root = _runtime.RootState(self._fsdp_state, states)
        h = next((u.handle for u in states if u.handle is not None), None)
        spans_world = h is None or h.W * h.R == c10d.get_world_size()
        root.fingerprint_check(None if spans_world else self.process_group)   # HYBRID: all
        self.__dict__["_root_state"] = root
        for m in units:
            m.__dict__["_root_state"] = root
        bd = _dtype(self.mixed_precision.buffer_dtype)
        if bd is not None:
            for b in self.buffers():
                if b.is_floating_point():
                    b._data = b._data.astype(bd)
        return root

    # ***** forward *****
    def forward(self, *args, **kwargs):
        self._lazy_init()
        st = self._fsdp_state
        if self._is_root and self.mixed_precision.cast_root_forward_inputs:
            st.cast_inputs = True
        args, kwargs = st.pre_forward(args, kwargs)
        out = self._fsdp_wrapped_module(*args, **kwargs)
        return st.post_forward(out)

    # ***** gradient synchronisation *****
    @contextlib.contextmanager
    def no_sync(self):
        """Accumulate gradients locally (unsharded, so this costs memory): backward passes inside
        the context do not communicate; the first one after it reduces the sum."""
        root = self._lazy_init()
        old = root.sync
        root.sync = False
        try:
            yield
        finally:
            root.sync = old

    def clip_grad_norm_(self, max_norm, norm_type=2.0):
        """Clip the gradients of all units by their global norm (over every rank's shards, and
        over the tensor-parallel group for TP-split parameters).

        Args:
            max_norm: the largest allowed total norm.
            norm_type: p of the p-norm (``inf`` for the max norm).

        Returns:
            The total norm before clipping (a scalar Tensor, the same on every rank).
        """
        from ...nn.utils.clip_grad import clip_grad_norm_
        self._lazy_init()
        return clip_grad_norm_(list(self.parameters()), max_norm, norm_type)

    # ***** state dicts *****
    @staticmethod
    @contextlib.contextmanager
    def state_dict_type(module, state_dict_type, state_dict_config=None,
                        optim_state_dict_config=None):
        """Within the context, ``state_dict()``/``load_state_dict()`` of every FSDP module
        under ``module`` use ``state_dict_type``."""
        units = [m for m in module.modules() if isinstance(m, FullyShardedDataParallel)]
        old = [(m._state_dict_type, m._state_dict_config, m._optim_state_dict_config)
               for m in units]
        _set_state_dict_type(units, state_dict_type, state_dict_config, optim_state_dict_config)
        try:
            yield
        finally:
            for m, (t, c, o) in zip(units, old, strict=True):
                m.__dict__["_state_dict_type"] = t
                m.__dict__["_state_dict_config"] = c
                m.__dict__["_optim_state_dict_config"] = o

    @staticmethod
    def set_state_dict_type(module, state_dict_type, state_dict_config=None,
                            optim_state_dict_config=None):
        """Set the state dict type of every FSDP module under ``module`` (no context).

        Returns:
            The previous :class:`StateDictSettings`, as torch's does.
        """
        prev = FullyShardedDataParallel.get_state_dict_type(module)
        _set_state_dict_type([m for m in module.modules()
                              if isinstance(m, FullyShardedDataParallel)],
                             state_dict_type, state_dict_config, optim_state_dict_config)
        return prev

    @staticmethod
    def get_state_dict_type(module):
        """The state dict type and configs in force for the FSDP modules under ``module``.

        Args:
            module: an FSDP module, or a module containing some.

        Returns:
            A :class:`StateDictSettings`.

        Raises:
            ValueError: there is no FSDP module under ``module``.
        """
        units = [m for m in module.modules() if isinstance(m, FullyShardedDataParallel)]
        if not units:
            raise ValueError("get_state_dict_type: no FullyShardedDataParallel module under "
                             f"{type(module).__name__}")
        m = units[0]
        t = m._state_dict_type
        full = t == StateDictType.FULL_STATE_DICT
        cfg = m._state_dict_config or (FullStateDictConfig() if full else
                                       ShardedStateDictConfig())
        ocfg = m._optim_state_dict_config or (FullOptimStateDictConfig() if full else
                                              ShardedOptimStateDictConfig())
        return StateDictSettings(t, cfg, ocfg)

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """The model's state under the original parameter names (see ``state_dict_type``)."""
        return _state_dict.model_state_dict(self, prefix)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Load a full or sharded state dict (by ``state_dict_type``) into the shards."""
        return _state_dict.load_model_state_dict(self, state_dict, strict)

    @staticmethod
    def optim_state_dict(model, optim, optim_state_dict=None, group=None):
        """The optimizer's state keyed by original parameter names (full tensors under
        FULL_STATE_DICT, DTensor Shard(0) under SHARDED_STATE_DICT)."""
        return _state_dict.optim_state_dict(model, optim)

    @staticmethod
    def optim_state_dict_to_load(model, optim, optim_state_dict, is_named_optimizer=False,
                                 load_directly=False, group=None):
        """Turn an :meth:`optim_state_dict` result back into ``optim.load_state_dict`` input
        for this rank's shards."""
        out = _state_dict.optim_state_dict_to_load(model, optim, optim_state_dict)
        if load_directly:
            optim.load_state_dict(out)
        return out

    @staticmethod
    def rekey_optim_state_dict(optim_state_dict, optim_state_key_type, model, optim_input=None,
                               optim=None):
        """Re-key an optimizer state dict between parameter names and parameter IDs, as torch's:
        a :meth:`full_optim_state_dict` made loadable by a plain optimizer over the unwrapped
        model (``PARAM_ID``), or a plain optimizer's state dict keyed by names (``PARAM_NAME``).

        IDs are the parameters' positions in ``optim.param_groups`` (or in ``optim_input``, or
        in ``model.parameters()`` when neither is given); names are ``model``'s
        ``named_parameters()`` names. A state dict already keyed as asked is returned as is.

        Args:
            optim_state_dict: ``{"state": {...}, "param_groups": [...]}``.
            optim_state_key_type: an :class:`OptimStateKeyType`.
            model: the module whose parameters the state belongs to.
            optim_input: the optimizer's parameters or parameter groups (torch's deprecated
                argument), used when ``optim`` is None.
            optim: the optimizer whose parameter order gives the IDs.

        Returns:
            A new state dict (the per-parameter states are shared, not copied).

        Raises:
            ValueError: the state's keys mix names and IDs.
            AssertionError: ``optim_state_key_type`` is not an :class:`OptimStateKeyType`.
        """
        return _state_dict.rekey_optim_state_dict(optim_state_dict, optim_state_key_type, model,
                                                  optim_input, optim)

    @staticmethod
    def full_optim_state_dict(model, optim, optim_input=None, rank0_only=True, group=None):
        """The whole optimizer state keyed by parameter IDs (torch's deprecated FSDP1 API).

        The state of every flat parameter is gathered and split back into the original
        parameters, numbered ``0, 1, ...`` in the order of ``optim.param_groups`` (so a
        plain optimizer over the unwrapped model's ``parameters()`` loads it with
        ``load_state_dict``). A collective: call it on every rank.

        Args:
            model: the root FSDP module.
            optim: the optimizer over ``model.parameters()``.
            optim_input: must be None (torch's deprecated parameter list).
            rank0_only: only rank 0 gets the state; the other ranks get ``{}``.
            group: ignored (the units' own groups are used).

        Returns:
            ``{"state": {id: {name: Tensor}}, "param_groups": [{..., "params": [ids]}]}``.

        Raises:
            NotImplementedError: ``optim_input`` given.
        """
        if optim_input is not None:
            raise NotImplementedError("FSDP.full_optim_state_dict(optim_input=...) is not "
                                      "supported; pass the optimizer only")
        with FullyShardedDataParallel.state_dict_type(
                model, StateDictType.FULL_STATE_DICT, FullStateDictConfig(rank0_only=rank0_only),
                FullOptimStateDictConfig(rank0_only=rank0_only)):
            osd = _state_dict.optim_state_dict(model, optim)
        if not osd:
            return {}
        ids: dict = {}
        groups = []
        for g in osd["param_groups"]:
            groups.append({**g, "params": [ids.setdefault(n, len(ids)) for n in g["params"]]})
        return {"state": {ids[n]: st for n, st in osd["state"].items()}, "param_groups": groups}

    @staticmethod
    def shard_full_optim_state_dict(full_optim_state_dict, model, optim_input=None, optim=None):
        """This rank's part of a :meth:`full_optim_state_dict` result, for
        ``optim.load_state_dict`` (torch's deprecated FSDP1 API).

        Args:
            full_optim_state_dict: the ID-keyed state (on every rank that calls this).
            model: the root FSDP module.
            optim_input: must be None.
            optim: the FSDP model's optimizer (required here: its parameter groups give the
                order of the IDs).

        Returns:
            The state dict to pass to ``optim.load_state_dict``.

        Raises:
            NotImplementedError: ``optim_input`` given.
            ValueError: ``optim`` missing, or the IDs do not match its parameters.
        """
        if optim_input is not None:
            raise NotImplementedError("FSDP.shard_full_optim_state_dict(optim_input=...) is not "
                                      "supported; pass optim=")
        if optim is None:
            raise ValueError("FSDP.shard_full_optim_state_dict: pass optim= (the FSDP model's "
                             "optimizer); TensorBrain orders the parameter IDs by its groups")
        names = [n for g in _state_dict.optim_group_fqns(model, optim) for n in g]
        full = full_optim_state_dict
        n_ids = sum(len(g["params"]) for g in full["param_groups"])
        if n_ids != len(names):
            raise ValueError(f"FSDP.shard_full_optim_state_dict: the state has {n_ids} "
                             f"parameter IDs, the optimizer's groups hold {len(names)} "
                             f"original parameters")
        by_name = {"state": {names[int(i)]: st for i, st in full["state"].items()},
                   "param_groups": [{**g, "params": [names[int(i)] for i in g["params"]]}
                                    for g in full["param_groups"]]}
        return _state_dict.optim_state_dict_to_load(model, optim, by_name)

    @staticmethod
    def scatter_full_optim_state_dict(full_optim_state_dict, model, optim_input=None, optim=None,
                                      group=None):
        """As :meth:`shard_full_optim_state_dict`, with the full state given on rank 0 only
        (the other ranks pass None; rank 0 broadcasts it). A collective.

        Args:
            full_optim_state_dict: the ID-keyed state on rank 0, anything on the others.
            model: the root FSDP module.
            optim_input: must be None.
            optim: the FSDP model's optimizer (required).
            group: the group to broadcast over (default: the world).

        Returns:
            The state dict to pass to ``optim.load_state_dict``.
        """
        box = [full_optim_state_dict if c10d.get_rank() == 0 else None]
        c10d.broadcast_object_list(box, src=0, group=group)
        return FullyShardedDataParallel.shard_full_optim_state_dict(box[0], model, optim_input,
                                                                    optim)

    @staticmethod
    @contextlib.contextmanager
    def summon_full_params(module, recurse=True, writeback=True, rank0_only=False,
                           offload_to_cpu=False, with_grads=False):
        """Within the context the module's parameters are whole (and, with ``writeback``, edits
        to them are copied back into the shards at exit)."""
        units = [m for m in module.modules() if isinstance(m, FullyShardedDataParallel)]
        if units:
            units[0]._lazy_init()
        with _state_dict.full_params(units, writeback):
            yield

    @staticmethod
    def fsdp_modules(module, root_only=False):
        """The FSDP modules under ``module`` (only the outermost with ``root_only``)."""
        mods = [m for m in module.modules() if isinstance(m, FullyShardedDataParallel)]
        if root_only:
            mods = [m for m in mods if not any(m is not o and m in list(o.modules())
                                               for o in mods)]
        return mods

    def extra_repr(self) -> str:
        return f"sharding_strategy={self.sharding_strategy.name}"


def _set_state_dict_type(units, state_dict_type, state_dict_config, optim_state_dict_config):
    if state_dict_type == StateDictType.LOCAL_STATE_DICT:
        raise NotImplementedError("StateDictType.LOCAL_STATE_DICT is not supported; use "
                                  "FULL_STATE_DICT or SHARDED_STATE_DICT")
    for m in units:
        m.__dict__["_state_dict_type"] = state_dict_type
        m.__dict__["_state_dict_config"] = state_dict_config
        m.__dict__["_optim_state_dict_config"] = optim_state_dict_config
