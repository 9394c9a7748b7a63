"""The tensor collectives of ``tb.distributed`` (all_reduce ... barrier).

Each function turns its Tensors into their arrays (checking that they are Tensors, and how many)
and hands them to the group's backend, whose pipeline describes the call once, checks it once
(``backends/_validate.py``: every size, dtype and op error), numbers and fingerprints it and runs
it (``backends/base.py``). Ranks given as ``src``/``dst`` are global ranks, as in torch. The
common ``all_reduce`` first tries the pipeline's first step, ``ProcessGroup.fast``.

What every collective shares (``group``, ``async_op``, the returned Work, the errors) is
documented once, below, and appended to each function's docstring by :func:`_collective`.
"""
from __future__ import annotations

from ..tensor import Tensor
from ._groups import _WORLD, ReduceOp, _pg, _root, _seconds

_SHARED_ARGS = """
        group: the process group; None for the default group.
        async_op: return a Work to wait on instead of blocking: its ``wait()`` raises the
            op's error, its ``result()`` is the output tensors, as torch's ``Work``."""
_SHARED_SECTIONS = """
    Returns:
        Work | None: a Work when ``async_op`` is True, else None; None as well on a rank that
        is not a member of ``group``.

    Raises:
        DistBackendError: a peer failed, the ranks called different collectives (on every
            rank), or the group timeout passed (DistTimeoutError); the message names the op,
            its sequence number and the peer.
        ValueError: sizes that do not fit the collective or the group.
        TypeError: an argument that is not a Tensor, or mismatched dtypes.
"""


def _collective(fn):
    """Append the Args, Returns and Raises every collective shares (written once, above) to
    ``fn``'s docstring, whose own Args section lists its other parameters."""
    doc = (fn.__doc__ or "").rstrip()
    fn.__doc__ = doc + _SHARED_ARGS + "\n" + _SHARED_SECTIONS
    return fn


def _arr(t, what: str):
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
_NAMES = {m.value: m.value for m in ReduceOp}  # the names the fast step takes as strings


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


