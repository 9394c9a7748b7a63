"""A slow network link between two network namespaces, shaped in user space (for tests and
benchmarks of training over slow links: ``benchmarks/diloco.py``).

This kernel has no netem and no iptables, so the link is a relay process: each namespace gets a
TUN device (``tbsl0`` in the first, ``tbsl1`` in the second, point to point), and the relay, which
holds both devices' file descriptors, moves each IP packet from one to the other after a token
bucket at ``rate`` bits/s (packets leave one after the other, each taking ``size * 8 / rate``
seconds: a serialising link) and a fixed one-way ``delay``. A packet that would wait longer
than ``queue_ms`` in the bucket is dropped (a tail-drop queue; TCP backs off as on a real link).
The relay counts the bytes of the IP packets it carries in each direction: the traffic on the
link, TCP/IP headers included.

>>> import os
>>> from tensorbrain.testing.shaped_link import shaped_link
>>> if os.geteuid() == 0:                                    # doctest: +SKIP
...     with shaped_link(rate_mbit=100, delay_ms=20) as link:
...         print(link.namespaces, link.addresses)

Processes start inside a namespace with ``link.popen(i, argv)`` (``ip netns exec``). Needs root,
``ip`` (iproute2) and ``/dev/net/tun``; :func:`why_unavailable` says what is missing.
The relay is pure Python; at MTU 9000 it keeps up with 100 Mbit/s on one busy core (1 400
packets a second each way). Larger MTUs than a real link's mean fewer, larger packets.
"""
from __future__ import annotations

import contextlib
import ctypes
import fcntl
import heapq
import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import time
import uuid

_TUNSETIFF = 0x400454CA
_IFF_TUN, _IFF_NO_PI = 0x0001, 0x1000
_CLONE_NEWNET = 0x40000000


