"""The mpi backend's exit notice: an ``atexit`` hook tells each peer of every group this rank
still holds how many collectives it posted there, so a peer waiting in one it never posted fails
at once, naming it (why, and what it replaced: docs/mpi.md, "Failures").
"""
from __future__ import annotations

import os
import sys
import time
import weakref

import numpy as np

from ..errors import DistBackendError

TAG = 7  # point-to-point on the fingerprint communicator, which carries no other p2p
CHECK_S = 0.02  # how often a napping poll looks for exit notices (an Iprobe, ~1 us)
_groups: weakref.WeakSet = weakref.WeakSet()


def _send_notices() -> None:
    """atexit: every group this process still holds tells each peer how many collectives it
    posted there."""
    MPI = sys.modules.get("mpi4py.MPI")
    if MPI is None or not MPI.Is_initialized() or MPI.Is_finalized():
        return
    sends = []
    for be in list(_groups):
        if getattr(be, "comm", None) is None or be._failure.first is not None \
                or be._failure.closed or be.size < 2:
            continue
        note = np.array([be._collectives, os.getpid()], np.int64)
        be._exit_note = note  # alive until the sends complete
        try:
            sends += [be._fpc.Isend(note, j, TAG) for j in range(be.size) if j != be.rank]
        except MPI.Exception:
            continue
    deadline = time.monotonic() + 0.5  # 16-byte messages go eagerly: this returns at once
    while sends and not MPI.Request.Testall(sends) and time.monotonic() < deadline:
        time.sleep(2e-5)


def watch(backend) -> None:
    """Register ``backend`` (an ``MPIBackend`` of several processes) for the exit notice."""
    if not _groups:
        import atexit
        atexit.register(_send_notices)  # runs before mpi4py's MPI_Finalize
    _groups.add(backend)


def exited_peer(be, op: str, seq: int) -> DistBackendError | None:
    """The error for a peer of ``be`` (an ``MPIBackend``, waiting in collective ``op`` number
    ``seq``) that exited before posting every collective this rank has posted there, else None."""
    MPI = be._MPI
    status = MPI.Status()
    while be._fpc.Iprobe(MPI.ANY_SOURCE, TAG, status):
        note = np.zeros(2, np.int64)
        be._fpc.Recv(note, status.Get_source(), TAG)
        be._exited[status.Get_source()] = (int(note[0]), int(note[1]))
    behind = sorted(j for j, (n, _) in be._exited.items() if n < be._collectives)
    if not behind:
        return None
    j = behind[0]
    n, pid = be._exited[j]
    return DistBackendError(
        f"MPI {op} (seq {seq}) of group {be.group_name!r} failed on rank {be.rank}: rank "
        f"{j} exited (process {pid}, without destroy_process_group) after {n} collective(s) "
        f"of this group, and this rank has called {be._collectives}: rank {j} will never "
        "join (a collective skipped on that rank?). Every rank must call the same "
        "collectives in the same order; MPI cannot cancel it, so this group is unusable")
