"""The progress engine's error reports (a mixin of ``wire.Engine``): every message names the
op, the group, the sequence number and the peer, and the ranks it blames travel as
``exc.culprits`` (abort frames carry the first)."""
from __future__ import annotations

import errno
import time
from typing import TYPE_CHECKING, Any, TypeVar

from ...errors import DistBackendError, DistTimeoutError
from .frames import _P2P, KIND, KINDS, dtype_name

if TYPE_CHECKING:
    from .wire import Conn

_E = TypeVar("_E", bound=BaseException)


class EngineErrors:
    """Builds the engine's errors; ``self`` is the ``wire.Engine`` (what it uses: below)."""

    mesh: Any
    op: str
    seq: int
    deadline: float
    active: dict

    def _where(self) -> str:
        b = self.mesh
        return f"{self.op} (seq {self.seq}) of group {b.group_name!r} on rank {b.rank}"

    def peer_lost(self, conn: Conn, exc: OSError | None = None) -> DistBackendError:
        """The error, naming the rank to blame, for a peer whose connection closed (``exc``
        None) or failed (a socket error: EPIPE, ECONNRESET, ...): its abort frame's story when
        it sent one, else what its liveness says (dead, stopped), else what it reported in the
        store."""
        # A send to a peer that already failed breaks (EPIPE, ECONNRESET) while its abort frame,
        # naming the rank that really failed, still waits unread in our receive buffer.
        info = conn.abort_info if conn.abort_info is not None else conn.pending_abort()
        if info is not None:
            return self.peer_aborted(conn, *info)
        err = f"{errno.errorcode.get(exc.errno, '') if exc.errno else ''} {exc}" if exc else ""
        state = self.mesh.peer_state(conn.peer, settle=0.05)
        if state:  # same host: /proc says it is gone or stopped (no store round trip)
            how = f" ({conn.describe()}: {err})" if exc else \
                f"; its connection ({conn.describe()}) closed"
            return _blame(DistBackendError(f"{self._where()} failed: rank {conn.peer} {state}"
                                           f"{how}"), [conn.peer])
        # A live peer that closed without an abort frame (it was mid-frame to us) closed because
        # of a failure elsewhere: name that one when our other sockets or /proc can tell.
        cause = self._cause_elsewhere(conn)
        if cause is not None:
            rank, what = cause
            return _blame(DistBackendError(
                f"{self._where()} failed: rank {rank} {what}; peer {conn.describe()} then "
                f"closed its connection"), [rank])
        # the store look-up: at most 1 s, not (much) past the deadline (a frozen host's store hangs)
        left = max(0.05, min(1.0, self.deadline - time.monotonic()))
        reason = self.mesh.peer_abort_reason(conn.peer, left)
        if exc:
            msg = f"failed talking to peer {conn.describe()}: {err}" + (
                f"; it reported: {reason}" if reason else "")
        else:
            msg = f"failed: peer {conn.describe()} closed the connection" + (
                f": it reported: {reason}" if reason else " (it died or hit an error)")
        return _blame(DistBackendError(f"{self._where()} {msg}"), [conn.peer])

    def _cause_elsewhere(self, conn: Conn) -> tuple[int, str] | None:
        """``(rank, what happened)`` for a failure at a rank other than ``conn.peer``, or None:
        an abort frame another peer sent us (it names the rank it blames), a dead or stopped
        same-host rank (/proc), or another peer that hung up on us with no abort frame (a
        peer that aborts sends one unless it is mid-frame, so that one most likely died)."""
        others = [c for c in self.mesh.conns if c is not None and c is not conn and not c.closed]
        for c in others:
            info = c.abort_info if c.abort_info is not None else c.pending_abort()
            if info is not None and info[0] >= 0 and info[0] != conn.peer:
                return info[0], f"failed (reported by rank {c.peer}: {info[1]})"
        silent = self._silent_ranks(skip=conn.peer)
        if silent:
            return next(iter(silent.items()))
        for c in others:
            if c.hung_up():
                return c.peer, f"closed its connection ({c.describe()}) without a word (it died?)"
        return None

    def _silent_ranks(self, skip: int = -1) -> dict:
        """``{rank: 'died (...)' or 'is stopped (...)'}`` for the other same-host ranks that
        /proc shows dead or stopped (not this rank, nor ``skip``)."""
        b = self.mesh
        return {j: st for j in range(b.size) if j not in (b.rank, skip)
                for st in [b.peer_state(j)] if st}

    def peer_aborted(self, conn: Conn, blamed: int, text: str) -> DistBackendError:
        """The peer sent an abort frame: name the rank it blames (the failed one)."""
        if blamed >= 0 and blamed != conn.peer:
            msg = f"rank {blamed} failed (reported by rank {conn.peer}: {text})"
        else:
            msg = f"peer {conn.describe()} failed: {text}"
        return _blame(DistBackendError(f"{self._where()} failed: {msg}"),
                      [blamed if blamed >= 0 else conn.peer])

    def protocol_error(self, conn: Conn, what: str) -> DistBackendError:
        """The error for bytes from ``conn`` that are not a valid frame (``what`` was wrong)."""
        return DistBackendError(f"{self._where()}: protocol error from peer {conn.describe()}: "
                                f"{what} (is another program connected to this port?)")

    def mismatch(self, conn, exp, kind, dtype, seq, total, nbytes, tag) -> DistBackendError:
        """The error for a frame from ``conn`` whose header fields differ from the expected
        receive ``exp`` (a collective mismatch): both sides' calls in words."""
        from ..._fingerprint import describe_tag

        def desc(k, d, s, t, n, g):
            kname = KINDS[k] if k < len(KINDS) else f"op#{k}"
            extra = describe_tag(g) if k != _P2P else f"tag {g}"
            extra = f", {extra}" if extra else ""
            what = kname if s < 0 else f"{kname} seq {s}"  # seq -1: a recv takes any seq
            size = f" of {t} bytes" if t > 0 or (t == 0 and n == 0) else ""  # -1: any total
            dname = dtype_name(d) if d or k != KIND["barrier"] else "no data"
            return f"{what}{size} ({dname}{extra}; frame {n} bytes)"
        mine = desc(exp.kind, exp.dtype, exp.seq, exp.total, exp.nbytes, exp.tag)
        theirs = desc(kind, dtype, seq, total, nbytes, tag)
        return DistBackendError(
            f"{self._where()}: collective mismatch between ranks: peer {conn.describe()} sent "
            f"{theirs} but this rank expects {mine}. Every rank must call the same collectives "
            f"in the same order with the same op, root, dtype and element count.")

    def timed_out(self, unread=None) -> DistTimeoutError:
        """The error for an operation past its deadline, naming the ranks it waits for (or that
        have not read the pages it lent them, ``unread``), and a frozen or dead rank anywhere in
        the group, which is the cause."""
        waiting = [c for c in self.active.values() if c.recvq]
        sending = unread or [c for c in self.active.values() if c.sendq and not c.recvq]
        # A frozen (SIGSTOP) or dead rank anywhere in the group is the cause, even when this rank
        # waits for a healthy peer that itself waits for it: same-host ranks are checked in /proc.
        b = self.mesh
        silent = self._silent_ranks()
        if silent:
            who = "; " + "; ".join(f"rank {j} {st}" for j, st in silent.items())
            culprits = sorted(silent)
        elif waiting:
            who = f"; still waiting for data from peer {', '.join(c.describe() for c in waiting)}"
            culprits = [c.peer for c in waiting]
        elif sending:
            who = f"; peer {', '.join(c.describe() for c in sending)} is not reading"
            culprits = [c.peer for c in sending]
        else:
            who, culprits = "", []
        return _blame(DistTimeoutError(f"{self._where()} timed out after {b.timeout:g} s"
                                       f"{who}. Did every rank call this collective?"), culprits)


def _blame(exc: _E, ranks) -> _E:
    """Attach the ranks an error blames (``exc.culprits``); abort frames carry the first."""
    setattr(exc, "culprits", list(ranks))  # noqa: B010 - an attribute exceptions do not declare
    return exc
