"""TCPStore: a key-value server in a thread of the master process, and its client.

The server is one thread around a ``selectors`` loop over non-blocking sockets, so a blocking
``get``/``wait`` only parks that client's request (a waiter with a deadline) and never stalls the
others, and a hostile client (garbage, an oversized length prefix, half a frame then silence, a
connection that never says hello) costs one socket and at most one capped frame of memory: bad
frames drop that connection, silent ones just sit (or are dropped at the handshake deadline), and
the loop keeps serving everyone else. See :mod:`.protocol` for the format and the caps.
"""
from __future__ import annotations

import collections
import errno
import hashlib
import hmac
import ipaddress
import logging
import os
import selectors
import socket
import threading
import time
from datetime import timedelta

from ..errors import DistNetworkError, DistStoreError
from . import protocol as P
from .base import (DEFAULT_TIMEOUT, INTERNAL_PREFIX, Store, add_rule, check_key, compare_set_rule,
                   fmt_timeout, to_bytes, wait_timeout_message)

log = logging.getLogger("tensorbrain.distributed.store")

_INIT_COUNT = INTERNAL_PREFIX + "tcpstore/workers"
_INIT_DONE = INTERNAL_PREFIX + "tcpstore/all_workers_arrived"
# Above this many queued reply bytes the server stops reading from that client until it drains,
# so a client that sends requests but never reads replies cannot grow the server's memory.
_OUT_HIGH = 4 * 1024 * 1024
_RECV_CHUNK = 256 * 1024


def _mac(secret: bytes, who: bytes, nonce_s: bytes, nonce_c: bytes) -> bytes:
    return hmac.new(secret, who + nonce_s + nonce_c, hashlib.sha256).digest()


def _secret_from(secret) -> bytes:
    if secret is None:
        from ... import _config
        secret = _config.get("TB_STORE_SECRET")
    return to_bytes(secret, "secret") if secret else b""


# ***** server *****

class _Conn:
    __slots__ = ("sock", "peer", "inbuf", "outbuf", "outpos", "ready", "nonce", "deadline", "waiter",
                 "closed", "close_after_flush", "events")

    def __init__(self, sock, peer):
        self.sock, self.peer = sock, peer
        self.inbuf, self.outbuf, self.outpos = bytearray(), bytearray(), 0
        self.ready = False
        self.nonce = os.urandom(P.NONCE_BYTES)
        self.deadline = time.monotonic() + P.HANDSHAKE_TIMEOUT_S
        self.waiter = None
        self.closed = False
        self.close_after_flush = False
        self.events = 0


def _pending(conn) -> int:
    return len(conn.outbuf) - conn.outpos


class _Waiter:
    __slots__ = ("conn", "keys", "op", "deadline")

    def __init__(self, conn, keys, op, deadline):
        self.conn, self.keys, self.op, self.deadline = conn, keys, op, deadline


