"""Process groups and collectives on Tensors, with ``torch.distributed``'s names and semantics.

This layer checks arguments (types, sizes, ranks) and turns Tensors into their arrays; the bytes
are moved by a backend (``tensorbrain/distributed/backends``). Ranks given to collectives
(``src``, ``dst``, ``group_dst``...) are *global* ranks, as in torch.

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

import enum
import threading
from datetime import timedelta

import time

import numpy as np

from . import _codec, _observe, _work, backends
from .errors import DistError

# ***** public names *****


class ReduceOp(enum.Enum):
    """Reduction operations (``dist.ReduceOp.SUM`` ...); strings like "sum" are accepted too."""
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "prod"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"


class Backend:
    """Backend names, as ``torch.distributed.Backend`` (``Backend.GLOO == "gloo"``)."""
    TCP = "tcp"
    GLOO = "gloo"
    MPI = "mpi"
    NCCL = "nccl"
    UNDEFINED = "undefined"

    @staticmethod
    def register_backend(name, func, devices=("cpu",), extended_api=False):
        """Register ``func(store, rank, size, timeout_seconds, group_name)`` as backend ``name``.

        Args:
            name: the backend's name, as used by ``init_process_group(backend=name)``.
            func: the factory ``func(store, rank, size, timeout_seconds, group_name) -> Backend``.
            devices: the device types the backend takes (``"cpu"``, ``"cuda"``).
            extended_api: accepted for torch compatibility; ignored.
        """
        backends.register_backend(name, func, devices)


default_pg_timeout = timedelta(minutes=30)


class ProcessGroup:
    """A group of ranks with its backend. ``rank()``/``size()`` are within the group.

    Made by :func:`init_process_group` (the default group) and :func:`new_group`; not meant to
    be constructed directly.

    Args:
        name: the group's name (``"default"`` or a number).
        ranks: the group's members, as global ranks.
        group_rank: this process's rank in the group.
        backend: the backend that moves the data.
        backend_name: the backend's name, as requested.
        timeout: the group timeout in seconds.
    """

    def __init__(self, name, ranks, group_rank, backend, backend_name, timeout):
        self.group_name, self.ranks = name, list(ranks)
        self._rank, self.backend, self.backend_name = group_rank, backend, backend_name
        self.timeout = timeout
        # TB_TIMELINE / TB_DISTRIBUTED_DEBUG=INFO observe every collective here (the backend
        # itself when both are off: no cost); see _observe.py
        global_rank = group_rank if name == "default" else _WORLD.global_rank
        self.backend = _observe.wrap(backend, name, global_rank)

    def rank(self) -> int:
        """This process's rank within the group."""
        return self._rank

    def size(self) -> int:
        """The number of ranks in the group."""
        return len(self.ranks)

    def group_rank_of(self, global_rank: int, what: str) -> int:
        """The group rank of a global rank.

        Args:
            global_rank: a rank of the default group.
            what: the argument's name, for error messages.

        Returns:
            int: its rank in this group.

        Raises:
            TypeError: ``global_rank`` is not an int.
            ValueError: ``global_rank`` is out of range or not a member of this group.
        """
        if not isinstance(global_rank, (int, np.integer)) or isinstance(global_rank, bool):
            raise TypeError(f"{what} must be an int rank, got {type(global_rank).__name__}")
        try:
            return self.ranks.index(int(global_rank))
        except ValueError:
            world = _world().default.size()
            if not 0 <= global_rank < world:
                raise ValueError(f"{what}={global_rank} is out of range: ranks are 0..{world - 1}"
                                 ) from None
            raise ValueError(f"{what}={global_rank} is not a member of group "
                             f"{self.group_name!r} (ranks {self.ranks})") from None

    def __repr__(self) -> str:
        return (f"ProcessGroup({self.group_name!r}, backend={self.backend_name}, ranks={self.ranks}, "
                f"rank={self._rank})")


class _NonMember:
    def __repr__(self):
        return "GroupMember.NON_GROUP_MEMBER"


class GroupMember:
    """Special groups, as ``torch.distributed.GroupMember``: ``WORLD`` (the default group, None)
    and ``NON_GROUP_MEMBER`` (what :func:`new_group` returns on ranks outside the group).
    """
    WORLD = None                    # "the default group"
    NON_GROUP_MEMBER = _NonMember()  # new_group() on a rank outside ``ranks``


