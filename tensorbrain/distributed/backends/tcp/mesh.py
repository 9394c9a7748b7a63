"""The tcp backend's connection mesh: one stream socket between every pair of ranks, set up
through the group's store (which address, Unix sockets for same-host peers, ``TB_IFNAME``:
docs/distributed.md, "The tcp backend"). Every rank publishes its record under
``tcp/addr/<rank>``; the higher rank of each pair connects and sends a hello frame, the lower one
accepts. ``peer_state`` and ``peer_abort_reason`` say what became of a peer.
"""
from __future__ import annotations

import contextlib
import json
import os
import socket
import tempfile
import threading
import time
import uuid

from .... import _config
from ... import _liveness
from ...errors import DistBackendError, DistNetworkError, DistStoreError, DistTimeoutError
from . import wire as W

_SOCKBUF = 4 << 20  # the kernel's wmem_max/rmem_max here; bigger buffers = fewer poll wakeups

K = W.KIND


def _host_identity() -> tuple:
    """(hostname, host id): ``_liveness.host_identity`` (a test may replace this name to make
    ranks on one machine look like several hosts)."""
    return _liveness.host_identity()


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
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", ifname.encode()[:15]))
            return socket.inet_ntoa(packed[20:24])  # SIOCGIFADDR
        except OSError as exc:
            raise DistNetworkError(f"TB_IFNAME={ifname!r}: cannot read the interface's IPv4 "
                                   f"address ({exc}); list interfaces with `ip addr`") from None


def _route_ip(host: str) -> str:
    """The local address the kernel would use to reach ``host`` (no packet is sent)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, 9))
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def _tune(sock: socket.socket, tcp: bool, deadline: float) -> None:
    """Buffers, keep-alive and no Nagle for a mesh socket; a set-up timeout until ``deadline``."""
    sock.settimeout(max(0.05, min(5.0, deadline - time.monotonic())))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SOCKBUF)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SOCKBUF)
    if tcp:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)


class Mesh:
    """One group's connections (``conns[j]``: the ``wire.Conn`` to rank j, None for this rank)
    and what is known of each peer (host, host id, pid, same-host ranks).

    Args:
        store, rank, size, timeout, group_name: as for ``base.Backend``.
        deadline: a monotonic deadline for the set-up; None for ``timeout`` from now.
    """

    def __init__(self, store, rank: int, size: int, timeout: float, group_name: str,
                 deadline: float | None = None) -> None:
        self.store, self.rank, self.size = store, rank, size
        self.timeout, self.group_name = timeout, group_name
        self.setup_deadline = deadline or time.monotonic() + timeout  # shm's attach too
        self.conns: list = [None] * size
        self.hosts: list = [_host_identity()[0]]
        self.host_ids: list = []
        self.pids: list = []
        self.local_ranks: list = [rank]
        self._abort_reasons: dict = {}
        if size > 1:
            self._connect_mesh()

    def close(self) -> None:
        """Close every connection."""
        for c in self.conns:
            if c is not None:
                c.close()

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
        deadline = self.setup_deadline
        _liveness.announce(self.store, self.rank)  # a rank that dies from here on is named
        hostname, hostid = _host_identity()
        ip, bind = self._advertised_ip()
        listeners = []
        tcp_l = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp_l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            tcp_l.bind((bind, 0))
        except OSError as exc:
            tcp_l.close()
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
            self.close()
            raise
        finally:
            for lst in listeners:
                lst.close()
            if uds_path and not uds_path.startswith("\0"):
                with contextlib.suppress(OSError):
                    os.unlink(uds_path)

    def _gather_records(self, deadline: float) -> list:
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
                    _tune(sock, transport == "tcp", deadline)
                    sock.connect(addr)
                    sock.sendall(W.HEADER.pack(W.MAGIC, K["hello"], 0, self.rank, 0, self.size, 0))
                    return W.Conn(sock, peer, rec["host"], transport)
                except OSError as exc:
                    sock.close()
                    last = exc
                    if transport == "unix" or time.monotonic() > deadline:
                        break
                    # a same-host peer that /proc says died or stopped will never answer
                    state = rec["hostid"] == hostid and rec.get("pid") and \
                        _liveness.proc_state(int(rec["pid"]))
                    if state:
                        raise DistBackendError(
                            f"tcp backend, group {self.group_name!r}: rank {peer} {state} "
                            f"during set-up (rank {self.rank} was connecting to it)") from None
                    time.sleep(0.05)
        raise DistNetworkError(
            f"tcp backend, group {self.group_name!r}: rank {self.rank} cannot connect to rank "
            f"{peer} at {rec['ip']}:{rec['port']} ({rec['host']}): {last}. Check that the address "
            f"is reachable from this host (firewall, TB_IFNAME to pick the interface).")

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
            # Pending connections first: a fast peer can connect, finish its work and exit
            # before we accept; its hello is still queued, so it joined (a later op names it).
            dead = {} if ready else {
                j: st for j in sorted(expected) for st in [self.peer_state(j)] if st}
            if dead:
                raise DistBackendError(
                    f"tcp backend, group {self.group_name!r}: " + "; ".join(
                        f"rank {j} {st}" for j, st in dead.items())
                    + f" during set-up (rank {self.rank} was waiting for it to connect)")
            for lst in ready:
                sock, _ = lst.accept()
                transport = "unix" if lst.family == socket.AF_UNIX else "tcp"
                try:
                    _tune(sock, transport == "tcp", deadline)
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

    def peer_state(self, peer: int, settle: float = 0.0):
        """For a same-host peer: 'died (...)' or 'is stopped (...)' from /proc, else None (a
        running peer, or one on another host, which only its sockets can tell about).
        ``settle``: a dying process closes its sockets before /proc shows it dead, so after an
        EOF look again for up to this many seconds."""
        pids, ids = self.pids, self.host_ids
        if not pids or not ids or ids[peer] != ids[self.rank] or pids[peer] <= 0:
            return None
        end = time.monotonic() + settle
        while True:
            state = _liveness.proc_state(pids[peer])
            if state or time.monotonic() >= end:
                return state
            time.sleep(0.002)

    def peer_abort_reason(self, peer: int, limit: float = 1.0):
        """The reason ``peer`` left in the store before it closed its sockets, or None; the
        look-up waits at most ``limit`` seconds (the store's host may be the frozen one)."""
        if peer in self._abort_reasons:
            return self._abort_reasons[peer]
        key = f"tcp/abort/{peer}"
        out = []

        def look():
            if self.store.check([key]):
                out.append(self.store.get(key).decode(errors="replace"))
        time.sleep(0.02)  # the peer writes its reason just before closing; let it land
        self._bounded(look, limit)
        self._abort_reasons[peer] = out[0] if out else None
        return self._abort_reasons[peer]

    @staticmethod
    def _bounded(fn, seconds: float) -> None:
        def swallow():
            with contextlib.suppress(Exception):  # best effort (the store may be gone)
                fn()
        t = threading.Thread(target=swallow, daemon=True)
        t.start()
        t.join(seconds)
