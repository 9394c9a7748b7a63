"""``tb.distributed.rpc``: remote procedure calls between processes (torch's
``torch.distributed.rpc``), over a socket per worker and the safe object codec; see docs/rpc.md.

``init_rpc(name, rank=, world_size=)`` registers the worker's name and address in the store of
the rendezvous (``env://``: ``MASTER_ADDR``/``MASTER_PORT``, as tbrun sets them; or the default
process group's store when one exists); ``rpc_sync``, ``rpc_async`` (a Future) and ``remote``
(an :class:`RRef`) call a function on another worker; ``shutdown()`` waits until every worker
is done (graceful) and closes. Functions travel by their importable name
(``module:qualname``; a lambda or nested function is refused with a clear error), arguments and
results through ``tensorbrain.distributed._codec``: data and Tensors only, never pickle.
Inside ``tb.distributed.autograd.context()`` a call also records the autograd edges, so
``dist_autograd.backward`` runs backward across workers.

Example:
    >>> import tensorbrain.distributed.rpc as rpc
    >>> rpc.init_rpc("worker", rank=0, world_size=1,
    ...              rpc_backend_options=rpc.TensorPipeRpcBackendOptions(
    ...                  init_method="tcp://127.0.0.1:0"))
    >>> rpc.rpc_sync("worker", max, args=(3, 7))
    7
    >>> rpc.shutdown()
"""
from __future__ import annotations

import enum
import itertools
import threading
import time
from dataclasses import dataclass

from . import _agent
from ._agent import Future, RemoteError
from ._agent import agent_or_raise as _agent_or_raise
from ._agent import call as _call

__all__ = ["BackendType", "Future", "RRef", "RemoteError", "TensorPipeRpcBackendOptions",
           "WorkerInfo", "get_worker_info", "init_rpc", "is_available", "remote", "rpc_async",
           "rpc_sync", "shutdown"]

_NOT_SUPPORTED = ("functions", "backend_registry", "ProcessGroupRpcBackendOptions")
DEFAULT_RPC_TIMEOUT_SEC = 60.0


class BackendType(enum.Enum):
    """torch's RPC backend names: every one means TensorBrain's socket agent."""

    TENSORPIPE = "TENSORPIPE"


class TensorPipeRpcBackendOptions:
    """torch's backend options: ``init_method`` (``env://`` default, ``tcp://host:port``),
    ``rpc_timeout`` (seconds, 60), ``num_worker_threads`` (16); other keywords are accepted.

    Args:
        **kwargs: as torch's.
    """

    def __init__(self, *, num_worker_threads: int = 16, rpc_timeout: float =
                 DEFAULT_RPC_TIMEOUT_SEC, init_method: str = "env://", **kwargs):
        self.num_worker_threads, self.rpc_timeout = int(num_worker_threads), float(rpc_timeout)
        self.init_method = init_method
        self.__dict__.update(kwargs)


@dataclass(frozen=True)
class WorkerInfo:
    """A worker's name and id (its rank)."""

    name: str
    id: int


_state: dict = {"owned": {}, "store": None, "hosted": None}
_rref_ids = itertools.count()


def is_available() -> bool:
    """True: RPC between processes is there."""
    return True


def init_rpc(name, backend=None, rank=-1, world_size=None, rpc_backend_options=None) -> None:
    """Start this worker's RPC agent and meet the others.

    Args:
        name: this worker's name (unique).
        backend: ``BackendType.TENSORPIPE`` or None (every backend is the socket agent).
        rank: this worker's rank (-1: from ``RANK``).
        world_size: the number of workers (None: from ``WORLD_SIZE``).
        rpc_backend_options: :class:`TensorPipeRpcBackendOptions`.

    Raises:
        RuntimeError: RPC is already started.
        ValueError: a name used twice, or bad rank/world size.
    """
    import os
    if _agent.running() is not None:
        raise RuntimeError("RPC is already initialized")
    opts = rpc_backend_options or TensorPipeRpcBackendOptions()
    rank = int(os.environ.get("RANK", 0)) if rank is None or rank < 0 else int(rank)
    world_size = int(os.environ.get("WORLD_SIZE", 1)) if world_size is None else int(world_size)
    store = _store(opts, rank, world_size)
    from ..store import PrefixStore
    _state["store"] = PrefixStore("rpc", store)
    _agent.set_running(_agent.Agent(str(name), rank, world_size, _state["store"],
                                    opts.rpc_timeout, opts.num_worker_threads, _handle))


def _store(opts, rank: int, world_size: int):
    from .. import distributed_c10d as c10d
    if c10d.is_initialized():           # reuse the process group's rendezvous
        from .._groups import _WORLD
        return _WORLD.store
    if world_size == 1:                  # one worker: nobody to meet
        from ..store import HashStore
        return HashStore()
    url = opts.init_method
    from ..rendezvous import rendezvous
    store, _, _ = next(rendezvous(url, rank, world_size))
    _state["hosted"] = store
    return store