class group:  # noqa: N801 - torch spells it this way
    """``group.WORLD``: the default group (None), as ``torch.distributed.group``."""
    WORLD = None


class _World:
    def __init__(self):
        self.default: ProcessGroup | None = None
        self.store = None
        self.prefix = ""
        self.groups: dict = {}
        self.group_count = 0
        self.global_rank = -1
        self.lock = threading.Lock()


_WORLD = _World()
_FAST = [None]  # the default group's all_reduce fast path (_fastpath.py), or None
_INIT_COUNT = [0]   # re-inits in this process get fresh store keys


def _world() -> _World:
    return _WORLD


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
def _seconds(timeout) -> float:
    if timeout is None:
        return default_pg_timeout.total_seconds()
    if isinstance(timeout, timedelta):
        return timeout.total_seconds()
    return float(timeout)


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None, device_id=None):
    """Join the default process group (collective: every rank calls it).

    ``init_method``: ``env://`` (default; RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT or the
    variables of Slurm / Open MPI / MPICH), ``tcp://host:port``, ``file:///path``; or pass an
    explicit ``store`` with ``rank`` and ``world_size``. ``backend``: "tcp" (alias "gloo"),
    "mpi", "nccl", or None (nccl for CUDA ``device_id``, tcp otherwise).

    Args:
        backend: ``"tcp"`` (alias ``"gloo"``), ``"mpi"``, ``"nccl"``, or None.
        init_method: a URL: ``env://``, ``tcp://host:port`` or ``file:///path``.
        timeout: the default timeout of collectives (a ``timedelta`` or seconds; 30 minutes).
        world_size: the number of ranks (-1: from the environment).
        rank: this process's rank (-1: from the environment).
        store: an explicit store (with ``rank`` and ``world_size``) instead of ``init_method``.
        group_name: accepted for torch compatibility.
        pg_options: accepted for torch compatibility.
        device_id: the CUDA device of this rank (chooses nccl when ``backend`` is None).

    Raises:
        DistError: the default group is already initialized, or the arguments are inconsistent.
        DistTimeoutError: not every rank joined within ``timeout``; the message names them.
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
    _INIT_COUNT[0] += 1
    from .store import PrefixStore
    prefix = f"tb_pg{_INIT_COUNT[0]}"
    if launched is None:
        _check_world_size(PrefixStore(prefix, store), rank, world_size, timeout_s, deadline)
    be = backends.create_backend(name, PrefixStore(f"{prefix}/default", store), rank, world_size,
                                 timeout_s, "default", global_ranks=range(world_size),
                                 deadline=deadline)
    pg = ProcessGroup("default", range(world_size), rank, be, requested, timeout_s)
    from . import _fastpath
    with _WORLD.lock:
        _FAST[0] = _fastpath.for_group(pg, be)
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
    """Every rank must agree on world_size: compare with rank 0's (rank 0 checks everyone).
    Waits in slices until ``deadline``: a rank that joined and died is named at once, a store
    that fails ends the wait with its error (see ``_liveness.wait_keys``)."""
    if world_size == 1:
        return
    from . import _liveness
    from .errors import DistTimeoutError
    deadline = time.monotonic() + timeout_s if deadline is None else deadline
    _announce(store, rank, world_size)
    keys = [f"ws/{j}" for j in range(world_size)] if rank == 0 else ["ws/0"]
    try:
        _liveness.wait_keys(store, keys, deadline, "init_process_group",
                            {i: int(k.split("/")[1]) for i, k in enumerate(keys)},
                            report=_wait_reporter(world_size, timeout_s) if rank == 0 else None)
    except DistTimeoutError as exc:
        missing = getattr(exc, "missing", None) or "?"
        raise DistTimeoutError(
            f"init_process_group: rank(s) {missing} of world_size {world_size} did not join "
            f"within {timeout_s:g} s; check that every rank was started with the same "
            "MASTER_ADDR:MASTER_PORT and WORLD_SIZE") from None
    for k in keys:
        theirs = int(store.get(k))
        if theirs != world_size:
            who = k.split("/")[1]
            raise ValueError(f"init_process_group: inconsistent world_size: rank {rank} was "
                             f"started with world_size={world_size} but rank {who} with "
                             f"{theirs}; every rank must use the same WORLD_SIZE")


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


def _announce(store, rank, world_size) -> None:
    """Publish this rank's join record: its world_size, then (for liveness checks) pid and host."""
    from . import _liveness
    from .store import PrefixStore
    store.set(f"ws/{rank}", str(world_size).encode())
    _liveness.announce(PrefixStore("default", store), rank)  # seen by the default group's backend


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
            fast, _FAST[0] = _FAST[0], None
            if fast is not None:
                fast.close()
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
    store = PrefixStore(f"{_WORLD.prefix}/group{name}", _WORLD.store)
    group_rank = ranks.index(_WORLD.global_rank)
    be = backends.create_backend(bname, store, group_rank, len(ranks), timeout_s, name,
                                 global_ranks=ranks)
    pg = ProcessGroup(name, ranks, group_rank, be, requested, timeout_s)
    with _WORLD.lock:
        _WORLD.groups[name] = pg
    return pg