def _root_list(pg, root, tensors, what: str, name: str, side: str):
    """The arrays of ``tensors`` on the root, None elsewhere, where the list must be None or
    empty (gather's and scatter's contract, as in torch)."""
    if pg.rank() == root:
        return _arrs(tensors, f"{what}: {name}", pg.size())
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
@_collective
def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` across the group, in place on every rank.

    Args:
        tensor: the input, overwritten with the result on every rank.
        op: a :class:`ReduceOp` (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR).
    """
    if group is None and not async_op:  # the pipeline's first step (ProcessGroup.fast)
        pg = _WORLD.default
        fast = pg.fast if pg is not None else None
        if fast is not None and type(tensor) is Tensor:
            # a ReduceOp's value without hashing the member (Enum hashes in Python)
            name = op._value_ if type(op) is ReduceOp else \
                _NAMES.get(op) if type(op) is str else None
            if name is not None and fast(tensor._data, name):
                return None
    pg = _pg(group, "all_reduce")
    if pg is None:
        return None
    return _ret(pg.backend.allreduce([_arr(tensor, "all_reduce: tensor")], _op(op),
                                     async_op=async_op), async_op, [tensor])


@_collective
def all_reduce_coalesced(tensors, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce every tensor of ``tensors`` across the group, in place, as one operation.

    Args:
        tensors: the tensors, each overwritten with its result on every rank.
        op: a :class:`ReduceOp` (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR).
    """
    pg = _pg(group, "all_reduce_coalesced")
    if pg is None:
        return None
    return _ret(pg.backend.allreduce(_arrs(tensors, "all_reduce_coalesced: tensors"), _op(op),
                                     async_op=async_op), async_op)


@_collective
def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    """Copy ``src``'s tensor into every rank's ``tensor``.

    Args:
        tensor: the data on ``src``; overwritten with it on the other ranks.
        src: the global rank that sends.
        group_src: the sender as a rank within ``group`` (instead of ``src``).
    """
    pg = _pg(group, "broadcast")
    if pg is None:
        return None
    root = _root(pg, src, group_src, "src")
    return _ret(pg.backend.broadcast(_arr(tensor, "broadcast: tensor"), root, async_op=async_op),
                async_op, [tensor])


@_collective
def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """Reduce into ``dst``'s tensor; other ranks' tensors are unchanged.

    Args:
        tensor: this rank's input; on ``dst`` overwritten with the result.
        dst: the global rank that receives the result.
        op: a :class:`ReduceOp` (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR).
        group_dst: the destination as a rank within ``group`` (instead of ``dst``).
    """
    pg = _pg(group, "reduce")
    if pg is None:
        return None
    root = _root(pg, dst, group_dst, "dst")
    return _ret(pg.backend.reduce(_arr(tensor, "reduce: tensor"), root, _op(op),
                                  async_op=async_op), async_op)


@_collective
def all_gather(tensor_list, tensor, group=None, async_op=False):
    """``tensor_list[j]`` = rank j's ``tensor``.

    Args:
        tensor_list: world_size tensors of ``tensor``'s shape, written in rank order.
        tensor: this rank's input.
    """
    pg = _pg(group, "all_gather")
    if pg is None:
        return None
    outs = _arrs(tensor_list, "all_gather: tensor_list", pg.size())
    src = _arr(tensor, "all_gather: tensor")
    return _ret(pg.backend.allgather(outs, src, async_op=async_op), async_op, [list(tensor_list)])


@_collective
def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """``output_tensor`` (world_size x input along dim 0, or flat) = inputs in rank order.

    Args:
        output_tensor: world_size times ``input_tensor``'s size, written.
        input_tensor: this rank's input.
    """
    pg = _pg(group, "all_gather_into_tensor")
    if pg is None:
        return None
    out, src = _arr(output_tensor, "output_tensor"), _arr(input_tensor, "input_tensor")
    return _ret(pg.backend.allgather_into(out, src, async_op=async_op), async_op, [output_tensor])


_all_gather_base = all_gather_into_tensor


@_collective
def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    """On ``dst``, ``gather_list[j]`` = rank j's ``tensor``.

    Args:
        tensor: this rank's input.
        gather_list: on ``dst``, world_size tensors written in rank order; None elsewhere.
        dst: the global rank that receives.
        group_dst: the destination as a rank within ``group`` (instead of ``dst``).
    """
    pg = _pg(group, "gather")
    if pg is None:
        return None
    root = _root(pg, dst, group_dst, "dst")
    src = _arr(tensor, "gather: tensor")
    outs = _root_list(pg, root, gather_list, "gather", "gather_list", "destination")
    return _ret(pg.backend.gather(outs, src, root, async_op=async_op), async_op)


@_collective
def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    """``tensor`` = ``src``'s ``scatter_list[rank]``.

    Args:
        tensor: the output on every rank.
        scatter_list: on ``src``, world_size tensors, one per rank; None elsewhere.
        src: the global rank that sends.
        group_src: the sender as a rank within ``group`` (instead of ``src``).
    """
    pg = _pg(group, "scatter")
    if pg is None:
        return None
    root = _root(pg, src, group_src, "src")
    out = _arr(tensor, "scatter: tensor")
    ins = _root_list(pg, root, scatter_list, "scatter", "scatter_list", "source")
    return _ret(pg.backend.scatter(out, ins, root, async_op=async_op), async_op)


@_collective
def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """``output`` = reduction over ranks of their ``input_list[rank]``.

    Args:
        output: this rank's reduced block, written.
        input_list: world_size tensors; entry j goes, reduced, to rank j.
        op: a :class:`ReduceOp` (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR).
    """
    pg = _pg(group, "reduce_scatter")
    if pg is None:
        return None
    out = _arr(output, "reduce_scatter: output")
    ins = _arrs(input_list, "reduce_scatter: input_list", pg.size())
    return _ret(pg.backend.reduce_scatter(out, ins, _op(op), async_op=async_op), async_op)


@_collective
def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """``output`` = reduction of block ``rank`` of ``input`` (world_size x output elements).

    Args:
        output: this rank's reduced block, written.
        input: world_size times ``output``'s size.
        op: a :class:`ReduceOp` (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR).
    """
    pg = _pg(group, "reduce_scatter_tensor")
    if pg is None:
        return None
    out, src = _arr(output, "output"), _arr(input, "input")
    return _ret(pg.backend.reduce_scatter_into(out, src, _op(op), async_op=async_op), async_op,
                [output])


_reduce_scatter_base = reduce_scatter_tensor


@_collective
def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """``output_tensor_list[j]`` on rank i = ``input_tensor_list[i]`` of rank j.

    Args:
        output_tensor_list: world_size tensors; entry j receives rank j's block.
        input_tensor_list: world_size tensors; entry j is sent to rank j.
    """
    pg = _pg(group, "all_to_all")
    if pg is None:
        return None
    outs = _arrs(output_tensor_list, "all_to_all: output_tensor_list", pg.size())
    ins = _arrs(input_tensor_list, "all_to_all: input_tensor_list", pg.size())
    return _ret(pg.backend.alltoall(outs, ins, async_op=async_op), async_op)


@_collective
def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op=False):
    """Split ``input`` along dim 0 (by ``input_split_sizes`` or evenly), send block j to rank j,
    and concatenate the received blocks into ``output``.

    Args:
        output: receives the blocks of every rank along dim 0, in rank order.
        input: the blocks to send along dim 0.
        output_split_sizes: rows received from each rank; None for an equal split.
        input_split_sizes: rows sent to each rank; None for an equal split.
    """
    pg = _pg(group, "all_to_all_single")
    if pg is None:
        return None
    out, src = _arr(output, "output"), _arr(input, "input")
    return _ret(pg.backend.alltoall_single(out, src, output_split_sizes, input_split_sizes,
                                           async_op=async_op), async_op)


@_collective
def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every rank of the group reaches the barrier.

    Args:
        device_ids: accepted for torch compatibility; ignored.
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
