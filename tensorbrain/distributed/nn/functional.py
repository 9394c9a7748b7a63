"""``tb.distributed.nn.functional``: collectives that autograd differentiates through
(``torch.distributed.nn.functional``), for losses that span ranks (contrastive losses over the
global batch: ``all_gather`` the embeddings, and the gradient of every rank's piece comes back to
its owner).

Each collective is one row of :data:`_RULES`: its forward on this rank's tensor and the
collective that carries the gradient back (all_gather <-> reduce_scatter, broadcast <-> reduce,
gather <-> scatter, all_to_all <-> itself reversed), as torch defines them; all_reduce's gradient
is the all_reduce (sum) of the gradients, torch's rule, whatever ``op``. Every rank of the group
must call them, and call ``backward`` through them, in the same order.

Example (on every rank)::

    import tensorbrain.distributed.nn.functional as dnnf
    emb = model(x)                               # this rank's (B, D)
    everyone = torch.cat(dnnf.all_gather(emb))   # (world * B, D), differentiable
    loss = contrastive(emb, everyone)
    loss.backward()                              # emb.grad includes the other ranks' terms
"""
from __future__ import annotations

from collections.abc import Callable

from ...autograd.function import Function
from .. import _collectives as C
from ..distributed_c10d import ReduceOp, get_rank, get_world_size

__all__ = ["all_gather", "all_reduce", "all_to_all", "all_to_all_single", "broadcast", "gather",
           "reduce", "reduce_scatter", "scatter"]


def _tb():
    import tensorbrain
    return tensorbrain


def _copy(x, fill):
    y = x.clone()
    fill(y)
    return y


def _stacked(like, world, fill):
    parts = [_tb().zeros_like(like) for _ in range(world)]
    fill(parts)
    return _tb().stack(parts)


def _rank(group):
    return get_rank(group) if group is not None else get_rank()


def _world(group):
    return get_world_size(group) if group is not None else get_world_size()


# name -> (forward(x, group, **kw), backward(grad, group, x_shape_like, **kw)); x is this rank's
# input (a stacked tensor for the list-taking ones), the result a tensor (stacked for tuples)
_RULES: dict[str, tuple[Callable, Callable]] = {
    "all_reduce": (
        lambda x, g, op: _copy(x, lambda y: C.all_reduce(y, op, group=g)),
        lambda d, g, x, op: _copy(d, lambda y: C.all_reduce(y, ReduceOp.SUM, group=g))),
    "broadcast": (
        lambda x, g, src: _copy(x, lambda y: C.broadcast(y, src, group=g)),
        lambda d, g, x, src: (lambda r: r if _rank(g) == src else r.zero_())(
            _copy(d, lambda y: C.reduce(y, src, ReduceOp.SUM, group=g)))),
    "reduce": (
        lambda x, g, dst, op: _copy(x, lambda y: C.reduce(y, dst, op, group=g)),
        lambda d, g, x, dst, op: _copy(d, lambda y: C.broadcast(y, dst, group=g))),
    "all_gather": (
        lambda x, g: _stacked(x, _world(g), lambda parts: C.all_gather(parts, x, group=g)),
        lambda d, g, x: _copy(x, lambda y: C.reduce_scatter(y, list(d.unbind(0)), ReduceOp.SUM,
                                                             group=g))),
    "gather": (
        lambda x, g, dst: _stacked(x, _world(g), lambda parts: C.gather(
            x, parts if _rank(g) == dst else None, dst, group=g)),
        lambda d, g, x, dst: _copy(x, lambda y: C.scatter(
            y, list(d.unbind(0)) if _rank(g) == dst else None, dst, group=g))),
    "scatter": (
        lambda x, g, src: _copy(x[0], lambda y: C.scatter(
            y, list(x.unbind(0)) if _rank(g) == src else None, src, group=g)),
        lambda d, g, x, src: _stacked(d, _world(g), lambda parts: C.gather(
            d, parts if _rank(g) == src else None, src, group=g))),
    "reduce_scatter": (
        lambda x, g, op: _copy(x[0], lambda y: C.reduce_scatter(y, list(x.unbind(0)), op,
                                                                 group=g)),
        lambda d, g, x, op: _stacked(d, _world(g), lambda parts: C.all_gather(parts, d,
                                                                              group=g))),
    "all_to_all": (
        lambda x, g: _stacked(x[0], _world(g), lambda parts: C.all_to_all(
            parts, list(x.unbind(0)), group=g)),
        lambda d, g, x: _stacked(d[0], _world(g), lambda parts: C.all_to_all(
            parts, list(d.unbind(0)), group=g))),
}


class _Collective(Function):
    @staticmethod
    def forward(ctx, name, group, kw, x):
        ctx.name, ctx.group, ctx.kw, ctx.like = name, group, kw, x.detach()
        return _RULES[name][0](x, group, **kw)

    @staticmethod
    def backward(ctx, grad):
        return None, None, None, _RULES[ctx.name][1](grad, ctx.group, ctx.like, **ctx.kw)


class _AllToAllSingle(Function):
    @staticmethod
    def forward(ctx, output, out_splits, in_splits, group, x):
        ctx.splits, ctx.group, ctx.like = (out_splits, in_splits), group, x.detach()
        y = _tb().empty_like(output)
        C.all_to_all_single(y, x, out_splits, in_splits, group=group)
        return y

    @staticmethod
    def backward(ctx, grad):
        out_splits, in_splits = ctx.splits
        gx = _tb().empty_like(ctx.like)
        C.all_to_all_single(gx, grad.contiguous(), in_splits, out_splits, group=ctx.group)
        return None, None, None, None, gx


