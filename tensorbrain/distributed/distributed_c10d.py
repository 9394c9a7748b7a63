"""Process groups and collectives on Tensors, with ``torch.distributed``'s names and semantics.

This layer checks arguments (types, sizes, ranks) and turns Tensors into their arrays; the bytes
are moved by a backend (``tensorbrain/distributed/backends``). Ranks given to collectives
(``src``, ``dst``, ``group_dst``...) are *global* ranks, as in torch.

This module creates and destroys groups (``init_process_group``, ``new_group``,
``destroy_process_group``) and is the one import path for everything else, which lives in:
``_groups.py`` (ReduceOp, ProcessGroup, the world state, rank/size queries),
``_collectives.py`` (the tensor collectives), ``_p2p.py`` (send/recv and batches),
``_object_collectives.py`` (collectives on plain-data objects). What a backend does with a
collective is the pipeline of ``backends/base.py``.

>>> import tensorbrain as tb
>>> import tensorbrain.distributed as dist
>>> dist.init_process_group("tcp", store=dist.HashStore(), rank=0, world_size=1)
>>> t = tb.tensor([1.0, 2.0])
>>> dist.all_reduce(t, op=dist.ReduceOp.SUM)
>>> t.tolist(), dist.get_rank(), dist.get_world_size(), dist.get_backend()
([1.0, 2.0], 0, 1, 'tcp')
>>> dist.destroy_process_group()
"""
from __future__ import annotations

import time
from datetime import timedelta

import numpy as np

from . import _observe, _work, backends
from ._collectives import (_all_gather_base, _arr, _arrs, _op, _reduce_scatter_base, all_gather,
                           all_gather_into_tensor, all_reduce, all_reduce_coalesced, all_to_all,
                           all_to_all_single, barrier, broadcast, gather, monitored_barrier,
                           reduce, reduce_scatter, reduce_scatter_tensor, scatter)
from ._groups import (_WORLD, Backend, GroupMember, ProcessGroup, ReduceOp,
                      _default, _pg, _root, _seconds, _World, _world, default_pg_timeout,
                      get_backend, get_global_rank, get_group_rank, get_process_group_ranks,
                      get_rank, get_world_size, group)
from ._object_collectives import (all_gather_object, broadcast_object_list, gather_object,
                                  scatter_object_list)
from ._p2p import P2POp, batch_isend_irecv, irecv, isend, recv, send
from .errors import DistError

__all__ = [
    "Backend", "GroupMember", "P2POp", "ProcessGroup", "ReduceOp", "Work", "all_gather",
    "all_gather_into_tensor", "all_gather_object", "all_reduce", "all_reduce_coalesced",
    "all_to_all", "all_to_all_single", "barrier", "batch_isend_irecv", "broadcast",
    "broadcast_object_list", "default_pg_timeout", "destroy_process_group", "gather",
    "gather_object", "get_backend", "get_global_rank", "get_group_rank", "get_process_group_ranks",
    "get_rank", "get_world_size", "group", "init_process_group", "irecv", "is_available",
    "is_backend_available", "is_gloo_available", "is_initialized", "is_mpi_available",
    "is_nccl_available", "is_tcp_available", "isend", "monitored_barrier", "new_group", "recv",
    "reduce", "reduce_scatter", "reduce_scatter_tensor", "scatter", "scatter_object_list", "send",
]
# the private helpers other modules of the package use (``c10d._pg``, ``c10d._world`` ...)
_PRIVATE = (_World, _all_gather_base, _arr, _arrs, _op, _pg, _world,
            _reduce_scatter_base, _root)


# ***** availability *****
def is_available() -> bool:
    """The distributed package is always built (the tcp backend needs only the stdlib)."""
    return True


def is_tcp_available() -> bool:
    """Always True: the tcp backend (alias gloo) needs only the standard library."""
    return True


is_gloo_available = is_tcp_available


def is_mpi_available() -> bool:
    """Whether mpi4py and an MPI library can be loaded (asked lazily, nothing imported before)."""
    return backends.is_backend_available("mpi")