def _bind_address(host: str):
    """Loopback names bind loopback only (nothing off-host can reach them anyway); any other
    name binds all interfaces, as torch's TCPStore does, so peers reach the master by whatever
    address routes to it (the name may resolve to 127.0.1.1 locally on Debian-style hosts)."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror:
        infos = []
    if infos and all(ipaddress.ip_address(i[4][0].split("%")[0]).is_loopback for i in infos):
        return infos[0][0], infos[0][4][0]
    return None, ""


class _StoreServer:
    def __init__(self, host: str, port: int, secret: bytes):
        self.secret = secret
        family, addr = _bind_address(host)
        try:
            if family is not None:
                self.lsock = socket.create_server((addr, port), family=family, backlog=1024)
            elif socket.has_dualstack_ipv6():
                try:
                    self.lsock = socket.create_server(("", port), family=socket.AF_INET6,
                                                      dualstack_ipv6=True, backlog=1024)
                except OSError as exc:
                    if exc.errno == errno.EADDRINUSE:
                        raise
                    self.lsock = socket.create_server(("", port), backlog=1024)
            else:
                self.lsock = socket.create_server(("", port), backlog=1024)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise DistNetworkError(
                    f"TCPStore master cannot listen on port {port} ({host}): the port is already "
                    f"in use, probably by another job's store or a process that has not exited. "
                    f"Pick another port (--master_port / MASTER_PORT), pass port=0 for a free one "
                    f"(tbrun --standalone), or find the owner with `ss -ltnp 'sport = :{port}'`."
                ) from None
            raise DistNetworkError(f"TCPStore master cannot listen on {host}:{port}: {exc}") from None
        self.lsock.setblocking(False)
        self.port = self.lsock.getsockname()[1]
        self.data: dict[str, bytes] = {}
        self.nbytes = 0
        self.waiting: dict[str, set[_Waiter]] = {}
        self.waiters: set[_Waiter] = set()
        self.conns: set[_Conn] = set()
        # connections whose parked request was just answered: their queued requests are served
        # from the loop, not by recursion (a chain of wake-ups across many clients could
        # otherwise nest as deep as the number of clients)
        self.runnable: collections.deque[_Conn] = collections.deque()
        self.sel = selectors.DefaultSelector()
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.sel.register(self.lsock, selectors.EVENT_READ, "listen")
        self.sel.register(self.wake_r, selectors.EVENT_READ, "wake")
        self.stopping = False
        self.thread = threading.Thread(target=self._run, name=f"TCPStore:{self.port}", daemon=True)
        self.thread.start()

    # ---- lifecycle ----------------------------------------------------------------------
    def stop(self):
        if self.stopping:
            return
        self.stopping = True
        try:
            self.wake_w.send(b"x")
        except OSError:
            pass
        if threading.current_thread() is not self.thread:
            self.thread.join(5)

    def _run(self):
        try:
            while not self.stopping:
                try:
                    events = self.sel.select(self._next_timeout())
                except OSError as exc:  # e.g. EINTR storms; never let the loop die
                    log.warning("TCPStore select failed: %s", exc)
                    time.sleep(0.01)
                    continue
                try:
                    self._step(events)
                except Exception:  # a bug must never take the server down with it
                    log.exception("TCPStore server loop error (continuing)")
        finally:
            for conn in list(self.conns):
                self._drop(conn, None)
            for s in (self.lsock, self.wake_r, self.wake_w):
                try:
                    s.close()
                except OSError:
                    pass
            self.sel.close()

    def _step(self, events):
        for key, mask in events:
            if key.data == "listen":
                self._accept()
            elif key.data == "wake":
                try:
                    self.wake_r.recv(4096)
                except OSError:
                    pass
            elif not key.data.closed:
                self._serve(key.data, mask)
        self._expire()
        while self.runnable:
            conn = self.runnable.popleft()
            if not conn.closed:
                self._serve(conn, 0)

    def _next_timeout(self):
        now = time.monotonic()
        nearest = now + 1.0
        for w in self.waiters:
            nearest = min(nearest, w.deadline)
        for c in self.conns:
            if not c.ready:
                nearest = min(nearest, c.deadline)
        return max(0.0, nearest - now)

    def _expire(self):
        now = time.monotonic()
        for w in [w for w in self.waiters if w.deadline <= now]:
            if w not in self.waiters:  # answered meanwhile
                continue
            missing = [k for k in w.keys if k not in self.data]
            self._unpark(w, P.encode(P.ST_TIMEOUT, *(k.encode() for k in missing)))
        for c in [c for c in self.conns if not c.ready and c.deadline <= now]:
            self._drop(c, "no handshake within %.0f s" % P.HANDSHAKE_TIMEOUT_S)

    # ---- connections ----------------------------------------------------------------------
    def _accept(self):
        for _ in range(64):
            try:
                sock, peer = self.lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE and friends: keep serving the ones we have
                log.warning("TCPStore accept failed: %s", exc)
                return
            if len(self.conns) >= P.MAX_CONNECTIONS:
                sock.close()
                continue
            pending = [c for c in self.conns if not c.ready]
            if len(pending) >= P.MAX_PENDING_HANDSHAKES:
                self._drop(min(pending, key=lambda c: c.deadline),
                           f"over {P.MAX_PENDING_HANDSHAKES} connections without a hello")
            sock.setblocking(False)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
            conn = _Conn(sock, peer)
            self.conns.add(conn)
            conn.events = selectors.EVENT_READ
            self.sel.register(sock, conn.events, conn)
            hello = P.MAGIC + bytes((P.VERSION, 1 if self.secret else 0)) + conn.nonce
            try:
                self._send(conn, P.encode(P.ST_OK, hello))
            except OSError as exc:  # reset before we said hello
                self._drop(conn, str(exc))

    def _drop(self, conn, why):
        if conn.closed:
            return
        conn.closed = True
        if why:
            log.info("TCPStore dropped client %s: %s", conn.peer, why)
        if conn.waiter is not None:
            self._forget(conn.waiter)
            conn.waiter = None
        self.conns.discard(conn)
        try:
            self.sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        try:
            conn.sock.close()
        except OSError:
            pass

    def _interest(self, conn):
        ev = 0
        if _pending(conn) <= _OUT_HIGH and not conn.close_after_flush:
            ev |= selectors.EVENT_READ
        if _pending(conn):
            ev |= selectors.EVENT_WRITE
        if ev != conn.events and not conn.closed:
            conn.events = ev
            if ev:
                self.sel.modify(conn.sock, ev, conn)
            else:  # nothing to do: keep it registered for reads so EOF is seen
                conn.events = selectors.EVENT_READ
                self.sel.modify(conn.sock, selectors.EVENT_READ, conn)

    def _serve(self, conn, mask):
        try:
            if mask & selectors.EVENT_WRITE:
                self._flush(conn)
            if mask & selectors.EVENT_READ and not conn.closed:
                self._read(conn)
            if not conn.closed:
                self._process(conn)
                self._interest(conn)
        except P.ProtocolError as exc:
            self._drop(conn, f"protocol error: {exc}")
        except OSError as exc:
            self._drop(conn, str(exc))
        except Exception as exc:  # a bug must cost one connection, never the server
            log.exception("TCPStore internal error serving %s", conn.peer)
            self._drop(conn, repr(exc))

    def _read(self, conn):
        try:  # before the hello: never more than one hello-sized frame (pre-auth memory bound)
            chunk = conn.sock.recv(_RECV_CHUNK if conn.ready
                                   else 4 + P.MAX_HELLO_FRAME - len(conn.inbuf) + 1)
        except (BlockingIOError, InterruptedError):
            return
        if not chunk:
            self._drop(conn, None)
            return
        conn.inbuf += chunk
        if len(conn.inbuf) >= 4:
            n = P.frame_length(bytes(conn.inbuf[:4]))  # reject a hostile prefix at once
            if not conn.ready and (n > P.MAX_HELLO_FRAME or len(conn.inbuf) > 4 + n):
                raise P.ProtocolError("more than a hello before the handshake")
        if len(conn.inbuf) > 4 + P.MAX_FRAME + _RECV_CHUNK:
            raise P.ProtocolError("client sent more than one frame ahead of its replies")

    def _send(self, conn, frame: bytes):
        if conn.outpos:  # drop what was sent (at most _OUT_HIGH bytes are still pending here)
            del conn.outbuf[:conn.outpos]
            conn.outpos = 0
        conn.outbuf += frame
        self._flush(conn)
        if not conn.closed:
            self._interest(conn)

    def _flush(self, conn):
        # Send from an offset and drop the sent bytes only once all are out: deleting each sent
        # prefix of a large reply is quadratic (a 32 MiB get ran at ~150 MiB/s that way).
        while conn.outpos < len(conn.outbuf):
            view = memoryview(conn.outbuf)
            try:
                conn.outpos += conn.sock.send(view[conn.outpos:])
            except (BlockingIOError, InterruptedError):
                return
            finally:
                view.release()
        conn.outbuf.clear()
        conn.outpos = 0
        if conn.close_after_flush:
            self._drop(conn, None)

    def _process(self, conn):
        while (not conn.closed and conn.waiter is None and not conn.close_after_flush
               and _pending(conn) <= _OUT_HIGH and len(conn.inbuf) >= 4):
            n = P.frame_length(bytes(conn.inbuf[:4]))
            if len(conn.inbuf) < 4 + n:
                return
            view = memoryview(conn.inbuf)
            op, fields = P.decode(view[4:4 + n])  # fields are copies (on error: conn dropped)
            view.release()
            del conn.inbuf[:4 + n]
            if not conn.ready:
                self._hello(conn, op, fields)
            else:
                self._handle(conn, op, fields)

    def _fail(self, conn, message: str):
        """Reply an error and hang up (auth failures)."""
        conn.close_after_flush = True
        self._send(conn, P.encode(P.ST_ERROR, message.encode()))

    def _hello(self, conn, op, fields):
        if op != P.OP_HELLO or len(fields) != 3 or fields[0] != P.MAGIC + bytes((P.VERSION,)):
            raise P.ProtocolError("not a TensorBrain store client (bad hello)")
        nonce_c, mac_c = fields[1], fields[2]
        if len(nonce_c) != P.NONCE_BYTES:
            raise P.ProtocolError("bad client nonce")
        mac_s = b""
        if self.secret:
            if not mac_c:
                return self._fail(conn, "this store requires a shared secret: set TB_STORE_SECRET "
                                        "to the master's value on every node")
            if not hmac.compare_digest(mac_c, _mac(self.secret, b"client", conn.nonce, nonce_c)):
                return self._fail(conn, "authentication failed: TB_STORE_SECRET differs from the "
                                        "master's")
            mac_s = _mac(self.secret, b"server", conn.nonce, nonce_c)
        elif mac_c:
            return self._fail(conn, "this store does not use a shared secret but the client has "
                                    "TB_STORE_SECRET set; set it on the master too (or unset it)")
        conn.ready = True
        self._send(conn, P.encode(P.ST_OK, mac_s))

    # ---- the operations --------------------------------------------------------------------
    def _handle(self, conn, op, f):
        if op == P.OP_SET:
            self._need(op, f, 2)
            key = P.decode_key(f[0])
            if len(f[1]) > P.MAX_VALUE_BYTES:
                raise P.ProtocolError(f"value of {len(f[1])} bytes exceeds the cap")
            err = self._put(key, f[1])
            self._send(conn, P.encode(P.ST_ERROR, err.encode()) if err else P.encode(P.ST_OK))
        elif op == P.OP_GET:
            self._need(op, f, 2)
            key = P.decode_key(f[0])
            if key in self.data:
                self._send(conn, P.encode(P.ST_OK, self.data[key]))
            else:
                self._park(conn, [key], op, P.read_i64(f[1]))
        elif op == P.OP_ADD:
            self._need(op, f, 2)
            key = P.decode_key(f[0])
            try:
                new = add_rule(self.data.get(key), P.read_i64(f[1]), key)
            except DistStoreError as exc:
                return self._send(conn, P.encode(P.ST_ERROR, str(exc).encode()))
            err = self._put(key, new)
            self._send(conn, P.encode(P.ST_ERROR, err.encode()) if err
                       else P.encode(P.ST_OK, P.i64(int(new))))
        elif op == P.OP_CAS:
            self._need(op, f, 3)
            key = P.decode_key(f[0])
            if len(f[2]) > P.MAX_VALUE_BYTES:
                raise P.ProtocolError("desired value exceeds the cap")
            result, write = compare_set_rule(self.data.get(key), f[1], f[2])
            err = self._put(key, f[2]) if write else None
            self._send(conn, P.encode(P.ST_ERROR, err.encode()) if err else P.encode(P.ST_OK, result))
        elif op == P.OP_WAIT:
            if not 2 <= len(f) <= P.MAX_WAIT_KEYS + 1:
                raise P.ProtocolError("wait needs a timeout and 1..MAX_WAIT_KEYS keys")
            keys = [P.decode_key(k) for k in f[1:]]
            if all(k in self.data for k in keys):
                self._send(conn, P.encode(P.ST_OK))
            else:
                self._park(conn, keys, op, P.read_i64(f[0]))
        elif op == P.OP_CHECK:
            if len(f) > P.MAX_WAIT_KEYS:
                raise P.ProtocolError("too many keys in check")
            ok = all(P.decode_key(k) in self.data for k in f)
            self._send(conn, P.encode(P.ST_OK, b"\x01" if ok else b"\x00"))
        elif op == P.OP_DELETE:
            self._need(op, f, 1)
            key = P.decode_key(f[0])
            old = self.data.pop(key, None)
            if old is not None:
                self.nbytes -= len(f[0]) + len(old)
            self._send(conn, P.encode(P.ST_OK, b"\x01" if old is not None else b"\x00"))
        elif op == P.OP_NUM_KEYS:
            n = sum(1 for k in self.data if not k.startswith(INTERNAL_PREFIX))
            self._send(conn, P.encode(P.ST_OK, P.i64(n)))
        elif op == P.OP_PING:
            self._send(conn, P.encode(P.ST_OK))
        else:
            raise P.ProtocolError(f"unknown opcode {op}")

    @staticmethod
    def _need(op, fields, n):
        if len(fields) != n:
            raise P.ProtocolError(f"{P.OP_NAMES.get(op, op)} takes {n} fields, got {len(fields)}")

    def _put(self, key: str, value: bytes):
        old = self.data.get(key)
        klen = len(key.encode())
        grow = len(value) - (len(old) if old is not None else -klen)
        if old is None and len(self.data) >= P.MAX_KEYS:
            return f"store full: it holds the maximum of {P.MAX_KEYS} keys; delete some"
        if self.nbytes + grow > P.MAX_STORE_BYTES:
            return (f"store full: {self.nbytes} bytes held, cap {P.MAX_STORE_BYTES}; the store is "
                    "for small metadata, send bulk data through the backend")
        self.data[key] = value
        self.nbytes += grow
        for w in list(self.waiting.get(key, ())):
            if w in self.waiters and all(k in self.data for k in w.keys):
                reply = P.encode(P.ST_OK, self.data[w.keys[0]]) if w.op == P.OP_GET \
                    else P.encode(P.ST_OK)
                self._unpark(w, reply)
        return None

    def _park(self, conn, keys, op, timeout_ms):
        w = _Waiter(conn, keys, op, time.monotonic() + max(0, timeout_ms) / 1000.0)
        conn.waiter = w
        self.waiters.add(w)
        for k in keys:
            self.waiting.setdefault(k, set()).add(w)

    def _forget(self, w):
        self.waiters.discard(w)
        for k in w.keys:
            s = self.waiting.get(k)
            if s is not None:
                s.discard(w)
                if not s:
                    del self.waiting[k]

    def _unpark(self, w, reply):
        self._forget(w)
        conn = w.conn
        conn.waiter = None
        if conn.closed:
            return
        try:
            self._send(conn, reply)
        except OSError as exc:
            self._drop(conn, str(exc))
            return
        self.runnable.append(conn)  # serve what it queued behind the parked request


# ***** client *****

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
        if status != P.ST_OK or len(fields) != 1 or len(fields[0]) != len(P.MAGIC) + 2 + P.NONCE_BYTES \
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
            raise _AuthError(fields[0].decode("utf-8", "replace") if fields else "handshake refused")
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
            raise DistStoreError(f"{self.describe()}: {out[0].decode('utf-8', 'replace') if out else 'error'}")
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
            raise ValueError(f"store key of {len(raw)} bytes exceeds the {P.MAX_KEY_BYTES}-byte cap")
        return raw

    @staticmethod
    def _value(value, what="value") -> bytes:
        raw = to_bytes(value, what)
        if len(raw) > P.MAX_VALUE_BYTES:
            raise ValueError(f"store {what} of {len(raw)} bytes exceeds the {P.MAX_VALUE_BYTES}-byte "
                             "cap; the store is for metadata, send bulk data through a backend")
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
        status, out = self._request(P.OP_WAIT, P.i64(int(t * 1000)), *map(self._key, keys), wait_s=t)
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


class _AuthError(Exception):
    pass


def _td(timeout):
    from .base import to_timedelta
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