def _default(what: str) -> ProcessGroup:
    pg = _WORLD.default
    if pg is None:
        raise DistError(f"{what}: the default process group is not initialized; call "
                        f"tb.distributed.init_process_group(...) first")
    return pg


def _pg(group, what: str):
    """The ProcessGroup to use, or None when this rank is not a member of ``group``."""
    default = _default(what)
    if group is None or group is GroupMember.WORLD:
        return default
    if group is GroupMember.NON_GROUP_MEMBER:
        return None
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"{what}: group must be a ProcessGroup from new_group(), got "
                        f"{type(group).__name__}")
    return group


def get_rank(group=None) -> int:
    """This process's rank in ``group`` (-1 if not a member).

    Args:
        group: the process group; None for the default group.
    """
    pg = _pg(group, "get_rank")
    return -1 if pg is None else pg.rank()


def get_world_size(group=None) -> int:
    """The number of ranks in ``group`` (-1 if this rank is not a member).

    Args:
        group: the process group; None for the default group.
    """
    pg = _pg(group, "get_world_size")
    return -1 if pg is None else pg.size()


def get_backend(group=None) -> str:
    """The name of ``group``'s backend (as requested, e.g. ``"gloo"``).

    Args:
        group: the process group; None for the default group.

    Raises:
        ValueError: this rank is not a member of the group.
    """
    pg = _pg(group, "get_backend")
    if pg is None:
        raise ValueError("get_backend: this rank is not a member of the group")
    return pg.backend_name


def get_process_group_ranks(group) -> list:
    """The global ranks of ``group``'s members ([] if this rank is not one).

    Args:
        group: the process group; None for the default group.
    """
    pg = _pg(group, "get_process_group_ranks")
    return [] if pg is None else list(pg.ranks)


def get_global_rank(group, group_rank: int) -> int:
    """The global rank of group rank ``group_rank``.

    Args:
        group: the process group; None for the default group.
        group_rank: a rank within ``group``.
    """
    return _pg(group, "get_global_rank").ranks[group_rank]


def get_group_rank(group, global_rank: int) -> int:
    """The rank within ``group`` of global rank ``global_rank``.

    Args:
        group: the process group; None for the default group.
        global_rank: a rank of the default group.

    Raises:
        ValueError: ``global_rank`` is not a member of ``group``.
    """
    return _pg(group, "get_group_rank").group_rank_of(global_rank, "global_rank")


# ***** argument helpers *****
def _arr(t, what: str):
    from ..tensor import Tensor
    if not isinstance(t, Tensor):
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


def _root(pg, global_rank, group_rank, what) -> int:
    if group_rank is not None:
        if not 0 <= group_rank < pg.size():
            raise ValueError(f"group_{what}={group_rank} is out of range 0..{pg.size() - 1}")
        return int(group_rank)
    if global_rank is None:
        global_rank = 0
    return pg.group_rank_of(global_rank, what)


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


