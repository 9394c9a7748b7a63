"""The tensor collectives of ``tb.distributed`` (all_reduce ... barrier): argument checks, then
the group's backend moves the arrays. Ranks given as ``src``/``dst`` are global ranks, as in
torch. The common all_reduce first tries the one-call fast path (``_fastpath.py``).
"""
from __future__ import annotations

from ._groups import _FAST, ReduceOp, _pg, _root, _seconds


def _arr(t, what: str):
    from ..tensor import Tensor
    if not isinstance(t, Tensor):
        from .._real_torch import is_pytorch_object, pytorch_object_message
        if is_pytorch_object(t):
            raise TypeError(pytorch_object_message(t, what))
        raise TypeError(f"{what} must be a tensorbrain Tensor, got {type(t).__name__}")
    return t._data


def _arrs(ts, what: str, n: int | None = None) -> list:
    if not isinstance(ts, (list, tuple)):
        raise TypeError(f"{what} must be a list of Tensors, got {type(ts).__name__}")
    if n is not None and len(ts) != n:
        raise ValueError(f"{what} must hold world_size={n} tensors, got {len(ts)}")
    return [_arr(t, f"{what}[{i}]") for i, t in enumerate(ts)]


_OP_NAMES = {member: member.value for member in ReduceOp}


def _op(op) -> str:
    name = _OP_NAMES.get(op) if isinstance(op, ReduceOp) else None
    if name is not None:
        return name
    name = str(op).lower().split(".")[-1]
    aliases = {"product": "prod", "sum": "sum", "avg": "avg", "mean": "avg"}
    name = aliases.get(name, name)
    if name not in {o.value for o in ReduceOp}:
        raise ValueError(f"unknown reduce op {op!r}: use tb.distributed.ReduceOp.SUM, AVG, "
                         f"PRODUCT, MIN, MAX, BAND, BOR or BXOR")
    return name


def _same(a, b, what: str) -> None:
    if a.dtype != b.dtype:
        raise TypeError(f"{what}: dtype mismatch ({a.dtype} vs {b.dtype})")


def _each_like(arrs, ref, what: str, name: str, role: str, hint: str = "") -> None:
    """Each array of the list ``name`` must have the size and dtype of the collective's single
    ``role`` array ``ref``."""
    for i, a in enumerate(arrs):
        if a.size != ref.size:
            raise ValueError(f"{what}: {name}[{i}] has shape {a.shape}, the {role} "
                             f"{ref.shape}{hint}")
        _same(a, ref, what)


def _root_list(pg, root, tensors, ref, what: str, name: str, role: str, side: str):
    """The arrays of ``tensors`` on the root (checked against ``ref``), None elsewhere, where
    the list must be None or empty (gather's and scatter's contract, as in torch)."""
    if pg.rank() == root:
        arrs = _arrs(tensors, f"{what}: {name}", pg.size())
        _each_like(arrs, ref, what, name, role)
        return arrs
    if tensors:
        raise ValueError(f"{what}: {name} must be None or empty on non-{side} ranks")
    return None


def _ret(work, async_op, tensors=None):
    """The Work for async ops (its ``result()`` is the output Tensors, as in torch), else None."""
    if not async_op:
        return None
    if tensors is not None:
        work._on_done(lambda w: setattr(w, "_result", tensors))
    return work


