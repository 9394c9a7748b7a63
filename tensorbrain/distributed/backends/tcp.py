"""The ``tcp`` backend (alias ``gloo``): a full mesh of stream sockets and size-aware algorithms.

Setup (collective, through the group's store): every rank opens a TCP listener (bound to the
address of ``TB_IFNAME`` when set, else all interfaces) and, for peers on the same host, a Unix
stream socket; it publishes ``{host, host id, ip, port, unix path}`` under ``tcp/addr/<rank>``;
the higher rank of each pair connects, sends a hello frame, and the lower one accepts. The
advertised IP is the local address that routes to the store's host (so MASTER_ADDR's network is
used across machines); ``127.0.0.1`` only when the store itself is on loopback.

Same-host peers talk over Unix sockets (``TB_TCP_UNIX=0`` forces TCP): measured here (2 ranks,
both directions at once, Python sockets with 4 MiB buffers) a Unix socket moved 4.6 GB/s each way
at 4 MiB against 1.6 GB/s for TCP loopback, and an 8-byte exchange took 10 us against 23 us.

Algorithms (thresholds measured on this 2-core machine, see the constants below):

* all_reduce: small messages use a direct exchange (every rank sends its buffer to every peer
  and reduces the n contributions in rank order: one round, bit-identical on all ranks); large
  ones a pipelined ring reduce-scatter + all-gather cut in ``SEGMENT``-byte frames, so the next
  segment is on the wire while the previous one is reduced.
* broadcast: binomial tree when small, pipelined chain when large. reduce: binomial tree when
  small, pipelined chain towards the root when large.
* all_gather: direct when small, ring (with segment forwarding) when large. gather/scatter:
  direct to/from the root. reduce_scatter: direct when small, ring reduce-scatter when large.
  all_to_all: pairwise (rank r sends to r+k while receiving from r-k, all k in flight).
  barrier: dissemination (ceil(log2 n) rounds of empty frames).

float16: the direct path accumulates the n contributions in float32 and rounds once; the ring
and chain paths round to float16 after each addition (the wire carries float16, as Gloo's does).
AVG on float16 divides each contribution by n (in float32) *before* summing, so an average that
fits in float16 never overflows on the way; on float32/64 AVG is a sum then one scale by 1/n.
Integer AVG is refused (as torch's Gloo does).
"""
from __future__ import annotations

import json
import os
import queue
import socket
import tempfile
import threading
import time
import uuid
from datetime import timedelta

import numpy as np

from ... import _config, _kernels
from .. import _work
from ..errors import DistBackendError, DistNetworkError, DistStoreError, DistTimeoutError
from .. import _fingerprint as FP
from . import _tcp_wire as W
from .base import Backend, stage, stage_in

# ***** measured thresholds *****
# all_reduce: direct exchange while the bytes each rank sends, nbytes * (n - 1), stay under this.
# Measured with 2 ranks over Unix sockets, float32, median of 15 calls in each of 3 interleaved
# rounds (load ~10 on the 2 cores), direct vs ring: 256 KiB 145 vs 183 us, 512 KiB 278 vs 241,
# 1 MiB 478 vs 522, 2 MiB 1094 vs 981, 4 MiB 2974 vs 2255 us: the crossover is at ~1 MiB.
SMALL_ALLREDUCE = 1 << 20
# Ring/chain frame size. 256 KiB..4 MiB measured within noise of each other at 16-64 MiB
# (64 MiB: 57.6 / 63.6 / 58.9 / 51.5 ms); at 2-4 MiB 1 MiB frames beat 256 KiB ones (981 vs
# 1010 us, 2255 vs 2779 us). 1 MiB keeps the ~15 us Python cost per frame under 5% of its
# transfer time and matches Gloo's newer 1 MiB segments.
SEGMENT = 1 << 20
# Binomial tree vs pipelined chain for broadcast/reduce: the chain only pays off once a message
# is several segments long; below, the tree's log2(n) rounds win.
SMALL_BCAST = 1 << 20
# Direct vs ring all_gather (bytes of the gathered result) and reduce_scatter (bytes of the
# input): both move the same bytes either way, direct does it in one round but buffers it all.
SMALL_ALLGATHER = 2 << 20
# Large ops send from a second thread (see _tcp_wire.Sender) from this many bytes on. 2 ranks,
# Unix sockets, load ~9, 3 rounds: 32 MiB 27.9/26.4/26.7 ms without, 27.8/24.0/25.0 ms with;
# 4 MiB 4.7/1.7/1.6 vs 2.6/1.6/2.0 ms: a small gain, and sends keep flowing while we reduce.
THREADED_SEND = 1 << 20

_SOCKBUF = 4 << 20  # the kernel's wmem_max/rmem_max here; bigger buffers = fewer poll wakeups
_BOOT_ID = "/proc/sys/kernel/random/boot_id"

K = W.KIND


def _host_identity() -> tuple:
    """(hostname, host id). Ranks with the same host id share a kernel *and* a network
    namespace: containers or netns "hosts" on one machine count as different hosts, so they talk
    TCP as separate machines would (their Unix sockets and shared memory may not be shared)."""
    host = socket.gethostname()
    try:
        with open(_BOOT_ID) as f:
            boot = f.read().strip()
    except OSError:
        boot = "no-boot-id"
    try:
        netns = os.readlink("/proc/self/ns/net")
    except OSError:
        netns = "no-netns"
    return host, f"{host}/{boot}/{netns}"


def _store_host(store):
    """The host of the TCPStore under any PrefixStore wrappers (None for other stores)."""
    seen = 0
    while store is not None and seen < 16:
        host = getattr(store, "host", None)
        if isinstance(host, str):
            return host
        store = getattr(store, "underlying_store", None) or getattr(store, "_store", None)
        seen += 1
    return None


def _iface_ip(ifname: str) -> str:
    import fcntl
    import struct
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", ifname.encode()[:15]))
        return socket.inet_ntoa(packed[20:24])  # SIOCGIFADDR
    except OSError as exc:
        raise DistNetworkError(f"TB_IFNAME={ifname!r}: cannot read the interface's IPv4 address "
                               f"({exc}); list interfaces with `ip addr`") from None
    finally:
        s.close()


def _route_ip(host: str) -> str:
    """The local address the kernel would use to reach ``host`` (no packet is sent)."""
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.connect((host, 9))
            return s.getsockname()[0]
        finally:
            s.close()
    except OSError:
        return "127.0.0.1"


def _tune(sock: socket.socket, tcp: bool) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SOCKBUF)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SOCKBUF)
    if tcp:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)


def _chunks(count: int, n: int) -> list:
    """n contiguous [start, end) element ranges covering count (np.array_split's split)."""
    base, rem = divmod(count, n)
    out, start = [], 0
    for i in range(n):
        end = start + base + (1 if i < rem else 0)
        out.append((start, end))
        start = end
    return out


def _segments(start: int, end: int, seg: int) -> list:
    return [(a, min(a + seg, end)) for a in range(start, end, seg)]


def _children(v: int, n: int) -> list:
    """Binomial-tree children of virtual rank v (farthest first)."""
    kids, mask = [], 1
    while mask < n:
        if v < mask and v + mask < n:
            kids.append(v + mask)
        mask <<= 1
    return kids[::-1]