# ***** point to point *****
def _peer(pg, peer, group_peer, what) -> int:
    r = _root(pg, peer, group_peer, what)
    if r == pg.rank():
        raise ValueError(f"{what}={peer if group_peer is None else group_peer} is this rank; "
                         f"a rank cannot send to or receive from itself")
    return r


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Send ``tensor`` to ``dst`` without waiting; returns a Work.

    Args:
        tensor: the data to send.
        dst: the destination global rank.
        group: the process group; None for the default group.
        tag: messages are matched in order per (peer, tag).
        group_dst: the destination as a rank within ``group`` (instead of ``dst``).

    Returns:
        Work | None: the Work, or None on a rank that is not a member of ``group``.

    Raises:
        ValueError: ``dst`` is this rank or not a member of the group.
    """
    pg = _pg(group, "isend")
    if pg is None:
        return None
    return pg.backend.send(_arr(tensor, "isend: tensor"), _peer(pg, dst, group_dst, "dst"),
                           int(tag), async_op=True)


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receive into ``tensor`` from ``src`` (None: any rank) without waiting; returns a Work.

    Args:
        tensor: receives the data (shape and dtype must match the send).
        src: the source global rank; None for any rank.
        group: the process group; None for the default group.
        tag: messages are matched in order per (peer, tag).
        group_src: the source as a rank within ``group`` (instead of ``src``).

    Returns:
        Work | None: the Work, or None on a rank that is not a member of ``group``.
    """
    pg = _pg(group, "irecv")
    if pg is None:
        return None
    peer = None if src is None and group_src is None else _peer(pg, src, group_src, "src")
    return pg.backend.recv(_arr(tensor, "irecv: tensor"), peer, int(tag), async_op=True)


def send(tensor, dst=None, group=None, tag=0, group_dst=None) -> None:
    """Send ``tensor`` to ``dst`` (returns when the data is handed to the transport).

    Args:
        tensor: the data to send.
        dst: the destination global rank.
        group: the process group; None for the default group.
        tag: messages are matched in order per (peer, tag).
        group_dst: the destination as a rank within ``group`` (instead of ``dst``).

    Raises:
        ValueError: ``dst`` is this rank or not a member of the group.
        DistBackendError: the peer failed or the group timeout passed.
    """
    pg = _pg(group, "send")
    if pg is None:
        return None
    pg.backend.send(_arr(tensor, "send: tensor"), _peer(pg, dst, group_dst, "dst"), int(tag),
                    async_op=False)


def recv(tensor, src=None, group=None, tag=0, group_src=None) -> int:
    """Receive into ``tensor`` from ``src`` (None: any rank); returns the sender's global rank.

    Args:
        tensor: receives the data (shape and dtype must match the send).
        src: the source global rank; None for any rank.
        group: the process group; None for the default group.
        tag: messages are matched in order per (peer, tag).
        group_src: the source as a rank within ``group`` (instead of ``src``).

    Returns:
        int: the sender's global rank (-1 on a rank that is not a member of ``group``).
    """
    pg = _pg(group, "recv")
    if pg is None:
        return -1
    peer = None if src is None and group_src is None else _peer(pg, src, group_src, "src")
    w = pg.backend.recv(_arr(tensor, "recv: tensor"), peer, int(tag), async_op=False)
    got = w.result()
    return pg.ranks[got] if got is not None else pg.ranks[peer]


class P2POp:
    """One send or receive for :func:`batch_isend_irecv` (``op`` is ``isend`` or ``irecv``).

    Args:
        op: ``tb.distributed.isend`` or ``tb.distributed.irecv`` (send/recv are accepted too).
        tensor: the data to send, or the tensor that receives.
        peer: the other side's global rank.
        group: the process group; None for the default group.
        tag: messages are matched in order per (peer, tag).
        group_peer: the peer as a rank within ``group`` (instead of ``peer``).

    Raises:
        ValueError: ``op`` is not one of those functions.
    """

    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None):
        if op not in (isend, irecv, send, recv):
            raise ValueError("P2POp: op must be tb.distributed.isend or tb.distributed.irecv")
        self.op, self.tensor, self.peer, self.group, self.tag = op, tensor, peer, group, tag
        self.group_peer = group_peer

    def __repr__(self):
        return f"P2POp({self.op.__name__}, peer={self.peer}, tag={self.tag})"


