"""The RPC agent: one listening socket per worker, persistent connections to peers, frames of
the safe object codec, a thread pool that runs the requests.

Wire: every message is ``[8-byte little-endian length][codec bytes]`` of a dict. Requests carry
``id``, ``op`` (``call``, ``remote``, ``fetch``, ``backward``, ``release``), the function's
importable name (``"module:qualname"``; nothing is pickled: a function that cannot be named is
refused on the caller's side), arguments and results through ``_codec`` (data and Tensors only;
an RRef travels as ``{"__rref__": [owner, id]}``). Replies carry ``id`` and ``value`` or
``error`` (type, message, the remote traceback). A peer whose connection ends fails every call
still waiting on it at once, naming the worker; a call that outlives its timeout fails naming
the worker, the function and the timeout.

Measured (``benchmarks/rpc.py``): an 8-byte ``rpc_sync`` round trip, next to torch's TensorPipe
RPC in the same run; see docs/rpc.md.
"""
from __future__ import annotations

import importlib
import itertools
import json
import os
import socket
import struct
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor

from .. import _codec

_HEADER = struct.Struct("<Q")
MAX_FRAME = 1 << 34


def qualified_name(func) -> str:
    """``"module:qualname"`` of ``func``, checked to import back to the same object.

    Raises:
        ValueError: a lambda, a nested function or another object that cannot be named (RPC
            sends functions by name; define it at module level).
    """
    if isinstance(func, str):
        return func
    module = getattr(func, "__module__", None)
    qual = getattr(func, "__qualname__", None)
    if module is None or qual is None or "<" in qual:
        raise ValueError(f"RPC cannot send {func!r}: functions travel by their importable name "
                         f"(module:qualname), and this one has none ({module}:{qual}); define "
                         f"it at module level of an importable module (or the main script)")
    try:
        found = resolve(f"{module}:{qual}")
    except (ImportError, AttributeError):
        found = None
    if found is not func and getattr(found, "__func__", None) is not getattr(func, "__func__",
                                                                               func):
        raise ValueError(f"RPC cannot send {func!r}: {module}:{qual} does not import back to it; "
                         f"define it at module level of an importable module")
    return f"{module}:{qual}"


def resolve(name: str):
    """The object a ``"module:qualname"`` names."""
    module, _, qual = name.partition(":")
    obj = importlib.import_module(module)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def send_frame(sock, lock, obj) -> None:
    blob = _codec.encode(obj)
    with lock:
        sock.sendall(_HEADER.pack(len(blob)) + blob)


def recv_frame(sock):
    head = _recv_exact(sock, _HEADER.size)
    if head is None:
        return None
    (n,) = _HEADER.unpack(head)
    if n > MAX_FRAME:
        raise ConnectionError(f"RPC frame of {n} bytes exceeds the limit")
    body = _recv_exact(sock, n)
    if body is None:
        return None
    return _codec.decode(body)


def _recv_exact(sock, n: int):
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            return None
        got += k
    return bytes(buf)


class RemoteError(RuntimeError):
    """An exception raised on the remote worker (its type, message and traceback)."""


