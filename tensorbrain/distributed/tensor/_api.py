"""``DTensor``: a Tensor whose value is laid out over a DeviceMesh (torch's
``torch.distributed.tensor.DTensor``), minimal version.

A DTensor is a tensorbrain Tensor whose ``._data`` is this rank's local shard; its ``shape``,
``size()``, ``numel()`` and ``stride()`` describe the *global* tensor, as in torch. It knows its
``device_mesh`` and one placement per mesh dimension, and changes layout with ``redistribute``
(differentiable). Difference from torch: arithmetic on a DTensor is not sharding-aware; an op on
a DTensor computes on the local shard and returns a plain Tensor. Convert first
(``to_local()`` / ``full_tensor()``) and rebuild with ``DTensor.from_local``. The reduction
methods (``sum``, ``mean``, ``norm``, ``max``, ...) refuse to reduce over a sharded dim, where
the local shard would silently give this rank's part only.
"""
from __future__ import annotations

from ... import _xp
from ...tensor import Size, Tensor
from ..._ops.core import make
from ...nn.utils import clip_grad as _clip_grad
from . import _redistribute as R
from .placement_types import Placement, Replicate, Shard, _StridedShard

__all__ = ["DTensor", "DTensorSpec", "distribute_tensor", "empty", "full", "ones", "zeros"]


class DTensorSpec:
    """What a DTensor knows besides its local data: mesh, placements, global shape and stride."""

    __slots__ = ("mesh", "placements", "shape", "stride")

    def __init__(self, mesh, placements, shape, stride=None):
        self.mesh, self.placements, self.shape = mesh, tuple(placements), tuple(shape)
        self.stride = tuple(stride) if stride is not None else _contiguous_stride(self.shape)

    def __eq__(self, other) -> bool:
        return (isinstance(other, DTensorSpec) and self.mesh == other.mesh
                and self.placements == other.placements and self.shape == other.shape)

    __hash__ = None

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
            p = Shard(p.dim % ndim) if type(p) is Shard else \
                _StridedShard(p.dim % ndim, p.split_factor)
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


def _dim_arg(args, kwargs):
    """The ``dim`` of a reduction method's call; None when reducing everything (a Tensor or
    bool first argument, as in ``max(other)`` or ``std(unbiased)``, is not a dim)."""
    if "dim" in kwargs:
        return kwargs["dim"]
    if args and isinstance(args[0], (int, tuple, list)) and not isinstance(args[0], bool):
        return args[0]
    if args and isinstance(args[0], Tensor):
        return ()   # elementwise with another tensor: reduces nothing
    return None