def is_nccl_available() -> bool:
    """Whether CuPy with NCCL and a GPU can be used here."""
    return backends.is_backend_available("nccl")


def is_initialized() -> bool:
    """Whether the default process group is initialized."""
    return _WORLD.default is not None


def is_backend_available(backend: str) -> bool:
    """Whether backend ``backend`` is known and can be used here.

    Args:
        backend: a backend name or alias (``"tcp"``, ``"gloo"``, ``"mpi"``, ``"nccl"``).
    """
    return backends.is_backend_available(backend)


# ***** init / destroy *****
def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None, device_id=None):
    """Join the default process group (collective: every rank calls it).

    ``init_method``: ``env://`` (default; RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT or the
    variables of Slurm / Open MPI / MPICH), ``tcp://host:port``, ``file:///path``; or pass an
    explicit ``store`` with ``rank`` and ``world_size``. ``backend``: "tcp" (alias "gloo"),
    "mpi", "nccl", or None (nccl for CUDA ``device_id``, tcp otherwise).

    Args:
        backend (str | None): ``"tcp"`` (alias ``"gloo"``), ``"mpi"``, ``"nccl"``, torch's
            ``"cpu:gloo,cuda:nccl"``, or None.
        init_method (str | None): a URL: ``env://``, ``tcp://host:port`` or ``file:///path``.
        timeout (timedelta | float | None): the default timeout of collectives (a ``timedelta``
            or seconds; 30 minutes).
        world_size (int): the number of ranks (-1: from the environment).
        rank (int): this process's rank (-1: from the environment).
        store (Store | None): an explicit store (with ``rank`` and ``world_size``) instead of
            ``init_method``.
        group_name (str): accepted for torch compatibility.
        pg_options (object | None): accepted for torch compatibility.
        device_id (int | device | None): the CUDA device of this rank (chooses nccl when
            ``backend`` is None).

    Raises:
        DistError: the default group is already initialized, or the arguments are inconsistent.
        DistTimeoutError: not every rank joined within ``timeout``; the message names them.
        ValueError: an unknown backend (with the nearest name), or ``RANK``/``WORLD_SIZE`` set
            without ``MASTER_ADDR``/``MASTER_PORT`` (naming the missing ones).

    Example:
        >>> import tensorbrain as tb, tensorbrain.distributed as dist
        >>> dist.init_process_group("tcp", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
        >>> t = tb.ones(2); dist.all_reduce(t); t.tolist()
        [1.0, 1.0]
        >>> dist.destroy_process_group()
    """
    with _WORLD.lock:
        if _WORLD.default is not None:
            raise DistError("init_process_group: the default process group is already "
                            "initialized (trying to initialize it twice); call "
                            "destroy_process_group() first")
    dev_type = "cpu"
    if device_id is not None:
        dev_type = getattr(device_id, "type", str(device_id).split(":")[0])
    requested = backends.default_backend(dev_type) if backend is None else str(backend).lower()
    if isinstance(backend, str) and ":" in backend:  # torch's "cpu:gloo,cuda:nccl"
        parts = dict(p.split(":", 1) for p in backend.split(","))
        requested = parts.get(dev_type, next(iter(parts.values()))).lower()
    name = backends.canonical_name(requested)  # unknown backend -> ValueError listing the known
    timeout_s = _seconds(timeout)
    deadline = time.monotonic() + timeout_s  # ONE deadline for every wait of the set-up
    launched = None
    if store is None and init_method is None:
        # backends that bring their own launcher (mpi under mpiexec) know rank and size already
        launched = backends.launcher_world(name)
    if launched is not None:
        from .store import HashStore
        rank, world_size = launched
        store = HashStore()
    elif store is None:
        if init_method is None:
            init_method = "env://"
        from .rendezvous import rendezvous
        store, rank, world_size = next(rendezvous(init_method, rank, world_size,
                                                  timeout=timedelta(seconds=timeout_s)))
    else:
        if init_method is not None:
            raise ValueError("init_process_group: pass either init_method or store, not both")
        if rank is None or world_size is None or rank < 0 or world_size < 1:
            raise ValueError(f"init_process_group with an explicit store needs rank >= 0 and "
                             f"world_size >= 1, got rank={rank}, world_size={world_size}")
    _check_rank(rank, world_size)
    _WORLD.inits += 1
    from .store import PrefixStore
    prefix = f"tb_pg{_WORLD.inits}"
    if launched is None:
        _check_world_size(PrefixStore(prefix, store), rank, world_size, timeout_s, deadline)
    be = backends.create_backend(name, PrefixStore(f"{prefix}/default", store), rank, world_size,
                                 timeout_s, "default", global_ranks=range(world_size),
                                 deadline=deadline)
    pg = ProcessGroup("default", range(world_size), rank, be, requested, timeout_s)
    with _WORLD.lock:
        _WORLD.default, _WORLD.store, _WORLD.prefix = pg, store, prefix
        _WORLD.groups = {"default": pg}
        _WORLD.group_count = 0
        _WORLD.global_rank = rank


