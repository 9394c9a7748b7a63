"""The TCPStore server: a key-value table served by one thread of the master process.

The thread runs a ``selectors`` loop over non-blocking sockets, so a blocking ``get``/``wait``
only parks that client's request (a waiter with a deadline) and never stalls the others, and a
hostile client (garbage, an oversized length prefix, half a frame then silence, a connection
that never says hello) costs one socket and at most one capped frame of memory: bad frames drop
that connection, silent ones just sit (or are dropped at the handshake deadline), and the loop
keeps serving everyone else. See :mod:`.protocol` for the format and the caps, :mod:`.handlers`
for what each request does, and :mod:`.tcp` for the client.
"""
from __future__ import annotations

import collections
import errno
import hmac
import ipaddress
import logging
import os
import selectors
import socket
import threading
import time

from ..errors import DistNetworkError
from . import protocol as P
from .auth import mac
from .handlers import HANDLERS

log = logging.getLogger("tensorbrain.distributed.store")

# Above this many queued reply bytes the server stops reading from that client until it drains,
# so a client that sends requests but never reads replies cannot grow the server's memory.
_OUT_HIGH = 4 * 1024 * 1024
_RECV_CHUNK = 256 * 1024

class _Conn:
    __slots__ = ("sock", "peer", "inbuf", "outbuf", "outpos", "ready", "nonce", "deadline",
                 "waiter", "closed", "close_after_flush", "events")

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
    if infos and all(ipaddress.ip_address(str(i[4][0]).split("%")[0]).is_loopback for i in infos):
        return infos[0][0], infos[0][4][0]
    return None, ""


class StoreServer:
    """The server thread: listens on ``port`` (0: a free one, read back from ``.port``).

    Args:
        host: the name the master was given; loopback names bind loopback only.
        port: the TCP port.
        secret: the shared secret (``b""``: none).

    Raises:
        DistNetworkError: the port is taken or cannot be bound; the message says what to do.
    """

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
            raise DistNetworkError(
                f"TCPStore master cannot listen on {host}:{port}: {exc}") from None
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
            self._drop(c, f"no handshake within {P.HANDSHAKE_TIMEOUT_S:.0f} s")

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
        # prefix of a large reply would cost time quadratic in its size.
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
            if not hmac.compare_digest(mac_c, mac(self.secret, b"client", conn.nonce, nonce_c)):
                return self._fail(conn, "authentication failed: TB_STORE_SECRET differs from the "
                                        "master's")
            mac_s = mac(self.secret, b"server", conn.nonce, nonce_c)
        elif mac_c:
            return self._fail(conn, "this store does not use a shared secret but the client has "
                                    "TB_STORE_SECRET set; set it on the master too (or unset it)")
        conn.ready = True
        self._send(conn, P.encode(P.ST_OK, mac_s))

    # ---- requests --------------------------------------------------------------------------
    def _handle(self, conn, op, fields):
        handler = HANDLERS.get(op)
        if handler is None:
            raise P.ProtocolError(f"unknown opcode {op}")
        handler(self, conn, fields)

    # ---- the table and its waiters (what the handlers use) ---------------------------------
    def reply(self, conn, frame: bytes):
        """Queue ``frame`` for ``conn`` and send what the socket takes now."""
        self._send(conn, frame)

    def put(self, key: str, value: bytes) -> str | None:
        """Store ``value`` under ``key`` within the caps and answer the waiters it completes.

        Returns:
            None, or why the store is full (the reply's error text).
        """
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

    def pop(self, key: str) -> bytes | None:
        """Remove ``key``; its old value, or None when it was not set."""
        old = self.data.pop(key, None)
        if old is not None:
            self.nbytes -= len(key.encode()) + len(old)
        return old

    def park(self, conn, keys, op, timeout_ms):
        """Hold ``conn``'s request until every key is set (answered by :meth:`put`) or the
        timeout (answered ``ST_TIMEOUT`` with the missing keys)."""
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