def get_worker_info(worker_name=None) -> WorkerInfo:
    """The :class:`WorkerInfo` of ``worker_name`` (None: this worker).

    Args:
        worker_name: a worker's name, or None.

    Raises:
        RuntimeError: RPC is not started.
        ValueError: no worker has that name.
    """
    agent = _agent_or_raise()
    rank = agent.rank if worker_name is None else agent.rank_of(worker_name)
    return WorkerInfo(agent.workers[rank]["name"], rank)


def _worker_infos() -> list:
    agent = _agent_or_raise()
    return [WorkerInfo(w["name"], r) for r, w in sorted(agent.workers.items())]


def shutdown(graceful: bool = True, timeout: float = 0) -> None:
    """Stop the agent. ``graceful``: first wait until every worker has called ``shutdown`` (so
    calls in flight to this worker still get their answers).

    Args:
        graceful: wait for the others (a barrier over the store).
        timeout: accepted.
    """
    agent = _agent.running()
    if agent is None:
        return
    store = _state["store"]
    try:
        if graceful and agent.world_size > 1:
            store.set(f"done/{agent.rank}", "1")
            _barrier(agent, store, "done")
            store.set(f"left/{agent.rank}", "1")
            if agent.rank == 0:     # the store's host leaves last
                _barrier(agent, store, "left")
    finally:
        agent.close()
        _agent.set_running(None)
        _state["store"] = None
        _state["owned"].clear()
        from .. import autograd as dist_autograd
        dist_autograd._forget_all()
        hosted, _state["hosted"] = _state["hosted"], None
        if hosted is not None and hasattr(hosted, "close"):
            time.sleep(0.05)
            hosted.close()


def _barrier(agent, store, what: str) -> None:
    """Wait (at most the RPC timeout) until every worker has set ``what/<rank>``; a worker
    that never does is named."""
    deadline = time.monotonic() + agent.timeout
    missing = list(range(agent.world_size))
    while missing:
        missing = [r for r in missing if not store.check([f"{what}/{r}"])]
        if not missing:
            return
        if time.monotonic() > deadline:
            names = [agent.workers[r]["name"] for r in missing]
            raise RuntimeError(f"rpc.shutdown on worker {agent.name!r}: workers {names} did not "
                               f"reach shutdown within {agent.timeout:g} s (rpc_timeout); they "
                               f"failed or are still running")
        time.sleep(0.005)


# ***** RRef *****
class RRef:
    """A reference to a value that lives on one worker (its owner): made by :func:`remote`, or
    ``RRef(value)`` for a local value (then passable to other workers as an argument or result).

    Args:
        value: the value this worker will own.
    """

    def __init__(self, value=None, *, _owner=None, _id=None):
        if _id is None:
            agent = _agent_or_raise()
            _id = f"{agent.rank}:{next(_rref_ids)}"
            _state["owned"][_id] = value
            _owner = agent.rank
        self._owner, self._id = int(_owner), str(_id)

    def owner(self) -> WorkerInfo:
        """The owner's :class:`WorkerInfo`."""
        return get_worker_info(_agent_or_raise().workers[self._owner]["name"])

    def owner_name(self) -> str:
        """The owner's name."""
        return self.owner().name

    def is_owner(self) -> bool:
        """Whether this worker owns the value."""
        return self._owner == _agent_or_raise().rank

    def confirmed_by_owner(self) -> bool:
        """True (the owner has it once ``remote`` returned)."""
        return True

    def local_value(self):
        """The value (on its owner only).

        Raises:
            RuntimeError: called on another worker.
        """
        if not self.is_owner():
            raise RuntimeError(f"RRef.local_value() on worker {get_worker_info().name!r}: the "
                               f"value lives on {self.owner_name()!r}; use to_here()")
        return _state["owned"][self._id]

    def to_here(self, timeout: float = -1):
        """A copy of the value here (fetched from the owner; data and Tensors only)."""
        if self.is_owner():
            return self.local_value()
        return _call(self._owner, {"op": "fetch", "rref": self._id}, "RRef.to_here", timeout)

    def rpc_sync(self, timeout: float = -1):
        """A proxy: ``rref.rpc_sync().method(*args)`` calls the method on the owner."""
        return _Proxy(self, "sync", timeout)

    def rpc_async(self, timeout: float = -1):
        """A proxy whose method calls return Futures."""
        return _Proxy(self, "async", timeout)

    def remote(self, timeout: float = -1):
        """A proxy whose method calls return RRefs (the result stays on the owner)."""
        return _Proxy(self, "remote", timeout)

    def __repr__(self):
        return f"RRef(owner={self._owner}, id={self._id!r})"


class _Proxy:
    def __init__(self, rref, mode, timeout):
        self._rref, self._mode, self._timeout = rref, mode, timeout

    def __getattr__(self, method):
        def call(*args, **kwargs):
            msg = {"op": "method", "rref": self._rref._id, "method": method}
            return _issue(self._rref._owner, msg, args, kwargs, self._mode, self._timeout,
                          f"{method} on an RRef")
        return call


