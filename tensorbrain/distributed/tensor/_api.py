"""``DTensor``: a Tensor whose value is laid out over a DeviceMesh (torch's
``torch.distributed.tensor.DTensor``), minimal version.

A DTensor is a tensorbrain Tensor whose ``._data`` is this rank's local shard; its ``shape``,
``size()``, ``numel()`` and ``stride()`` describe the *global* tensor, as in torch. It knows its
``device_mesh`` and one placement per mesh dimension, and changes layout with ``redistribute``
(differentiable).

Ops on a DTensor (every op hands its result to :func:`_on_op`):

* pointwise ops (``neg``, ``exp``, ``** 2``, ``* 2.0``, ``clamp``, ``relu``, ``clone``, dtype
  casts, ...) and binary pointwise ops between DTensors of the same mesh, placements and shape
  return a DTensor of that layout, as in torch. On a ``Partial`` DTensor only ops linear in the
  value are allowed (``neg``, ``clone``, ``* scalar``, ``/ scalar``, ``+``/``-`` of two Partial
  DTensors); ``.data``, ``.detach()`` and ``zeros_like``/``ones_like``/``rand_like``/... keep the
  layout too (``*_like`` turns Partial into Replicate, as torch).
* a pointwise op mixing a sharded or Partial DTensor with a plain Tensor of more than one
  element, or two DTensors of different layouts, raises (redistribute / ``DTensor.from_local``
  first); a fully replicated DTensor with a plain Tensor still gives a plain Tensor (the value is
  right on every rank).
* any other op (matmul, reshape, indexing, ``tb.norm``, ...) on a sharded or Partial DTensor
  raises NotImplementedError naming ``.full_tensor()`` / ``.to_local()``; on a fully replicated
  DTensor it computes on the local copy (the global value) and returns a plain Tensor.
* the reduction methods (``sum``, ``mean``, ``norm``, ``max``, ...) refuse to reduce over a
  sharded dim; over other dims they return a DTensor of the reduced layout.
"""
from __future__ import annotations

from typing import NoReturn