def _parent(v: int) -> int:
    return v - (1 << (v.bit_length() - 1))


class TCPBackend(Backend):
    """Collectives over a socket mesh; see the module docstring for algorithms and thresholds.

    Args:
        store: a store private to this group (prefixed).
        rank: this process's rank in the group.
        size: the number of ranks in the group.
        timeout: the group timeout in seconds.
        group_name: the group's name, used in error messages.
        deadline: a monotonic deadline for the set-up; None for ``timeout`` from now.
    """

    name = "tcp"

    def __init__(self, store, rank: int, size: int, timeout: float, group_name: str,
                 deadline: float | None = None):
        super().__init__(store, rank, size, timeout, group_name)
        self._setup_deadline = deadline  # init_process_group's one deadline (None: timeout)
        self.conns: list = [None] * size
        self.hosts: list = [None] * size
        self.local_ranks: list = [rank]
        self._seq = 0
        self._poisoned: BaseException | None = None
        self._submit_lock = threading.Lock()
        self._exec_lock = threading.Lock()
        self._pending = 0
        self._queue: queue.Queue = queue.Queue()
        self._worker: threading.Thread | None = None
        self._closed = False
        self._engine = W.Engine(self)
        self._abort_reasons: dict = {}
        self._shm = None
        self._debug = str(_config.get("TB_DISTRIBUTED_DEBUG")).upper() == "DETAIL"
        if size > 1:
            self._connect_mesh()
        else:
            self.hosts = [_host_identity()[0]]

    # ***** mesh setup *****
    def _advertised_ip(self) -> tuple:
        ifname = _config.get("TB_IFNAME")
        if ifname:
            ip = _iface_ip(ifname)
            return ip, ip
        host = _store_host(self.store)
        if host:
            return _route_ip(host), "0.0.0.0"
        try:
            return socket.gethostbyname(socket.gethostname()), "0.0.0.0"
        except OSError:
            return "127.0.0.1", "0.0.0.0"

    def _connect_mesh(self) -> None:
        deadline = self._setup_deadline or time.monotonic() + self.timeout
        from .. import _liveness
        _liveness.announce(self.store, self.rank)  # a rank that dies from here on is named
        hostname, hostid = _host_identity()
        ip, bind = self._advertised_ip()
        listeners = []
        tcp_l = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp_l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            tcp_l.bind((bind, 0))
        except OSError as exc:
            raise DistNetworkError(f"tcp backend, group {self.group_name!r}, rank {self.rank}: "
                                   f"cannot listen on {bind}: {exc}") from None
        tcp_l.listen(self.size)
        listeners.append(tcp_l)
        uds_path = None
        if _config.get("TB_TCP_UNIX"):
            # Linux abstract socket names ("\0..."): no file, so nothing is left behind when a
            # rank is killed during set-up (a /tmp/tb-*.sock used to stay)
            name = f"tb-{os.getpid()}-{uuid.uuid4().hex[:12]}.sock"
            uds_path = ("\0" + name) if os.uname().sysname == "Linux" else \
                os.path.join(tempfile.gettempdir(), name)
            uds_l = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                uds_l.bind(uds_path)
                uds_l.listen(self.size)
                listeners.append(uds_l)
            except OSError:
                uds_l.close()
                uds_path = None
        try:
            record = {"host": hostname, "hostid": hostid, "ip": ip, "port": tcp_l.getsockname()[1],
                      "unix": uds_path, "pid": os.getpid()}
            self.store.set(f"tcp/addr/{self.rank}", json.dumps(record).encode())
            records = self._gather_records(deadline)
            self.hosts = [r["host"] for r in records]
            self.host_ids = [r["hostid"] for r in records]
            self.pids = [int(r.get("pid") or 0) for r in records]
            self.local_ranks = [j for j in range(self.size) if self.host_ids[j] == hostid]
            for j in range(self.rank):
                self.conns[j] = self._connect_to(j, records[j], hostid, deadline)
            self._accept_from(listeners, deadline)
        except BaseException:
            for c in self.conns:
                if c is not None:
                    c.close()
            raise
        finally:
            for lst in listeners:
                lst.close()
            if uds_path and not uds_path.startswith("\0"):
                try:
                    os.unlink(uds_path)
                except OSError:
                    pass
        # ----- seam: the same-host shared-memory transport (docs/shm.md) -----
        # Host identities are known here (self.hosts, self.host_ids, self.local_ranks); the
        # transport is created once, after the mesh is up, so it can use the store and sockets
        # for its own handshake.
        self._shm = self._setup_intra_host()

    def _setup_intra_host(self):
        """Create the same-host transport for this group, or return None (sockets only).
        Collective: every rank of the group calls it once, right after the mesh is up."""
        from .._shm.transport import IntraHost  # None with TB_SHM=0 or no same-host peer
        return IntraHost.create(self)

    def _gather_records(self, deadline: float) -> list:
        from .. import _liveness
        keys = [f"tcp/addr/{j}" for j in range(self.size)]
        try:
            _liveness.wait_keys(self.store, keys, deadline,
                                f"tcp backend, group {self.group_name!r}, rank {self.rank}",
                                {j: j for j in range(self.size)})
        except (DistBackendError, DistStoreError):
            raise  # a rank that joined and died, or the store failed: named already
        except Exception as exc:  # noqa: BLE001 - store errors become a named timeout
            missing = []
            for j, k in enumerate(keys):
                try:
                    if not self.store.check([k]):
                        missing.append(j)
                except Exception:  # noqa: BLE001
                    missing.append(j)
            raise DistTimeoutError(
                f"tcp backend, group {self.group_name!r}: rank(s) {missing or '?'} did not publish "
                f"their address within {self.timeout:g} s ({exc}); did every rank of the group "
                f"call init_process_group/new_group?") from None
        return [json.loads(v) for v in self.store.multi_get(keys)]

    def _connect_to(self, peer: int, rec: dict, hostid: str, deadline: float) -> W.Conn:
        attempts = []
        if rec.get("unix") and rec["hostid"] == hostid:
            attempts.append(("unix", socket.AF_UNIX, rec["unix"]))
        attempts.append(("tcp", socket.AF_INET, (rec["ip"], rec["port"])))
        last = None
        for transport, family, addr in attempts:
            while True:
                sock = socket.socket(family, socket.SOCK_STREAM)
                try:
                    _tune(sock, transport == "tcp")
                    sock.settimeout(max(0.05, min(5.0, deadline - time.monotonic())))
                    sock.connect(addr)
                    hello = W.HEADER.pack(W.MAGIC, K["hello"], 0, self.rank, 0, self.size, 0)
                    sock.sendall(hello)
                    return W.Conn(sock, peer, rec["host"], transport)
                except OSError as exc:
                    sock.close()
                    last = exc
                    if transport == "unix" or time.monotonic() > deadline:
                        break
                    state = self._record_state(rec, hostid)
                    if state:
                        raise DistBackendError(
                            f"tcp backend, group {self.group_name!r}: rank {peer} {state} "
                            f"during set-up (rank {self.rank} was connecting to it)") from None
                    time.sleep(0.05)
        where = f"{rec['ip']}:{rec['port']}"
        raise DistNetworkError(
            f"tcp backend, group {self.group_name!r}: rank {self.rank} cannot connect to rank "
            f"{peer} at {where} ({rec['host']}): {last}. Check that the address is reachable "
            f"from this host (firewall, TB_IFNAME to pick the interface).")

    def _accept_from(self, listeners: list, deadline: float) -> None:
        import select
        expected = set(range(self.rank + 1, self.size))
        while expected:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DistTimeoutError(
                    f"tcp backend, group {self.group_name!r}: rank {self.rank} waited "
                    f"{self.timeout:g} s for rank(s) {sorted(expected)} to connect")
            ready, _, _ = select.select(listeners, [], [], min(left, 0.25))
            dead = {j: st for j in sorted(expected) for st in [self._peer_state(j)] if st}
            if dead:
                raise DistBackendError(
                    f"tcp backend, group {self.group_name!r}: " + "; ".join(
                        f"rank {j} {st}" for j, st in dead.items())
                    + f" during set-up (rank {self.rank} was waiting for it to connect)")
            for lst in ready:
                sock, _ = lst.accept()
                transport = "unix" if lst.family == socket.AF_UNIX else "tcp"
                try:
                    _tune(sock, transport == "tcp")
                    sock.settimeout(max(0.05, min(5.0, deadline - time.monotonic())))
                    buf = bytearray(W.HEADER_SIZE)
                    got = 0
                    while got < W.HEADER_SIZE:
                        n = sock.recv_into(memoryview(buf)[got:])
                        if n == 0:
                            raise OSError("closed during hello")
                        got += n
                    magic, kind, _, peer, _, size, _ = W.HEADER.unpack(buf)
                    if magic != W.MAGIC or kind != K["hello"] or size != self.size:
                        raise OSError("not a hello of this group")
                    if peer not in expected:
                        raise OSError(f"unexpected peer rank {peer}")
                except OSError:
                    sock.close()  # a stray or hostile client: ignore it
                    continue
                expected.discard(peer)
                self.conns[peer] = W.Conn(sock, peer, self.hosts[peer], transport)

    def _intra_host_transport(self):
        """The same-host transport, or None to use the sockets; asked at the start of each op.

        The object has ``allreduce(flat, op)``, ``broadcast(flat, root)``,
        ``allgather(blocks, src)``, ``reduce_scatter(out, scratch, op)``, ``barrier()`` and
        ``alltoall(dsts, srcs)`` on contiguous host arrays (``op`` may be "avg"); each returns
        True when it ran the op and False to let the sockets run it. Every rank must take the
        same decision for the same op (decide from sizes, dtypes and group shape only)."""
        return self._shm

    # ***** op execution: ordering, sequence numbers, poisoning *****
    def _submit(self, op: str, body, async_op: bool, finish=None, result=None,
                collective: bool = True, desc=None, ftag: int = 0) -> _work.Work:
        # ftag: op and root (_fingerprint.wire_tag), carried in every frame of the op and
        # compared by the receiver together with kind, dtype, byte count and sequence number.
        if self._debug and desc is not None and self.size > 1:
            inner, site = body, FP.call_site()  # the caller's line, before any thread hop

            def body():
                self._check_fingerprint(op, desc(), site)
                return inner()
        with self._submit_lock:
            if self._poisoned is not None:
                raise DistBackendError(
                    f"{op} on group {self.group_name!r} (rank {self.rank}): the group is unusable "
                    f"after an earlier failure: {self._poisoned}")
            if self._closed:
                raise DistBackendError(f"{op}: group {self.group_name!r} was destroyed")
            seq = self._seq
            if collective:
                self._seq += 1
            work = _work.Work(op, seq, self.group_name)
            inline = not async_op and self._pending == 0
            if inline:
                self._exec_lock.acquire()
            else:
                self._pending += 1
                self._ensure_worker()
                self._queue.put((work, body, finish, result, ftag))
        if inline:
            try:
                self._execute(work, body, finish, result, ftag)
            finally:
                self._exec_lock.release()
            if work._exc is not None:
                raise work._exc
            return work
        if not async_op:
            try:
                work.wait()
            except KeyboardInterrupt:  # Ctrl-C while queued behind async ops: stop them all
                self._interrupted(work)
                raise
        return work

    def _interrupted(self, work) -> BaseException:
        """Ctrl-C during ``work``: poison the group (peers fail at once, naming this rank)."""
        reason = DistBackendError(
            f"{work.op} (seq {work.seq}) of group {self.group_name!r} on rank {self.rank} was "
            "interrupted by KeyboardInterrupt (Ctrl-C); the group is unusable: create a new one")
        self._poison(reason)
        return reason

    def _execute(self, work, body, finish, result, ftag=0) -> None:
        if self._poisoned is not None:
            work._complete(exc=DistBackendError(
                f"{work.op} (seq {work.seq}) on group {self.group_name!r}: the group is unusable "
                f"after an earlier failure: {self._poisoned}"))
            return
        self._engine.begin(work.op, work.seq, self.timeout, ftag)
        try:
            out = body()
            if finish is not None:
                finish()
            work._complete(result=out if result is None else result)
        except BaseException as exc:  # noqa: BLE001 - every failure poisons the group
            # Any failure poisons the group: peers may be mid-op with us, and closing our sockets
            # makes them fail at once instead of at their timeout.
            where = f"{work.op} (seq {work.seq}) of group {self.group_name!r} on rank {self.rank}"
            if isinstance(exc, KeyboardInterrupt):  # stays a KeyboardInterrupt for the caller
                self._interrupted(work)
                work._complete(exc=exc)
                return
            if not isinstance(exc, (DistBackendError, TypeError, ValueError)):
                exc = DistBackendError(f"{where} failed: {type(exc).__name__}: {exc}")
            elif isinstance(exc, DistBackendError) and f"seq {work.seq}" not in str(exc):
                # a transport below (e.g. shared memory) that does not know the sequence number
                blamed = getattr(exc, "culprits", None) or [getattr(exc, "rank", None)]
                try:
                    exc = type(exc)(f"{where}: {exc}")
                except Exception:  # noqa: BLE001 - an exception class with another signature
                    exc = DistBackendError(f"{where}: {exc}")
                exc.culprits = [r for r in blamed if r is not None]
            self._poison(exc)
            work._complete(exc=exc)

    def _check_fingerprint(self, op: str, desc: str, site: str = "?") -> None:
        """TB_DISTRIBUTED_DEBUG=DETAIL: before the op, every rank sends every peer what it is
        about to run (op, dtypes, shapes, root, reduce op) and its Python call site over the
        sockets, whatever transport then runs the op; a difference in the call (not the site)
        raises on every rank, naming each rank's call and site (torch's DETAIL mode does the
        same). Without DETAIL the cheaper always-on fingerprint in each frame still applies."""
        n, r, E = self.size, self.rank, self._engine
        text = f"{op} {desc} | at {site}".encode()[:_FP_BYTES]
        mine = np.zeros(_FP_BYTES, np.uint8)
        mine[:len(text)] = np.frombuffer(text, np.uint8)
        rows = np.zeros((n, _FP_BYTES), np.uint8)
        for k in range(1, n):
            E.send(self.conns[(r + k) % n], K["check"], 0, _FP_BYTES, W.as_bytes(mine), tag=0)
            E.recv(self.conns[(r - k) % n], K["check"], 0, _FP_BYTES,
                   W.as_bytes(rows[(r - k) % n]), tag=0)
        E.run()
        rows[r] = mine
        calls = [bytes(row).rstrip(b"\0").decode(errors="replace") for row in rows]
        if len({c.partition(" | at ")[0] for c in calls}) > 1:
            detail = "; ".join(f"rank {j}: {c}" for j, c in enumerate(calls))
            raise DistBackendError(
                f"{op} (seq {E.seq}) of group {self.group_name!r} on rank {r}: mismatch between "
                f"ranks detected by TB_DISTRIBUTED_DEBUG=DETAIL: {detail}")

    def _ensure_worker(self) -> None:
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._work_loop, daemon=True,
                                            name=f"tb-tcp-{self.group_name}-r{self.rank}")
            self._worker.start()

    def _work_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            work, body, finish, result, ftag = item
            with self._exec_lock:
                self._execute(work, body, finish, result, ftag)
            with self._submit_lock:
                self._pending -= 1

    def _poison(self, exc: BaseException) -> None:
        first = self._poisoned is None
        if first:
            self._poisoned = exc
            # Tell every peer why, in band (the store may be gone): they name the failed rank.
            culprits = getattr(exc, "culprits", None) or [-1]
            for c in self.conns:
                if c is not None and c.peer != culprits[0]:
                    c.send_abort(culprits[0], str(exc)[:W.MAX_ABORT_TEXT])
            # Tell peers why (they see our sockets close and look this up), bounded: the store
            # may live in the process that just died.
            self._bounded(lambda: self.store.set(f"tcp/abort/{self.rank}", str(exc)[:4000]), 1.0)
        if self._shm is not None:
            self._shm.abort()  # same-host peers waiting in shared memory fail at once too
        for c in self.conns:
            if c is not None:
                c.close()

    @staticmethod
    def _record_state(rec: dict, hostid: str):
        if rec.get("hostid") != hostid or not rec.get("pid"):
            return None
        return _proc_state(int(rec["pid"]))

    def _peer_state(self, peer: int, settle: float = 0.0):
        """For a same-host peer: 'died (...)' or 'is stopped (...)' from /proc, else None (a
        running peer, or one on another host, which only its sockets can tell about).
        ``settle``: a dying process closes its sockets before /proc shows it dead, so after an
        EOF look again for up to this many seconds."""
        pids, ids = getattr(self, "pids", None), getattr(self, "host_ids", None)
        if not pids or not ids or ids[peer] != ids[self.rank] or pids[peer] <= 0:
            return None
        end = time.monotonic() + settle
        while True:
            state = _proc_state(pids[peer])
            if state or time.monotonic() >= end:
                return state
            time.sleep(0.002)

    def _peer_abort_reason(self, peer: int):
        if peer in self._abort_reasons:
            return self._abort_reasons[peer]
        key = f"tcp/abort/{peer}"
        out = []

        def look():
            if self.store.check([key]):
                out.append(self.store.get(key).decode(errors="replace"))
        time.sleep(0.02)  # the peer writes its reason just before closing; let it land
        self._bounded(look, 1.0)
        self._abort_reasons[peer] = out[0] if out else None
        return self._abort_reasons[peer]

    @staticmethod
    def _bounded(fn, seconds: float) -> None:
        t = threading.Thread(target=lambda: _swallow(fn), daemon=True)
        t.start()
        t.join(seconds)

    # ***** all_reduce *****
    def allreduce(self, arrays, op="sum", *, async_op=True):
        """Reduce every array of ``arrays`` across ranks, in place (MPI_Allreduce).

        Args:
            arrays: the arrays to reduce; each is overwritten with the result.
            op: the reduction, one of ``"sum", "avg", "prod", "min", "max", "band", "bor", "bxor"``.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        staged = [stage(a) for a in arrays]
        hosts = [h for h, _ in staged]
        for h in hosts:
            _check_op(op, h.dtype)

        def body():
            for h in hosts:
                self._allreduce_one(h, op)

        return self._submit("all_reduce", body, async_op, _finisher(staged), list(arrays),
                            desc=lambda: _fp(*hosts, op=op), ftag=FP.wire_tag(op))

    def _allreduce_one(self, arr, op) -> None:
        n = self.size
        flat = arr.reshape(-1)
        if n == 1:
            return
        shm = self._intra_host_transport()
        if shm is not None and shm.allreduce(flat, op):
            return
        op, post = _kernels.avg_plan(flat, op, n)
        if flat.nbytes * (n - 1) <= SMALL_ALLREDUCE:
            self._direct_allreduce(flat, op)
        else:
            self._ring(flat, _chunks(flat.size, n), op, K["all_reduce"], allgather=True)
        if post is not None:
            _kernels.scale_into(flat, post)

    def _direct_allreduce(self, flat, op, kind=K["all_reduce"]) -> None:
        """Everyone sends its whole buffer to everyone; reduce n contributions in rank order."""
        n, r, E = self.size, self.rank, self._engine
        dc, total = W.dtype_code(flat.dtype), flat.nbytes
        bufs = np.empty((n, flat.size), flat.dtype)
        payload = W.as_bytes(flat)
        for k in range(1, n):
            peer = (r + k) % n
            E.send(self.conns[peer], kind, dc, total, payload)
            E.recv(self.conns[(r - k) % n], kind, dc, total, W.as_bytes(bufs[(r - k) % n]))
        E.run()
        if n == 2:  # two operands commute exactly for every op: both ranks get the same bits
            _kernels.reduce_into(flat, bufs[(r + 1) % 2], op)
            return
        bufs[r] = flat
        _reduce_rows(flat, bufs, op)

    def _ring(self, flat, bounds, op, kind, allgather: bool) -> None:
        """Pipelined ring reduce-scatter (+ all-gather) over ``flat`` cut at ``bounds``.

        Step s of the reduce-scatter sends chunk (r-s-1) and reduces chunk (r-s-2) received from
        the left; after n-1 steps chunk r is complete. The all-gather then forwards chunks round
        the ring. Every chunk travels as SEGMENT-byte frames and each received segment is reduced
        (or forwarded) at once, so sends of step s+1 overlap the receives of step s.
        """
        n, r, E = self.size, self.rank, self._engine
        right, left = self.conns[(r + 1) % n], self.conns[(r - 1) % n]
        dc, total = W.dtype_code(flat.dtype), flat.nbytes
        seg = max(1, SEGMENT // flat.itemsize)
        segs = [_segments(a, b, seg) for a, b in bounds]
        tmp = np.empty(min(seg, max(b - a for a, b in bounds)), flat.dtype)
        reduce_into = _kernels.reduce_into
        if total >= THREADED_SEND:
            E.use_sender()
        as_bytes = W.as_bytes

        for a, b in segs[(r - 1) % n]:
            E.send(right, kind, dc, total, as_bytes(flat[a:b]))
        for s in range(n - 1):
            forward = s < n - 2 or allgather
            for a, b in segs[(r - s - 2) % n]:
                t = tmp[:b - a]

                def reduced(a=a, b=b, t=t, forward=forward):
                    reduce_into(flat[a:b], t, op)
                    if forward:
                        E.send(right, kind, dc, total, as_bytes(flat[a:b]))
                E.recv(left, kind, dc, total, as_bytes(t), reduced)
        if allgather:
            for t_step in range(n - 1):
                forward = t_step < n - 2
                for a, b in segs[(r - t_step - 1) % n]:
                    view = as_bytes(flat[a:b])
                    cb = (lambda v=view: E.send(right, kind, dc, total, v)) if forward else None
                    E.recv(left, kind, dc, total, view, cb)
        E.run()

    # ***** broadcast / reduce *****
    def broadcast(self, array, root, *, async_op=True):
        """Copy ``root``'s array into every rank's ``array`` (MPI_Bcast).

        Args:
            array: the root's data on ``root``, overwritten with it elsewhere.
            root: the group rank that holds (or receives) the data.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        host, finish = stage(array, copy_in=(self.rank == root))
        return self._submit("broadcast", lambda: self._broadcast(host.reshape(-1), root),
                            async_op, finish, array, desc=lambda: _fp(host, root=root),
                            ftag=FP.wire_tag(root=root))

    def _broadcast(self, flat, root) -> None:
        n, r, E = self.size, self.rank, self._engine
        if n == 1:
            return
        shm = self._intra_host_transport()
        if shm is not None and shm.broadcast(flat, root):
            return
        kind, dc, total = K["broadcast"], W.dtype_code(flat.dtype), flat.nbytes
        v = (r - root) % n
        real = lambda vv: (vv + root) % n  # noqa: E731
        if total <= SMALL_BCAST:
            kids = [self.conns[real(c)] for c in _children(v, n)]
            payload = W.as_bytes(flat)
            if v == 0:
                for c in kids:
                    E.send(c, kind, dc, total, payload)
            else:
                def got():
                    for c in kids:
                        E.send(c, kind, dc, total, payload)
                E.recv(self.conns[real(_parent(v))], kind, dc, total, payload, got)
            E.run()
            return
        # pipelined chain root -> root+1 -> ... ; each segment is forwarded as soon as it lands
        if total >= THREADED_SEND:
            E.use_sender()
        nxt = self.conns[real(v + 1)] if v < n - 1 else None
        prev = self.conns[real(v - 1)] if v > 0 else None
        for a, b in _segments(0, flat.size, max(1, SEGMENT // flat.itemsize)):
            view = W.as_bytes(flat[a:b])
            if prev is None:
                E.send(nxt, kind, dc, total, view)
            else:
                cb = (lambda vw=view: E.send(nxt, kind, dc, total, vw)) if nxt is not None else None
                E.recv(prev, kind, dc, total, view, cb)
        E.run()

    def reduce(self, array, root, op="sum", *, async_op=True):
        """Reduce into ``root``'s ``array``; other ranks' arrays are unchanged (MPI_Reduce).

        Args:
            array: this rank's contribution; on ``root`` overwritten with the result.
            root: the group rank that holds (or receives) the data.
            op: the reduction, one of ``"sum", "avg", "prod", "min", "max", "band", "bor", "bxor"``.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        host, finish = stage(array)
        _check_op(op, host.dtype)
        if self.rank != root:
            finish = None  # non-roots keep their input unchanged
        return self._submit("reduce", lambda: self._reduce(host.reshape(-1), root, op),
                            async_op, finish, array, desc=lambda: _fp(host, root=root, op=op),
                            ftag=FP.wire_tag(op, root))

    def _reduce(self, flat, root, op) -> None:
        n, r, E = self.size, self.rank, self._engine
        if n == 1:
            return
        kind, dc, total = K["reduce"], W.dtype_code(flat.dtype), flat.nbytes
        acc = flat if r == root else flat.copy()
        op, post = _kernels.avg_plan(acc, op, n)
        v = (r - root) % n
        real = lambda vv: (vv + root) % n  # noqa: E731
        if total <= SMALL_BCAST:
            kids = _children(v, n)
            f32 = acc.dtype == np.float16 and op == "sum"
            acc_r = acc.astype(np.float32) if f32 else acc
            tmps = {}
            for c in kids:
                t = tmps[c] = np.empty_like(acc)
                E.recv(self.conns[real(c)], kind, dc, total, W.as_bytes(t))
            E.run()
            for c in sorted(kids):  # fixed order: the same result whatever the arrival order
                if f32:
                    acc_r += tmps[c]
                else:
                    _kernels.reduce_into(acc_r, tmps[c], op)
            if f32:
                acc[...] = acc_r
            if v > 0:
                E.send(self.conns[real(_parent(v))], kind, dc, total, W.as_bytes(acc))
                E.run()
        else:
            nxt = self.conns[real(v + 1)] if v < n - 1 else None   # farther from the root
            prev = self.conns[real(v - 1)] if v > 0 else None      # towards the root
            seg = max(1, SEGMENT // acc.itemsize)
            tmp = np.empty(min(seg, acc.size), acc.dtype)
            if total >= THREADED_SEND:
                E.use_sender()
            for a, b in _segments(0, acc.size, seg):
                if nxt is None:
                    E.send(prev, kind, dc, total, W.as_bytes(acc[a:b]))
                    continue
                t = tmp[:b - a]

                def reduced(a=a, b=b, t=t):
                    _kernels.reduce_into(acc[a:b], t, op)
                    if prev is not None:
                        E.send(prev, kind, dc, total, W.as_bytes(acc[a:b]))
                E.recv(nxt, kind, dc, total, W.as_bytes(t), reduced)
            E.run()
        if r == root and post is not None:
            _kernels.scale_into(acc, post)

    # ***** gathers *****
    def allgather(self, outputs, input, *, async_op=True):
        """``outputs[j]`` = rank j's ``input`` (MPI_Allgather into a list).

        Args:
            outputs: ``size`` arrays, one per rank, written in rank order.
            input: this rank's contribution (read only).
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        src = stage_in(input)
        staged = [stage(o, copy_in=False) for o in outputs]
        blocks = [h.reshape(-1) for h, _ in staged]
        return self._submit("all_gather", lambda: self._allgather(blocks, src.reshape(-1)),
                            async_op, _finisher(staged), list(outputs), desc=lambda: _fp(src))

    def allgather_into(self, output, input, *, async_op=True):
        """``output`` (size x input elements) = inputs concatenated in rank order.

        Args:
            output: one array of ``size`` times ``input``'s elements, written.
            input: this rank's contribution (read only).
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        src = stage_in(input)
        host, finish = stage(output, copy_in=False)
        flat = host.reshape(-1)
        m = src.size
        blocks = [flat[j * m:(j + 1) * m] for j in range(self.size)]
        return self._submit("all_gather", lambda: self._allgather(blocks, src.reshape(-1)),
                            async_op, finish, output, desc=lambda: _fp(src))

    def _allgather(self, blocks, src) -> None:
        n, r, E = self.size, self.rank, self._engine
        kind, dc, total = K["all_gather"], W.dtype_code(src.dtype), src.nbytes
        for b in blocks:
            if b.size != src.size:
                raise ValueError(f"all_gather: every output must hold {src.size} elements like "
                                 f"the input, got {b.size}")
        blocks[r][...] = src
        if n == 1:
            return
        shm = self._intra_host_transport()
        if shm is not None and shm.allgather(blocks, src):
            return
        if total * n <= SMALL_ALLGATHER:
            payload = W.as_bytes(src)
            for k in range(1, n):
                E.send(self.conns[(r + k) % n], kind, dc, total, payload)
                E.recv(self.conns[(r - k) % n], kind, dc, total, W.as_bytes(blocks[(r - k) % n]))
            E.run()
            return
        right, left = self.conns[(r + 1) % n], self.conns[(r - 1) % n]
        seg = max(1, SEGMENT // src.itemsize)
        pieces = _segments(0, src.size, seg)
        if total >= THREADED_SEND:
            E.use_sender()
        for a, b in pieces:
            E.send(right, kind, dc, total, W.as_bytes(blocks[r][a:b]))
        for t in range(n - 1):
            blk = blocks[(r - t - 1) % n]
            for a, b in pieces:
                view = W.as_bytes(blk[a:b])
                cb = (lambda v=view: E.send(right, kind, dc, total, v)) if t < n - 2 else None
                E.recv(left, kind, dc, total, view, cb)
        E.run()

    def gather(self, outputs, input, root, *, async_op=True):
        """On ``root``, ``outputs[j]`` = rank j's ``input``; ``outputs`` is None elsewhere.

        Args:
            outputs: on ``root``, ``size`` arrays written in rank order; None elsewhere.
            input: this rank's contribution (read only).
            root: the group rank that holds (or receives) the data.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        src = stage_in(input).reshape(-1)
        staged = [stage(o, copy_in=False) for o in outputs] if self.rank == root else []

        def body():
            n, r, E = self.size, self.rank, self._engine
            kind, dc, total = K["gather"], W.dtype_code(src.dtype), src.nbytes
            if r == root:
                for j, (h, _) in enumerate(staged):
                    if h.size != src.size:
                        raise ValueError(f"gather: output {j} has {h.size} elements, the input "
                                         f"{src.size}")
                staged[r][0].reshape(-1)[...] = src
                for j in range(n):
                    if j != r:
                        E.recv(self.conns[j], kind, dc, total, W.as_bytes(staged[j][0]))
            else:
                E.send(self.conns[root], kind, dc, total, W.as_bytes(src))
            E.run()
        return self._submit("gather", body, async_op, _finisher(staged), outputs,
                            desc=lambda: _fp(src, root=root), ftag=FP.wire_tag(root=root))

    def scatter(self, output, inputs, root, *, async_op=True):
        """``output`` = root's ``inputs[rank]``; ``inputs`` is None off the root.

        Args:
            output: the array that receives this rank's piece.
            inputs: on ``root``, ``size`` arrays, one per rank; None elsewhere.
            root: the group rank that holds (or receives) the data.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        host, finish = stage(output, copy_in=False)
        srcs = [stage_in(x).reshape(-1) for x in inputs] if self.rank == root else []

        def body():
            n, r, E = self.size, self.rank, self._engine
            kind, dc, total = K["scatter"], W.dtype_code(host.dtype), host.nbytes
            if r == root:
                for j, s in enumerate(srcs):
                    if s.nbytes != total:
                        raise ValueError(f"scatter: input {j} has {s.size} elements, the output "
                                         f"{host.size}")
                host.reshape(-1)[...] = srcs[r]
                for j in range(n):
                    if j != r:
                        E.send(self.conns[j], kind, dc, total, W.as_bytes(srcs[j]))
            else:
                E.recv(self.conns[root], kind, dc, total, W.as_bytes(host))
            E.run()
        return self._submit("scatter", body, async_op, finish, output,
                            desc=lambda: _fp(host, root=root), ftag=FP.wire_tag(root=root))

    # ***** reduce_scatter *****
    def reduce_scatter(self, output, inputs, op="sum", *, async_op=True):
        """``output`` = reduction over ranks of their ``inputs[rank]``.

        Args:
            output: the array that receives this rank's reduced block.
            inputs: ``size`` arrays; block ``j`` goes, reduced, to rank ``j``.
            op: the reduction, one of ``"sum", "avg", "prod", "min", "max", "band", "bor", "bxor"``.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        srcs = [stage_in(x).reshape(-1) for x in inputs]
        host, finish = stage(output, copy_in=False)
        _check_op(op, host.dtype)

        def body():
            for j, s in enumerate(srcs):
                if s.size != host.size or s.dtype != host.dtype:
                    raise ValueError(f"reduce_scatter: input {j} is {s.size} x {s.dtype}, the "
                                     f"output {host.size} x {host.dtype}")
            self._reduce_scatter(host.reshape(-1), np.concatenate(srcs) if srcs else host, op)
        return self._submit("reduce_scatter", body, async_op, finish, output,
                            desc=lambda: _fp(host, op=op), ftag=FP.wire_tag(op))

    def reduce_scatter_into(self, output, input, op="sum", *, async_op=True):
        """``output`` = reduction of block ``rank`` of the flat ``input`` (size x output).

        Args:
            output: the array that receives this rank's reduced block.
            input: one flat array of ``size`` times ``output``'s elements.
            op: the reduction, one of ``"sum", "avg", "prod", "min", "max", "band", "bor", "bxor"``.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        src = stage_in(input).reshape(-1)
        host, finish = stage(output, copy_in=False)
        _check_op(op, host.dtype)
        if src.size != host.size * self.size:
            raise ValueError(f"reduce_scatter_tensor: the input must hold world_size x output "
                             f"= {self.size} x {host.size} elements, got {src.size}")
        return self._submit("reduce_scatter",
                            lambda: self._reduce_scatter(host.reshape(-1), src.copy(), op),
                            async_op, finish, output, desc=lambda: _fp(host, op=op),
                            ftag=FP.wire_tag(op))

    def _reduce_scatter(self, out, scratch, op) -> None:
        """``scratch`` (n x m, ours to modify) -> out = reduction of block ``rank``."""
        n, r, E, m = self.size, self.rank, self._engine, out.size
        shm = self._intra_host_transport()
        if n > 1 and shm is not None and shm.reduce_scatter(out, scratch, op):
            return
        op, post = _kernels.avg_plan(scratch, op, n)
        kind = K["reduce_scatter"]
        if n > 1 and scratch.nbytes <= SMALL_ALLGATHER:
            dc, total = W.dtype_code(out.dtype), scratch.nbytes
            bufs = np.empty((n, m), out.dtype)
            for k in range(1, n):
                to, frm = (r + k) % n, (r - k) % n
                E.send(self.conns[to], kind, dc, total, W.as_bytes(scratch[to * m:(to + 1) * m]))
                E.recv(self.conns[frm], kind, dc, total, W.as_bytes(bufs[frm]))
            E.run()
            bufs[r] = scratch[r * m:(r + 1) * m]
            _reduce_rows(out, bufs, op)
        else:
            if n > 1:
                self._ring(scratch, [(j * m, (j + 1) * m) for j in range(n)], op, kind,
                           allgather=False)
            out[...] = scratch[r * m:(r + 1) * m]
        if post is not None:
            _kernels.scale_into(out, post)

    # ***** all_to_all *****
    def alltoall(self, outputs, inputs, *, async_op=True):
        """``outputs[j]`` on rank i = ``inputs[i]`` of rank j (MPI_Alltoall with lists).

        Args:
            outputs: ``size`` arrays; ``outputs[j]`` receives rank j's ``inputs[rank]``.
            inputs: ``size`` arrays; ``inputs[j]`` is sent to rank j.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        srcs = [stage_in(x).reshape(-1) for x in inputs]
        staged = [stage(o, copy_in=False) for o in outputs]
        dsts = [h.reshape(-1) for h, _ in staged]
        return self._submit("all_to_all", lambda: self._alltoall(dsts, srcs), async_op,
                            _finisher(staged), list(outputs),
                            desc=lambda: f"{srcs[0].dtype if srcs else '-'} x{len(srcs)}")

    def alltoall_single(self, output, input, out_splits=None, in_splits=None, *, async_op=True):
        """Flat all-to-all along dim 0; splits are row counts per rank (None = equal).

        Args:
            output: the array that receives the rows from every rank, in rank order.
            input: the rows to send, ``in_splits[j]`` of them to rank j.
            out_splits: rows received from each rank; None for an equal split.
            in_splits: rows sent to each rank; None for an equal split.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        n = self.size
        src = stage_in(input)
        host, finish = stage(output, copy_in=False)
        rows_in, rows_out = (src.shape[0] if src.ndim else 1), (host.shape[0] if host.ndim else 1)
        in_splits = _splits(in_splits, rows_in, n, "input_split_sizes")
        out_splits = _splits(out_splits, rows_out, n, "output_split_sizes")
        row_in = src.size // max(rows_in, 1)
        row_out = host.size // max(rows_out, 1)
        fs, fd = src.reshape(-1), host.reshape(-1)
        oi = np.concatenate([[0], np.cumsum(in_splits)]) * row_in
        oo = np.concatenate([[0], np.cumsum(out_splits)]) * row_out
        srcs = [fs[oi[j]:oi[j + 1]] for j in range(n)]
        dsts = [fd[oo[j]:oo[j + 1]] for j in range(n)]
        return self._submit("all_to_all", lambda: self._alltoall(dsts, srcs, check_total=False),
                            async_op, finish, output, desc=lambda: f"{src.dtype} single")

    def _alltoall(self, dsts, srcs, check_total=True) -> None:
        n, r, E = self.size, self.rank, self._engine
        kind = K["all_to_all"]
        if len(dsts) != n or len(srcs) != n:
            raise ValueError(f"all_to_all needs {n} inputs and {n} outputs, got {len(srcs)} and "
                             f"{len(dsts)}")
        if dsts[r].size != srcs[r].size:
            raise ValueError(f"all_to_all: this rank's block to itself has {srcs[r].size} "
                             f"elements but its output slot {dsts[r].size}")
        dsts[r][...] = srcs[r]
        shm = self._intra_host_transport()
        if n > 1 and shm is not None and shm.alltoall(dsts, srcs):
            return
        total = srcs[0].nbytes if check_total else -1
        for k in range(1, n):
            to, frm = (r + k) % n, (r - k) % n
            E.send(self.conns[to], kind, W.dtype_code(srcs[to].dtype), max(total, 0),
                   W.as_bytes(srcs[to]))
            E.recv(self.conns[frm], kind, W.dtype_code(dsts[frm].dtype), total,
                   W.as_bytes(dsts[frm]))
        E.run()

    # ***** barrier *****
    def barrier(self, *, async_op=True):
        """Return once every rank has entered the barrier.

        Args:
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        def body():
            n, r, E = self.size, self.rank, self._engine
            shm = self._intra_host_transport()
            if n > 1 and shm is not None and shm.barrier():
                return
            dist = 1
            while dist < n:  # dissemination: after round k, everyone heard from 2^(k+1) ranks
                E.send(self.conns[(r + dist) % n], K["barrier"], 0, 0, W._EMPTY)
                E.recv(self.conns[(r - dist) % n], K["barrier"], 0, 0, W._EMPTY)
                E.run()
                dist <<= 1
        return self._submit("barrier", body, async_op, desc=lambda: "")

    # ***** point to point *****
    def send(self, array, dst, tag=0, *, async_op=True):
        """Send ``array`` to group rank ``dst``; matched in order per (peer, tag).

        Args:
            array: the data to send (read only).
            dst: the destination group rank.
            tag: messages are matched in order per (peer, tag).
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        src = stage_in(array).reshape(-1)
        if dst == self.rank:
            raise ValueError(f"send: dst {dst} is this rank; a rank cannot send to itself")

        def body():
            conn = self.conns[dst]
            conn.p2p_sent += 1
            self._engine.send(conn, K["p2p"], W.dtype_code(src.dtype), src.nbytes,
                              W.as_bytes(src), tag=tag, seq=conn.p2p_sent)
            self._engine.run()
        return self._submit("send", body, async_op, collective=False)

    def recv(self, array, src, tag=0, *, async_op=True):
        """Receive into ``array`` from ``src`` (None = any rank); ``result()`` is the source.

        Args:
            array: the array that receives the data (shape and dtype must match the send).
            src: the source group rank; None for any rank.
            tag: messages are matched in order per (peer, tag).
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        host, finish = stage(array, copy_in=False)
        flat = host.reshape(-1)
        if src == self.rank:
            raise ValueError(f"recv: src {src} is this rank; a rank cannot receive from itself")
        # the Work's result is the source rank (within the group)
        return self._submit("recv", lambda: self._recv(flat, src, tag), async_op, finish,
                            collective=False)

    def _recv(self, flat, src, tag) -> int:
        E, dc = self._engine, W.dtype_code(flat.dtype)
        peers = [src] if src is not None else [j for j in range(self.size) if j != self.rank]
        for j in peers:  # an early frame already read?
            stash = self.conns[j].stash.get(tag)
            if stash:
                dtype, data = stash.popleft()
                if dtype != dc or len(data) != flat.nbytes:
                    raise DistBackendError(
                        f"recv (tag {tag}) on group {self.group_name!r}, rank {self.rank}: rank "
                        f"{j} sent {len(data)} bytes of {W.dtype_name(dtype)} but this rank "
                        f"receives {flat.nbytes} bytes of {flat.dtype}")
                W.as_bytes(flat)[:] = data
                return j
        if src is None:
            src = self._wait_any_p2p(peers, tag)
            if src is None:
                return self._recv(flat, None, tag)  # a stashed frame with our tag arrived
        E.recv(self.conns[src], K["p2p"], dc, -1, W.as_bytes(flat), tag=tag, seq=-1)
        E.run()
        return src

    def batch_p2p(self, ops, *, async_op=True):
        """Sends and receives ``[(kind, array, peer, tag)]`` progressed together in one run (an
        exchange of any size cannot deadlock on full socket buffers).

        Args:
            ops: ``(kind, array, peer, tag)`` tuples, kind ``"send"`` or ``"recv"``.
            async_op: return without waiting for the peers.

        Returns:
            Work: one handle for the whole batch.
        """
        prepared, staged = [], []
        for kind, arr, peer, tag in ops:
            if kind == "send":
                prepared.append((kind, stage_in(arr).reshape(-1), peer, tag))
            else:
                host, fin = stage(arr, copy_in=False)
                staged.append((host, fin))
                prepared.append((kind, host.reshape(-1), peer, tag))

        def body():
            E = self._engine
            for kind, flat, peer, tag in prepared:
                conn, dc = self.conns[peer], W.dtype_code(flat.dtype)
                if kind == "send":
                    conn.p2p_sent += 1
                    E.send(conn, K["p2p"], dc, flat.nbytes, W.as_bytes(flat), tag=tag,
                           seq=conn.p2p_sent)
                else:
                    E.recv(conn, K["p2p"], dc, -1, W.as_bytes(flat), tag=tag, seq=-1)
            E.run()
        return self._submit("batch_isend_irecv", body, async_op, _finisher(staged),
                            collective=False)

    def _wait_any_p2p(self, peers, tag):
        """recv(src=None): the first peer whose next frame is a p2p frame with ``tag``."""
        import select
        E = self._engine
        candidates = {self.conns[j].fd: self.conns[j] for j in peers}
        while candidates:
            left = E.deadline - time.monotonic()
            if left <= 0:
                raise DistTimeoutError(
                    f"recv from any source (tag {tag}) on group {self.group_name!r}, rank "
                    f"{self.rank}, timed out after {self.timeout:g} s: no rank sent")
            ready, _, _ = select.select(list(candidates), [], [], left)
            for fd in ready:
                conn = candidates[fd]
                try:
                    head = conn.sock.recv(W.HEADER_SIZE, socket.MSG_PEEK)
                except BlockingIOError:
                    continue
                if not head:
                    raise E.peer_closed(conn)
                if len(head) < W.HEADER_SIZE:
                    time.sleep(0.0001)
                    continue
                magic, kind, dtype, ftag, _, _, nbytes = W.HEADER.unpack(head)
                if magic != W.MAGIC:
                    raise E.protocol_error(conn, f"bad frame magic {magic:#x}")
                if kind == K["abort"]:
                    conn.sock.recv_into(conn.hdr_view)
                    raise E.peer_aborted(conn, *conn.read_abort(E, ftag, nbytes))
                if kind != K["p2p"]:
                    del candidates[fd]  # its next frame is a collective: no p2p before it
                    continue
                if ftag == tag:
                    return conn.peer
                conn.sock.recv_into(conn.hdr_view)  # consume the header, stash the payload
                conn._read_stray(E, dtype, ftag, nbytes)
                return None if conn.stash.get(tag) else self._wait_any_p2p(peers, tag)
        raise DistBackendError(f"recv from any source (tag {tag}) on group {self.group_name!r}, "
                               f"rank {self.rank}: every peer's next message is a collective")

    # ***** lifetime *****
    def monitored_barrier(self, timeout, wait_all_ranks=False):
        """A barrier that names the ranks that did not arrive (via the store).

        Args:
            timeout: seconds to wait for the other ranks.
            wait_all_ranks: report every missing rank rather than the first.

        Raises:
            DistTimeoutError: some rank did not arrive within ``timeout``; the message names it.
        """
        return super().monitored_barrier(timeout, wait_all_ranks)

    def shutdown(self) -> None:
        """Finish queued ops, then release connections and threads."""
        if self._closed:
            return
        with self._submit_lock:
            self._closed = True
            worker = self._worker
        if worker is not None and worker.is_alive():
            self._queue.put(None)
            worker.join(self.timeout + 1.0)
        self._engine.close()
        if self._shm is not None and not (worker is not None and worker.is_alive()):
            self._shm.close()  # unmap only when no collective can be running in it
        for c in self.conns:
            if c is not None:
                c.close()

    def abort(self) -> None:
        """Fail pending ops at once and close everything."""
        self._closed = True
        if self._poisoned is None:
            self._poisoned = DistBackendError(f"group {self.group_name!r} was aborted")
        if self._shm is not None:
            self._shm.abort()  # wakes same-host peers waiting in shared memory
        for c in self.conns:
            if c is not None:
                c.close()
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0]._complete(exc=self._poisoned)
        self._queue.put(None)


# ***** helpers *****
def _proc_state(pid: int):
    from .._liveness import proc_state
    return proc_state(pid)


def _swallow(fn) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001 - best effort (the store may be gone)
        pass


def _finisher(staged):
    fins = [f for _, f in staged if f.__name__ != "_noop"]
    if not fins:
        return None

    def finish():
        for f in fins:
            f()
    return finish


_CHECKED: set = set()  # (op, dtype) pairs already validated: keeps the latency path short


_FP_BYTES = 256  # fingerprint of one call (TB_DISTRIBUTED_DEBUG=DETAIL)


def _fp(*arrays, **extra) -> str:
    """What a call moves, for the DETAIL check: dtypes and shapes, plus root/op."""
    parts = [",".join(f"{a.dtype}{list(a.shape)}" for a in arrays)]
    parts += [f"{k}={v}" for k, v in extra.items()]
    return " ".join(parts)


def _check_op(op: str, dtype) -> None:
    if (op, dtype) in _CHECKED:
        return
    _check_op_uncached(op, dtype)
    _CHECKED.add((op, dtype))


def _check_op_uncached(op: str, dtype) -> None:
    dtype = np.dtype(dtype)
    if op not in ("sum", "avg", "prod", "min", "max", "band", "bor", "bxor"):
        raise ValueError(f"unknown reduce op {op!r}")
    if dtype.name not in _kernels.DTYPES:
        raise TypeError(f"reductions support {', '.join(_kernels.DTYPES)}; got {dtype}")
    if op == "avg" and dtype.kind != "f":
        raise TypeError(f"ReduceOp.AVG needs a floating dtype, got {dtype} (integer averages "
                        f"are not defined here, as in torch's Gloo): use SUM and divide")
    if op in ("band", "bor", "bxor") and dtype.kind not in "iub":
        raise TypeError(f"ReduceOp.{op.upper()} needs an integer or bool dtype, got {dtype}")


def _reduce_rows(out, rows, op) -> None:
    """out = rows[0] op rows[1] op ... in row (rank) order; float16 sums in float32."""
    if rows.dtype == np.float16 and op == "sum":
        acc = rows[0].astype(np.float32)
        for j in range(1, len(rows)):
            acc += rows[j]
        out[...] = acc
        return
    np.copyto(out, rows[0])
    for j in range(1, len(rows)):
        _kernels.reduce_into(out, rows[j], op)


def _splits(splits, rows, n, what):
    if splits is None or len(splits) == 0:
        if rows % n:
            raise ValueError(f"all_to_all_single: dim 0 ({rows}) is not divisible by the world "
                             f"size {n}; pass {what}")
        return [rows // n] * n
    splits = [int(s) for s in splits]
    if len(splits) != n or sum(splits) != rows or min(splits) < 0:
        raise ValueError(f"all_to_all_single: {what} {splits} must have {n} non-negative entries "
                         f"summing to dim 0 = {rows}")
    return splits
