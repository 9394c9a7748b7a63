"""FSDP over tensor-parallel parameters (torch's 2-D parallel recipe).

After ``parallelize_module(model, mesh["tp"], plan)`` some parameters are DTensors on the 1-D
tensor-parallel mesh. FSDP (``fully_shard(model, mesh=mesh["dp"])`` or ``FSDP(model,
device_mesh=mesh["dp"])``) then shards each such parameter's *local* TP shard over the
data-parallel group, exactly as it shards a plain parameter, and gives the result back on the
2-D ``(dp, tp)`` mesh:

* TP ``Shard(0)`` (a ColwiseParallel weight or bias) -> ``(_StridedShard(0, sf=tp), Shard(0))``:
  FSDP cuts rows of the TP shard, not of the whole tensor (torch names this layout the same way);
* TP ``Shard(1)`` (a RowwiseParallel weight) -> ``(Shard(0), Shard(1))``;
* TP ``Replicate()`` (a RowwiseParallel bias) -> ``(Shard(0), Replicate())``.

The module's forward still sees plain local tensors (the TP styles compute on local shards), so
FSDP's gather / reduce-scatter machinery is unchanged; this module only checks the parameters,
builds the 2-D mesh and the placements, and converts state-dict values.
"""
from __future__ import annotations

import numpy as np

from ...tensor import Tensor
from .. import distributed_c10d as c10d

_MESHES: dict = {}   # (id(dp group), tp mesh) -> (dp group, 2-D mesh): built once, collectively


def check_param(fqn: str, p, what: str):
    """The DTensorSpec of a DTensor parameter FSDP can shard (1-D mesh, Shard/Replicate)."""
    spec = p._spec
    if spec.mesh.ndim != 1:
        raise NotImplementedError(
            f"{what}: parameter '{fqn}' is a DTensor on a {spec.mesh.ndim}-D mesh "
            f"{spec.mesh}; FSDP shards DTensor parameters of a 1-D (tensor-parallel) mesh "
            f"only: apply parallelize_module with mesh['tp'] and FSDP with mesh['dp'], each "
            f"module once")
    for pl in spec.placements:
        if pl.is_partial():
            raise ValueError(
                f"{what}: parameter '{fqn}' is a DTensor with placement {pl}; FSDP cannot shard "
                f"a Partial parameter (its value is a pending sum). Redistribute it to "
                f"Replicate() or Shard(d) before wrapping (p = nn.Parameter("
                f"p.redistribute(placements=[Replicate()])))")
    return spec


def mesh_2d(dp_group, tp_mesh, what: str):
    """The ``(dp, tp)`` DeviceMesh whose dimension 0 is ``dp_group`` and dimension 1
    ``tp_mesh``. Collective over ``dp_group`` the first time (each rank tells its TP ranks)."""
    from ..device_mesh import DeviceMesh
    key = (id(dp_group), tp_mesh)
    if key in _MESHES:
        return _MESHES[key][1]
    dp_ranks = c10d.get_process_group_ranks(dp_group)
    tp_ranks = [int(r) for r in tp_mesh._mesh.reshape(-1)]
    mine = Tensor._wrap(np.asarray(tp_ranks, dtype=np.int64))
    out = Tensor._wrap(np.empty(len(dp_ranks) * len(tp_ranks), dtype=np.int64))
    c10d.all_gather_into_tensor(out, mine, group=dp_group)
    grid = out._data.reshape(len(dp_ranks), len(tp_ranks))
    me, t = c10d.get_rank(), tp_mesh.get_local_rank()
    flat = grid.reshape(-1).tolist()
    if len(set(flat)) != len(flat) or grid[:, t].tolist() != list(dp_ranks) or \
            grid[dp_ranks.index(me)].tolist() != tp_ranks:
        raise ValueError(
            f"{what}: the data-parallel group {list(dp_ranks)} and the tensor-parallel mesh "
            f"{tp_ranks} of rank {me} are not the two dimensions of one mesh (the ranks' TP "
            f"meshes form {grid.tolist()}); build both from one mesh = init_device_mesh('cpu', "
            f"(dp, tp), mesh_dim_names=('dp', 'tp')) and pass mesh['tp'] and mesh['dp']")
    names = ("dp", tp_mesh.mesh_dim_names[0] if tp_mesh.mesh_dim_names else "tp")
    if names[0] == names[1]:
        names = ("dp", "tp")
    mesh = DeviceMesh(tp_mesh.device_type, grid, mesh_dim_names=names,
                      _groups=[dp_group, tp_mesh.get_group(0)])
    _MESHES[key] = (dp_group, mesh)
    return mesh