def batch_isend_irecv(p2p_op_list) -> list:
    """Start every send and receive of the list together (so exchanges of any size cannot
    deadlock); returns one Work per op.

    Args:
        p2p_op_list: the :class:`P2POp` s, all on the same group.

    Returns:
        list[Work]: one Work per op (empty on a rank outside the group).

    Raises:
        ValueError: the list is empty or mixes groups.
    """
    if not p2p_op_list:
        raise ValueError("batch_isend_irecv: the list of P2POp is empty")
    groups = {id(p.group) for p in p2p_op_list}
    if len(groups) != 1:
        raise ValueError("batch_isend_irecv: all ops must use the same group")
    pg = _pg(p2p_op_list[0].group, "batch_isend_irecv")
    if pg is None:
        return []
    ops = []
    for p in p2p_op_list:
        is_send = p.op in (isend, send)
        peer = _peer(pg, p.peer, p.group_peer, "peer")
        ops.append(("send" if is_send else "recv", _arr(p.tensor, "P2POp tensor"), peer,
                    int(p.tag)))
    batch = getattr(pg.backend, "batch_p2p", None)
    if batch is not None:
        w = batch(ops, async_op=True)
        return [w] * len(ops)
    return [(pg.backend.send if k == "send" else pg.backend.recv)(a, peer, tag, async_op=True)
            for k, a, peer, tag in ops]


# ***** object collectives (safe codec, never pickle) *****
def _u8(n: int):
    from ..tensor import Tensor
    return Tensor._wrap(np.zeros(n, dtype=np.uint8))


def _wrap(arr):
    from ..tensor import Tensor
    return Tensor._wrap(arr)


