"""Point-to-point messages of the tcp backend (``PointToPoint``, a component of ``TCPBackend``).

A p2p frame carries its tag and a per-peer counter; it is matched in order per (peer, tag). A
frame that arrives before its ``recv`` is posted (another tag, or ``recv(src=None)`` looking
at several peers) is stashed on its connection, bounded by ``wire.MAX_STASH``. Point-to-point
ops never take a collective sequence number.
"""
from __future__ import annotations

import socket
import time

from ...errors import DistBackendError, DistTimeoutError
from .._staging import finisher, stage, stage_in
from . import wire as W

K = W.KIND


class PointToPoint:
    """recv and batch_p2p (``Backend.send`` is a batch of one) over the ``mesh``'s connections,
    through the progress ``engine`` and the backend's op queue (``submit``: ordering, the Work,
    failures)."""

    def __init__(self, mesh, engine, submit) -> None:
        self.mesh, self._engine, self._submit = mesh, engine, submit
        self.rank, self.size, self.conns = mesh.rank, mesh.size, mesh.conns
        self.group_name, self.timeout = mesh.group_name, mesh.timeout

    def recv(self, array, src, tag=0, async_op=True):
        """``Backend.recv``: the next p2p frame with ``tag`` from ``src`` (None: any rank)."""
        host, finish = stage(array, copy_in=False)
        flat = host.reshape(-1)
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
        E.recv(self.conns[src], K["p2p"], dc, -1, W.as_bytes(flat), tag=tag, seq=-1)
        E.run()
        return src

    def batch_p2p(self, ops, async_op=True, op="batch_isend_irecv"):
        """``Backend.batch_p2p``: the frames progressed together in one engine run (no deadlock
        on full socket buffers, whatever the sizes)."""
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
        return self._submit(op, body, async_op, finisher(staged), collective=False)

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
                    raise E.peer_lost(conn)
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
                conn.sock.recv_into(conn.hdr_view)  # another tag's: consume the header, stash
                conn._read_stray(E, dtype, ftag, nbytes)  # the payload, and look on
        raise DistBackendError(f"recv from any source (tag {tag}) on group {self.group_name!r}, "
                               f"rank {self.rank}: every peer's next message is a collective")
