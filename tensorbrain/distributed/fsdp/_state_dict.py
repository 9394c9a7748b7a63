"""FSDP state dicts: the model's and the optimizer's, full or sharded, under original names.

Every function here is collective over the units' groups (each unit all-gathers its shard once
per tensor kind), and iterates units in one fixed order, so every rank issues the same
collectives.
"""
from __future__ import annotations

import contextlib
import copy

import numpy as np

from ... import _xp
from ...tensor import Tensor
from .api import FullOptimStateDictConfig, FullStateDictConfig, OptimStateKeyType, StateDictType

_MESHES: dict = {}


# wrapper modules that do not appear in state-dict keys (torch's clean_tensor_name)
_WRAPPER_NAMES = ("_fsdp_wrapped_module", "_checkpoint_wrapped_module")


def clean_name(name: str) -> str:
    """``name`` without FSDP's and checkpointing's wrapper modules (torch's clean_tensor_name)."""
    return ".".join(p for p in name.split(".") if p not in _WRAPPER_NAMES)


def _units(model):
    """The FSDP units inside ``model``, in module order (the root's units under it)."""
    root = model._lazy_init()
    inside = {id(m.__dict__.get("_fsdp_state")) for m in model.modules()}
    return [u for u in root.units if id(u) in inside]


def _key(prefix, unit, fqn):
    return prefix + (unit.name + "." if unit.name else "") + clean_name(fqn)


def _mesh(h):
    from ..device_mesh import DeviceMesh
    group = h.shard_group if h.shard_group is not None else h.replicate_group
    if id(group) not in _MESHES:
        _MESHES[id(group)] = (group, DeviceMesh.from_group(group, "cpu"))
    return _MESHES[id(group)][1]


def _as_dtensor(h, full_param):
    """A parameter-shaped full array as this rank's DTensor Shard(0) (Replicate for scalars)."""
    from ..tensor import DTensor, Replicate, Shard
    from ..tensor._redistribute import take_chunk
    mesh = _mesh(h)
    if full_param.ndim == 0:
        return DTensor.from_local(Tensor._wrap(full_param.copy()), mesh, [Replicate()])
    local = take_chunk(full_param, 0, mesh.size(), mesh.get_local_rank())
    return DTensor.from_local(Tensor._wrap(local), mesh, [Shard(0)], shape=full_param.shape)


def _tp_out(h, e, arr, sharded: bool):
    """A tensor-parallel parameter's (or its optimizer state's) TP-local array for a state
    dict: a DTensor on the TP mesh (full state dict, as torch's FSDP1 gives it) or its FSDP
    shard on the 2-D ``(dp, tp)`` mesh (sharded state dict)."""
    from ._tp import as_dtensor
    if not sharded:
        return as_dtensor(e.tp_spec, arr.copy())
    from ..tensor._redistribute import take_chunk
    spec = h.tp_specs[id(e)]
    split = arr.ndim > 0 and spec.placements[0].is_shard()
    local = take_chunk(arr, 0, h.W, h.rank) if split else arr.copy()
    return as_dtensor(spec, local)


def _value_in(e, v, key):
    """A state-dict value as the array FSDP holds for entry ``e`` (TP-local for a TP one)."""
    if getattr(e, "tp_spec", None) is not None:
        from ._tp import tp_local
        return tp_local(e.tp_spec, v, key)
    return _full_value(v)


def _full_value(v):
    """A state-dict value as a full array (DTensors are all-gathered)."""
    from ..tensor import DTensor
    if isinstance(v, DTensor):
        return v.full_tensor()._data
    return v._data if isinstance(v, Tensor) else np.asarray(v)


def _managed(units):
    ids = set()
    for u in units:
        if u.handle is None:
            continue
        if u.flat_param is not None:
            ids.add(id(u.flat_param))
        ids.update(id(e.orig) for e in u.handle.entries if e.orig is not None)
    return ids


def _others(model, units, prefix):
    """Parameters FSDP does not manage (ignored modules) and buffers, by clean name."""
    managed = _managed(units)
    out = {}
    for name, p in model.named_parameters():
        if id(p) not in managed and not name.endswith("_flat_param"):
            out[prefix + clean_name(name)] = p
    for name, b in model.named_buffers():
        out[prefix + clean_name(name)] = b
    return out