def _check_rank(rank, world_size) -> None:
    if not isinstance(rank, (int, np.integer)) or not isinstance(world_size, (int, np.integer)):
        raise TypeError(f"rank and world_size must be ints, got {rank!r} and {world_size!r}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is out of range for world_size {world_size} "
                         f"(ranks are 0..{world_size - 1}); check RANK/WORLD_SIZE")


def _check_world_size(store, rank, world_size, timeout_s, deadline=None) -> None:
    """Every rank must agree on world_size (and, under a launcher, on the run id): rank 0 reads
    every rank's join record and publishes its verdict; the others wait for that verdict.
    Waits in slices until ``deadline``: a rank that joined and died is named at once, a store
    that fails ends the wait with its error (see ``_liveness.wait_keys``).

    Rank 0 serves the store: when it finds a mismatch it waits (up to 2 s) until the others
    have read its verdict before it raises, so they report the cause too, not "lost the
    connection to TCPStore" (second fault run)."""
    if world_size == 1:
        return
    import json

    from . import _liveness
    from .errors import DistTimeoutError
    deadline = time.monotonic() + timeout_s if deadline is None else deadline
    mine = _announce(store, rank, world_size)
    keys = [f"ws/{j}" for j in range(world_size)] if rank == 0 else ["ws/verdict"]
    try:
        _liveness.wait_keys(store, keys, deadline, "init_process_group",
                            {i: (i if rank == 0 else 0) for i in range(len(keys))},
                            report=_wait_reporter(world_size, timeout_s) if rank == 0 else None)
    except DistTimeoutError as exc:
        missing = getattr(exc, "missing", None) or "?"
        raise DistTimeoutError(
            f"init_process_group: rank(s) {missing} of world_size {world_size} did not join "
            f"within {timeout_s:g} s; check that every rank was started with the same "
            "MASTER_ADDR:MASTER_PORT and WORLD_SIZE") from None
    if rank == 0:
        error = next((e for j in range(1, world_size)
                      for e in [_disagreement(mine, _record(store.get(f"ws/{j}")), 0, j)] if e),
                     None)
        store.set("ws/verdict", json.dumps({**mine, "error": error}).encode())
        if error is not None:
            try:  # keep serving the store until the others have read the verdict
                _liveness.wait_keys(store, [f"ack/{j}" for j in range(1, world_size)],
                                    min(deadline, time.monotonic() + 2.0), "init_process_group")
            except Exception:  # noqa: BLE001 - best effort: the error below is what matters
                pass
            raise ValueError(f"init_process_group: {error}")
        return
    verdict = _record(store.get("ws/verdict"))
    store.set(f"ack/{rank}", b"1")
    error = _disagreement(mine, verdict, rank, 0) or verdict.get("error")
    if error:
        raise ValueError(f"init_process_group: {error}")