class DTensor(Tensor):
    """A distributed tensor: this rank's local shard plus its mesh, placements and global shape.

    Build one with :func:`distribute_tensor` (split a full tensor) or :meth:`DTensor.from_local`
    (assemble from local shards); read it back with :meth:`to_local` or :meth:`full_tensor`.

    Example:
        >>> import tensorbrain as tb, tensorbrain.distributed as dist
        >>> from tensorbrain.distributed.tensor import distribute_tensor, init_device_mesh, Shard
        >>> dist.init_process_group("tcp", store=dist.HashStore(), rank=0, world_size=1)
        >>> d = distribute_tensor(tb.ones(4, 2), init_device_mesh("cpu", (1,)), [Shard(0)])
        >>> d.shape, d.placements, d.to_local().shape
        (tb.Size([4, 2]), (Shard(dim=0),), tb.Size([4, 2]))
        >>> dist.destroy_process_group()
    """

    def __init__(self, *args, **kwargs):
        raise TypeError("DTensor cannot be constructed directly; use distribute_tensor(tensor, "
                        "mesh, placements) or DTensor.from_local(local, mesh, placements)")

    @classmethod
    def _make(cls, array, spec: DTensorSpec, requires_grad=False, like=None):
        """A DTensor around ``array`` (no copy); ``like``'s autograd fields are taken over."""
        t = object.__new__(cls)
        t._init_from(array, requires_grad)
        if like is not None:
            t.requires_grad, t.grad_fn, t._version = like.requires_grad, like.grad_fn, like._version
        t._spec = spec
        if t.requires_grad and t.grad_fn is None:
            t._keep_grad_distributed()
        return t

    def _keep_grad_distributed(self):
        """After backward, ``.grad`` of a leaf DTensor is a DTensor with the same layout."""
        if getattr(self, "_grad_hook", None) is not None:
            return
        spec = self._spec

        def as_dtensor(leaf):
            if leaf.grad is not None and not isinstance(leaf.grad, DTensor):
                leaf.grad = DTensor._make(leaf.grad._data, spec)
        self._grad_hook = self.register_post_accumulate_grad_hook(as_dtensor)

    # ***** metadata: the global tensor *****
    @property
    def device_mesh(self):
        """The DeviceMesh the tensor is laid out over."""
        return self._spec.mesh

    @property
    def placements(self) -> tuple:
        """One placement per mesh dimension."""
        return self._spec.placements

    @property
    def shape(self):
        """The global shape (``._data`` holds this rank's piece)."""
        return Size(self._spec.shape)

    def size(self, dim=None):
        """The global size, or its ``dim``-th entry."""
        return Size(self._spec.shape) if dim is None else self._spec.shape[dim]

    @property
    def ndim(self):
        """Number of dimensions of the global tensor."""
        return len(self._spec.shape)

    def dim(self):
        """Number of dimensions of the global tensor."""
        return len(self._spec.shape)

    def numel(self):
        """Elements of the global tensor."""
        n = 1
        for s in self._spec.shape:
            n *= int(s)
        return n

    nelement = numel

    # ***** reductions: refused where the local shard would give a different answer *****
    def _sharded_dims(self) -> set:
        """Tensor dims split over a mesh dim of more than one rank."""
        mesh = self._spec.mesh
        return {p.dim for i, p in enumerate(self._spec.placements)
                if isinstance(p, Shard) and mesh.size(i) > 1}

    def _refuse_sharded_reduction(self, op: str, dim) -> None:
        """Raise if reducing over ``dim`` (None: every dim) would read only this rank's shard.

        Args:
            op: the method's name, for the message.
            dim: the reduced dim(s); None for all.

        Raises:
            NotImplementedError: the reduction covers a sharded dim.
        """
        sharded = self._sharded_dims()
        if not sharded:
            return
        n = len(self._spec.shape)
        dims = set(range(n)) if dim is None else \
            {int(d) % max(n, 1) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}
        if dims & sharded:
            raise NotImplementedError(
                f"DTensor.{op}() over a dim sharded across ranks (placements "
                f"{self._spec.placements}) is not supported by TensorBrain: its DTensor ops run "
                f"on the local shard, which would give this rank's part only. Call "
                f".full_tensor() first (a collective: every rank must call it) or .to_local() "
                f"for the shard's own value")

    def _reduce(self, op: str, dim, args, kwargs):
        self._refuse_sharded_reduction(op, dim)
        return getattr(Tensor, op)(self, *args, **kwargs)

    def sum(self, *args, **kwargs):
        """As Tensor's, refused over a sharded dim (see ``_refuse_sharded_reduction``)."""
        return self._reduce("sum", _dim_arg(args, kwargs), args, kwargs)

    def mean(self, *args, **kwargs):
        """As Tensor's, refused over a sharded dim."""
        return self._reduce("mean", _dim_arg(args, kwargs), args, kwargs)

    def norm(self, *args, **kwargs):
        """As Tensor's, refused over a sharded dim."""
        dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
        return self._reduce("norm", dim, args, kwargs)

    def prod(self, *args, **kwargs):
        """As Tensor's, refused over a sharded dim."""
        return self._reduce("prod", _dim_arg(args, kwargs), args, kwargs)

    def amax(self, *args, **kwargs):
        """As Tensor's, refused over a sharded dim."""
        return self._reduce("amax", _dim_arg(args, kwargs), args, kwargs)

    def amin(self, *args, **kwargs):
        """As Tensor's, refused over a sharded dim."""
        return self._reduce("amin", _dim_arg(args, kwargs), args, kwargs)

    def max(self, *args, **kwargs):
        """As Tensor's, refused over a sharded dim (``max(other)`` is elementwise: allowed)."""
        return self._reduce("max", _dim_arg(args, kwargs), args, kwargs)

    def min(self, *args, **kwargs):
        """As Tensor's, refused over a sharded dim (``min(other)`` is elementwise: allowed)."""
        return self._reduce("min", _dim_arg(args, kwargs), args, kwargs)

    def std(self, *args, **kwargs):
        """As Tensor's, refused over a sharded dim."""
        return self._reduce("std", _dim_arg(args, kwargs), args, kwargs)

    def var(self, *args, **kwargs):
        """As Tensor's, refused over a sharded dim."""
        return self._reduce("var", _dim_arg(args, kwargs), args, kwargs)

    def all(self, *args, **kwargs):
        """As Tensor's, refused over a sharded dim."""
        return self._reduce("all", _dim_arg(args, kwargs), args, kwargs)

    def any(self, *args, **kwargs):
        """As Tensor's, refused over a sharded dim."""
        return self._reduce("any", _dim_arg(args, kwargs), args, kwargs)

    def argmax(self, *args, **kwargs):
        """As Tensor's, refused over a sharded dim."""
        return self._reduce("argmax", _dim_arg(args, kwargs), args, kwargs)

    def argmin(self, *args, **kwargs):
        """As Tensor's, refused over a sharded dim."""
        return self._reduce("argmin", _dim_arg(args, kwargs), args, kwargs)

    def stride(self, dim=None):
        """The global (contiguous unless given to ``from_local``) stride."""
        return self._spec.stride if dim is None else self._spec.stride[dim]

    def __len__(self):
        return self._spec.shape[0]

    def requires_grad_(self, requires_grad=True):
        """As Tensor's; a leaf DTensor's ``.grad`` then comes back as a DTensor."""
        super().requires_grad_(requires_grad)
        if self.requires_grad and self.grad_fn is None:
            self._keep_grad_distributed()
        return self

    def detach(self):
        """A DTensor sharing this one's local data and layout, outside autograd."""
        return DTensor._make(self._data, self._spec, like=_Detached(self._version))

    def __repr__(self) -> str:
        local = Tensor._wrap(self._data)
        return (f"DTensor(local_tensor={local!r}, device_mesh={self._spec.mesh!r}, "
                f"placements={self._spec.placements})")

    # ***** conversions *****
    def to_local(self, *, grad_placements=None) -> Tensor:
        """This rank's shard as a plain Tensor sharing memory (differentiable: its gradient
        flows back into this DTensor's)."""
        out = make(self._data, (self,), lambda g: (g,), "DTensorToLocal")
        out._version = self._version
        return out

    def full_tensor(self, *, grad_placements=None) -> Tensor:
        """The whole tensor on every rank (all-gathers shards, reduces partials);
        differentiable."""
        return self.redistribute(placements=(Replicate(),) * self._spec.mesh.ndim).to_local()

    def redistribute(self, device_mesh=None, placements=None, *, async_op=False) -> DTensor:
        """The same global tensor under new ``placements`` on the same mesh.

        Shard -> Replicate all-gathers, Partial -> Replicate all-reduces, Replicate -> Shard
        slices locally, Shard(i) -> Shard(j) gathers then slices. The backward redistributes the
        gradient back to the source layout (a Partial source receives a Replicate gradient).

        Args:
            device_mesh: must be this DTensor's mesh (or None).
            placements: the target placements, one per mesh dimension (None: all Replicate).
            async_op: accepted for torch compatibility; the collectives run synchronously.

        Returns:
            A new DTensor.

        Raises:
            NotImplementedError: a different mesh.
            ValueError: wrong number of placements or a Shard dim out of range.
        """
        mesh = self._spec.mesh
        if device_mesh is not None and device_mesh != mesh:
            raise NotImplementedError(f"DTensor.redistribute: moving to another mesh "
                                      f"({device_mesh} from {mesh}) is not supported yet")
        src = self._spec.placements
        dst = _placements(mesh, placements, self.ndim, "DTensor.redistribute")
        gshape = self._spec.shape
        out = R.redistribute_array(self._data, mesh, src, dst, gshape)
        back = tuple(Replicate() if p.is_partial() else p for p in src)

        def backward(g):
            return (R.redistribute_array(g, mesh, dst, back, gshape),)
        t = make(out, (self,), backward, "DTensorRedistribute")
        return DTensor._make(out, DTensorSpec(mesh, dst, gshape, self._spec.stride), like=t)

    @staticmethod
    def from_local(local_tensor, device_mesh=None, placements=None, *, run_check=False,
                   shape=None, stride=None) -> DTensor:
        """Assemble a DTensor from every rank's local shard (no communication).

        Args:
            local_tensor: this rank's shard.
            device_mesh: the mesh.
            placements: one per mesh dimension (None: all Replicate).
            run_check: accepted for torch compatibility (no cross-rank check is made).
            shape: the global shape; needed when a Shard dimension is split unevenly (without
                it, as in torch, the global size is local size x mesh size).
            stride: the global stride (default: contiguous).

        Returns:
            A DTensor; differentiable with respect to ``local_tensor``.

        Raises:
            ValueError: the local shape is not this rank's shard of ``shape``.
        """
        if not isinstance(local_tensor, Tensor):
            raise TypeError(f"DTensor.from_local: local_tensor must be a Tensor, got "
                            f"{type(local_tensor).__name__}")
        mesh = _check_mesh(device_mesh, "DTensor.from_local")
        pl = _placements(mesh, placements, local_tensor.ndim, "DTensor.from_local")
        lshape = tuple(local_tensor._data.shape)
        if shape is None:
            gshape = list(lshape)
            for i, p in enumerate(pl):
                if isinstance(p, Shard):
                    gshape[p.dim] *= mesh.size(i)
        else:
            gshape = [int(s) for s in shape]
        expect = R.local_shape(gshape, mesh, pl)
        if expect != lshape:
            from .. import distributed_c10d as c10d
            raise ValueError(f"DTensor.from_local: rank {c10d.get_rank()}'s local tensor has "
                             f"shape {lshape} but its shard of the global shape {tuple(gshape)} "
                             f"under {pl} is {expect}; pass shape= for uneven shards")
        t = make(local_tensor._data, (local_tensor,), lambda g: (g,), "DTensorFromLocal")
        t._version = local_tensor._version
        return DTensor._make(local_tensor._data, DTensorSpec(mesh, pl, gshape, stride), like=t)

    @classmethod
    def _as_parameter(cls, dt: DTensor, requires_grad: bool = True):
        """A DTensor that is also an ``nn.Parameter`` (what ``nn.Parameter(dtensor)`` gives in
        torch): a leaf sharing ``dt``'s local data."""
        p = object.__new__(_parameter_class())
        p._init_from(dt._data, requires_grad)
        p._version = dt._version
        p._spec = dt._spec
        if requires_grad:
            p._keep_grad_distributed()
        return p