# ***** model *****
def model_state_dict(model, prefix=""):
    kind = model._state_dict_type
    cfg = model._state_dict_config
    units = _units(model)
    rank0_only = kind == StateDictType.FULL_STATE_DICT and isinstance(cfg, FullStateDictConfig) \
        and cfg.rank0_only
    to_cpu = cfg is not None and getattr(cfg, "offload_to_cpu", False)
    from .. import distributed_c10d as c10d
    keep = not rank0_only or c10d.get_rank() == 0
    out = {}
    for u in units:
        h = u.handle
        if h is None:
            continue
        full = h.gather_full_flat(h.shard)
        for e in h.entries:
            arr = full[e.offset:e.offset + e.numel].reshape(e.shape)
            if e.tp_spec is not None:
                if keep or kind == StateDictType.SHARDED_STATE_DICT:
                    out[_key(prefix, u, e.fqn)] = _tp_out(
                        h, e, arr, kind == StateDictType.SHARDED_STATE_DICT)
            elif kind == StateDictType.SHARDED_STATE_DICT:
                out[_key(prefix, u, e.fqn)] = _as_dtensor(h, arr)
            elif keep:
                arr = _xp.to_numpy(arr) if to_cpu else arr
                out[_key(prefix, u, e.fqn)] = Tensor._wrap(arr.copy())
    if not keep:
        return {}
    for k, v in _others(model, units, prefix).items():
        out[k] = Tensor._wrap(v._data.copy())
    return dict(sorted(out.items(), key=lambda kv: _order(model, kv[0], prefix)))


def _order(model, key, prefix):
    """Keys in the plain model's order: parameters and buffers of each module, depth first."""
    cache = model.__dict__.setdefault("_fsdp_key_order", {})
    if not cache:
        i = 0
        for mname, mod in model.named_modules():
            base = clean_name(mname)
            base = base + "." if base else ""
            names = [e.attr for e in _entries_of(model, mod)] + list(mod._parameters) + \
                list(mod._buffers)
            for n in names:
                cache.setdefault(base + n, i)
                i += 1
    return cache.get(key[len(prefix):], len(cache))


def _entries_of(model, mod):
    root = model._root_state
    out: list = []
    for u in root.units:
        if u.handle is not None:
            out.extend(e for e in u.handle.entries if e.module is mod)
    return out


def load_model_state_dict(model, state_dict, strict=True):
    from ...nn.modules.module import _IncompatibleKeys
    units = _units(model)
    missing, used = [], set()
    for u in units:
        h = u.handle
        if h is None:
            continue
        full = h.gather_full_flat(h.shard).astype(h.dtype, copy=False)
        for e in h.entries:
            k = _key("", u, e.fqn)
            if k not in state_dict:
                missing.append(k)
                continue
            used.add(k)
            v = _value_in(e, state_dict[k], k)
            if tuple(v.shape) != e.shape:
                raise RuntimeError(f"FSDP load_state_dict: '{k}' has shape {tuple(v.shape)} in "
                                   f"the state dict but {e.shape} in the model")
            xp = _xp.get_array_module(full)
            full[e.offset:e.offset + e.numel] = xp.asarray(v).reshape(-1)
        h.shard[...] = h.shard_of_full(full)
        h.reshard()
    for k, t in _others(model, units, "").items():
        if k in state_dict:
            used.add(k)
            t._data[...] = _full_value(state_dict[k])
        else:
            missing.append(k)
    unexpected = [k for k in state_dict if k not in used]
    if strict and (missing or unexpected):
        raise RuntimeError(f"FSDP load_state_dict: missing keys {missing}, unexpected keys "
                           f"{unexpected}")
    return _IncompatibleKeys(missing, unexpected)


@contextlib.contextmanager
def full_params(fsdp_modules, writeback):
    units = [m._fsdp_state for m in fsdp_modules if m._fsdp_state.handle is not None]
    for u in units:
        u._unshard()
        u.install()
    try:
        yield
    finally:
        for u in units:
            h = u.handle
            if writeback:
                h.shard[...] = h.shard_of_full(h.full.astype(h.dtype, copy=False))
            h.reshard()
            u.uninstall()


