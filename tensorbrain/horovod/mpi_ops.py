"""Horovod's process and collective functions (``horovod.torch``'s names) on TensorBrain's
process group. ``allreduce`` averages by default (``op=Average``), as Horovod."""
from __future__ import annotations

import os


class _Op:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


Average, Sum, Adasum, Min, Max, Product = (_Op(n) for n in
                                           ("Average", "Sum", "Adasum", "Min", "Max", "Product"))


def _dist():
    from .. import distributed
    return distributed


def _need_init(what: str) -> None:
    if not _dist().is_initialized():
        raise ValueError(f"Horovod has not been initialized; use hvd.init() (before {what})")


def init(comm=None, process_sets=None) -> None:
    """Join the process group from the launcher's environment (tbrun, torchrun, mpiexec,
    Slurm, the hostfile launcher); a single process without those runs alone (size 1).

    Args:
        comm: not supported (an MPI communicator).
        process_sets: not supported.

    Raises:
        ValueError: ``comm`` or ``process_sets`` given.
    """
    if comm is not None or process_sets is not None:
        raise ValueError("hvd.init(comm=..., process_sets=...) is not supported by "
                         "tensorbrain.horovod: every process joins the one global set")
    dist = _dist()
    if dist.is_initialized():
        return
    from .. import _config
    if _config.get("TB_FAULT_TOLERANT"):  # tbrun --fault_tolerant: join the live group
        from ..distributed.elastic import init as elastic_init
        elastic_init()
        return
    if "WORLD_SIZE" not in os.environ and not any(
            k in os.environ for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")):
        from ..distributed.store import HashStore
        dist.init_process_group(store=HashStore(), rank=0, world_size=1)
        return
    dist.init_process_group()


def shutdown() -> None:
    """Leave the process group."""
    if _dist().is_initialized():
        _dist().destroy_process_group()


def is_initialized() -> bool:
    """Whether :func:`init` has run."""
    return _dist().is_initialized()


def size() -> int:
    """The number of processes."""
    _need_init("size()")
    return _dist().get_world_size()


def rank() -> int:
    """This process's rank."""
    _need_init("rank()")
    return _dist().get_rank()


def local_size() -> int:
    """Processes on this machine (LOCAL_WORLD_SIZE, as tbrun/torchrun set it)."""
    _need_init("local_size()")
    return int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get(
        "OMPI_COMM_WORLD_LOCAL_SIZE", size())))


def local_rank() -> int:
    """This process's rank on its machine."""
    _need_init("local_rank()")
    return int(os.environ.get("LOCAL_RANK", os.environ.get(
        "OMPI_COMM_WORLD_LOCAL_RANK", rank() % local_size())))


def cross_size() -> int:
    """The number of machines (processes with the same local rank)."""
    return size() // local_size()


def cross_rank() -> int:
    """This machine's index."""
    return rank() // local_size()


def mpi_threads_supported() -> bool:
    """False: TensorBrain's collectives do not run on MPI here."""
    return False


def mpi_enabled() -> bool:
    """False (see :func:`mpi_threads_supported`)."""
    return False


def mpi_built() -> bool:
    """False."""
    return False


def gloo_enabled() -> bool:
    """True: the CPU transport plays Gloo's part."""
    return True


def gloo_built() -> bool:
    """True."""
    return True


def nccl_built() -> bool:
    """Whether TensorBrain's NCCL backend can run here."""
    return _dist().is_nccl_available()


# ---- handles ------------------------------------------------------------------------------
class _Handle:
    def __init__(self, work, finish):
        self.work, self.finish, self.done = work, finish, False
        self.result = None

    def wait(self):
        if not self.done:
            if self.work is not None:
                self.work.wait()
            self.result = self.finish()
            self.done = True
        return self.result


