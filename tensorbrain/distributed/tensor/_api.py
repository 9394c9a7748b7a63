"""``DTensor``: a Tensor whose value is laid out over a DeviceMesh (torch's
``torch.distributed.tensor.DTensor``), minimal version.

A DTensor is a tensorbrain Tensor whose ``._data`` is this rank's local shard; its ``shape``,
``size()``, ``numel()`` and ``stride()`` describe the *global* tensor, as in torch. It knows its
``device_mesh`` and one placement per mesh dimension, and changes layout with ``redistribute``
(differentiable).

Ops on a DTensor hand their result to ``_rules.on_op`` through ``DTensor.__tb_dispatch__``
(torch's ``__torch_dispatch__`` shape: ``_ops.core.make`` finds it on the input's class; what
each kind of op returns is described in ``_rules``); DTensors are made by ``_factories``
(``distribute_tensor``, ``zeros``, ...) or :meth:`DTensor.from_local`.
"""
from __future__ import annotations

from ...tensor import Size, Tensor
from ..._ops.core import make
from . import _redistribute as R
from ._dtensor_spec import DTensorSpec, _check_mesh, _placements
from ._loss_parallel import cross_entropy as _loss_parallel_cross_entropy
from ._rules import _refuse, bypassed, checked, guard, on_op
from .placement_types import Replicate, Shard

__all__ = ["DTensor"]


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


