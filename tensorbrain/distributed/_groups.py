"""Process groups: the reduce ops, the backend names, :class:`ProcessGroup`, the process-wide
world state, and the queries (rank, size, members) that every other part of
``distributed_c10d`` builds on. Creating and destroying groups is in ``distributed_c10d``.
"""
from __future__ import annotations

import enum
import threading
from datetime import timedelta

import numpy as np

from .. import _config
from . import _observe, backends
from .errors import DistError


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
        #: the pipeline's first step for dist.all_reduce, ``fast(array, op) -> bool``, or None
        #: (``Backend.fast_all_reduce``; not when observed, so every call is seen;
        #: ``TB_FASTPATH=0`` turns it off)
        self.fast = backend.fast_all_reduce() if self.backend is backend and \
            _config.get("TB_FASTPATH") else None

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
            default = _world().default
            world = default.size() if default is not None else len(self.ranks)
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
        self.inits = 0   # re-inits in this process get fresh store keys
        self.lock = threading.Lock()


_WORLD = _World()


def _world() -> _World:
    return _WORLD


def _seconds(timeout) -> float:
    if timeout is None:
        return default_pg_timeout.total_seconds()
    if isinstance(timeout, timedelta):
        return timeout.total_seconds()
    return float(timeout)


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


def _root(pg, global_rank, group_rank, what) -> int:
    if group_rank is not None:
        if not 0 <= group_rank < pg.size():
            raise ValueError(f"group_{what}={group_rank} is out of range 0..{pg.size() - 1}")
        return int(group_rank)
    if global_rank is None:
        global_rank = 0
    return pg.group_rank_of(global_rank, what)