def poll(handle) -> bool:
    """Whether ``handle``'s operation has finished (never blocks).

    Args:
        handle: from an ``*_async`` call.
    """
    return handle.done or handle.work is None or bool(getattr(handle.work, "is_completed",
                                                              lambda: False)())


def synchronize(handle):
    """Wait for an ``*_async`` operation and return its result.

    Args:
        handle: from an ``*_async`` call.

    Returns:
        The operation's result (the reduced tensor...).

    Raises:
        ValueError: not a handle.
    """
    if not isinstance(handle, _Handle):
        raise ValueError(f"synchronize() takes a handle from an *_async call, got "
                         f"{type(handle).__name__}")
    return handle.wait()


def _check_op(op, average=None):
    if average is not None:
        op = Average if average else Sum
    op = Average if op is None else op
    if op is Adasum:
        raise NotImplementedError("op=hvd.Adasum is not supported by tensorbrain.horovod; use "
                                  "hvd.Average (the default) or hvd.Sum")
    if op not in (Average, Sum, Min, Max, Product):
        raise ValueError(f"unknown reduction op {op!r}")
    return op


def _reduce_op(op):
    R = _dist().ReduceOp
    return {"Average": R.SUM, "Sum": R.SUM, "Min": R.MIN, "Max": R.MAX,
            "Product": R.PRODUCT}[op.name]


# ---- allreduce ----------------------------------------------------------------------------
def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=None):
    """Start an in-place all-reduce of ``tensor``; :func:`synchronize` waits and returns it.

    Args:
        tensor: reduced in place.
        average: the old spelling of ``op`` (True: Average, False: Sum).
        name: accepted (Horovod's tensor name).
        op: ``Average`` (default), ``Sum``, ``Min``, ``Max``, ``Product``.
        prescale_factor: multiply before the reduction.
        postscale_factor: multiply after it.
        process_set: accepted; the global set.

    Returns:
        A handle.
    """
    _need_init("allreduce")
    op = _check_op(op, average)
    from ..autograd import grad_mode
    with grad_mode.no_grad():
        if prescale_factor != 1.0:
            tensor._data *= tensor._data.dtype.type(prescale_factor)
        work = _dist().all_reduce(tensor, op=_reduce_op(op), async_op=True)

    def finish():
        scale = postscale_factor / (size() if op is Average else 1)
        if scale != 1.0:
            tensor._data *= tensor._data.dtype.type(scale)
        return tensor
    return _Handle(work, finish)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=None):
    """All-reduce ``tensor`` in place (average by default).

    Args:
        tensor: reduced in place.
        average: the old spelling of ``op``.
        name: accepted.
        op: as :func:`allreduce_async_`.
        prescale_factor: multiply before the reduction.
        postscale_factor: multiply after it.
        process_set: accepted; the global set.

    Returns:
        ``tensor``.
    """
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=None):
    """:func:`allreduce_async_` on a copy (``tensor`` is left as it is).

    Args:
        tensor: this process's tensor.
        average: the old spelling of ``op``.
        name: accepted.
        op: as :func:`allreduce_async_`.
        prescale_factor: multiply before the reduction.
        postscale_factor: multiply after it.
        process_set: accepted; the global set.

    Returns:
        A handle.
    """
    return allreduce_async_(tensor.detach().clone(), average, name, op, prescale_factor,
                            postscale_factor, process_set)


def allreduce(tensor, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=None):
    """The average (default), sum, min, max or product of ``tensor`` over every process.

    Args:
        tensor: this process's tensor (not modified).
        op: ``hvd.Average`` (default), ``hvd.Sum``, ``hvd.Min``, ``hvd.Max``, ``hvd.Product``;
            ``hvd.Adasum`` raises NotImplementedError.
        compression: ``Compression.none`` or ``Compression.fp16`` (sent as float16).

    Returns:
        A new tensor with the result.
    """
    from .compression import Compression
    compression = compression or Compression.none
    sent, ctx = compression.compress(tensor.detach().clone())
    out = synchronize(allreduce_async_(sent, average, name, op, prescale_factor,
                                       postscale_factor, process_set))
    return compression.decompress(out, ctx)