def _reduction(name: str, dim_of=_dim_arg):
    """A DTensor reduction method (``DTensor._reduce``)."""
    def method(self, *args, **kwargs):
        return self._reduce(name, dim_of(args, kwargs), args, kwargs)
    method.__name__, method.__qualname__ = name, f"DTensor.{name}"
    method.__doc__ = (f"As ``Tensor.{name}``, refused over a sharded dim (``max(other)`` and "
                      f"``min(other)``, elementwise, are allowed).")
    return method


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

    _spec: DTensorSpec   # mesh, placements, global shape and stride (set by _make)

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

    @staticmethod
    def __tb_dispatch__(t, inputs, name, along=None):
        """An op with a DTensor input hands its result here (``_ops.core.make``)."""
        return on_op(t, inputs, name, along)

    #: ``F.cross_entropy``'s hook: the parallel loss inside ``loss_parallel()``.
    __tb_cross_entropy__ = staticmethod(_loss_parallel_cross_entropy)

    def _result(self, array, spec: DTensorSpec, like):
        """A DTensor op result (``_rules.on_op``): a DTensor, never a subclass (a parameter)."""
        return DTensor._make(array, spec, like=like)

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
        return Size(self._spec.shape).numel()

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
            return getattr(Tensor, op)(self, *args, **kwargs)   # on_op decides
        n = len(self._spec.shape)
        dims = {int(d) % n for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}
        keepdim = bool(kwargs.get("keepdim", args[1] if len(args) > 1 and
                                  isinstance(args[1], bool) else False))
        with bypassed():
            res = getattr(Tensor, op)(self, *args, **kwargs)
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
        mesh = self._spec.mesh
        found = [(i, p) for i, p in enumerate(self._spec.placements)
                 if mesh.size(i) > 1 and not isinstance(p, Replicate)]
        if len(found) != 1 or type(found[0][1]) is not Shard or \
                self._spec.shape[found[0][1].dim] % mesh.size(found[0][0]):
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
        with bypassed():
            return getattr(Tensor, op)(self, *args, **kwargs)

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
        with bypassed():
            out = Tensor.matmul(self, other)
        return self._relayout("matmul", out, self._spec.placements)

    __matmul__ = matmul

    def _is_partial(self) -> bool:
        return any(p.is_partial() for p in self._spec.placements)

    sum, mean, prod = _reduction("sum"), _reduction("mean"), _reduction("prod")
    amax, amin, max, min = _reduction("amax"), _reduction("amin"), _reduction("max"), _reduction("min")
    std, var, all, any = _reduction("std"), _reduction("var"), _reduction("all"), _reduction("any")
    argmax, argmin = _reduction("argmax"), _reduction("argmin")
    norm = _reduction("norm", lambda args, kwargs: kwargs.get("dim", args[1] if len(args) > 1
                                                               else None))

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
        Tensor.data.fset(self, value)  # type: ignore[attr-defined]

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
            out = DTensor._from_full(make_local(*gshape, **kw), mesh, pl, 0)
            return out.requires_grad_(requires_grad) if requires_grad else out
        local = make_local(*R.local_shape(gshape, mesh, pl), **kw)
        return DTensor._make(local._data, DTensorSpec(mesh, pl, gshape, self._spec.stride),
                             requires_grad=requires_grad)

    # ***** in-place random fills *****
    def _random_fill(self, name: str, args, kwargs) -> DTensor:
        """Draw the whole tensor's values (every rank draws them from its own generator, so
        ranks seeded alike agree, no communication) and keep this rank's piece: an
        initialiser on a sharded parameter gives the values it gives the unsharded one (the
        meta-device FSDP2 idiom: ``to_empty``, then ``reset_parameters()``)."""
        from ... import _xp
        full = Tensor._wrap(_xp.get_array_module(self._data).empty(self._spec.shape,
                                                                   dtype=self._data.dtype))
        getattr(Tensor, name)(full, *args, **kwargs)
        pl = tuple(Replicate() if p.is_partial() else p for p in self._spec.placements)
        piece = DTensor._from_full(full, self._spec.mesh, pl, None)
        self._data[...] = piece._data
        self._version[0] += 1
        return self

    def uniform_(self, a: float = 0.0, b: float = 1.0, generator=None) -> DTensor:
        """``Tensor.uniform_`` of the whole tensor; this rank keeps its piece (see
        :meth:`_random_fill`).

        Args:
            a: lower bound.
            b: upper bound.
            generator: the random generator (default: the global one).
        """
        return self._random_fill("uniform_", (a, b), {"generator": generator})

    def normal_(self, mean: float = 0.0, std: float = 1.0, generator=None) -> DTensor:
        """``Tensor.normal_`` of the whole tensor; this rank keeps its piece.

        Args:
            mean: the mean.
            std: the standard deviation.
            generator: the random generator (default: the global one).
        """
        return self._random_fill("normal_", (mean, std), {"generator": generator})

    @staticmethod
    def _from_full(tensor: Tensor, mesh, pl: tuple, src_data_rank) -> DTensor:
        """``distribute_tensor``'s work, its arguments checked: ``tensor`` (every rank's full
        value; ``src_data_rank``'s is broadcast first unless None) split by ``pl``."""
        full = tensor._data
        if src_data_rank is not None:
            from .. import distributed_c10d as c10d
            src = int(src_data_rank)
            full = full.copy()
            for i in range(mesh.ndim):
                if not 0 <= src < mesh.size(i):
                    raise ValueError(f"distribute_tensor: src_data_rank={src} is not a rank of "
                                     f"mesh dimension {i} (size {mesh.size(i)}) of {mesh}")
                if mesh.size(i) > 1:
                    c10d.broadcast(Tensor._wrap(full), group=mesh.get_group(i), group_src=src)
        local = R.redistribute_array(full, mesh, (Replicate(),) * mesh.ndim, pl, tuple(full.shape))
        if local is tensor._data:
            local = local.copy()
        return DTensor._make(local, DTensorSpec(mesh, pl, tuple(full.shape)),
                             requires_grad=tensor.requires_grad)

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

    # operators that check the other operand's layout first (_rules.checked), and methods whose
    # op builds its result without make (_rules.guard): they keep or refuse the layout
    __add__, __radd__, __sub__, __rsub__ = (checked("__add__"), checked("__radd__"),
                                            checked("__sub__"), checked("__rsub__"))
    __mul__, __rmul__, __pow__, __rpow__ = (checked("__mul__"), checked("__rmul__"),
                                            checked("__pow__"), checked("__rpow__"))
    __truediv__, __rtruediv__ = checked("__truediv__"), checked("__rtruediv__")
    add, sub, mul, div = checked("add"), checked("sub"), checked("mul"), checked("div")
    maximum, minimum, sign, round = checked("maximum"), checked("minimum"), guard("sign"), guard("round")
    floor, ceil, trunc, isnan, isinf = (guard("floor"), guard("ceil"), guard("trunc"),
                                        guard("isnan"), guard("isinf"))
    isfinite, logical_not, to, type_as = (guard("isfinite"), guard("logical_not"), guard("to"),
                                          guard("type_as"))
    lt, gt, le, ge, eq, ne = guard("lt"), guard("gt"), guard("le"), guard("ge"), guard("eq"), guard("ne")
    __lt__, __gt__, __le__ = guard("__lt__"), guard("__gt__"), guard("__le__")
    __ge__, __eq__, __ne__ = guard("__ge__"), guard("__eq__"), guard("__ne__")
    float, double, half, bfloat16 = guard("float"), guard("double"), guard("half"), guard("bfloat16")
    long, int, bool = guard("long"), guard("int"), guard("bool")
    __invert__, __and__, __or__, __xor__ = (guard("__invert__"), guard("__and__"),
                                            guard("__or__"), guard("__xor__"))
    __hash__ = Tensor.__hash__   # kept: defining __eq__ would set it to None


# ***** what an op on a DTensor gives (``make`` hands every op's result to on_op) *****
class _Detached:
    __slots__ = ("requires_grad", "grad_fn", "_version")

    def __init__(self, version):
        self.requires_grad, self.grad_fn, self._version = False, None, version


_PARAM_CLASS: list = []


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