# ***** optimizer *****
def _param_owner(units):
    """id(optimizer param) -> (unit, entry or None for a whole flat parameter)."""
    owner = {}
    for u in units:
        if u.handle is None:
            continue
        if u.flat_param is not None:
            owner[id(u.flat_param)] = (u, None)
        else:
            for e in u.handle.entries:
                owner[id(e.orig)] = (u, e)
    return owner


def _unit_state_shard(u, per_param, key):
    """One unit's shard-shaped array of state ``key`` (flat param, or gathered from the
    original parameters' slices)."""
    h = u.handle
    if u.flat_param is not None:
        return per_param[id(u.flat_param)][key]
    xp = _xp.get_array_module(h.shard)
    out = xp.zeros(h.shard_numel, dtype=h.dtype)
    for e in h.entries:
        st = per_param.get(id(e.orig))
        if st is not None and key in st:
            lo, hi = h.local_slice(e)
            out[lo:hi] = xp.asarray(st[key]).reshape(-1)
    return out


def _group_fqns(optim, owner, names, other) -> list:
    """Each param group's original parameter names, in the group's order (a flat parameter
    expands to its unit's names)."""
    out = []
    for g in optim.param_groups:
        fqns: list[str] = []
        for p in g["params"]:
            if id(p) in owner:
                u, e = owner[id(p)]
                fqns.extend(names[id(u)] if e is None else [_key("", u, e.fqn)])
            elif id(p) in other:
                fqns.append(other[id(p)])
        out.append(fqns)
    return out


def optim_group_fqns(model, optim) -> list:
    """The original parameter names of each of ``optim``'s groups over the FSDP ``model``."""
    units = _units(model)
    owner = _param_owner(units)
    names: dict = {}
    for u in units:
        for e in (u.handle.entries if u.handle is not None else ()):
            names.setdefault(id(u), []).append(_key("", u, e.fqn))
    other = {id(p): k for k, p in _others(model, units, "").items()}
    return _group_fqns(optim, owner, names, other)


def optim_state_dict(model, optim):
    units = _units(model)
    kind = model._state_dict_type
    cfg = model._optim_state_dict_config
    from .. import distributed_c10d as c10d
    rank0_only = isinstance(cfg, FullOptimStateDictConfig) and cfg.rank0_only
    owner = _param_owner(units)
    per_param = {id(p): st for p, st in optim.state.items()}
    names: dict = {}
    for u in units:
        for e in (u.handle.entries if u.handle is not None else ()):
            names.setdefault(id(u), []).append(_key("", u, e.fqn))
    state: dict = {}
    for u in units:
        h = u.handle
        if h is None:
            continue
        mine = [pid for pid, (uu, _) in owner.items() if uu is u and pid in per_param]
        if not mine:
            continue
        sample = per_param[mine[0]]
        for key in sorted(sample):
            v = sample[key]
            if key.startswith("_"):
                continue
            if hasattr(v, "shape") and getattr(v, "ndim", 0) > 0:
                full = h.gather_full_flat(_unit_state_shard(u, per_param, key))
                for e in h.entries:
                    arr = full[e.offset:e.offset + e.numel].reshape(e.shape)
                    sharded = kind == StateDictType.SHARDED_STATE_DICT
                    if e.tp_spec is not None:
                        val = _tp_out(h, e, arr, sharded)
                    else:
                        val = _as_dtensor(h, arr) if sharded \
                            else Tensor._wrap(_xp.to_numpy(arr).copy())
                    state.setdefault(_key("", u, e.fqn), {})[key] = val
            else:
                for e in h.entries:
                    state.setdefault(_key("", u, e.fqn), {})[key] = \
                        Tensor._wrap(v.copy()) if hasattr(v, "shape") else v
    other = {id(p): k for k, p in _others(model, units, "").items()}
    for p, st in optim.state.items():
        if id(p) in other:
            state[other[id(p)]] = {k: (Tensor._wrap(v.copy()) if hasattr(v, "shape") else v)
                                   for k, v in st.items() if not k.startswith("_")}
    groups = []
    for g, fqns in zip(optim.param_groups, _group_fqns(optim, owner, names, other), strict=True):
        packed = {k: v for k, v in g.items() if k != "params"}
        packed["params"] = fqns
        groups.append(packed)
    if rank0_only and c10d.get_rank() != 0:
        return {}
    return {"state": state, "param_groups": groups}