class Future:
    """The result of an asynchronous RPC (torch's ``torch.futures.Future`` as RPC gives it):
    ``wait()`` (raises the remote error), ``value()``, ``done()``, ``then(fn)``,
    ``add_done_callback(fn)``."""

    def __init__(self, describe: str = "", timeout: float | None = None):
        self._event = threading.Event()
        self._value = None
        self._exc: BaseException | None = None
        self._callbacks: list = []
        self._describe, self._timeout = describe, timeout
        self._lock = threading.Lock()

    def set_result(self, value) -> None:
        """Finish with ``value``."""
        self._finish(value, None)

    def set_exception(self, exc: BaseException) -> None:
        """Finish with an error."""
        self._finish(None, exc)

    def _finish(self, value, exc):
        with self._lock:
            if self._event.is_set():
                return
            self._value, self._exc = value, exc
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(self)

    def done(self) -> bool:
        """Whether the result (or error) is there."""
        return self._event.is_set()

    def wait(self):
        """The result, once there; raises the remote error or a timeout naming the call."""
        if not self._event.wait(self._timeout):
            self.set_exception(TimeoutError(
                f"RPC {self._describe} ran out of time after {self._timeout:g} s (rpc_timeout)"))
        if self._exc is not None:
            raise self._exc
        return self._value

    def value(self):
        """The result (``wait()`` without waiting: it must be done)."""
        return self.wait()

    def add_done_callback(self, fn) -> None:
        """Call ``fn(self)`` when done (at once when already done)."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(fn)
                return
        fn(self)

    def then(self, fn) -> Future:
        """A Future of ``fn(self)``, run when this one is done."""
        out = Future(self._describe, self._timeout)

        def run(f):
            try:
                out.set_result(fn(f))
            except BaseException as exc:  # noqa: BLE001  (handed to the waiter)
                out.set_exception(exc)
        self.add_done_callback(run)
        return out


class Agent:
    """This worker's RPC endpoint (one per process, made by ``init_rpc``)."""

    def __init__(self, name: str, rank: int, world_size: int, store, timeout: float,
                 num_worker_threads: int, handler):
        self.name, self.rank, self.world_size = name, rank, world_size
        self.store, self.timeout, self.handler = store, timeout, handler
        self.pool = ThreadPoolExecutor(max_workers=num_worker_threads,
                                       thread_name_prefix=f"rpc-{name}")
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("0.0.0.0", 0))
        self.server.listen(128)
        self.port = self.server.getsockname()[1]
        self.closed = False
        self.ids = itertools.count(1)
        self.pending: dict = {}        # id -> (Future, peer rank)
        self.out: dict = {}            # peer rank -> (socket, lock)
        self.out_lock = threading.Lock()
        self.incoming: list = []
        # A peer may call as soon as it has read this worker's address, before init_rpc has made
        # this agent the running one; its handler needs that, so requests wait for it.
        self.serving = threading.Event()
        threading.Thread(target=self._accept, daemon=True, name=f"rpc-accept-{name}").start()
        host = _advertised_host()
        store.set(f"rpc/worker/{rank}", json.dumps({"name": name, "host": host,
                                                     "port": self.port}))
        self.workers: dict = {}
        for r in range(world_size):
            info = json.loads(store.get(f"rpc/worker/{r}"))
            self.workers[r] = info
        names = [w["name"] for w in self.workers.values()]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"init_rpc: worker names must be unique, {dup} is used twice")
        self.by_name = {w["name"]: r for r, w in self.workers.items()}

    # ***** serving *****
    def _accept(self):
        while not self.closed:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.incoming.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True,
                             name=f"rpc-serve-{self.name}").start()

    def _serve(self, conn):
        lock = threading.Lock()
        while True:
            try:
                msg = recv_frame(conn)
            except (OSError, ConnectionError, ValueError):
                msg = None
            if msg is None:
                conn.close()
                return
            self.pool.submit(self._answer, conn, lock, msg)

    def _answer(self, conn, lock, msg):
        self.serving.wait(self.timeout if self.timeout and self.timeout > 0 else None)
        try:
            reply = {"id": msg["id"], "value": self.handler(msg)}
        except BaseException as exc:  # noqa: BLE001  (sent back to the caller)
            reply = {"id": msg["id"], "error": [type(exc).__name__, str(exc),
                                                traceback.format_exc()]}
        try:
            send_frame(conn, lock, reply)
        except (OSError, TypeError) as exc:
            try:
                send_frame(conn, lock, {"id": msg["id"], "error": [
                    type(exc).__name__, f"the result could not be sent: {exc}", ""]})
            except OSError:
                pass

    # ***** calling *****
    def rank_of(self, to) -> int:
        """The rank of a worker given by name, rank or WorkerInfo."""
        if hasattr(to, "id") and hasattr(to, "name"):
            return int(to.id)
        if isinstance(to, int) and 0 <= to < self.world_size:
            return to
        if isinstance(to, str) and to in self.by_name:
            return self.by_name[to]
        raise ValueError(f"Unknown destination worker {to!r}: the workers are "
                         f"{sorted(self.by_name)}")

    def _connection(self, peer: int):
        with self.out_lock:
            if peer in self.out:
                return self.out[peer]
            info = self.workers[peer]
            try:
                sock = socket.create_connection((info["host"], info["port"]),
                                                timeout=self.timeout)
            except OSError as exc:
                raise ConnectionError(f"RPC: cannot reach worker {info['name']!r} (rank {peer}) "
                                      f"at {info['host']}:{info['port']}: {exc}") from None
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            entry = (sock, threading.Lock())
            self.out[peer] = entry
            threading.Thread(target=self._replies, args=(peer, sock), daemon=True,
                             name=f"rpc-replies-{peer}").start()
            return entry

    def _replies(self, peer, sock):
        while True:
            try:
                msg = recv_frame(sock)
            except (OSError, ConnectionError, ValueError):
                msg = None
            if msg is None:
                break
            entry = self.pending.pop(msg["id"], None)
            if entry is None:
                continue
            fut = entry[0]
            if "error" in msg:
                kind, text, tb_text = msg["error"]
                fut.set_exception(RemoteError(
                    f"{kind} on worker {self.workers[peer]['name']!r}: {text}\n"
                    f"--- remote traceback ---\n{tb_text}"))
            else:
                fut.set_result(msg["value"])
        with self.out_lock:
            if self.out.get(peer, (None,))[0] is sock:
                del self.out[peer]
        gone = ConnectionError(f"RPC: worker {self.workers[peer]['name']!r} (rank {peer}) "
                               f"closed the connection (it exited or failed)")
        for rid, (fut, p) in list(self.pending.items()):
            if p == peer:
                self.pending.pop(rid, None)
                fut.set_exception(gone)

    def send(self, peer: int, msg: dict, describe: str, timeout: float | None = None) -> Future:
        """Send ``msg`` to ``peer``; a Future of the reply's value."""
        t = self.timeout if timeout is None or timeout < 0 else (timeout or None)
        fut = Future(f"{describe} to worker {self.workers[peer]['name']!r}", t)
        rid = next(self.ids)
        msg["id"] = rid
        self.pending[rid] = (fut, peer)
        try:
            sock, lock = self._connection(peer)
            send_frame(sock, lock, msg)
        except (OSError, ConnectionError) as exc:
            self.pending.pop(rid, None)
            fut.set_exception(ConnectionError(str(exc)))
        except TypeError:
            self.pending.pop(rid, None)
            raise
        return fut

    def close(self) -> None:
        self.closed = True
        try:
            self.server.close()
        except OSError:
            pass
        with self.out_lock:
            for sock, _ in self.out.values():
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                    sock.close()
                except OSError:
                    pass
            self.out.clear()
        for conn in self.incoming:
            try:
                conn.close()
            except OSError:
                pass
        self.pool.shutdown(wait=False, cancel_futures=True)


# The running agent of this process: init_rpc starts it and shutdown ends it (rpc/__init__.py);
# distributed.autograd reaches its peers through it. It lives here, below both, so that neither
# imports the other.
_running: Agent | None = None


def running() -> Agent | None:
    """The agent init_rpc started (None: RPC is not running)."""
    return _running


def set_running(agent: Agent | None) -> None:
    """Make ``agent`` the running one (None: RPC stopped)."""
    global _running
    _running = agent
    if agent is not None:
        agent.serving.set()


def agent_or_raise() -> Agent:
    """The running agent, or the error that says to call init_rpc first."""
    agent = _running
    if agent is None:
        raise RuntimeError("RPC has not been initialized. Call torch.distributed.rpc.init_rpc "
                           "first.")
    return agent


def call(peer: int, msg: dict, describe: str, timeout=-1):
    """Send ``msg`` to ``peer`` and wait for its answer."""
    return agent_or_raise().send(peer, msg, describe, timeout).wait()


def _advertised_host() -> str:
    """The address peers reach this worker at: the interface that routes to MASTER_ADDR."""
    master = os.environ.get("MASTER_ADDR", "127.0.0.1")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((socket.gethostbyname(master), 9))
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"