def _record(raw: bytes) -> dict:
    """A join record (JSON; a bare number from before the records)."""
    import json
    try:
        out = json.loads(raw)
    except ValueError:
        out = None
    return out if isinstance(out, dict) else {"ws": int(raw) if raw.isdigit() else raw}


def _disagreement(mine: dict, theirs: dict, me: int, other: int) -> str | None:
    """Why ranks ``me`` and ``other`` cannot be one group (their join records), or None."""
    if theirs.get("ws") != mine["ws"]:
        return (f"inconsistent world_size: rank {me} was started with world_size={mine['ws']} "
                f"but rank {other} with {theirs.get('ws')}; every rank must use the same "
                "WORLD_SIZE")
    if mine.get("run") and theirs.get("run") and mine["run"] != theirs["run"]:
        return (f"rank {other} belongs to another run (run id {theirs['run']!r}, this rank's is "
                f"{mine['run']!r}): two jobs share one MASTER_ADDR:MASTER_PORT; give each job "
                "its own port")
    return None


def _wait_reporter(world_size, timeout_s):
    """Rank 0's progress line while ranks are missing (every TB_WAIT_REPORT_S seconds)."""
    import sys

    def report(joined, missing, waited):
        sys.stderr.write(
            f"[tensorbrain] init_process_group: rank 0 has waited {waited:.0f} s (timeout "
            f"{timeout_s:g} s) for world_size {world_size}: joined {joined}, missing {missing}. "
            f"Check that {world_size} processes were started (launcher --nnodes x "
            "--nproc_per_node), that they use the same MASTER_ADDR:MASTER_PORT and WORLD_SIZE, "
            "and that the missing ones did not fail at start-up (their logs).\n")
        sys.stderr.flush()
    return report


def _announce(store, rank, world_size) -> dict:
    """Claim ``ws/<rank>`` with this rank's join record (world_size, pid, host, run id), then
    publish pid and host for liveness checks. The claim is a compare-and-set: a second process
    with the same rank (a second job on a busy MASTER_PORT joined the first job's store, or two
    processes got RANK=r) is refused at once with the holder named, and changes nothing."""
    import json
    import os
    import socket
    import uuid

    from .. import _config
    from . import _liveness
    from .store import PrefixStore
    mine = {"ws": int(world_size), "pid": os.getpid(), "host": socket.gethostname(),
            "run": _config.get("TB_RUN_ID") or os.environ.get("TORCHELASTIC_RUN_ID", ""),
            "nonce": uuid.uuid4().hex}
    raw = json.dumps(mine).encode()
    got = store.compare_set(f"ws/{rank}", b"", raw)
    if got != raw:
        other = _record(got)
        raise DistError(
            f"init_process_group: rank {rank} has already joined the store at "
            f"{store.describe()} (process {other.get('pid', '?')} on {other.get('host', '?')}, "
            f"world_size {other.get('ws', '?')}): another job is using this "
            "MASTER_ADDR:MASTER_PORT (its rank 0 serves the store there), or two processes were "
            f"started with RANK={rank}. Give each job its own MASTER_PORT (tbrun --standalone "
            "picks a free one)")
    _liveness.announce(PrefixStore("default", store), rank)  # seen by the default group's backend
    return mine


def _safe_check(store, key) -> bool:
    try:
        return store.check([key])
    except Exception:  # noqa: BLE001
        return False


def destroy_process_group(group=None) -> None:
    """Shut down ``group`` (default: every group, and leave the default group).

    Args:
        group: the group to shut down; None for all of them.
    """
    with _WORLD.lock:
        if group is None or group is GroupMember.WORLD or group is _WORLD.default:
            pgs = list(_WORLD.groups.values())
            _WORLD.default, _WORLD.store, _WORLD.groups = None, None, {}
        elif group is GroupMember.NON_GROUP_MEMBER:
            return
        else:
            pgs = [_WORLD.groups.pop(group.group_name, group)]
    for pg in pgs:
        try:
            pg.backend.shutdown()
        except Exception:  # noqa: BLE001 - teardown of a failed group must not mask the error
            pg.backend.abort()
    if _WORLD.default is None:  # the last group is gone: write the timeline
        _observe.flush()
        _observe.reset()