from ... import _xp
from ...tensor import Size, Tensor
from ..._ops import core as _core
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
        """Run reduction ``op``: refused over a sharded dim; over unsharded dims of a sharded
        DTensor the result is a DTensor whose Shard dims are renumbered past the reduced ones."""
        self._refuse_sharded_reduction(op, dim)
        if dim == () or not self._sharded_dims() or self._is_partial():
            return getattr(Tensor, op)(self, *args, **kwargs)   # _on_op decides
        n = len(self._spec.shape)
        dims = {int(d) % n for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}
        keepdim = bool(kwargs.get("keepdim", args[1] if len(args) > 1 and
                                  isinstance(args[1], bool) else False))
        _BYPASS[0] += 1
        try:
            res = getattr(Tensor, op)(self, *args, **kwargs)
        finally:
            _BYPASS[0] -= 1
        shape = tuple(1 if i in dims else s for i, s in enumerate(self._spec.shape)
                      if keepdim or i not in dims)
        pl = tuple(p if not isinstance(p, Shard) or keepdim else
                   Shard(p.dim - sum(d < p.dim for d in dims)) for p in self._spec.placements)
        spec = DTensorSpec(self._spec.mesh, pl, shape)

        def wrap(x):
            return DTensor._make(x._data, spec, like=x) if isinstance(x, Tensor) else x
        if isinstance(res, tuple):
            items = [wrap(x) for x in res]
            return type(res)(*items) if hasattr(res, "_fields") else tuple(items)
        return wrap(res)

    # ***** shape ops whose layout follows: view/reshape, transpose/permute, matmul *****
    def _one_shard(self, op: str):
        """The (mesh dim, Shard) splitting this DTensor, when exactly one mesh dim of more than
        one rank shards it evenly and the others replicate; else raise naming ``op``."""
        mesh, found = self._spec.mesh, []
        for i, p in enumerate(self._spec.placements):
            if mesh.size(i) == 1 or isinstance(p, Replicate):
                continue
            if type(p) is not Shard or self._spec.shape[p.dim] % mesh.size(i):
                found = None
                break
            found.append((i, p))
        if not found or len(found) != 1:
            _refuse(op, (self,))
        return found[0]

    def _relayout(self, op: str, out: Tensor, placements) -> DTensor:
        shape = list(out._data.shape)
        for i, p in enumerate(placements):
            if isinstance(p, Shard):
                shape[p.dim] *= self._spec.mesh.size(i)
        return DTensor._make(out._data, DTensorSpec(self._spec.mesh, placements, shape),
                             like=out)

    def _local(self, op: str, *args, **kwargs):
        _BYPASS[0] += 1
        try:
            return getattr(Tensor, op)(self, *args, **kwargs)
        finally:
            _BYPASS[0] -= 1

    def view(self, *shape):
        """As Tensor's; on a sharded DTensor allowed where the sharded dim is the outermost
        factor of an output dim (``(B, T, D) -> (B, T, -1, hd)`` with D sharded), as torch's
        view propagation gives; the result is then a DTensor sharded on that output dim."""
        return self._reshape("view", shape)

    def reshape(self, *shape):
        """As :meth:`view`."""
        return self._reshape("reshape", shape)

    def _reshape(self, op: str, shape):
        if not self._sharded_dims() and not self._is_partial():
            return getattr(Tensor, op)(self, *shape)
        i, sh = self._one_shard(op)
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        n = self._spec.mesh.size(i)
        want = [int(x) for x in shape]
        if -1 in want:   # resolve against the global element count
            known = 1
            for x in want:
                known *= x if x != -1 else 1
            want[want.index(-1)] = self.numel() // max(known, 1)
        outer, acc, j = 1, 1, None
        for x in self._spec.shape[:sh.dim]:
            outer *= int(x)
        for k, x in enumerate(want):   # the output dim whose outermost factor is the shard's
            if acc == outer and x % n == 0 and x > 0:
                j = k
                break
            acc *= x
        if j is None:
            _refuse(op, (self,))
        local = list(want)
        local[j] //= n
        try:
            out = self._local(op, *local)
        except (RuntimeError, ValueError):
            _refuse(op, (self,))
        pl = list(self._spec.placements)
        pl[i] = Shard(j)
        return self._relayout(op, out, tuple(pl))

    def transpose(self, dim0, dim1):
        """As Tensor's; Shard dims move with the dims they name."""
        nd = len(self._spec.shape)
        a, b = int(dim0) % nd, int(dim1) % nd
        perm = list(range(nd))
        perm[a], perm[b] = b, a
        return self._permuted("transpose", perm, (dim0, dim1))

    def permute(self, *dims):
        """As Tensor's; Shard dims move with the dims they name."""
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        nd = len(self._spec.shape)
        return self._permuted("permute", [int(d) % nd for d in dims], dims)

    def _permuted(self, op: str, perm, args):
        out = self._local(op, *args)
        where = {src: dst for dst, src in enumerate(perm)}
        pl = tuple(Shard(where[p.dim]) if type(p) is Shard else p
                   for p in self._spec.placements)
        if any(isinstance(p, Shard) and type(p) is not Shard for p in pl):
            _refuse(op, (self,))
        return self._relayout(op, out, pl)

    def matmul(self, other):
        """As Tensor's; between two DTensors sharded alike on one batch dim (not the two
        matrix dims) the result is sharded on that dim; other sharded cases raise."""
        if not isinstance(other, DTensor) or other._spec.mesh != self._spec.mesh \
                or len(other._spec.shape) != len(self._spec.shape) or self._is_partial() \
                or other._is_partial() or not (self._sharded_dims() or other._sharded_dims()):
            return Tensor.matmul(self, other)
        nd = len(self._spec.shape)
        i, sh = self._one_shard("matmul")
        j, sh2 = other._one_shard("matmul")
        if (i, sh) != (j, sh2) or sh.dim >= nd - 2:
            _refuse("matmul", (self, other))
        _BYPASS[0] += 1
        try:
            out = Tensor.matmul(self, other)
        finally:
            _BYPASS[0] -= 1
        return self._relayout("matmul", out, self._spec.placements)

    __matmul__ = matmul

    def _is_partial(self) -> bool:
        return any(p.is_partial() for p in self._spec.placements)

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

    @property
    def data(self):
        """A DTensor sharing this one's local data and layout, with no autograd history (as
        torch's ``.data`` of a DTensor parameter); in-place changes through it change this one."""
        return self.detach()

    @data.setter
    def data(self, value):
        """``t.data = other``: take ``other``'s local storage (layout unchanged)."""
        Tensor.data.fset(self, value)

    def _like(self, make_local, kw: dict, random: bool = False) -> DTensor:
        """``tb.*_like(self)``: a DTensor of this layout (Partial becomes Replicate, as torch)
        whose local shards ``make_local(*shape, **kw)`` builds; for the random ones the full
        tensor is drawn and split from the mesh's first rank (a collective), so replicated
        copies agree and shards differ.

        Args:
            make_local: a factory (``tb.zeros``, ``tb.rand``, ...).
            kw: its keyword arguments (``dtype``, ``device``, ``fill_value``, ...).
            random: whether the factory draws random numbers.

        Returns:
            A leaf DTensor, requiring grad as ``kw["requires_grad"]`` says.
        """
        requires_grad = bool(kw.pop("requires_grad", False))
        pl = tuple(Replicate() if p.is_partial() else p for p in self._spec.placements)
        mesh, gshape = self._spec.mesh, self._spec.shape
        if random:
            full = make_local(*gshape, **kw)
            out = distribute_tensor(full, mesh, pl, src_data_rank=0)
            return out.requires_grad_(requires_grad) if requires_grad else out
        local = make_local(*R.local_shape(gshape, mesh, pl), **kw)
        return DTensor._make(local._data, DTensorSpec(mesh, pl, gshape, self._spec.stride),
                             requires_grad=requires_grad)

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