# ***** packing RRefs for the codec *****
def _pack(obj):
    if isinstance(obj, RRef):
        return {"__rref__": [obj._owner, obj._id]}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_pack(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _pack(v) for k, v in obj.items()}
    return obj


def _unpack(obj):
    if isinstance(obj, dict):
        if set(obj) == {"__rref__"}:
            owner, rid = obj["__rref__"]
            return RRef(_owner=owner, _id=rid)
        return {k: _unpack(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_unpack(o) for o in obj)
    return obj


# ***** calling *****
def _issue(to, msg: dict, args, kwargs, mode: str, timeout, describe: str):
    """Send a call (``mode``: sync, async or remote) with autograd recording."""
    from .. import autograd as dist_autograd
    agent = _agent_or_raise()
    peer = agent.rank_of(to)
    args, kwargs = tuple(args or ()), dict(kwargs or {})
    rref = None
    if mode == "remote":
        rid = f"{agent.rank}:{next(_rref_ids)}r"
        msg["new_rref"] = rid
        rref = RRef(_owner=peer, _id=rid)
    record = dist_autograd._before_send(peer, msg, (args, kwargs))
    msg["args"], msg["kwargs"] = _pack(list(args)), _pack(kwargs)
    fut = agent.send(peer, msg, describe, timeout)
    out = fut.then(lambda f: dist_autograd._after_reply(record, _unpack(f.value())))
    if mode == "sync":
        return out.wait()
    if mode == "remote":
        out.wait()
        return rref
    return out


def rpc_sync(to, func, args=None, kwargs=None, timeout: float = -1):
    """Call ``func(*args, **kwargs)`` on worker ``to`` and wait for its result.

    Args:
        to: the worker's name, rank or WorkerInfo.
        func: a function importable by its name (module level of a module or the main script).
        args: positional arguments (data, Tensors, RRefs).
        kwargs: keyword arguments.
        timeout: seconds (-1: the agent's ``rpc_timeout``; 0: none).

    Returns:
        The result.

    Raises:
        ValueError: unknown worker, or ``func`` cannot be named.
        RemoteError: ``func`` raised on the worker (its type, message and traceback).
        TimeoutError: no answer within the timeout. ConnectionError: the worker is gone.
    """
    name = _agent.qualified_name(func)
    return _issue(to, {"op": "call", "fn": name}, args, kwargs, "sync", timeout, name)


def rpc_async(to, func, args=None, kwargs=None, timeout: float = -1) -> Future:
    """:func:`rpc_sync` returning a :class:`Future` at once.

    Args:
        to: the worker's name, rank or WorkerInfo.
        func: a function importable by its name.
        args: positional arguments.
        kwargs: keyword arguments.
        timeout: seconds (-1: the agent's default).
    """
    name = _agent.qualified_name(func)
    return _issue(to, {"op": "call", "fn": name}, args, kwargs, "async", timeout, name)


def remote(to, func, args=None, kwargs=None, timeout: float = -1) -> RRef:
    """Run ``func`` on worker ``to`` and keep its result there; an :class:`RRef` to it.

    Args:
        to: the worker's name, rank or WorkerInfo.
        func: a function (or class) importable by its name.
        args: positional arguments.
        kwargs: keyword arguments.
        timeout: seconds (-1: the agent's default).
    """
    name = _agent.qualified_name(func)
    return _issue(to, {"op": "call", "fn": name}, args, kwargs, "remote", timeout, name)


# ***** serving *****
def _handle(msg: dict):
    from .. import autograd as dist_autograd
    op = msg["op"]
    owned = _state["owned"]
    if op == "fetch":
        return _pack(owned[msg["rref"]])
    if op == "backward":
        return dist_autograd._remote_backward(msg)
    if op == "release":
        return dist_autograd._release(msg["ctx"])
    if op == "call":
        target = _agent.resolve(msg["fn"])
    elif op == "method":
        if msg["rref"] not in owned:
            raise KeyError(f"RRef {msg['rref']} is not owned by this worker")
        target = getattr(owned[msg["rref"]], msg["method"])
    else:
        raise ValueError(f"unknown RPC op {op!r}")
    args, kwargs = _unpack(msg["args"]), _unpack(msg["kwargs"])
    with dist_autograd._serving(msg, (args, kwargs)) as keep:
        value = target(*args, **kwargs)
        value = keep(value)
    if "new_rref" in msg:
        owned[msg["new_rref"]] = value
        return None
    return _pack(value)


def __getattr__(name):
    if name in _NOT_SUPPORTED:
        raise NotImplementedError(f"tensorbrain.distributed.rpc.{name} is not supported by "
                                  f"TensorBrain (see docs/rpc.md)")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_lock = threading.Lock()