def why_unavailable() -> str | None:
    """Why a shaped link cannot be made here (None when it can)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces and TUN devices)"
    if shutil.which("ip") is None:
        return "needs iproute2's `ip`"
    if not os.path.exists("/dev/net/tun"):
        return "needs /dev/net/tun"
    return None


class ShapedLink:
    """Two namespaces joined by the relay; see :func:`shaped_link`."""

    def __init__(self, namespaces, addresses, relay, stats_path):
        self.namespaces, self.addresses = namespaces, addresses
        self._relay, self._stats_path = relay, stats_path

    def popen(self, i: int, argv, **kwargs) -> subprocess.Popen:
        """Start ``argv`` inside namespace ``i`` (0 or 1).

        Args:
            i: which namespace.
            argv: the command.
            **kwargs: passed to ``subprocess.Popen``.

        Returns:
            The process.
        """
        return subprocess.Popen(["ip", "netns", "exec", self.namespaces[i], *argv], **kwargs)

    def stats(self) -> dict:
        """Bytes and packets carried (``"bytes"``: [0 -> 1, 1 -> 0]) and dropped so far."""
        self._relay.send_signal(signal.SIGUSR1)
        end = time.monotonic() + 5
        while time.monotonic() < end:
            try:
                with open(self._stats_path) as f:
                    out = json.load(f)
                if out.get("asked", 0) >= self._asked + 1:
                    self._asked = out["asked"]
                    return out
            except (OSError, ValueError):
                pass
            time.sleep(0.01)
        raise RuntimeError("the shaped link's relay did not report its counters")

    _asked = 0


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10, check=check)


@contextlib.contextmanager
def shaped_link(rate_mbit: float = 100.0, delay_ms: float = 20.0, queue_ms: float = 200.0,
                mtu: int = 9000):
    """Yield a :class:`ShapedLink` between two new namespaces; everything is removed after.

    Args:
        rate_mbit: the link's rate in Mbit/s (each direction).
        delay_ms: one-way delay in ms (the round trip is twice that).
        queue_ms: the most a packet may wait in the token bucket before it is dropped.
        mtu: the TUN devices' MTU.

    Raises:
        RuntimeError: the link cannot be made here (the reason).
    """
    why = why_unavailable()
    if why is not None:
        raise RuntimeError(f"shaped_link: {why}")
    tag = uuid.uuid4().hex[:6]
    ns = [f"tbsl{tag}a", f"tbsl{tag}b"]
    subnet = f"10.252.{os.getpid() % 250}"
    addrs = [f"{subnet}.1", f"{subnet}.2"]
    stats_path = f"/tmp/tbsl-{tag}.json"
    made, relay = [], None
    try:
        for n in ns:
            _ip("netns", "add", n)
            made.append(n)
            _ip("-n", n, "link", "set", "lo", "up")
        relay = subprocess.Popen([sys.executable, "-m", "tensorbrain.testing.shaped_link", ns[0],
                                  ns[1], str(rate_mbit), str(delay_ms), str(queue_ms),
                                  stats_path], stdout=subprocess.PIPE, text=True)
        line = relay.stdout.readline() if relay.stdout else ""
        if line.strip() != "ready":
            raise RuntimeError(f"shaped_link: the relay did not start ({line.strip()!r})")
        for i, n in enumerate(ns):
            _ip("-n", n, "link", "set", "tbsl", "mtu", str(mtu))
            _ip("-n", n, "addr", "add", addrs[i], "peer", addrs[1 - i], "dev", "tbsl")
            _ip("-n", n, "link", "set", "tbsl", "up")
        yield ShapedLink(ns, addrs, relay, stats_path)
    finally:
        if relay is not None:
            relay.kill()
            relay.wait(10)
        for n in made:
            for pid in _ip("netns", "pids", n, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            _ip("netns", "del", n, check=False)
        with contextlib.suppress(OSError):
            os.unlink(stats_path)


# ***** the relay process *****
def _open_tun_in(netns: str) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    nsfd = os.open(f"/var/run/netns/{netns}", os.O_RDONLY)
    try:
        if libc.setns(nsfd, _CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {netns} failed")
    finally:
        os.close(nsfd)
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, _TUNSETIFF, struct.pack("16sH", b"tbsl", _IFF_TUN | _IFF_NO_PI))
    os.set_blocking(fd, False)
    return fd


def _relay(ns0: str, ns1: str, rate_mbit: float, delay_ms: float, queue_ms: float,
           stats_path: str) -> None:
    fds = [_open_tun_in(ns0), _open_tun_in(ns1)]
    print("ready", flush=True)
    bps, delay, qmax = rate_mbit * 1e6, delay_ms / 1e3, queue_ms / 1e3
    free_at = [0.0, 0.0]            # when each direction's bucket can start the next packet
    due: list = []                  # (delivery time, seq, direction, packet)
    carried, packets, dropped = [0, 0], [0, 0], [0, 0]
    asked = [0]
    seq = 0

    def report(*_):
        asked[0] += 1
        tmp = stats_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"bytes": carried, "packets": packets, "dropped": dropped,
                       "asked": asked[0]}, f)
        os.replace(tmp, stats_path)
    signal.signal(signal.SIGUSR1, report)
    while True:
        now = time.monotonic()
        wait = max(0.0, due[0][0] - now) if due else 0.5
        try:
            ready, _, _ = select.select(fds, [], [], wait)
        except InterruptedError:
            continue
        now = time.monotonic()
        for d, fd in enumerate(fds):
            if fd not in ready:
                continue
            while True:
                try:
                    pkt = os.read(fd, 65536)
                except BlockingIOError:
                    break
                start = max(now, free_at[d])
                if start - now > qmax:
                    dropped[d] += 1
                    continue
                free_at[d] = start + len(pkt) * 8 / bps
                seq += 1
                heapq.heappush(due, (free_at[d] + delay, seq, d, pkt))
        now = time.monotonic()
        while due and due[0][0] <= now:
            _, _, d, pkt = heapq.heappop(due)
            try:
                os.write(fds[1 - d], pkt)
                carried[d] += len(pkt)
                packets[d] += 1
            except OSError:
                dropped[d] += 1


if __name__ == "__main__":
    _relay(sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]),
           sys.argv[6])