# ***** collectives *****
def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` across the group, in place on every rank.

    Args:
        tensor: the input, overwritten with the result on every rank.
        op: a :class:`ReduceOp` (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR).
        group: the process group; None for the default group.
        async_op: return a Work to wait on instead of blocking.

    Returns:
        Work | None: a Work when ``async_op`` is True (its ``result()`` is the output tensors),
        else None; None as well on a rank that is not a member of ``group``.

    Raises:
        DistBackendError: a peer failed or the group timeout passed; the message names the op and
            the peer.
    """
    fast = _FAST[0]
    if fast is not None and group is None and not async_op and fast(tensor, op):
        return None
    pg = _pg(group, "all_reduce")
    if pg is None:
        return None
    return _ret(pg.backend.allreduce([_arr(tensor, "all_reduce: tensor")], _op(op),
                                     async_op=async_op), async_op, [tensor])


def all_reduce_coalesced(tensors, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce every tensor of ``tensors`` across the group, in place, as one operation.

    Args:
        tensors: the tensors, each overwritten with its result on every rank.
        op: a :class:`ReduceOp` (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR).
        group: the process group; None for the default group.
        async_op: return a Work to wait on instead of blocking.

    Returns:
        Work | None: a Work when ``async_op`` is True (its ``result()`` is the output tensors),
        else None; None as well on a rank that is not a member of ``group``.

    Raises:
        DistBackendError: a peer failed or the group timeout passed; the message names the op and
            the peer.
    """
    pg = _pg(group, "all_reduce_coalesced")
    if pg is None:
        return None
    return _ret(pg.backend.allreduce(_arrs(tensors, "all_reduce_coalesced: tensors"), _op(op),
                                     async_op=async_op), async_op)


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    """Copy ``src``'s tensor into every rank's ``tensor``.

    Args:
        tensor: the data on ``src``; overwritten with it on the other ranks.
        src: the global rank that sends.
        group: the process group; None for the default group.
        async_op: return a Work to wait on instead of blocking.
        group_src: the sender as a rank within ``group`` (instead of ``src``).

    Returns:
        Work | None: a Work when ``async_op`` is True (its ``result()`` is the output tensors),
        else None; None as well on a rank that is not a member of ``group``.

    Raises:
        DistBackendError: a peer failed or the group timeout passed; the message names the op and
            the peer.
    """
    pg = _pg(group, "broadcast")
    if pg is None:
        return None
    root = _root(pg, src, group_src, "src")
    return _ret(pg.backend.broadcast(_arr(tensor, "broadcast: tensor"), root, async_op=async_op),
                async_op, [tensor])


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """Reduce into ``dst``'s tensor; other ranks' tensors are unchanged.

    Args:
        tensor: this rank's input; on ``dst`` overwritten with the result.
        dst: the global rank that receives the result.
        op: a :class:`ReduceOp` (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR).
        group: the process group; None for the default group.
        async_op: return a Work to wait on instead of blocking.
        group_dst: the destination as a rank within ``group`` (instead of ``dst``).

    Returns:
        Work | None: a Work when ``async_op`` is True (its ``result()`` is the output tensors),
        else None; None as well on a rank that is not a member of ``group``.

    Raises:
        DistBackendError: a peer failed or the group timeout passed; the message names the op and
            the peer.
    """
    pg = _pg(group, "reduce")
    if pg is None:
        return None
    root = _root(pg, dst, group_dst, "dst")
    return _ret(pg.backend.reduce(_arr(tensor, "reduce: tensor"), root, _op(op),
                                  async_op=async_op), async_op)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """``tensor_list[j]`` = rank j's ``tensor``.

    Args:
        tensor_list: world_size tensors of ``tensor``'s shape, written in rank order.
        tensor: this rank's input.
        group: the process group; None for the default group.
        async_op: return a Work to wait on instead of blocking.

    Returns:
        Work | None: a Work when ``async_op`` is True (its ``result()`` is the output tensors),
        else None; None as well on a rank that is not a member of ``group``.

    Raises:
        DistBackendError: a peer failed or the group timeout passed; the message names the op and
            the peer.
    """
    pg = _pg(group, "all_gather")
    if pg is None:
        return None
    outs = _arrs(tensor_list, "all_gather: tensor_list", pg.size())
    src = _arr(tensor, "all_gather: tensor")
    _each_like(outs, src, "all_gather", "tensor_list", "input", "; all must match")
    return _ret(pg.backend.allgather(outs, src, async_op=async_op), async_op, [list(tensor_list)])


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """``output_tensor`` (world_size x input along dim 0, or flat) = inputs in rank order.

    Args:
        output_tensor: world_size times ``input_tensor``'s size, written.
        input_tensor: this rank's input.
        group: the process group; None for the default group.
        async_op: return a Work to wait on instead of blocking.

    Returns:
        Work | None: a Work when ``async_op`` is True (its ``result()`` is the output tensors),
        else None; None as well on a rank that is not a member of ``group``.

    Raises:
        DistBackendError: a peer failed or the group timeout passed; the message names the op and
            the peer.
    """
    pg = _pg(group, "all_gather_into_tensor")
    if pg is None:
        return None
    out, src = _arr(output_tensor, "output_tensor"), _arr(input_tensor, "input_tensor")
    if out.size != src.size * pg.size():
        raise ValueError(f"all_gather_into_tensor: output has {out.size} elements, expected "
                         f"world_size x input = {pg.size()} x {src.size}")
    _same(out, src, "all_gather_into_tensor")
    return _ret(pg.backend.allgather_into(out, src, async_op=async_op), async_op, [output_tensor])


_all_gather_base = all_gather_into_tensor


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    """On ``dst``, ``gather_list[j]`` = rank j's ``tensor``.

    Args:
        tensor: this rank's input.
        gather_list: on ``dst``, world_size tensors written in rank order; None elsewhere.
        dst: the global rank that receives.
        group: the process group; None for the default group.
        async_op: return a Work to wait on instead of blocking.
        group_dst: the destination as a rank within ``group`` (instead of ``dst``).

    Returns:
        Work | None: a Work when ``async_op`` is True (its ``result()`` is the output tensors),
        else None; None as well on a rank that is not a member of ``group``.

    Raises:
        DistBackendError: a peer failed or the group timeout passed; the message names the op and
            the peer.
    """
    pg = _pg(group, "gather")
    if pg is None:
        return None
    root = _root(pg, dst, group_dst, "dst")
    src = _arr(tensor, "gather: tensor")
    outs = _root_list(pg, root, gather_list, src, "gather", "gather_list", "input", "destination")
    return _ret(pg.backend.gather(outs, src, root, async_op=async_op), async_op)


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    """``tensor`` = ``src``'s ``scatter_list[rank]``.

    Args:
        tensor: the output on every rank.
        scatter_list: on ``src``, world_size tensors, one per rank; None elsewhere.
        src: the global rank that sends.
        group: the process group; None for the default group.
        async_op: return a Work to wait on instead of blocking.
        group_src: the sender as a rank within ``group`` (instead of ``src``).

    Returns:
        Work | None: a Work when ``async_op`` is True (its ``result()`` is the output tensors),
        else None; None as well on a rank that is not a member of ``group``.

    Raises:
        DistBackendError: a peer failed or the group timeout passed; the message names the op and
            the peer.
    """
    pg = _pg(group, "scatter")
    if pg is None:
        return None
    root = _root(pg, src, group_src, "src")
    out = _arr(tensor, "scatter: tensor")
    ins = _root_list(pg, root, scatter_list, out, "scatter", "scatter_list", "output", "source")
    return _ret(pg.backend.scatter(out, ins, root, async_op=async_op), async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """``output`` = reduction over ranks of their ``input_list[rank]``.

    Args:
        output: this rank's reduced block, written.
        input_list: world_size tensors; entry j goes, reduced, to rank j.
        op: a :class:`ReduceOp` (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR).
        group: the process group; None for the default group.
        async_op: return a Work to wait on instead of blocking.

    Returns:
        Work | None: a Work when ``async_op`` is True (its ``result()`` is the output tensors),
        else None; None as well on a rank that is not a member of ``group``.

    Raises:
        DistBackendError: a peer failed or the group timeout passed; the message names the op and
            the peer.
    """
    pg = _pg(group, "reduce_scatter")
    if pg is None:
        return None
    out = _arr(output, "reduce_scatter: output")
    ins = _arrs(input_list, "reduce_scatter: input_list", pg.size())
    _each_like(ins, out, "reduce_scatter", "input_list", "output")
    return _ret(pg.backend.reduce_scatter(out, ins, _op(op), async_op=async_op), async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """``output`` = reduction of block ``rank`` of ``input`` (world_size x output elements).

    Args:
        output: this rank's reduced block, written.
        input: world_size times ``output``'s size.
        op: a :class:`ReduceOp` (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR).
        group: the process group; None for the default group.
        async_op: return a Work to wait on instead of blocking.

    Returns:
        Work | None: a Work when ``async_op`` is True (its ``result()`` is the output tensors),
        else None; None as well on a rank that is not a member of ``group``.

    Raises:
        DistBackendError: a peer failed or the group timeout passed; the message names the op and
            the peer.
    """
    pg = _pg(group, "reduce_scatter_tensor")
    if pg is None:
        return None
    out, src = _arr(output, "output"), _arr(input, "input")
    if src.size != out.size * pg.size():
        raise ValueError(f"reduce_scatter_tensor: input has {src.size} elements, expected "
                         f"world_size x output = {pg.size()} x {out.size}")
    _same(out, src, "reduce_scatter_tensor")
    return _ret(pg.backend.reduce_scatter_into(out, src, _op(op), async_op=async_op), async_op,
                [output])


_reduce_scatter_base = reduce_scatter_tensor


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """``output_tensor_list[j]`` on rank i = ``input_tensor_list[i]`` of rank j.

    Args:
        output_tensor_list: world_size tensors; entry j receives rank j's block.
        input_tensor_list: world_size tensors; entry j is sent to rank j.
        group: the process group; None for the default group.
        async_op: return a Work to wait on instead of blocking.

    Returns:
        Work | None: a Work when ``async_op`` is True (its ``result()`` is the output tensors),
        else None; None as well on a rank that is not a member of ``group``.

    Raises:
        DistBackendError: a peer failed or the group timeout passed; the message names the op and
            the peer.
    """
    pg = _pg(group, "all_to_all")
    if pg is None:
        return None
    outs = _arrs(output_tensor_list, "all_to_all: output_tensor_list", pg.size())
    ins = _arrs(input_tensor_list, "all_to_all: input_tensor_list", pg.size())
    return _ret(pg.backend.alltoall(outs, ins, async_op=async_op), async_op)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op=False):
    """Split ``input`` along dim 0 (by ``input_split_sizes`` or evenly), send block j to rank j,
    and concatenate the received blocks into ``output``.

    Args:
        output: receives the blocks of every rank along dim 0, in rank order.
        input: the blocks to send along dim 0.
        output_split_sizes: rows received from each rank; None for an equal split.
        input_split_sizes: rows sent to each rank; None for an equal split.
        group: the process group; None for the default group.
        async_op: return a Work to wait on instead of blocking.

    Returns:
        Work | None: a Work when ``async_op`` is True (its ``result()`` is the output tensors),
        else None; None as well on a rank that is not a member of ``group``.

    Raises:
        DistBackendError: a peer failed or the group timeout passed; the message names the op and
            the peer.
    """
    pg = _pg(group, "all_to_all_single")
    if pg is None:
        return None
    out, src = _arr(output, "output"), _arr(input, "input")
    _same(out, src, "all_to_all_single")
    return _ret(pg.backend.alltoall_single(out, src, output_split_sizes, input_split_sizes,
                                           async_op=async_op), async_op)


def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every rank of the group reaches the barrier.

    Args:
        group: the process group; None for the default group.
        async_op: return a Work to wait on instead of blocking.
        device_ids: accepted for torch compatibility; ignored.

    Returns:
        Work | None: a Work when ``async_op`` is True (its ``result()`` is the output tensors),
        else None; None as well on a rank that is not a member of ``group``.

    Raises:
        DistBackendError: a peer failed or the group timeout passed; the message names the op and
            the peer.
    """
    pg = _pg(group, "barrier")
    if pg is None:
        return None
    return _ret(pg.backend.barrier(async_op=async_op), async_op)


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """A barrier that, on timeout, raises naming the ranks that did not arrive (rank 0 reports
    them; the others raise too).

    Args:
        group: the process group; None for the default group.
        timeout: how long to wait (a ``timedelta`` or seconds); None for the group's timeout.
        wait_all_ranks: name every missing rank rather than the first.

    Raises:
        DistTimeoutError: a rank did not arrive within ``timeout``.
    """
    pg = _pg(group, "monitored_barrier")
    if pg is None:
        return None
    pg.backend.monitored_barrier(pg.timeout if timeout is None else _seconds(timeout),
                                 wait_all_ranks)