def new_group(ranks=None, timeout=None, backend=None, pg_options=None,
              use_local_synchronization=False, group_desc=None):
    """A group of ``ranks`` (global ranks; default all). Every rank of the default group must
    call it, in the same order, as in torch; ranks outside get ``GroupMember.NON_GROUP_MEMBER``.
    Each group has its own connections, so groups (overlapping ones included) never mix messages.

    Args:
        ranks: the members, as global ranks; None for all.
        timeout: the group's timeout (a ``timedelta`` or seconds); None for the default group's.
        backend: the group's backend; None for the default group's.
        pg_options: accepted for torch compatibility.
        use_local_synchronization: accepted for torch compatibility.
        group_desc: accepted for torch compatibility.

    Returns:
        ProcessGroup: the group, or ``GroupMember.NON_GROUP_MEMBER`` on ranks outside ``ranks``.

    Raises:
        ValueError: a rank is out of range, repeated, or ``ranks`` is empty.
    """
    default = _default("new_group")
    world = default.size()
    ranks = list(range(world)) if ranks is None else sorted(int(r) for r in ranks)
    for r in ranks:
        if not 0 <= r < world:
            raise ValueError(f"new_group: rank {r} is out of range 0..{world - 1}")
    if len(set(ranks)) != len(ranks) or not ranks:
        raise ValueError(f"new_group: ranks must be distinct and non-empty, got {ranks}")
    with _WORLD.lock:
        _WORLD.group_count += 1
        name = str(_WORLD.group_count)
    if _WORLD.global_rank not in ranks:
        return GroupMember.NON_GROUP_MEMBER
    requested = default.backend_name if backend is None else str(backend).lower()
    bname = backends.canonical_name(requested)
    timeout_s = default.timeout if timeout is None else _seconds(timeout)
    from .store import PrefixStore
    assert _WORLD.store is not None  # set with the default group
    store = PrefixStore(f"{_WORLD.prefix}/group{name}", _WORLD.store)
    group_rank = ranks.index(_WORLD.global_rank)
    be = backends.create_backend(bname, store, group_rank, len(ranks), timeout_s, name,
                                 global_ranks=ranks)
    pg = ProcessGroup(name, ranks, group_rank, be, requested, timeout_s)
    with _WORLD.lock:
        _WORLD.groups[name] = pg
    return pg


def new_subgroups_by_enumeration(ranks_per_subgroup_list, timeout=None, backend=None,
                                 pg_options=None, group_desc=None):
    """One group per list of ranks (every rank calls it with the same lists), and this rank's.

    Args:
        ranks_per_subgroup_list (list[list[int]]): the groups' global ranks; a rank may be in
            at most one.
        timeout: the groups' timeout (None: the default group's).
        backend: the groups' backend (None: the default group's).
        pg_options: accepted for torch compatibility.
        group_desc: accepted for torch compatibility.

    Returns:
        tuple: ``(this rank's group or None, [every group])``.

    Raises:
        ValueError: the list is empty, or a rank is in two groups.
    """
    if not ranks_per_subgroup_list:
        raise ValueError("The arg 'ranks_per_subgroup_list' cannot be empty")
    owner: dict = {}
    for i, ranks in enumerate(ranks_per_subgroup_list):
        for r in ranks:
            if r in owner:
                raise ValueError(f"Rank {r} has appeared in both subgroup "
                                 f"{list(ranks_per_subgroup_list[owner[r]])} and {list(ranks)}")
            owner[r] = i
    groups = [new_group(ranks, timeout=timeout, backend=backend) for ranks in
              ranks_per_subgroup_list]
    mine = owner.get(_WORLD.global_rank)
    return (groups[mine] if mine is not None else None), groups


def is_xccl_available() -> bool:
    """False: TensorBrain has no Intel GPU (XCCL) backend."""
    return False


#: torch's type of a group's name (a string).
GroupName = str

Work = _work.Work
