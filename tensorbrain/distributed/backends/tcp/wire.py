"""Frames, connections and the progress engine of the tcp backend.

Wire format: every message is one frame, a 32-byte little-endian header followed by ``nbytes``
of raw payload (C-order array bytes)::

    magic u16 | kind u8 | dtype u8 | tag i32 | seq u64 | total u64 | nbytes u64

``total`` is the whole operation's byte size on the sender (a size mismatch shows on the first
frame even when chunk sizes agree); a collective frame's ``tag`` holds its op and root
(``_fingerprint.wire_tag``), so the whole fingerprint travels in every frame at no extra cost.
The receiver compares every field with what it expects before it reads a byte of payload, and
trusts no length beyond that (early p2p frames are bounded by ``MAX_STASH``).

The engine drives all connections of one operation from one thread with non-blocking sockets and
``poll``: sends and receives progress together, so a ring step never deadlocks on full socket
buffers, and a received segment is reduced while the kernel moves the next ones. Sends use
``sendmsg([header, payload])`` (one syscall, no copy), receives ``recv_into`` the destination;
both release the GIL. Ring frames to a Unix-socket peer lend their pages (``lend.py``).
"""
from __future__ import annotations

import collections
import contextlib
import os
import queue
import select
import socket
import threading
import time

import numpy as np

from ...errors import DistBackendError
from . import lend as _lend
from .engine_errors import EngineErrors
from .frames import (  # noqa: F401 - the wire format, re-exported as wire.X
    _ABORT, _EMPTY, _P2P, HEADER, HEADER_SIZE, KIND, KINDS, MAGIC, MAX_ABORT_TEXT, MAX_STASH,
    Recv, _consume, as_bytes, dtype_code, dtype_name)