def grouped_allreduce(tensors, average=None, name=None, compression=None, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """:func:`allreduce` of each tensor in a list.

    Args:
        tensors: the tensors.
        average: the old spelling of ``op``.
        name: accepted.
        compression: as :func:`allreduce`.
        op: as :func:`allreduce`.
        prescale_factor: multiply before the reduction.
        postscale_factor: multiply after it.
        process_set: accepted; the global set.

    Returns:
        The results, in order.
    """
    return [allreduce(t, average, name, compression, op, prescale_factor, postscale_factor)
            for t in tensors]


# ---- allgather, broadcast, alltoall, reducescatter ------------------------------------------
def _done(value):
    return _Handle(None, lambda: value)


def allgather(tensor, name=None, process_set=None):
    """Concatenate every process's ``tensor`` along dim 0 (the first dimension may differ
    between processes; the others must match).

    Args:
        tensor: this process's tensor.
        name: accepted.
        process_set: accepted; the global set.

    Returns:
        The concatenation in rank order.

    Raises:
        ValueError: the dimensions after the first differ between processes.
    """
    import tensorbrain as tb
    _need_init("allgather")
    dist = _dist()
    n = size()
    if n == 1:
        return tensor.detach().clone()
    one = tensor.detach().reshape(1) if tensor.dim() == 0 else tensor.detach()
    sizes = [None] * n
    dist.all_gather_object(sizes, list(one.shape))
    rest = {tuple(s[1:]) for s in sizes}
    if len(rest) != 1:
        raise ValueError(f"allgather: tensors must match in every dimension but the first; "
                         f"got shapes {sizes} on ranks 0..{n - 1}")
    longest = max(s[0] for s in sizes)
    padded = one
    if one.shape[0] < longest:
        pad = tb.zeros((longest - one.shape[0],) + tuple(one.shape[1:]), dtype=one.dtype,
                       device=one.device)
        padded = tb.cat([one, pad], dim=0)
    parts = [tb.empty_like(padded) for _ in range(n)]
    dist.all_gather(parts, padded.contiguous())
    return tb.cat([p[:s[0]] for p, s in zip(parts, sizes, strict=True)], dim=0)


def allgather_async(tensor, name=None, process_set=None):
    """:func:`allgather`, run now; :func:`synchronize` returns the result."""
    return _done(allgather(tensor, name))


def broadcast_(tensor, root_rank, name=None, process_set=None):
    """Overwrite ``tensor`` with ``root_rank``'s, in place.

    Args:
        tensor: overwritten in place (read on ``root_rank``).
        root_rank: the sender.
        name: accepted.
        process_set: accepted; the global set.

    Returns:
        ``tensor``.
    """
    _need_init("broadcast")
    from ..autograd import grad_mode
    with grad_mode.no_grad():
        _dist().broadcast(tensor, src=root_rank)
    return tensor


def broadcast(tensor, root_rank, name=None, process_set=None):
    """``root_rank``'s ``tensor``, as a new tensor on every process.

    Args:
        tensor: read on ``root_rank``; gives the shape elsewhere.
        root_rank: the sender.
        name: accepted.
        process_set: accepted; the global set.

    Returns:
        A new tensor.
    """
    return broadcast_(tensor.detach().clone(), root_rank, name)


def broadcast_async(tensor, root_rank, name=None, process_set=None):
    """:func:`broadcast`, run now; :func:`synchronize` returns the result."""
    return _done(broadcast(tensor, root_rank, name))


def broadcast_async_(tensor, root_rank, name=None, process_set=None):
    """:func:`broadcast_`, run now; :func:`synchronize` returns ``tensor``."""
    return _done(broadcast_(tensor, root_rank, name))


def alltoall(tensor, splits=None, name=None, process_set=None):
    """Send block ``j`` of ``tensor`` (dim 0, split evenly or by ``splits``) to rank ``j``;
    return the received blocks concatenated (and, with ``splits``, the received sizes).

    Args:
        tensor: this process's rows.
        splits: rows for each rank (default: equal blocks).
        name: accepted.
        process_set: accepted; the global set.

    Returns:
        The received rows, or ``(rows, received_splits)`` when ``splits`` is given.

    Raises:
        ValueError: rows not divisible without ``splits``, or ``splits`` of the wrong length/sum.
    """
    import tensorbrain as tb
    _need_init("alltoall")
    dist, n = _dist(), size()
    rows = tensor.shape[0]
    if splits is None:
        if rows % n:
            raise ValueError(f"alltoall: dim 0 ({rows}) is not divisible by the number of "
                             f"processes ({n}); pass splits=")
        send = [rows // n] * n
    else:
        send = [int(s) for s in (splits.tolist() if hasattr(splits, "tolist") else splits)]
        if len(send) != n or sum(send) != rows:
            raise ValueError(f"alltoall: splits {send} must have {n} entries summing to {rows}")
    table = [None] * n
    dist.all_gather_object(table, send)
    recv = [table[j][rank()] for j in range(n)]
    out = tb.empty((sum(recv),) + tuple(tensor.shape[1:]), dtype=tensor.dtype,
                   device=tensor.device)
    dist.all_to_all_single(out, tensor.detach().contiguous(), recv, send)
    return out if splits is None else (out, tb.tensor(recv))


def alltoall_async(tensor, splits=None, name=None, process_set=None):
    """:func:`alltoall`, run now; :func:`synchronize` returns the result."""
    return _done(alltoall(tensor, splits, name))


def reducescatter(tensor, name=None, compression=None, op=None, process_set=None,
                  prescale_factor=1.0, postscale_factor=1.0):
    """Reduce ``tensor`` over the processes (average by default) and return this rank's block
    of dim 0 (the first ``rows % size`` ranks get one row more).

    Args:
        tensor: this process's tensor (same shape everywhere).
        name: accepted.
        compression: accepted (sent uncompressed).
        op: ``Average`` (default), ``Sum``, ``Min``, ``Max``, ``Product``.
        process_set: accepted; the global set.
        prescale_factor: multiply before the reduction.
        postscale_factor: multiply after it.

    Returns:
        This rank's block of the result.
    """
    _need_init("reducescatter")
    op = _check_op(op)
    total = allreduce(tensor * prescale_factor if prescale_factor != 1.0 else tensor,
                      op=op, postscale_factor=postscale_factor)
    n, r = size(), rank()
    per, extra = divmod(tensor.shape[0], n)
    start = r * per + min(r, extra)
    return total[start:start + per + (1 if r < extra else 0)].contiguous()


def reducescatter_async(tensor, name=None, compression=None, op=None, process_set=None,
                        prescale_factor=1.0, postscale_factor=1.0):
    """:func:`reducescatter`, run now; :func:`synchronize` returns the result."""
    return _done(reducescatter(tensor, name, compression, op, process_set, prescale_factor,
                               postscale_factor))


def barrier(process_set=None) -> None:
    """Wait for every process.

    Args:
        process_set: accepted; the global set.
    """
    _need_init("barrier")
    _dist().barrier()


def join(device=-1) -> int:
    """Wait until every process has called ``join``; returns the last rank to join.

    Unlike Horovod, a process that has joined does not answer the others' all-reduces with
    zeros: every process must call ``join`` after the same number of collectives.

    Args:
        device: accepted.

    Returns:
        The rank that called ``join`` last.
    """
    _need_init("join")
    dist = _dist()
    import time
    order: list[float] = [0.0] * size()
    dist.all_gather_object(order, time.time())
    return max(range(size()), key=lambda r: order[r])