class _ObjBuffers:
    """Where an object collective's byte buffers live. NCCL moves device memory only, so for an
    NCCL group the buffers go to the group's GPU and come back to the host after the call (as
    torch stages objects on ``torch.cuda.current_device()``); every other backend works on the
    host arrays directly."""

    def __init__(self, pg):
        self.device = getattr(pg.backend, "device", None) if pg.backend_name == "nccl" else None

    def put(self, arr):
        if self.device is None or arr is None:
            return arr
        from .. import _xp
        with self.device:
            return _xp.cupy().asarray(arr)

    def get(self, arr):
        if self.device is None:
            return arr
        from .. import _xp
        return _xp.to_numpy(arr)


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Broadcast ``src``'s picklable-in-torch objects (here: data only, see ``_codec``) into
    every rank's ``object_list``, in place.

    Args:
        object_list: the objects on ``src``; replaced in place by them on the other ranks.
        src: the global rank that sends.
        group: the process group; None for the default group.
        device: accepted for torch compatibility.
        group_src: the sender as a rank within ``group`` (instead of ``src``).

    Raises:
        TypeError: an object is not plain data the codec can encode.
    """
    pg = _pg(group, "broadcast_object_list")
    if pg is None:
        return
    root = _root(pg, src, group_src, "src")
    if pg.rank() == root:
        blobs = [_codec.encode(o) for o in object_list]
        sizes = np.array([len(b) for b in blobs], dtype=np.int64)
    else:
        sizes = np.zeros(len(object_list), dtype=np.int64)
    buf = _ObjBuffers(pg)
    sizes_d = buf.put(sizes)
    pg.backend.broadcast(sizes_d, root, async_op=False)
    sizes = buf.get(sizes_d)
    payload = (np.frombuffer(b"".join(blobs), dtype=np.uint8).copy() if pg.rank() == root
               else np.empty(int(sizes.sum()), dtype=np.uint8))
    payload_d = buf.put(payload)
    pg.backend.broadcast(payload_d, root, async_op=False)
    payload = buf.get(payload_d)
    if pg.rank() != root:
        off = 0
        for i, n in enumerate(sizes.tolist()):
            object_list[i] = _codec.decode(payload[off:off + n].tobytes())
            off += n


def _gather_sizes(pg, n: int) -> list:
    buf = _ObjBuffers(pg)
    mine = buf.put(np.array([n], dtype=np.int64))
    allsz = buf.put(np.zeros(pg.size(), dtype=np.int64))
    pg.backend.allgather_into(allsz, mine, async_op=False)
    return buf.get(allsz).tolist()


def all_gather_object(object_list, obj, group=None):
    """``object_list[j]`` = rank j's ``obj`` (data only; TypeError for other objects).

    Args:
        object_list: a list of world_size entries, filled in rank order.
        obj: this rank's object (plain data).
        group: the process group; None for the default group.

    Raises:
        ValueError: ``object_list`` does not have world_size entries.
        TypeError: ``obj`` is not plain data the codec can encode.
    """
    pg = _pg(group, "all_gather_object")
    if pg is None:
        return
    if len(object_list) != pg.size():
        raise ValueError(f"all_gather_object: object_list must have world_size={pg.size()} "
                         f"entries, got {len(object_list)}")
    blob = _codec.encode(obj)
    sizes = _gather_sizes(pg, len(blob))
    width = max(sizes)
    mine = np.zeros(width, dtype=np.uint8)
    mine[:len(blob)] = np.frombuffer(blob, dtype=np.uint8)
    buf = _ObjBuffers(pg)
    out = buf.put(np.empty(width * pg.size(), dtype=np.uint8))
    pg.backend.allgather_into(out, buf.put(mine), async_op=False)
    out = buf.get(out)
    for j, n in enumerate(sizes):
        object_list[j] = _codec.decode(out[j * width:j * width + n].tobytes())


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
    """On ``dst``, ``object_gather_list[j]`` = rank j's ``obj``.

    Args:
        obj: this rank's object (plain data).
        object_gather_list: on ``dst``, a list of world_size entries filled in rank order; None
            elsewhere.
        dst: the global rank that receives.
        group: the process group; None for the default group.
        group_dst: the destination as a rank within ``group`` (instead of ``dst``).

    Raises:
        ValueError: ``object_gather_list`` on ``dst`` does not have world_size entries.
    """
    pg = _pg(group, "gather_object")
    if pg is None:
        return
    root = _root(pg, dst, group_dst, "dst")
    if pg.rank() == root and (object_gather_list is None or
                              len(object_gather_list) != pg.size()):
        raise ValueError(f"gather_object: object_gather_list on the destination must have "
                         f"world_size={pg.size()} entries")
    blob = _codec.encode(obj)
    sizes = _gather_sizes(pg, len(blob))
    width = max(sizes)
    mine = np.zeros(width, dtype=np.uint8)
    mine[:len(blob)] = np.frombuffer(blob, dtype=np.uint8)
    buf = _ObjBuffers(pg)
    outs = [buf.put(np.empty(width, dtype=np.uint8)) for _ in range(pg.size())] \
        if pg.rank() == root else None
    pg.backend.gather(outs, buf.put(mine), root, async_op=False)
    outs = [buf.get(o) for o in outs] if outs is not None else None
    if pg.rank() == root:
        for j, n in enumerate(sizes):
            object_gather_list[j] = _codec.decode(outs[j][:n].tobytes())


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None,
                        group=None, group_src=None):
    """``scatter_object_output_list[0]`` = ``src``'s ``scatter_object_input_list[rank]``.

    Args:
        scatter_object_output_list: a non-empty list; entry 0 receives this rank's object.
        scatter_object_input_list: on ``src``, world_size objects; None elsewhere.
        src: the global rank that sends.
        group: the process group; None for the default group.
        group_src: the sender as a rank within ``group`` (instead of ``src``).

    Raises:
        ValueError: the output list is empty, or the input list on ``src`` does not have
            world_size entries.
    """
    pg = _pg(group, "scatter_object_list")
    if pg is None:
        return
    root = _root(pg, src, group_src, "src")
    if not isinstance(scatter_object_output_list, list) or not scatter_object_output_list:
        raise ValueError("scatter_object_list: scatter_object_output_list must be a non-empty "
                         "list (element 0 receives the object)")
    if pg.rank() == root:
        if scatter_object_input_list is None or len(scatter_object_input_list) != pg.size():
            raise ValueError(f"scatter_object_list: the source needs world_size={pg.size()} "
                             f"input objects")
        blobs = [_codec.encode(o) for o in scatter_object_input_list]
        sizes = np.array([len(b) for b in blobs], dtype=np.int64)
    else:
        sizes = np.zeros(pg.size(), dtype=np.int64)
    buf = _ObjBuffers(pg)
    sizes_d = buf.put(sizes)
    pg.backend.broadcast(sizes_d, root, async_op=False)
    sizes = buf.get(sizes_d)
    width = int(sizes.max())
    ins = None
    if pg.rank() == root:
        ins = []
        for b in blobs:
            a = np.zeros(width, dtype=np.uint8)
            a[:len(b)] = np.frombuffer(b, dtype=np.uint8)
            ins.append(a)
    out = buf.put(np.empty(width, dtype=np.uint8))
    pg.backend.scatter(out, [buf.put(a) for a in ins] if ins is not None else None, root,
                       async_op=False)
    out = buf.get(out)
    scatter_object_output_list[0] = _codec.decode(out[:int(sizes[pg.rank()])].tobytes())


Work = _work.Work