# ***** what an op on a DTensor gives (``make`` hands every op's result to _on_op) *****
_BYPASS = [0]   # > 0 while DTensor internals call ops whose result they wrap themselves

_UNARY = {"Abs", "Clamp", "Clone", "Cos", "Erf", "Exp", "Expm1", "Gelu", "Log", "Log1P", "Neg",
          "Reciprocal", "Relu", "Rsqrt", "Sigmoid", "Silu", "Sin", "Sqrt", "Tanh", "ToCopy",
          "Elementwise"}
_BINARY = {"Add", "Sub", "Mul", "Div", "Pow", "Maximum", "Minimum", "Where"}
_POINTWISE = {n + "Backward" for n in _UNARY | _BINARY}


def local_ops(fn):
    """Wrap ``fn`` so that ops inside it compute on DTensors' local shards and return plain
    Tensors (no layout rules): for DTensor internals, such as the tensor-parallel styles, which
    run a module's own forward on this rank's weight shard by design.

    Args:
        fn: the function (a forward).

    Returns:
        The wrapped function.
    """
    import functools

    @functools.wraps(fn)
    def run(*args, **kwargs):
        _BYPASS[0] += 1
        try:
            return fn(*args, **kwargs)
        finally:
            _BYPASS[0] -= 1
    return run


def _linear_on_partial(name: str, inputs, dts) -> bool:
    """Whether op ``name`` on these inputs is linear in the Partial values (sum of the op on
    each rank's part = the op on the sum)."""
    op = name[:-len("Backward")]
    if op in ("Neg", "Clone", "ToCopy"):
        return True
    tensors = [x for x in inputs if x is not None]
    if op == "Mul":
        return len(tensors) == 1
    if op == "Div":
        return len(tensors) == 1 and inputs[0] is not None
    if op in ("Add", "Sub"):
        return len(tensors) == 2 and len(dts) == 2
    return False


def _refuse(op: str, dts) -> NoReturn:
    """Raise NotImplementedError: ``op`` would compute on the local shards of ``dts``."""
    layouts = ", ".join(f"{d._spec.placements}" for d in dts)
    raise NotImplementedError(
        f"{op} on a DTensor sharded or Partial across ranks (placements {layouts}) is not "
        f"supported by TensorBrain: it would compute on this rank's local shard only and give a "
        f"wrong result. Call .full_tensor() first (a collective: every rank must call it) for "
        f"the global value, or .to_local() for the shard's own value")


def _check_operands(op: str, dts, plain) -> None:
    """Raise ValueError when a pointwise op mixes a sharded/Partial DTensor with a plain Tensor
    of more than one element (``plain``), or DTensors of different layouts."""
    spec = dts[0]._spec
    layouts = ", ".join(f"{d._spec.placements}" for d in dts)
    if plain and any(d._sharded_dims() or d._is_partial() for d in dts):
        raise ValueError(
            f"{op}: got a mixed plain Tensor and DTensor (placements {layouts}); as in torch, "
            f"convert the Tensor to a DTensor first (distribute_tensor or DTensor.from_local), "
            f"or use .to_local() / .full_tensor() on the DTensor")
    if any(d._spec != spec for d in dts):
        raise ValueError(
            f"{op}: DTensors with different layouts ({layouts}, global shapes "
            f"{[d._spec.shape for d in dts]}); redistribute one to the other's placements first")


