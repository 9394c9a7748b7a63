"""Sends that lend the array's pages to the kernel instead of copying them (Unix sockets):
``vmsplice`` into a pipe, ``splice`` on to the socket. Only the ring lends, and ``Engine.run``
waits for the socket's unread count (:func:`unread`) to reach zero before the op returns. Why,
when it is safe, why TCP sockets never lend, and the figures: docs/distributed.md, "Zero-copy
sends on Unix sockets". ``TB_TCP_SPLICE=0`` turns lending off; without Linux's ``vmsplice`` it
is off.
"""
from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import os
import sys
import termios
import time
from typing import Any

from .... import _config

LEND_MIN = 64 << 10        # smaller payloads are copied (a syscall pair costs more than the copy)
SPIN = 2e-3                # seconds wait_read spins before it sleeps
_PIPE_BYTES = 1 << 20      # pages in flight per vmsplice/splice round
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
_F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)
_SPLICE_FLAGS = getattr(os, "SPLICE_F_NONBLOCK", 2) | getattr(os, "SPLICE_F_MOVE", 1)


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


@functools.cache
def _libc_vmsplice() -> Any:
    """libc's ``vmsplice``, or None where it (or ``os.splice``) is missing."""
    if not (sys.platform.startswith("linux") and hasattr(os, "splice")):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).vmsplice
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.POINTER(_Iovec), ctypes.c_size_t, ctypes.c_uint]
    fn.restype = ctypes.c_ssize_t
    return fn


def enabled() -> bool:
    """Whether this process lends pages on Unix sockets: ``TB_TCP_SPLICE`` is on and the
    platform has ``vmsplice`` and ``os.splice``."""
    return bool(_config.get("TB_TCP_SPLICE")) and bool(_libc_vmsplice())


def unread(fd: int) -> int:
    """Bytes sent on the Unix socket ``fd`` that its peer has not consumed yet (``SIOCOUTQ``;
    0 once every lent page is free again)."""
    buf = bytearray(4)
    fcntl.ioctl(fd, termios.TIOCOUTQ, buf)
    return int.from_bytes(buf, sys.byteorder, signed=True)


def wait_read(fds, deadline: float) -> bool:
    """Wait until the peers on ``fds`` have read everything sent to them, or ``deadline``.

    The peers read the last frames in the same operation, so the wait is about the skew between
    the ranks: it spins (yielding the core) for up to ``SPIN`` seconds, then sleeps in steps
    growing to 1 ms. Nothing wakes a thread when a peer reads, so there is no event to poll.

    Returns:
        bool: True when every count reached zero, False at ``deadline`` (``time.monotonic()``).
    """
    spin_until, pause = time.monotonic() + SPIN, 0.0
    for fd in fds:
        while unread(fd) > 0:
            now = time.monotonic()
            if now > deadline:
                return False
            if now < spin_until:
                os.sched_yield()
                continue
            pause = min(max(pause * 2, 50e-6), 1e-3)
            time.sleep(pause)
    return True


class Lender:
    """The pipe that carries one connection's lent pages to its socket.

    Driven by the progress engine with a non-blocking socket: :meth:`pump` moves what the socket
    takes and says when a payload is through. Pages mapped into the pipe and not yet spliced
    stay there between calls, so each connection has its own pipe.
    """

    def __init__(self):
        self.rfd, self.wfd = os.pipe()
        # pipe-max-size below 1 MiB: the default 64 KiB pipe still works
        with contextlib.suppress(OSError):
            fcntl.fcntl(self.wfd, _F_SETPIPE_SZ, _PIPE_BYTES)
        self.capacity = fcntl.fcntl(self.wfd, _F_GETPIPE_SZ)
        self.inpipe = 0  # bytes mapped into the pipe and not yet spliced to the socket
        self.iov = _Iovec()
        self.vmsplice = _libc_vmsplice()

    def pump(self, fd: int, lent: list) -> bool:
        """Move lent bytes to the socket ``fd`` until it is full or the payload is through.

        ``lent`` is ``[address, length, mapped, ...]`` of the payload (kept alive by the
        caller); ``mapped``, the bytes already mapped into the pipe, is advanced in place.
        Returns True when every byte has gone to ``fd`` (a non-blocking Unix stream socket),
        False when it is full; OSError when vmsplice or splice failed (the peer closed).
        """
        address, length, mapped = lent[0], lent[1], lent[2]
        iov = self.iov
        while True:
            if not self.inpipe:
                if mapped == length:
                    return True
                iov.base, iov.len = address + mapped, min(self.capacity, length - mapped)
                got = self.vmsplice(self.wfd, ctypes.byref(iov), 1, 0)
                if got < 0:
                    code = ctypes.get_errno()
                    raise OSError(code, f"vmsplice: {os.strerror(code)}")
                mapped += got
                lent[2] = mapped
                self.inpipe = got
            try:
                self.inpipe -= os.splice(self.rfd, fd, self.inpipe, flags=_SPLICE_FLAGS)
            except (BlockingIOError, InterruptedError):
                return False

    def close(self) -> None:
        """Close the pipe (pages still in it are released)."""
        for fd in (self.rfd, self.wfd):
            with contextlib.suppress(OSError):
                os.close(fd)
