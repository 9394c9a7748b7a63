"""TCPStore, the client of the key-value server that the master process runs in a thread.

Every instance, master included, talks to the server over one TCP connection, one request at a
time. The server is :mod:`.server` (its request handlers :mod:`.handlers`), the wire format and
caps :mod:`.protocol`, the shared-secret handshake :mod:`.auth`.
"""
from __future__ import annotations

import hmac
import os
import socket
import threading
import time
from datetime import timedelta

from ..errors import DistNetworkError, DistStoreError
from . import protocol as P
from .auth import AuthError as _AuthError
from .auth import mac as _mac
from .auth import secret_from as _secret_from
from .base import (
    DEFAULT_TIMEOUT,
    INTERNAL_PREFIX,
    Store,
    check_key,
    fmt_timeout,
    to_bytes,
    to_timedelta,
    wait_timeout_message,
)
from .server import StoreServer as _StoreServer

_INIT_COUNT = INTERNAL_PREFIX + "tcpstore/workers"
_INIT_DONE = INTERNAL_PREFIX + "tcpstore/all_workers_arrived"


class TCPStore(Store):
    """A store served over TCP by the master process (torch.distributed.TCPStore).

    ``is_master=True`` starts the server in a thread of this process (``port=0`` picks a free
    port, read it back from ``.port``); every instance, master included, is a client. With
    ``world_size`` and ``wait_for_workers`` the master's constructor returns once ``world_size``
    instances (itself included) have connected. Clients retry connecting until ``timeout``, so
    workers may start before the master. ``secret`` (default: ``TB_STORE_SECRET``) turns on an
    HMAC challenge-response handshake.

    >>> from tensorbrain.distributed.store import TCPStore
    >>> master = TCPStore("127.0.0.1", 0, world_size=1, is_master=True)
    >>> master.set("addr/0", "10.0.0.1:4000"); master.get("addr/0")
    b'10.0.0.1:4000'
    >>> worker = TCPStore("127.0.0.1", master.port)
    >>> worker.add("ready", 1)
    1
    >>> worker.close(); master.close()
    """

    def __init__(self, host_name: str, port: int, world_size: int | None = None,
                 is_master: bool = False, timeout=DEFAULT_TIMEOUT, wait_for_workers: bool = True,
                 secret: bytes | str | None = None):
        super().__init__(timeout)
        if not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"TCPStore port must be an int in 0..65535, got {port!r}")
        if not is_master and port == 0:
            raise ValueError("TCPStore: port=0 (pick a free port) only makes sense on the master")
        if world_size is not None and world_size < 1:
            world_size = None  # torch treats -1 as "unknown"
        self.host = host_name
        self.world_size = world_size
        self._secret = _secret_from(secret)
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._server = _StoreServer(host_name, port, self._secret) if is_master else None
        self.port = self._server.port if self._server else port
        try:
            self._connect_host = host_name
            self._sock = self._connect(self.timeout)
            if world_size is not None:
                if self.add(_INIT_COUNT, 1) == world_size:
                    self.set(_INIT_DONE, b"1")
                if is_master and wait_for_workers:
                    self._wait_for_workers(world_size)
        except BaseException:
            self.close()
            raise

    @property
    def is_master(self) -> bool:
        """Whether this process runs the store's server (``is_master=True`` at creation)."""
        return self._server is not None

    def describe(self) -> str:
        return f"TCPStore {self.host}:{self.port}"

    def _wait_for_workers(self, world_size):
        try:
            self.wait([_INIT_DONE])
        except DistStoreError:
            arrived = self.add(_INIT_COUNT, 0)
            raise DistStoreError(
                f"TCPStore master {self.host}:{self.port}: only {arrived} of {world_size} "
                f"processes connected within {fmt_timeout(self.timeout)}; check that every rank "
                f"was started and can reach {self.host}:{self.port} (firewall, MASTER_ADDR)"
            ) from None

    # ---- connection --------------------------------------------------------------------
    def _connect(self, timeout: timedelta) -> socket.socket:
        deadline = time.monotonic() + timeout.total_seconds()
        delay, last = 0.01, None
        host = self._connect_host
        while True:
            left = deadline - time.monotonic()
            try:
                sock = socket.create_connection((host, self.port), timeout=max(0.05, min(left, 10)))
                try:
                    self._handshake(sock, max(1.0, min(left, P.HANDSHAKE_TIMEOUT_S)))
                except BaseException:
                    sock.close()
                    raise
                return sock
            except _AuthError as exc:
                raise DistStoreError(f"{self.describe()}: {exc}") from None
            except (OSError, EOFError, P.ProtocolError) as exc:
                last = exc
            left = deadline - time.monotonic()
            if left <= 0:
                raise DistNetworkError(
                    f"could not connect to TCPStore at {host}:{self.port} within "
                    f"{fmt_timeout(timeout)} (last error: {last}). Is the master (rank 0 / node 0) "
                    f"running and reachable at that address? Check MASTER_ADDR/MASTER_PORT and "
                    f"firewalls.") from None
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.5)

    def _handshake(self, sock, timeout_s):
        sock.settimeout(timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        status, fields = _recv_reply(sock)
        hello_size = len(P.MAGIC) + 2 + P.NONCE_BYTES
        if status != P.ST_OK or len(fields) != 1 or len(fields[0]) != hello_size \
                or not fields[0].startswith(P.MAGIC):
            raise P.ProtocolError(f"{self._connect_host}:{self.port} is not a TensorBrain store")
        hello = fields[0]
        if hello[len(P.MAGIC)] != P.VERSION:
            raise _AuthError(f"store protocol version {hello[len(P.MAGIC)]} != {P.VERSION}; "
                             "all nodes must run the same TensorBrain version")
        nonce_s = hello[len(P.MAGIC) + 2:]
        nonce_c = os.urandom(P.NONCE_BYTES)
        mac_c = _mac(self._secret, b"client", nonce_s, nonce_c) if self._secret else b""
        sock.sendall(P.encode(P.OP_HELLO, P.MAGIC + bytes((P.VERSION,)), nonce_c, mac_c))
        status, fields = _recv_reply(sock)
        if status != P.ST_OK:
            raise _AuthError(fields[0].decode("utf-8", "replace") if fields
                             else "handshake refused")
        if self._secret and not (len(fields) == 1 and hmac.compare_digest(
                fields[0], _mac(self._secret, b"server", nonce_s, nonce_c))):
            raise _AuthError("the server could not prove it knows TB_STORE_SECRET (wrong server "
                             "or different secret)")

    def _request(self, op: int, *fields: bytes, wait_s: float | None = None):
        frame = P.encode(op, *fields)
        with self._lock:
            if self._sock is None:
                if self._server is None and getattr(self, "_closed", False):
                    raise DistStoreError(f"{self.describe()} is closed")
                self._sock = self._connect(self.timeout)
            sock = self._sock
            # blocking ops get the server's deadline plus a margin; the margin only matters when
            # the server itself is wedged or gone
            sock.settimeout((wait_s if wait_s is not None else self.timeout.total_seconds()) + 10.0)
            try:
                sock.sendall(frame)
                status, out = _recv_reply(sock)
            except (OSError, EOFError, P.ProtocolError) as exc:
                self._sock = None
                try:
                    sock.close()
                except OSError:
                    pass
                raise DistStoreError(
                    f"lost the connection to {self.describe()} during {P.OP_NAMES[op]}: {exc}. "
                    "The master process (which serves the store) probably exited or was killed."
                ) from None
        if status == P.ST_ERROR:
            why = out[0].decode("utf-8", "replace") if out else "error"
            raise DistStoreError(f"{self.describe()}: {why}")
        return status, out

    def close(self):
        self._closed = True
        with self._lock:
            if self._sock is not None:
                try:
                    self._sock.close()
                except OSError:
                    pass
                self._sock = None
        if self._server is not None:
            self._server.stop()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # ---- operations ----------------------------------------------------------------------
    @staticmethod
    def _key(key) -> bytes:
        raw = check_key(key).encode("utf-8")
        if len(raw) > P.MAX_KEY_BYTES:
            raise ValueError(f"store key of {len(raw)} bytes exceeds the {P.MAX_KEY_BYTES}-byte "
                             "cap")
        return raw

    @staticmethod
    def _value(value, what="value") -> bytes:
        raw = to_bytes(value, what)
        if len(raw) > P.MAX_VALUE_BYTES:
            raise ValueError(f"store {what} of {len(raw)} bytes exceeds the {P.MAX_VALUE_BYTES}-"
                             "byte cap; the store is for metadata, send bulk data through a "
                             "backend")
        return raw

    def set(self, key, value):
        self._request(P.OP_SET, self._key(key), self._value(value))

    def get(self, key):
        t = self.timeout.total_seconds()
        status, out = self._request(P.OP_GET, self._key(key), P.i64(int(t * 1000)), wait_s=t)
        if status == P.ST_TIMEOUT:
            raise DistStoreError(wait_timeout_message([key], self.timeout, self.describe()))
        return out[0]

    def add(self, key, amount):
        _, out = self._request(P.OP_ADD, self._key(key), P.i64(int(amount)))
        return P.read_i64(out[0])

    def compare_set(self, key, expected, desired):
        _, out = self._request(P.OP_CAS, self._key(key), self._value(expected, "expected"),
                               self._value(desired, "desired"))
        return out[0]

    def wait(self, keys, timeout=None):
        keys = list(keys)
        if not keys:
            return
        if len(keys) > P.MAX_WAIT_KEYS:
            raise ValueError(f"wait on {len(keys)} keys exceeds the cap of {P.MAX_WAIT_KEYS}")
        td = self.timeout if timeout is None else _td(timeout)
        t = td.total_seconds()
        status, out = self._request(P.OP_WAIT, P.i64(int(t * 1000)), *map(self._key, keys),
                                    wait_s=t)
        if status == P.ST_TIMEOUT:
            missing = [m.decode("utf-8", "replace") for m in out] or keys
            raise DistStoreError(wait_timeout_message(missing, td, self.describe()))

    def check(self, keys):
        keys = list(keys)
        if len(keys) > P.MAX_WAIT_KEYS:
            raise ValueError(f"check on {len(keys)} keys exceeds the cap of {P.MAX_WAIT_KEYS}")
        _, out = self._request(P.OP_CHECK, *map(self._key, keys))
        return out[0] == b"\x01"

    def delete_key(self, key):
        _, out = self._request(P.OP_DELETE, self._key(key))
        return out[0] == b"\x01"

    def num_keys(self):
        _, out = self._request(P.OP_NUM_KEYS)
        return P.read_i64(out[0])

    def ping(self) -> None:
        """One round trip (health check)."""
        self._request(P.OP_PING)


def _td(timeout):
    return to_timedelta(timeout)


def _recv_exact(sock, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise EOFError("connection closed by the store server")
        got += k
    return buf


def _recv_reply(sock):
    n = P.frame_length(bytes(_recv_exact(sock, 4)))
    return P.decode(_recv_exact(sock, n))