def _on_op(t: Tensor, inputs, name: str, along=None) -> Tensor:
    """Decide what op ``name`` with a DTensor among ``inputs`` returns; ``t`` is its result
    computed on the local shards (a plain Tensor).

    Args:
        t: the op's output as ``make`` built it.
        inputs: the op's tensor inputs (None where a Python scalar was given).
        name: the op's autograd node name (``"MulBackward"``, ...).
        along: the dims a shape-keeping op (softmax) mixes values along, if it says.

    Returns:
        A DTensor of the inputs' layout for pointwise ops; ``t`` itself where the local
        computation is the global one (fully replicated DTensors, DTensor internals).

    Raises:
        ValueError: a pointwise op between DTensors of different layouts, or a sharded/Partial
            DTensor with a plain Tensor.
        NotImplementedError: a non-pointwise op (or a non-linear one on a Partial DTensor) that
            would compute on this rank's shard only.
    """
    if _BYPASS[0] or name.startswith("DTensor"):
        return t
    dts = [x for x in inputs if isinstance(x, DTensor)]
    plain = [x for x in inputs if x is not None and not isinstance(x, DTensor)
             and x._data.size > 1]
    spec = dts[0]._spec
    split = any(d._sharded_dims() for d in dts)
    partial = any(d._is_partial() for d in dts)
    op = name[:-len("Backward")] if name.endswith("Backward") else name
    if not split and not partial:
        if (name in _POINTWISE or along is not None and len(dts) == 1) and not plain \
                and all(d._spec == spec for d in dts):
            return DTensor._make(t._data, spec, like=t)
        return t   # replicated everywhere: the local value is the global one
    layouts = ", ".join(f"{d._spec.placements}" for d in dts)
    if along is not None and len(dts) == 1 and not partial and not plain:
        n = len(spec.shape)
        if not {int(d) % max(n, 1) for d in along} & dts[0]._sharded_dims():
            return DTensor._make(t._data, spec, like=t)
    if name not in _POINTWISE:
        _refuse(op.lower(), dts)
    _check_operands(op.lower(), dts, plain)
    if partial and not _linear_on_partial(name, inputs, dts):
        raise NotImplementedError(
            f"{op.lower()} on a Partial DTensor (placements {layouts}) is not linear in the "
            f"pending sum; call .redistribute(placements=[Replicate()...]) or .full_tensor() "
            f"first")
    return DTensor._make(t._data, spec, like=t)


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


_core.DTENSOR_HOOK[0] = (DTensor, _on_op)


def _guard(name: str):
    """A DTensor method for a Tensor method whose op builds its result without ``make``
    (comparisons, ``sign``, ``round``, ...): same treatment as :func:`_on_op`."""
    base = getattr(Tensor, name)

    def method(self, *args, **kwargs):
        out = base(self, *args, **kwargs)
        if isinstance(out, DTensor) or not isinstance(out, Tensor):
            return out
        others = tuple(a if isinstance(a, Tensor) else None for a in args)
        return _on_op(out, (self,) + others, "ElementwiseBackward")
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"As Tensor.{name}, keeping or refusing the DTensor layout as other ops do."
    return method


def _checked(name: str):
    """A DTensor arithmetic operator that checks the other operand's layout before computing
    (the local shapes of mismatched layouts would otherwise fail with a broadcast error, or
    worse, broadcast)."""
    base = getattr(Tensor, name)

    def method(self, other, *args, **kwargs):
        if isinstance(other, Tensor):
            _check_operands(name.strip("_"), [self] + ([other] if isinstance(other, DTensor)
                                                      else []),
                            [] if isinstance(other, DTensor) or other._data.size <= 1
                            else [other])
        return base(self, other, *args, **kwargs)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"As Tensor.{name}; the other operand must have this DTensor's layout."
    return method


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__pow__", "__rpow__", "add", "sub", "mul", "div",
              "maximum", "minimum"):
    if hasattr(Tensor, _name):
        setattr(DTensor, _name, _checked(_name))
for _name in ("sign", "round", "floor", "ceil", "trunc", "isnan", "isinf", "isfinite",
              "logical_not", "lt", "gt", "le", "ge", "eq", "ne", "__lt__", "__gt__", "__le__",
              "__ge__", "__eq__", "__ne__", "float", "double", "half", "bfloat16", "long",
              "int", "bool", "to", "type_as", "__invert__", "__and__", "__or__", "__xor__"):
    if hasattr(Tensor, _name):
        setattr(DTensor, _name, _guard(_name))
DTensor.__hash__ = Tensor.__hash__


# clip_grad_norm_ (in nn, a lower layer that never imports distributed) computes sharded norms
# through this hook.
_clip_grad._register_sharded_total_norm(_total_norm)