def _check_list(name: str, arg: str, tensors) -> list:
    tensors = list(tensors)
    shapes = {tuple(t.shape) for t in tensors}
    if not tensors or len(shapes) != 1:
        raise ValueError(f"{name}: {arg} must be a non-empty list of tensors of one shape, got "
                         f"shapes {[tuple(t.shape) for t in tensors]}")
    return tensors


def all_reduce(tensor, op=ReduceOp.SUM, group=None):
    """The reduction of every rank's ``tensor`` (a new tensor); gradient: all_reduce of grads.

    Args:
        tensor (Tensor): this rank's input.
        op (ReduceOp): the reduction.
        group (ProcessGroup | None): the ranks (default: all).

    Returns:
        Tensor: the reduced tensor.
    """
    return _Collective.apply("all_reduce", group, {"op": op}, tensor)


def broadcast(tensor, src: int, group=None):
    """``src``'s ``tensor`` on every rank; gradient: the sum of grads, to ``src``.

    Args:
        tensor (Tensor): this rank's tensor (only ``src``'s is read).
        src (int): the sending rank.
        group (ProcessGroup | None): the ranks.

    Returns:
        Tensor: a copy of ``src``'s tensor.
    """
    return _Collective.apply("broadcast", group, {"src": src}, tensor)


def reduce(tensor, dst: int, op=ReduceOp.SUM, group=None):
    """The reduction on ``dst`` (other ranks: a copy of their input); gradient: broadcast from
    ``dst``.

    Args:
        tensor (Tensor): this rank's input.
        dst (int): the receiving rank.
        op (ReduceOp): the reduction.
        group (ProcessGroup | None): the ranks.

    Returns:
        Tensor: the reduced tensor on ``dst``.
    """
    return _Collective.apply("reduce", group, {"dst": dst, "op": op}, tensor)


def all_gather(tensor, group=None) -> tuple:
    """Every rank's ``tensor``, in rank order; gradient: reduce_scatter (sum) of the grads.

    Args:
        tensor (Tensor): this rank's tensor (same shape on every rank).
        group (ProcessGroup | None): the ranks.

    Returns:
        tuple[Tensor, ...]: one tensor per rank.
    """
    return tuple(_Collective.apply("all_gather", group, {}, tensor).unbind(0))


def gather(tensor, dst: int = 0, group=None) -> tuple:
    """Every rank's ``tensor`` on ``dst`` (zeros elsewhere); gradient: scatter from ``dst``.

    Args:
        tensor (Tensor): this rank's tensor.
        dst (int): the receiving rank.
        group (ProcessGroup | None): the ranks.

    Returns:
        tuple[Tensor, ...]: one tensor per rank.
    """
    return tuple(_Collective.apply("gather", group, {"dst": dst}, tensor).unbind(0))


def scatter(tensors, src: int = 0, group=None):
    """``src``'s ``tensors[rank]`` on each rank; gradient: gather to ``src``.

    Args:
        tensors (Sequence[Tensor]): one tensor per rank, of one shape (every rank passes a list;
            only ``src``'s values are read).
        src (int): the sending rank.
        group (ProcessGroup | None): the ranks.

    Returns:
        Tensor: this rank's piece.

    Raises:
        ValueError: ``tensors`` is empty or of mixed shapes.
    """
    parts = _check_list("scatter", "tensors", tensors)
    return _Collective.apply("scatter", group, {"src": src}, _tb().stack(parts))


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None):
    """The reduction over ranks of their ``input_list[rank]``; gradient: all_gather.

    Args:
        output (Tensor): a tensor of the result's shape (torch's signature; not written).
        input_list (Sequence[Tensor]): one tensor per rank, of ``output``'s shape.
        op (ReduceOp): the reduction.
        group (ProcessGroup | None): the ranks.

    Returns:
        Tensor: this rank's reduced piece.

    Raises:
        ValueError: ``input_list`` is empty, of mixed shapes, or not of ``output``'s shape.
    """
    parts = _check_list("reduce_scatter", "input_list", input_list)
    if tuple(parts[0].shape) != tuple(output.shape):
        raise ValueError(f"reduce_scatter: output has shape {tuple(output.shape)}, input_list's "
                         f"tensors {tuple(parts[0].shape)}")
    return _Collective.apply("reduce_scatter", group, {"op": op}, _tb().stack(parts))


def all_to_all(output_tensor_list, input_tensor_list, group=None) -> tuple:
    """Rank i's ``input_tensor_list[j]`` becomes rank j's output i; gradient: the reverse.

    Args:
        output_tensor_list (Sequence[Tensor]): one tensor per rank (their shape; not written).
        input_tensor_list (Sequence[Tensor]): one tensor per rank, of one shape.
        group (ProcessGroup | None): the ranks.

    Returns:
        tuple[Tensor, ...]: what each rank sent to this one.

    Raises:
        ValueError: the lists are empty or of mixed shapes (TensorBrain needs one shape).
    """
    _check_list("all_to_all", "output_tensor_list", output_tensor_list)
    parts = _check_list("all_to_all", "input_tensor_list", input_tensor_list)
    return tuple(_Collective.apply("all_to_all", group, {}, _tb().stack(parts)).unbind(0))


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                      group=None):
    """``all_to_all_single`` along dim 0 with split sizes; gradient: the reverse exchange.

    Args:
        output (Tensor): a tensor of the result's shape (not written).
        input (Tensor): this rank's input.
        output_split_sizes (list[int] | None): rows received from each rank (None: even).
        input_split_sizes (list[int] | None): rows sent to each rank (None: even).
        group (ProcessGroup | None): the ranks.

    Returns:
        Tensor: the received rows.
    """
    return _AllToAllSingle.apply(output, output_split_sizes, input_split_sizes, group, input)