class Conn:
    """A connection to one peer (TCP or Unix stream socket), non-blocking."""

    def __init__(self, sock: socket.socket, peer: int, host: str, transport: str):
        self.sock, self.peer, self.host, self.transport = sock, peer, host, transport
        self.fd = sock.fileno()
        sock.setblocking(False)
        self.sendq: collections.deque = collections.deque()  # [bufs, callback, lent]
        self.lender: _lend.Lender | None = None  # the pipe of lent pages, on first use
        self.recvq: collections.deque = collections.deque()  # Recv
        self.hdr = bytearray(HEADER_SIZE)
        self.hdr_view = memoryview(self.hdr)
        self.hdr_got = 0
        self.stash: dict = {}           # tag -> deque of (dtype, bytes) early p2p frames
        self.p2p_sent = 0
        self.closed = False
        self.mid_frame = False          # part of a frame is on the wire (no abort frame now)
        self.abort_info: tuple | None = None  # (blamed rank, text) from the peer's abort frame

    def describe(self) -> str:
        """``rank 1 (host, tcp)``: the peer as error messages name it."""
        return f"rank {self.peer} ({self.host}, {self.transport})"

    # ***** sending *****
    def queue_send(self, header: bytes, payload: memoryview, callback=None,
                   lend: bool = False) -> None:
        """Queue one frame of :meth:`Engine.send`: ``header``, then ``payload`` (not copied; with
        ``lend`` its pages are spliced to the socket, lend.py); ``callback()`` once all is out."""
        bufs = [memoryview(header)]
        lent = None
        if lend:
            lent = [np.frombuffer(payload, np.uint8).ctypes.data, len(payload), 0, payload]
        elif len(payload):
            bufs.append(payload)
        self.sendq.append([bufs, callback, lent])

    def pump_send(self) -> bool:
        """Send as much as the socket takes; True when the queue is empty."""
        sendq = self.sendq
        while sendq:
            entry = sendq[0]
            bufs = entry[0]
            if bufs:
                try:
                    n = self.sock.sendmsg(bufs)
                except (BlockingIOError, InterruptedError):
                    return False
                _consume(bufs, n)
                self.mid_frame = True
                if bufs:
                    continue
            if entry[2] is not None:  # the header is out: now the lent payload
                if self.lender is None:
                    self.lender = _lend.Lender()
                if not self.lender.pump(self.fd, entry[2]):
                    return False
            self.mid_frame = False
            sendq.popleft()
            if entry[1] is not None:
                entry[1]()
        return True

    # ***** receiving *****
    def pump_recv(self, engine) -> bool:
        """Receive expected frames while data is there; True when nothing more is expected."""
        recvq = self.recvq
        sock = self.sock
        while recvq:
            exp = recvq[0]
            if not exp.header_ok and exp.kind == _P2P and self.hdr_got == 0 and self.stash.get(exp.tag):
                # its frame was read earlier, while another receive was reading this socket
                dtype, data = self.stash[exp.tag].popleft()
                if dtype != exp.dtype or len(data) != exp.nbytes:
                    raise engine.mismatch(self, exp, _P2P, dtype, exp.seq, exp.total, len(data),
                                          exp.tag)
                exp.dest[:] = data
                exp.header_ok, exp.got = True, exp.nbytes  # complete: on to the callback below
            if not exp.header_ok:
                while self.hdr_got < HEADER_SIZE:
                    try:
                        n = sock.recv_into(self.hdr_view[self.hdr_got:])
                    except (BlockingIOError, InterruptedError):
                        return False
                    if n == 0:
                        raise engine.peer_lost(self)
                    self.hdr_got += n
                magic, kind, dtype, tag, seq, total, nbytes = HEADER.unpack(self.hdr)
                if magic != MAGIC:
                    raise engine.protocol_error(self, f"bad frame magic {magic:#x}")
                if kind == _ABORT:
                    raise engine.peer_aborted(self, *self.read_abort(engine, tag, nbytes))
                if kind == KIND["p2p"] and (exp.kind != kind or exp.tag != tag):
                    # a send() that arrived before its recv() was posted: keep it for later
                    self._read_stray(engine, dtype, tag, nbytes)
                    continue
                if (kind != exp.kind or dtype != exp.dtype or nbytes != exp.nbytes
                        or tag != exp.tag or (exp.seq >= 0 and seq != exp.seq)
                        or (exp.total >= 0 and total != exp.total)):
                    raise engine.mismatch(self, exp, kind, dtype, seq, total, nbytes, tag)
                exp.header_ok = True
                self.hdr_got = 0
            dest = exp.dest
            while exp.got < exp.nbytes:
                try:
                    n = sock.recv_into(dest[exp.got:])
                except (BlockingIOError, InterruptedError):
                    return False
                if n == 0:
                    raise engine.peer_lost(self)
                exp.got += n
            recvq.popleft()
            if exp.callback is not None:
                exp.callback()
        return True

    def read_abort(self, engine, blamed, nbytes) -> tuple:
        """The payload of an abort frame whose header was just read: ``(blamed, text)``."""
        if nbytes > MAX_ABORT_TEXT:
            raise engine.protocol_error(self, f"abort frame of {nbytes} bytes")
        text = self._read_payload(engine, nbytes, eof_ok=True)
        self.abort_info = (blamed, bytes(text).decode(errors="replace"))
        return self.abort_info

    def pending_abort(self) -> tuple | None:
        """The ``(blamed, text)`` of an abort frame the peer sent that is still unread in the
        receive buffer (frames before it are skipped over, not consumed), else None.

        Best effort and non-blocking: used only on the error path, to name the rank that
        really failed instead of a peer that closed because it had already aborted.
        """
        try:
            size = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
            data = self.sock.recv(max(size, 1 << 16), socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except OSError:
            return None
        pos, exp = 0, self.recvq[0] if self.recvq else None
        if self.hdr_got:  # a header is half read: complete it from the buffer
            head = bytes(self.hdr[:self.hdr_got]) + data[:HEADER_SIZE - self.hdr_got]
            if len(head) < HEADER_SIZE:
                return None
            pos = HEADER_SIZE - self.hdr_got + HEADER.unpack(head)[6]
        elif exp is not None and exp.header_ok:  # inside an expected frame's payload
            pos = exp.nbytes - exp.got
        while pos + HEADER_SIZE <= len(data):
            magic, kind, _, tag, _, _, nbytes = HEADER.unpack_from(data, pos)
            if magic != MAGIC:
                return None
            if kind == _ABORT:
                text = data[pos + HEADER_SIZE:pos + HEADER_SIZE + min(nbytes, MAX_ABORT_TEXT)]
                self.abort_info = (tag, bytes(text).decode(errors="replace"))
                return self.abort_info
            pos += HEADER_SIZE + nbytes
        return None

    def hung_up(self) -> bool:
        """True when the peer has closed its end (seen without reading: POLLRDHUP)."""
        poller = select.poll()
        poller.register(self.fd, select.POLLRDHUP)
        try:
            return any(ev & (select.POLLRDHUP | select.POLLHUP) for _, ev in poller.poll(0))
        except OSError:
            return False

    def send_abort(self, blamed: int, text: str) -> None:
        """Best effort, never blocks: tell the peer why we stop (skipped mid-frame)."""
        if self.closed or self.mid_frame or self.sendq:
            return
        payload = text.encode(errors="replace")[:MAX_ABORT_TEXT]
        with contextlib.suppress(OSError):
            self.sock.send(HEADER.pack(MAGIC, _ABORT, 0, blamed, 0, 0, len(payload)) + payload)

    def _read_stray(self, engine, dtype, tag, nbytes) -> None:
        """Read an early p2p frame completely (blocking up to the deadline) into the stash."""
        if nbytes > MAX_STASH:
            raise engine.protocol_error(self, f"early p2p frame of {nbytes} bytes exceeds "
                                              f"{MAX_STASH}")
        data = self._read_payload(engine, nbytes, eof_ok=False)
        self.stash.setdefault(tag, collections.deque()).append((dtype, data))

    def _read_payload(self, engine, nbytes: int, eof_ok: bool) -> bytearray:
        """The payload of a frame whose header was just read, blocking up to the op's deadline;
        at EOF, what came (``eof_ok``) or the peer's error."""
        buf = bytearray(nbytes)
        view, got = memoryview(buf), 0
        while got < nbytes:
            try:
                n = self.sock.recv_into(view[got:])
            except (BlockingIOError, InterruptedError):
                engine.wait_readable(self)
                continue
            if n == 0:
                if eof_ok:
                    buf = buf[:got]
                    break
                raise engine.peer_lost(self)
            got += n
        self.hdr_got = 0
        return buf

    def close(self) -> None:
        """Close the connection's socket once (later calls do nothing)."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        if self.lender is not None:
            self.lender.close()


class Sender:
    """A thread that writes the frames of large operations, so that copying into the kernel
    (send) and out of it (receive, then reduce) run on two cores at once, and a rank waiting for
    its peer does not also hold back its own sends. Completions are reported through a pipe the
    engine polls together with its sockets."""

    def __init__(self):
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.done: collections.deque = collections.deque()
        self.rfd, self.wfd = os.pipe()
        os.set_blocking(self.rfd, False)
        self.thread = threading.Thread(target=self._loop, daemon=True, name="tb-tcp-sender")
        self.thread.start()

    def _loop(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                return
            conn, bufs, deadline = item
            err: tuple[Conn, BaseException] | None = None
            if conn.closed:
                err = (conn, BrokenPipeError("connection closed"))
            else:
                try:
                    self._send(conn, bufs, deadline)
                except BaseException as exc:  # noqa: BLE001 - handed to the engine's thread
                    err = (conn, exc)
            self.done.append(err)
            try:
                os.write(self.wfd, b"x")
            except OSError:
                return

    @staticmethod
    def _send(conn, bufs, deadline) -> None:
        poller = None
        conn.mid_frame = True
        while bufs:
            try:
                n = conn.sock.sendmsg(bufs)
            except (BlockingIOError, InterruptedError):
                if poller is None:
                    poller = select.poll()
                    poller.register(conn.fd, select.POLLOUT)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("send did not complete") from None
                ev = poller.poll(left * 1000.0 + 1)
                if ev and ev[0][1] & (select.POLLERR | select.POLLNVAL | select.POLLHUP):
                    raise BrokenPipeError("connection closed by the peer") from None
                continue
            _consume(bufs, n)
        conn.mid_frame = False

    def close(self) -> None:
        """Stop the sender thread and close its wake-up pipe."""
        self.queue.put(None)
        for fd in (self.rfd, self.wfd):
            with contextlib.suppress(OSError):
                os.close(fd)


class Engine(EngineErrors):
    """Drives the connections of one operation until every queued send and receive is done."""

    def __init__(self, mesh):
        self.mesh = mesh             # the group's connections and what is known of its peers
        self.active: dict = {}       # fd -> Conn with pending work
        self.poller = select.poll()
        self.registered: dict = {}   # fd -> mask
        self.deadline = 0.0
        self.op = "?"
        self.seq = -1
        self.ftag = 0                # op and root of this collective (_fingerprint.wire_tag)
        self.threaded = False        # this op's sends go through the Sender thread
        self.sender: Sender | None = None
        self.inflight = 0            # frames handed to the Sender and not yet reported done
        self.lend = _lend.enabled()  # TB_TCP_SPLICE, and vmsplice exists
        self.lent: dict = {}         # fd -> Conn this op lent pages to (waited for in run())
        self.lent_bytes = 0          # payload bytes lent so far (all ops; tests, benchmarks)

    def begin(self, op: str, seq: int, timeout: float, ftag: int = 0) -> None:
        """Start one operation: the name ``op``, number ``seq`` and fingerprint tag ``ftag`` (op
        and root) that its frames carry and its errors name, and its deadline (``timeout`` s)."""
        self.op, self.seq, self.ftag = op, seq, ftag
        self.deadline = time.monotonic() + timeout
        self.threaded = False
        self.inflight = 0
        self.lent.clear()

    def lends_to(self, conn: Conn) -> bool:
        """Whether ``send(..., lend=True)`` to ``conn`` lends pages (a Unix socket, lending on)."""
        return self.lend and conn.transport == "unix"

    def use_sender(self) -> None:
        """Send this op's frames from the sender thread (large ops; see Sender)."""
        if self.sender is None:
            self.sender = Sender()
        self.threaded = True

    # ***** posting *****
    def send(self, conn: Conn, kind: int, dtype: int, total: int, payload: memoryview,
             callback=None, tag: int | None = None, seq: int | None = None,
             lend: bool = False) -> None:
        """Queue a frame of this operation to ``conn``; ``callback()`` runs once it is written.

        Args:
            conn: the peer.
            kind, dtype, total, tag, seq: the header (``total``: the whole message's bytes;
                ``tag``, ``seq``: by default the op's fingerprint tag and number).
            payload: this frame's bytes.
            lend: the caller writes into ``payload`` only after ``conn`` has read it (or after
                the op), so a large frame to a Unix-socket peer may lend its pages (lend.py);
                ``run()`` then waits for the peer to read them. Not with the sender thread.
        """
        header = HEADER.pack(MAGIC, kind, dtype, self.ftag if tag is None else tag,
                             self.seq if seq is None else seq, total, len(payload))
        if self.threaded and callback is None:
            bufs = [memoryview(header)] + ([payload] if len(payload) else [])
            self.inflight += 1
            assert self.sender is not None   # use_sender() made it
            self.sender.queue.put((conn, bufs, self.deadline))
            return
        lend = lend and self.lends_to(conn) and len(payload) >= _lend.LEND_MIN
        if lend:
            self.lent[conn.fd] = conn
            self.lent_bytes += len(payload)
        conn.queue_send(header, payload, callback, lend)
        self.active[conn.fd] = conn

    def recv(self, conn: Conn, kind: int, dtype: int, total: int, dest: memoryview,
             callback=None, tag: int | None = None, seq: int | None = None) -> None:
        """Expect a frame from ``conn`` into ``dest`` (its length is the frame's), then run
        ``callback``; its header must match every field given, as :meth:`send` writes them."""
        conn.recvq.append(Recv(kind, dtype, self.ftag if tag is None else tag,
                               self.seq if seq is None else seq, total, len(dest), dest, callback))
        self.active[conn.fd] = conn

    # ***** progress *****
    def run(self, settle: bool = True) -> None:
        """Progress every posted frame; raise on error, EOF or the deadline.

        Args:
            settle: wait for the peers to read the pages this op lent them (``send(lend=True)``)
                before returning; False when the op posts more frames after this run and the
                caller writes into none of the lent ranges before the last run.
        """
        active = self.active
        try:
            # first pass without poll: small frames usually go out (and may already be in)
            for conn in list(active.values()):
                self._pump(conn)
            self._collect_sent()
            while active or self.inflight:
                self._register()
                left = self.deadline - time.monotonic()
                if left <= 0:
                    raise self.timed_out()
                events = self.poller.poll(min(left, 3600.0) * 1000.0 + 1)
                for fd, ev in events:
                    if self.sender is not None and fd == self.sender.rfd:
                        self._collect_sent()
                        continue
                    conn = active.get(fd)
                    if conn is not None:
                        if ev & (select.POLLERR | select.POLLNVAL) and not ev & select.POLLIN:
                            raise self.peer_lost(conn)
                        self._pump(conn)
                # callbacks may have queued sends on connections with no event: push them now
                for conn in list(active.values()):
                    if conn.sendq and conn.fd in active:
                        self._pump(conn)
            if self.lent and settle:  # the peers must have read them before the caller writes
                self._wait_lent()
        finally:
            self._clear()

    def _wait_lent(self) -> None:
        conns, self.lent = list(self.lent.values()), {}
        try:
            if _lend.wait_read([c.fd for c in conns], self.deadline):
                return
        except OSError as exc:
            raise self.peer_lost(conns[0], exc) from None
        raise self.timed_out(unread=[c for c in conns if _lend.unread(c.fd) > 0])

    def _collect_sent(self) -> None:
        sender = self.sender
        if sender is None or not self.inflight:
            return
        with contextlib.suppress(BlockingIOError, InterruptedError):
            os.read(sender.rfd, 65536)
        while sender.done:
            err = sender.done.popleft()
            self.inflight -= 1
            if err is not None:
                conn, exc = err
                if isinstance(exc, TimeoutError):
                    raise self.timed_out()
                if isinstance(exc, OSError):
                    raise self.peer_lost(conn, exc)
                raise DistBackendError(f"{self._where()}: sending to {conn.describe()} failed: "
                                       f"{type(exc).__name__}: {exc}")

    def _pump(self, conn: Conn) -> None:
        try:
            sent = conn.pump_send() if conn.sendq else True
            done = conn.pump_recv(self) if conn.recvq else True
            if conn.sendq and sent:  # a receive callback queued more
                sent = conn.pump_send()
        except DistBackendError:
            raise
        except OSError as exc:
            raise self.peer_lost(conn, exc) from None
        if sent and done and not conn.sendq and not conn.recvq:
            self.active.pop(conn.fd, None)

    def _register(self) -> None:
        poller, registered = self.poller, self.registered
        for fd, conn in self.active.items():
            mask = (select.POLLIN if conn.recvq else 0) | (select.POLLOUT if conn.sendq else 0)
            if registered.get(fd) != mask:
                if fd in registered:
                    poller.modify(fd, mask)
                else:
                    poller.register(fd, mask)
                registered[fd] = mask
        sfd = self.sender.rfd if self.sender is not None and self.inflight else None
        if sfd is not None and sfd not in registered:
            poller.register(sfd, select.POLLIN)
            registered[sfd] = select.POLLIN
        for fd in [fd for fd in registered if fd not in self.active and fd != sfd]:
            poller.unregister(fd)
            del registered[fd]

    def _clear(self) -> None:
        for fd in self.registered:
            try:
                self.poller.unregister(fd)
            except (KeyError, ValueError, OSError):
                pass
        self.registered.clear()
        self.active.clear()

    def wait_readable(self, conn: Conn) -> None:
        """Block until ``conn`` has data; `DistTimeoutError` at the operation's deadline."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.timed_out()
        r, _, _ = select.select([conn.fd], [], [], left)
        if not r:
            raise self.timed_out()

    def close(self) -> None:
        """Stop the sender thread, if one was started; the connections stay open."""
        if self.sender is not None:
            self.sender.close()
            self.sender = None
