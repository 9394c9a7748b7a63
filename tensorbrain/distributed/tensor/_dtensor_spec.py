"""``DTensorSpec`` (a DTensor's mesh, placements, global shape and stride; torch's
``torch.distributed.tensor._dtensor_spec``) and the checks of the mesh and placements arguments
that every way of making a DTensor runs (``from_local``, ``distribute_tensor``, the factories).
"""
from __future__ import annotations

from .placement_types import Placement, Replicate, Shard, _StridedShard


class DTensorSpec:
    """What a DTensor knows besides its local data: mesh, placements, global shape and stride."""

    __slots__ = ("mesh", "placements", "shape", "stride")

    def __init__(self, mesh, placements, shape, stride=None):
        self.mesh, self.placements, self.shape = mesh, tuple(placements), tuple(shape)
        self.stride = tuple(stride) if stride is not None else _contiguous_stride(self.shape)

    def __eq__(self, other) -> bool:
        return (isinstance(other, DTensorSpec) and self.mesh == other.mesh
                and self.placements == other.placements and self.shape == other.shape)

    __hash__ = None  # type: ignore[assignment]  # (equal specs, not one object)

    def __repr__(self) -> str:
        return f"DTensorSpec(placements={self.placements}, shape={self.shape})"


def _contiguous_stride(shape) -> tuple:
    stride, acc = [], 1
    for n in reversed(shape):
        stride.append(acc)
        acc *= max(int(n), 1)
    return tuple(reversed(stride))


def _placements(mesh, placements, ndim: int, what: str) -> tuple:
    """Placements as a tuple, one per mesh dimension, with Shard dims made non-negative."""
    if placements is None:
        return (Replicate(),) * mesh.ndim
    out = []
    for p in placements:
        if not isinstance(p, Placement):
            raise TypeError(f"{what}: placements must be Shard/Replicate/Partial, got {p!r}")
        if isinstance(p, Shard):
            if not -ndim <= p.dim < max(ndim, 1):
                raise ValueError(f"{what}: {p} is out of range for a {ndim}-D tensor")
            p = _StridedShard(p.dim % ndim, p.split_factor) if isinstance(p, _StridedShard) \
                else Shard(p.dim % ndim)
        out.append(p)
    if len(out) != mesh.ndim:
        raise ValueError(f"{what}: got {len(out)} placements {tuple(out)} for a {mesh.ndim}-D "
                         f"mesh; give one per mesh dimension")
    return tuple(out)


def _check_mesh(mesh, what: str):
    from ..device_mesh import DeviceMesh
    if not isinstance(mesh, DeviceMesh):
        raise TypeError(f"{what}: device_mesh must be a DeviceMesh (see init_device_mesh), "
                        f"got {type(mesh).__name__}")
    if mesh.get_coordinate() is None:
        from .. import distributed_c10d as c10d
        raise RuntimeError(f"{what}: rank {c10d.get_rank()} is not in the mesh {mesh}")
    return mesh