def placements_2d(tp_spec, dp_size: int, sharded: bool, ndim: int) -> tuple:
    """The ``(dp, tp)`` placements of a TP parameter whose local rows FSDP shards."""
    from ..tensor import Replicate, Shard
    from ..tensor.placement_types import _StridedShard
    tp = tp_spec.placements[0]
    if not sharded or ndim == 0:
        return (Replicate(), tp)
    if tp.is_shard(0):
        return (_StridedShard(0, split_factor=tp_spec.mesh.size()), tp)
    return (Shard(0), tp)


def tp_local(tp_spec, value, key: str):
    """A state-dict value for a TP parameter as this rank's TP-local array: a DTensor in the
    TP layout gives its local data, any other DTensor or a whole tensor is cut to the shard."""
    from ..tensor import DTensor
    from ..tensor._redistribute import local_offset, local_shape
    gshape = tuple(tp_spec.shape)
    if isinstance(value, DTensor):
        if value._spec.mesh == tp_spec.mesh and value.placements == tp_spec.placements:
            return value._data
        value = value.full_tensor()
    arr = value._data if isinstance(value, Tensor) else np.asarray(value)
    if tuple(arr.shape) != gshape:
        raise RuntimeError(f"FSDP load_state_dict: '{key}' has shape {tuple(arr.shape)} in the "
                           f"state dict but the tensor-parallel parameter's global shape is "
                           f"{gshape}")
    off = local_offset(gshape, tp_spec.mesh, tp_spec.placements)
    shape = local_shape(gshape, tp_spec.mesh, tp_spec.placements)
    return arr[tuple(slice(o, o + s) for o, s in zip(off, shape, strict=True))]


def as_dtensor(spec, local):
    """``local`` as a DTensor of ``spec`` (no communication)."""
    from ..tensor import DTensor
    return DTensor._make(local, spec)


def attach(handle, what: str) -> None:
    """Give ``handle.tp_specs``: for each entry of a TP parameter, the DTensorSpec of its FSDP
    shard on the 2-D ``(dp, tp)`` mesh (an empty dict when the unit has no TP parameter)."""
    from ..tensor._dtensor_spec import DTensorSpec
    handle.tp_specs = {}
    tp_entries = [e for e in handle.entries if e.tp_spec is not None]
    if not tp_entries:
        return
    if handle.shard_group is not None and handle.replicate_group is not None:
        raise NotImplementedError(
            f"{what}: tensor-parallel parameters {[e.fqn for e in tp_entries][:4]} under hybrid "
            f"sharding (a 2-D FSDP mesh) would need a 3-D mesh, which is not supported yet; "
            f"use a 1-D data-parallel mesh (mesh['dp']) with FULL_SHARD / fully_shard")
    sharded = handle.shard_group is not None
    dp_group = handle.shard_group if sharded else handle.replicate_group
    if dp_group is None:
        dp_group = c10d._default(what)
    for e in tp_entries:
        mesh = mesh_2d(dp_group, e.tp_spec.mesh, what)
        pl = placements_2d(e.tp_spec, mesh.size(0), sharded, len(e.shape))
        handle.tp_specs[id(e)] = DTensorSpec(mesh, pl, e.tp_spec.shape)


def norm_groups(handle, e) -> tuple:
    """The process groups entry ``e``'s local gradient is one shard of (for the global norm in
    ``clip_grad_norm_``): FSDP's shard group, and the TP group when TP splits it."""
    groups = [handle.shard_group] if handle.shard_group is not None and handle.W > 1 else []
    tp = e.tp_spec
    if tp is not None and tp.placements[0].is_shard() and tp.mesh.size() > 1:
        groups.append(tp.mesh.get_group(0))
    return tuple(groups)