class _Detached:
    __slots__ = ("requires_grad", "grad_fn", "_version")

    def __init__(self, version):
        self.requires_grad, self.grad_fn, self._version = False, None, version


_PARAM_CLASS = []


def _parameter_class():
    if not _PARAM_CLASS:
        from ...nn.parameter import Parameter

        class DTensorParameter(DTensor, Parameter):
            """A Parameter whose value is a DTensor (FSDP2's sharded parameters)."""

            def __init__(self, *args, **kwargs):
                pass   # built by _as_parameter (or nn.Parameter(dtensor) returning it)

            def __repr__(self):
                return "Parameter containing:\n" + DTensor.__repr__(self)
        _PARAM_CLASS.append(DTensorParameter)
    return _PARAM_CLASS[0]


def distribute_tensor(tensor, device_mesh=None, placements=None, *, src_data_rank=0) -> DTensor:
    """Split a full tensor over ``device_mesh`` by ``placements``.

    Args:
        tensor: the full tensor (same shape and dtype on every rank).
        device_mesh: the mesh.
        placements: one per mesh dimension (None: all Replicate). Shards follow torch.chunk.
        src_data_rank: the rank, along every mesh dimension, whose values are used (broadcast to
            the others first, as in torch: 0 is the mesh's first rank); None uses each rank's
            own ``tensor`` without communication.

    Returns:
        A leaf DTensor with ``tensor.requires_grad``.

    Raises:
        TypeError, ValueError: not a Tensor, not a DeviceMesh, bad placements.
    """
    if not isinstance(tensor, Tensor):
        raise TypeError(f"distribute_tensor: expected a Tensor, got {type(tensor).__name__}")
    if isinstance(tensor, DTensor):
        raise ValueError("distribute_tensor: the tensor is already a DTensor; use redistribute")
    mesh = _check_mesh(device_mesh, "distribute_tensor")
    pl = _placements(mesh, placements, tensor.ndim, "distribute_tensor")
    full = tensor._data
    if src_data_rank is not None:
        from .. import distributed_c10d as c10d
        src = int(src_data_rank)
        full = full.copy()
        for i in range(mesh.ndim):
            if not 0 <= src < mesh.size(i):
                raise ValueError(f"distribute_tensor: src_data_rank={src} is not a rank of mesh "
                                 f"dimension {i} (size {mesh.size(i)}) of {mesh}")
            if mesh.size(i) > 1:
                c10d.broadcast(Tensor._wrap(full), group=mesh.get_group(i), group_src=src)
    local = R.redistribute_array(full, mesh, (Replicate(),) * mesh.ndim, pl, tuple(full.shape))
    if local is tensor._data:
        local = local.copy()
    return DTensor._make(local, DTensorSpec(mesh, pl, tuple(full.shape)),
                         requires_grad=tensor.requires_grad)


