"""``DeviceMesh``: ranks laid out as an N-D grid, one process group per grid dimension (torch's
``torch.distributed.device_mesh``).

A mesh of shape ``(2, 4)`` over 8 ranks puts ranks ``0..7`` in row-major order; dimension 0 groups
the ranks of each column (``{0, 4}``, ``{1, 5}``, ...), dimension 1 the ranks of each row. FSDP's
``HYBRID_SHARD``, tensor parallel and pipeline x data parallel all ask the mesh for "my group along
dimension ``d``". Every rank of the default group creates every sub-group in the same order (as
``new_group`` requires); a dimension that spans the whole world reuses the default group.

>>> import tensorbrain.distributed as dist
>>> from tensorbrain.distributed.device_mesh import init_device_mesh
>>> dist.init_process_group("tcp", store=dist.HashStore(), rank=0, world_size=1)
>>> mesh = init_device_mesh("cpu", (1,), mesh_dim_names=("dp",))
>>> mesh["dp"].size(), mesh.get_local_rank("dp")
(1, 0)
>>> dist.destroy_process_group()
"""
from __future__ import annotations

import math

import numpy as np

from . import distributed_c10d as c10d

__all__ = ["DeviceMesh", "init_device_mesh"]

_DEVICE_TYPES = ("cpu", "cuda")


def _world(device_type: str, who: str) -> int:
    """The default group's size, after forming that group from the environment (``env://``:
    ``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``, as tbrun/torchrun set them) with
    the device type's default backend when none exists yet, as torch's DeviceMesh does."""
    if not c10d.is_initialized():
        from . import get_default_backend_for_device
        c10d.init_process_group(backend=get_default_backend_for_device(device_type))
    return c10d._default(who).size()


def _dim_groups(mesh: np.ndarray) -> list:
    """For each dimension, every group of ranks along it (other coordinates fixed), in a fixed
    order every rank computes identically."""
    out = []
    for d in range(mesh.ndim):
        moved = np.moveaxis(mesh, d, -1).reshape(-1, mesh.shape[d])
        out.append([[int(r) for r in row] for row in moved])
    return out


