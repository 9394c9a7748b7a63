"""``torch.distributed._functional_collectives``: collectives that return a new tensor instead of
writing into one (tensor- and sequence-parallel programs call them as ``funcol``).

``group`` is what torch takes: a ProcessGroup, a 1-D DeviceMesh, ``(mesh, dim)``, or None (the
default group). The result is ready when returned (torch's is an AsyncCollectiveTensor that
waits when used; ``wait_tensor`` is there and returns its argument). They record no autograd
(torch's plain functional collectives do not either).

>>> import tensorbrain as tb
>>> import tensorbrain.distributed as dist
>>> import tensorbrain.distributed._functional_collectives as funcol
>>> dist.init_process_group("tcp", store=dist.HashStore(), rank=0, world_size=1)
>>> funcol.all_reduce(tb.ones(2), "sum", None).tolist()
[1.0, 1.0]
>>> dist.destroy_process_group()
"""
from __future__ import annotations

from . import distributed_c10d as c10d

__all__ = ["all_gather_tensor", "all_reduce", "all_to_all_single", "broadcast",
           "reduce_scatter_tensor", "wait_tensor"]

_OPS = {"sum": "SUM", "avg": "AVG", "product": "PRODUCT", "min": "MIN", "max": "MAX",
        "band": "BAND", "bor": "BOR", "bxor": "BXOR"}


def _group(group):
    """A ProcessGroup (or None) from torch's group arguments."""
    if group is None or isinstance(group, c10d.ProcessGroup):
        return group
    if isinstance(group, tuple) and len(group) == 2:
        mesh, dim = group
        return mesh.get_group(dim)
    if hasattr(group, "get_group"):
        if getattr(group, "ndim", 1) != 1:
            raise ValueError(f"functional collectives: a {group.ndim}-D DeviceMesh needs a "
                             f"dimension: pass (mesh, dim)")
        return group.get_group(0)
    raise TypeError(f"functional collectives: group must be a ProcessGroup, a DeviceMesh, "
                    f"(mesh, dim) or None, got {type(group).__name__} (a list of ranks is not "
                    f"supported: make a group with new_group)")


def _op(op):
    if isinstance(op, str):
        if op.lower() not in _OPS:
            raise ValueError(f"unknown reduce op {op!r}: expected one of {sorted(_OPS)}")
        return getattr(c10d.ReduceOp, _OPS[op.lower()])
    return op


def all_reduce(self, reduceOp, group, tag: str = ""):
    """A reduced copy of ``self`` over ``group``.

    Args:
        self: the tensor.
        reduceOp: ``"sum"``, ``"avg"``, ``"max"``, ... or a ReduceOp.
        group: a ProcessGroup, DeviceMesh, ``(mesh, dim)`` or None.
        tag: accepted.
    """
    out = self.detach().clone()
    c10d.all_reduce(out, op=_op(reduceOp), group=_group(group))
    return out


def all_gather_tensor(self, gather_dim: int, group, tag: str = ""):
    """Every rank's ``self`` concatenated along ``gather_dim``.

    Args:
        self: this rank's piece.
        gather_dim: the dimension to concatenate along.
        group: a ProcessGroup, DeviceMesh, ``(mesh, dim)`` or None.
        tag: accepted.
    """
    import tensorbrain as tb
    pg = _group(group)
    n = c10d.get_world_size(pg)
    x = self.detach().contiguous()
    out = tb.empty((n * x.shape[0], *x.shape[1:]), dtype=x.dtype, device=x.device)
    c10d.all_gather_into_tensor(out, x, group=pg)
    if gather_dim != 0:
        out = tb.cat(out.chunk(n, dim=0), dim=gather_dim)
    return out


def reduce_scatter_tensor(self, reduceOp, scatter_dim: int, group, tag: str = ""):
    """This rank's piece (along ``scatter_dim``) of the reduction of every rank's ``self``.

    Args:
        self: the whole tensor on each rank.
        reduceOp: ``"sum"``, ``"avg"``, ... or a ReduceOp.
        scatter_dim: the dimension to split along (its size must divide by the group size).
        group: a ProcessGroup, DeviceMesh, ``(mesh, dim)`` or None.
        tag: accepted.

    Raises:
        ValueError: ``self.shape[scatter_dim]`` does not divide by the group size.
    """
    import tensorbrain as tb
    pg = _group(group)
    n = c10d.get_world_size(pg)
    if self.shape[scatter_dim] % n:
        raise ValueError(f"reduce_scatter_tensor: dimension {scatter_dim} of shape "
                         f"{tuple(self.shape)} does not divide by the group size {n}")
    x = self.detach()
    if scatter_dim != 0:
        x = tb.cat(x.chunk(n, dim=scatter_dim), dim=0)
    x = x.contiguous()
    out = tb.empty((x.shape[0] // n, *x.shape[1:]), dtype=x.dtype, device=x.device)
    c10d.reduce_scatter_tensor(out, x, op=_op(reduceOp), group=pg)
    if scatter_dim != 0:
        shape = list(self.shape)
        shape[scatter_dim] //= n
        out = out.reshape(shape)
    return out


def all_to_all_single(self, output_split_sizes, input_split_sizes, group, tag: str = ""):
    """``dist.all_to_all_single`` into a new tensor.

    Args:
        self: the input.
        output_split_sizes: rows received from each rank (None: equal).
        input_split_sizes: rows sent to each rank (None: equal).
        group: a ProcessGroup, DeviceMesh, ``(mesh, dim)`` or None.
        tag: accepted.
    """
    import tensorbrain as tb
    x = self.detach().contiguous()
    rows = sum(output_split_sizes) if output_split_sizes is not None else x.shape[0]
    out = tb.empty((rows, *x.shape[1:]), dtype=x.dtype, device=x.device)
    c10d.all_to_all_single(out, x, output_split_sizes, input_split_sizes, group=_group(group))
    return out


def broadcast(self, src: int, group, tag: str = ""):
    """A copy of rank ``src``'s ``self`` on every rank.

    Args:
        self: the tensor.
        src: the global rank that sends.
        group: a ProcessGroup, DeviceMesh, ``(mesh, dim)`` or None.
        tag: accepted.
    """
    out = self.detach().clone()
    c10d.broadcast(out, src=src, group=_group(group))
    return out


def wait_tensor(tensor):
    """``tensor`` (results here are ready when returned).

    Args:
        tensor: a result of a functional collective.
    """
    return tensor