def _factory(name: str):
    def build(*size, device_mesh=None, placements=None, dtype=None, requires_grad=False):
        import importlib
        make_local = getattr(importlib.import_module("tensorbrain.tensor"), name)
        shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
        mesh = _check_mesh(device_mesh, name)
        pl = _placements(mesh, placements, len(shape), name)
        local = make_local(*R.local_shape(shape, mesh, pl), dtype=dtype, device=mesh.device_type)
        return DTensor._make(local._data, DTensorSpec(mesh, pl, shape),
                             requires_grad=requires_grad)
    build.__name__ = name
    build.__doc__ = (f"A DTensor of global shape ``size`` whose shards are tb.{name}'s "
                     f"(torch.distributed.tensor.{name}).")
    return build


zeros, ones, empty = _factory("zeros"), _factory("ones"), _factory("empty")


def full(size, fill_value, *, device_mesh=None, placements=None, dtype=None,
         requires_grad=False) -> DTensor:
    """A DTensor of global shape ``size`` filled with ``fill_value``."""
    out = zeros(tuple(size), device_mesh=device_mesh, placements=placements, dtype=dtype,
                requires_grad=requires_grad)
    out._data[...] = fill_value
    return out


def _total_norm(tensors, norm_type: float = 2.0):
    """The ``norm_type`` norm of all ``tensors`` together, each counted once globally.

    An item is a Tensor, a DTensor, or a pair ``(tensor, parts)`` where ``parts`` lists
    ``(start, stop, groups)`` slices of the flattened local array, each slice being one shard
    of a tensor split over the ranks of ``groups`` (what FSDP marks its flat and original
    parameters with, ``_grad_norm_parts``). A DTensor's local p-sum (or max) is reduced over the
    mesh dimensions it is sharded on (``Replicate`` dimensions hold copies and are not summed; a
    ``Partial`` tensor is reduced to its full value first); a plain Tensor counts as replicated.
    Collective: every rank of the groups must call it with the same layouts in the same order.
    Returns a Python float."""
    import math

    import numpy as np

    from .. import distributed_c10d as c10d
    p = float(norm_type)
    inf = p == math.inf
    groups: dict = {}   # ids of the groups to reduce over -> (groups, running value)

    def add(groups_, a):
        part = (float(a.max()) if a.size else 0.0) if inf else float((a ** p).sum())
        key = tuple(id(g) for g in groups_)
        gs, acc = groups.get(key, (groups_, 0.0))
        groups[key] = (gs, max(acc, part) if inf else acc + part)

    for t in tensors:
        parts = None
        if isinstance(t, tuple):
            t, parts = t
        if isinstance(t, DTensor) and any(pl.is_partial() for pl in t.placements):
            t = t.redistribute(placements=[Replicate() if pl.is_partial() else pl
                                           for pl in t.placements])
        a = np.abs(_xp.to_numpy(t.data).astype(np.float64))
        if parts is not None:
            flat = a.reshape(-1)
            for lo, hi, gs in parts:
                add(tuple(gs), flat[lo:hi])
        elif isinstance(t, DTensor):
            mesh = t.device_mesh
            add(tuple(mesh.get_group(i) for i, pl in enumerate(t.placements) if pl.is_shard()
                      and mesh.size(i) > 1), a)
        else:
            add((), a)
    total = 0.0
    for gs, acc in groups.values():
        buf = Tensor._wrap(np.array([acc]))
        for g in gs:
            c10d.all_reduce(buf, op="max" if inf else "sum", group=g)
        total = max(total, float(buf.data[0])) if inf else total + float(buf.data[0])
    return total if inf else total ** (1.0 / p)


# clip_grad_norm_ (in nn, a lower layer that never imports distributed) computes sharded norms
# through this hook.
_clip_grad._register_sharded_total_norm(_total_norm)