class DeviceMesh:
    """An N-D grid of global ranks with one process group per dimension.

    Build it with :func:`init_device_mesh` (which also checks the world size), or directly from a
    nested list of ranks; either way every rank of the default group must construct the same mesh
    in the same order, because it creates process groups.

    Args:
        device_type (str): ``"cpu"`` or ``"cuda"``: the device the mesh's tensors live on.
        mesh (list | np.ndarray | Tensor): nested list/array (or Tensor) of distinct global
            ranks.
        mesh_dim_names (tuple[str, ...] | None): optional name per dimension (``("dp", "tp")``)
            for ``mesh["dp"]``.

    Raises:
        ValueError: unknown device type, ranks repeated or out of range, wrong number of names.
        DistError: there is no default group and none can be formed from the environment.

    Example:
        >>> mesh = DeviceMesh("cpu", [[0, 1], [2, 3]], mesh_dim_names=("dp", "tp"))  # doctest: +SKIP
        >>> mesh.get_group("tp")                                                       # doctest: +SKIP
    """

    def __init__(self, device_type: str, mesh, *, mesh_dim_names=None, _groups=None):
        self.device_type = _check_device(device_type)
        arr = np.asarray(mesh.numpy() if hasattr(mesh, "numpy") else mesh, dtype=np.int64)
        if arr.ndim == 0:
            arr = arr.reshape(1)
        world = _world(self.device_type, "DeviceMesh")
        flat = arr.reshape(-1).tolist()
        if len(set(flat)) != len(flat) or any(not 0 <= r < world for r in flat):
            raise ValueError(f"DeviceMesh: ranks must be distinct and in 0..{world - 1}, got "
                             f"{arr.tolist()}")
        names = None if mesh_dim_names is None else tuple(str(n) for n in mesh_dim_names)
        if names is not None and (len(names) != arr.ndim or len(set(names)) != len(names)):
            raise ValueError(f"DeviceMesh: mesh_dim_names={names} must give {arr.ndim} distinct "
                             f"names, one per dimension of a mesh of shape {arr.shape}")
        self._mesh, self.mesh_dim_names = arr, names
        self._groups = list(_groups) if _groups is not None else self._make_groups()

    def _make_groups(self) -> list:
        me, world = c10d.get_rank(), c10d.get_world_size()
        mine = []
        for groups in _dim_groups(self._mesh):
            chosen = None
            for ranks in groups:
                if sorted(ranks) == list(range(world)):
                    pg = c10d._default("DeviceMesh")   # torch reuses the world group too
                else:
                    pg = c10d.new_group(ranks)
                if me in ranks:
                    chosen = pg
            mine.append(chosen)  # None: this rank is outside the mesh
        return mine

    # ***** shape *****
    @property
    def mesh(self):
        """The ranks as an int64 Tensor of the mesh's shape."""
        from ..tensor import tensor
        return tensor(self._mesh.copy())

    @property
    def ndim(self) -> int:
        """Number of mesh dimensions."""
        return self._mesh.ndim

    @property
    def shape(self) -> tuple:
        """The mesh's shape."""
        return tuple(self._mesh.shape)

    def size(self, mesh_dim=None) -> int:
        """Number of ranks along ``mesh_dim`` (int or name), or in the whole mesh when None.

        Args:
            mesh_dim: a dimension index or name, or None for the whole mesh.
        """
        if mesh_dim is None:
            return int(self._mesh.size)
        return int(self._mesh.shape[self._dim(mesh_dim)])

    def _dim(self, mesh_dim) -> int:
        if isinstance(mesh_dim, str):
            if not self.mesh_dim_names or mesh_dim not in self.mesh_dim_names:
                raise KeyError(f"DeviceMesh: no dimension named {mesh_dim!r}; the mesh's names "
                               f"are {self.mesh_dim_names}")
            return self.mesh_dim_names.index(mesh_dim)
        d = int(mesh_dim)
        if not -self.ndim <= d < self.ndim:
            raise IndexError(f"DeviceMesh: dimension {mesh_dim} is out of range for a "
                             f"{self.ndim}-D mesh")
        return d % self.ndim

    # ***** groups and coordinates *****
    def get_group(self, mesh_dim=None):
        """The process group of this rank along ``mesh_dim`` (required unless the mesh is 1-D).

        Args:
            mesh_dim: a dimension index or name (may be None for a 1-D mesh).

        Raises:
            RuntimeError: ``mesh_dim`` is None on a mesh of more than one dimension, or this rank
                is not in the mesh.
        """
        if mesh_dim is None:
            if self.ndim != 1:
                raise RuntimeError(f"DeviceMesh.get_group: the mesh has {self.ndim} dimensions; "
                                   f"name one (mesh_dim=0..{self.ndim - 1} or a name)")
            mesh_dim = 0
        pg = self._groups[self._dim(mesh_dim)]
        if pg is None:
            raise RuntimeError(f"DeviceMesh.get_group: rank {c10d.get_rank()} is not in this "
                               f"mesh {self._mesh.tolist()}")
        return pg

    def get_all_groups(self) -> list:
        """This rank's group along every dimension, in dimension order."""
        return [self.get_group(d) for d in range(self.ndim)]

    def get_rank(self) -> int:
        """This process's global rank."""
        return c10d.get_rank()

    def get_coordinate(self):
        """This rank's index along each dimension, or None when it is not in the mesh."""
        where = np.argwhere(self._mesh == c10d.get_rank())
        return None if where.size == 0 else [int(i) for i in where[0]]

    def get_local_rank(self, mesh_dim=None) -> int:
        """This rank's index along ``mesh_dim`` (its rank in that dimension's group).

        Args:
            mesh_dim: a dimension index or name (may be None for a 1-D mesh).
        """
        if mesh_dim is None:
            if self.ndim != 1:
                raise RuntimeError("DeviceMesh.get_local_rank: name a dimension on an N-D mesh")
            mesh_dim = 0
        coord = self.get_coordinate()
        if coord is None:
            raise RuntimeError(f"DeviceMesh.get_local_rank: rank {c10d.get_rank()} is not in "
                               f"this mesh")
        return coord[self._dim(mesh_dim)]

    # ***** slicing *****
    def __getitem__(self, names) -> DeviceMesh:
        """The sub-mesh of the named dimensions that contains this rank (``mesh["dp"]``,
        ``mesh["dp", "tp"]``); it reuses this mesh's groups, so it creates none."""
        names = (names,) if isinstance(names, str) else tuple(names)
        if self.mesh_dim_names is None:
            raise RuntimeError("DeviceMesh: a mesh without mesh_dim_names cannot be sliced; pass "
                               "mesh_dim_names to init_device_mesh")
        dims = [self._dim(n) for n in names]
        if dims != sorted(dims) or len(set(dims)) != len(dims):
            raise KeyError(f"DeviceMesh: slice {names} must name distinct dimensions in the "
                           f"mesh's order {self.mesh_dim_names}")
        coord = self.get_coordinate()
        if coord is None:
            raise RuntimeError(f"DeviceMesh: rank {c10d.get_rank()} is not in this mesh")
        index = tuple(slice(None) if d in dims else coord[d] for d in range(self.ndim))
        return DeviceMesh(self.device_type, self._mesh[index],
                          mesh_dim_names=[self.mesh_dim_names[d] for d in dims],
                          _groups=[self._groups[d] for d in dims])

    @classmethod
    def from_group(cls, group, device_type: str, mesh=None, *, mesh_dim_names=None):
        """A 1-D mesh over an existing process group (torch's ``DeviceMesh.from_group``).

        Args:
            group: the process group.
            device_type: ``'cpu'`` or ``'cuda'``.
            mesh: the group's global ranks (default: all of them, in group order).
            mesh_dim_names: a one-element tuple naming the dimension.
        """
        pg = c10d._pg(group, "DeviceMesh.from_group")
        ranks = c10d.get_process_group_ranks(group) if mesh is None else mesh
        return cls(device_type, ranks, mesh_dim_names=mesh_dim_names, _groups=[pg])

    def __eq__(self, other) -> bool:
        return (isinstance(other, DeviceMesh) and self.device_type == other.device_type
                and np.array_equal(self._mesh, other._mesh)
                and self.mesh_dim_names == other.mesh_dim_names)

    def __hash__(self) -> int:
        return hash((self.device_type, self._mesh.tobytes(), self._mesh.shape,
                     self.mesh_dim_names))

    def __repr__(self) -> str:
        names = f", mesh_dim_names={self.mesh_dim_names}" if self.mesh_dim_names else ""
        return f"DeviceMesh('{self.device_type}', {self._mesh.tolist()}{names})"