def optim_state_dict_to_load(model, optim, osd):
    units = _units(model)
    owner = _param_owner(units)
    other = {id(p): k for k, p in _others(model, units, "").items()}
    saved = osd["state"]
    index: dict = {}
    out_state: dict = {}
    for g in optim.param_groups:
        for p in g["params"]:
            index.setdefault(id(p), len(index))
    for u in units:
        h = u.handle
        if h is None:
            continue
        keys = [_key("", u, e.fqn) for e in h.entries]
        present = [k for k in keys if k in saved]
        if not present:
            continue
        first = saved[present[0]]
        for key in sorted(first):
            v0 = first[key]
            tensor_like = isinstance(v0, Tensor) and v0.ndim > 0 or \
                (hasattr(v0, "shape") and getattr(v0, "ndim", 0) > 0)
            if tensor_like:
                xp = _xp.get_array_module(h.shard)
                full = xp.zeros(h.padded, dtype=h.dtype)
                for e, k in zip(h.entries, keys, strict=True):
                    if k in saved and key in saved[k]:
                        full[e.offset:e.offset + e.numel] = xp.asarray(
                            _value_in(e, saved[k][key], k)).reshape(-1)
                shard = h.shard_of_full(full)
                if u.flat_param is not None:
                    out_state.setdefault(index[id(u.flat_param)], {})[key] = shard
                else:
                    for e in h.entries:
                        lo, hi = h.local_slice(e)
                        out_state.setdefault(index[id(e.orig)], {})[key] = \
                            shard[lo:hi].reshape(e.orig._data.shape).copy()
            else:
                val = v0._data.copy() if isinstance(v0, Tensor) else v0
                targets = [u.flat_param] if u.flat_param is not None else \
                    [e.orig for e in h.entries]
                for p in targets:
                    out_state.setdefault(index[id(p)], {})[key] = val
    for pid, k in other.items():
        if k in saved and pid in index:
            out_state[index[pid]] = {kk: (_full_value(v) if hasattr(v, "shape") else v)
                                     for kk, v in saved[k].items()}
    groups = []
    for mine, theirs in zip(optim.param_groups, osd["param_groups"], strict=False):
        packed = {k: v for k, v in theirs.items() if k != "params"}
        packed["params"] = [index[id(p)] for p in mine["params"]]
        groups.append(packed)
    del owner
    return {"state": out_state, "param_groups": groups}


def rekey_optim_state_dict(optim_state_dict, optim_state_key_type, model, optim_input, optim):
    """``FullyShardedDataParallel.rekey_optim_state_dict`` (documented there)."""
    if optim_state_key_type not in (OptimStateKeyType.PARAM_NAME, OptimStateKeyType.PARAM_ID):
        raise AssertionError(f"Expected optim_state_key_type to be PARAM_NAME or PARAM_ID, "
                             f"got {optim_state_key_type}")
    osd = optim_state_dict
    kinds = {type(k) for k in osd["state"]}
    if len(kinds) > 1 or kinds - {str, int}:
        raise ValueError(f"Invalid parameter keys: {osd['state'].keys()}")
    want = str if optim_state_key_type == OptimStateKeyType.PARAM_NAME else int
    if kinds == {want}:
        return osd
    if optim is not None:
        order = [p for g in optim.param_groups for p in g["params"]]
    elif optim_input is not None:
        items = list(optim_input)
        order = ([p for g in items for p in g["params"]] if items and isinstance(items[0], dict)
                 else items)
    else:
        order = list(model.parameters())
    pid = {id(p): i for i, p in enumerate(order)}
    name_to_id = {n: pid[id(p)] for n, p in model.named_parameters() if id(p) in pid}
    key = (name_to_id if want is int else {i: n for n, i in name_to_id.items()})
    new = {"state": {key[k]: v for k, v in osd["state"].items()},
           "param_groups": copy.deepcopy(osd["param_groups"])}
    for group in new["param_groups"]:
        group["params"] = sorted(key[k] for k in group["params"])
    return new