def _check_device(device_type: str) -> str:
    kind = str(device_type).split(":")[0].lower()
    if kind not in _DEVICE_TYPES:
        raise ValueError(f"DeviceMesh: device_type {device_type!r} is not supported; use one of "
                         f"{_DEVICE_TYPES}")
    return kind


def init_device_mesh(device_type: str, mesh_shape, *, mesh_dim_names=None) -> DeviceMesh:
    """Lay the default group's ranks out row-major in ``mesh_shape`` and create its groups.

    With no default group yet, it is formed first from the environment (``env://``, the
    variables tbrun and torchrun set) with the device type's default backend (``gloo``, i.e.
    TensorBrain's tcp backend, for ``"cpu"``; ``nccl`` for ``"cuda"``), as torch does.

    Args:
        device_type (str): ``"cpu"`` or ``"cuda"``.
        mesh_shape (tuple[int, ...] | int): the sizes, whose product is the world size.
        mesh_dim_names (tuple[str, ...] | None): optional names, one per dimension.

    Returns:
        DeviceMesh: the mesh, with its groups made.

    Raises:
        ValueError: the shape's product is not the world size, or a size is not positive.

    Example:
        >>> mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))  # doctest: +SKIP
    """
    shape = (int(mesh_shape),) if isinstance(mesh_shape, int) else tuple(int(s) for s in mesh_shape)
    world = _world(_check_device(device_type), "init_device_mesh")
    if any(s <= 0 for s in shape) or math.prod(shape) != world:
        raise ValueError(f"init_device_mesh: mesh_shape {shape} has {math.prod(shape)} ranks but "
                         f"the world size is {world}; the sizes must multiply to the world size")
    ranks = np.arange(world, dtype=np.int64).reshape(shape)
    return DeviceMesh(device_type, ranks, mesh_dim_names=mesh_dim_names)

