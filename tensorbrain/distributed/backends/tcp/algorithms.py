"""The tcp backend's collective algorithms over the socket mesh (``SocketAlgorithms``, a
component of ``TCPBackend``): each posts the sends and receives of its rounds to the progress
engine (``wire.Engine``), whose ``run()`` progresses them together. Which algorithm a size takes
(the thresholds below), and why, and how float16 is summed: docs/distributed.md ("Algorithms by
size", "float16").
"""
from __future__ import annotations

import numpy as np

from .... import _kernels
from . import wire as W

# Thresholds, measured on 2 cores with 2 ranks over Unix sockets (docs/distributed.md).
SMALL_ALLREDUCE = 1 << 20   # direct all_reduce while nbytes * (n - 1) stays under this
SEGMENT = 1 << 20           # ring/chain frame: keeps the ~15 us Python cost per frame under 5%
SMALL_BCAST = 1 << 20       # tree below, chain above (a chain pays off after a few segments)
SMALL_ALLGATHER = 2 << 20   # direct all_gather/reduce_scatter below (one round, all buffered)
THREADED_SEND = 1 << 20     # large ops send from a second thread (wire.Sender)
PIECE = 4 << 20             # lending all_reduce: one ring per this many bytes

K = W.KIND


def _chunks(count: int, n: int) -> list:
    """n contiguous [start, end) element ranges covering count (np.array_split's split: the
    first ``count % n`` ranges are one element longer)."""
    base, rem = divmod(count, n)
    starts = [i * base + min(i, rem) for i in range(n + 1)]
    return list(zip(starts[:-1], starts[1:]))


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


class SocketAlgorithms:
    """The collectives over the socket mesh, on contiguous 1-D host arrays.

    Args:
        mesh: the group's connections (``tcp/mesh.py``).
        engine: the progress engine that moves their frames.
    """

    def __init__(self, mesh, engine) -> None:
        self.mesh, self._engine = mesh, engine
        self.rank, self.size, self.conns = mesh.rank, mesh.size, mesh.conns

    def allreduce(self, flat, op, ring: bool) -> None:
        """all_reduce: direct up to ``SMALL_ALLREDUCE``, else the ring (``ring``)."""
        n = self.size
        op, post = _kernels.avg_plan(flat, op, n)
        if not ring:
            self._direct_allreduce(flat, op)
        else:
            # Lending (tcp/lend.py): one ring per PIECE bytes, so a chunk reduced in the
            # reduce-scatter is still in cache when the peer reads its pages in the all-gather
            # (64 MiB: 3.3 -> 4.3 GB/s busbw). Copying sends over TCP gained nothing from it.
            # Every rank must cut the same pieces, so this is decided from what all ranks know
            # alike (every rank on one host), not from this rank's own link to the right: with
            # hosts of two ranks each, some links are Unix sockets and others TCP.
            one_host = len(self.mesh.local_ranks) == n
            piece = max(n, PIECE // flat.itemsize) if one_host else flat.size
            for s0 in range(0, flat.size, piece):
                part = flat[s0:s0 + piece]
                self._ring(part, _chunks(part.size, n), op, K["all_reduce"], allgather=True,
                           last=s0 + piece >= flat.size, total=flat.nbytes)
        if post is not None:
            _kernels.scale_into(flat, post)

    def exchange(self, dsts, srcs, ranks, kind, totals=(0, -1), tag=None) -> None:
        """Send ``srcs[i]`` to ``ranks[i]`` and receive ``dsts[i]`` from it, for every other rank
        of ``ranks``, in one round inside a running op (every rank posts all its sends and
        receives, then progresses them together), in frames of ``kind`` and ``tag`` (default:
        the op's) whose totals are ``totals`` (sent, expected; -1: any)."""
        m, p, E = len(ranks), ranks.index(self.rank), self._engine
        for k in range(1, m):
            to, frm = (p + k) % m, (p - k) % m
            E.send(self.conns[ranks[to]], kind, W.dtype_code(srcs[to].dtype), totals[0],
                   W.as_bytes(srcs[to]), tag=tag)
            E.recv(self.conns[ranks[frm]], kind, W.dtype_code(dsts[frm].dtype), totals[1],
                   W.as_bytes(dsts[frm]), tag=tag)
        E.run()

    def exchange_direct(self, flat, ranks, kind=K["all_reduce"], tag=None, into=None):
        """:meth:`exchange` of ``flat`` (read only) with every other rank of ``ranks`` (the
        direct all_reduce and all_gather, shared memory's exchange between host leaders, the
        DETAIL check); returns ``into`` (one array per rank of ``ranks``), else a new
        ``(len(ranks), flat.size)`` array: row i is ``ranks[i]``'s (this rank's row unset)."""
        bufs = np.empty((len(ranks), flat.size), flat.dtype) if into is None else into
        self.exchange(bufs, [flat] * len(ranks), ranks, kind, (flat.nbytes,) * 2, tag)
        return bufs

    def _direct_allreduce(self, flat, op) -> None:
        """Everyone sends its whole buffer to everyone; reduce n contributions in rank order."""
        n, r = self.size, self.rank
        bufs = self.exchange_direct(flat, range(n))
        if n == 2:  # two operands commute exactly for every op: both ranks get the same bits
            _kernels.reduce_into(flat, bufs[(r + 1) % 2], op)
            return
        bufs[r] = flat
        _reduce_rows(flat, bufs, op)

    def _ring(self, flat, bounds, op, kind, allgather: bool, last: bool = True,
              total: int | None = None) -> None:
        """Pipelined ring reduce-scatter (+ all-gather) over ``flat`` cut at ``bounds``.

        Step s of the reduce-scatter sends chunk (r-s-1) and reduces chunk (r-s-2) received from
        the left; after n-1 steps chunk r is complete. The all-gather then forwards chunks round
        the ring. Every chunk travels as SEGMENT-byte frames and each received segment is reduced
        (or forwarded) at once, so sends of step s+1 overlap the receives of step s.
        ``last=False``: more rings of the same op follow over other ranges, so the wait for the
        peers to read lent pages (tcp/lend.py) is left to the last one, and ``total``, the whole
        op's byte count, goes in every frame (a size mismatch shows on the first frame).
        """
        n, r, E = self.size, self.rank, self._engine
        right, left = self.conns[(r + 1) % n], self.conns[(r - 1) % n]
        dc, total = W.dtype_code(flat.dtype), flat.nbytes if total is None else total
        seg = max(1, SEGMENT // flat.itemsize)
        segs = [_segments(a, b, seg) for a, b in bounds]
        tmp = np.empty(min(seg, max(b - a for a, b in bounds)), flat.dtype)
        reduce_into = _kernels.reduce_into
        if total >= THREADED_SEND and not E.lends_to(right):  # lent pages cost no copy
            E.use_sender()
        as_bytes = W.as_bytes

        # lend=True: a rank writes into a range it sent only after its right neighbour has
        # read it (that neighbour's reply for the range depends on it), see tcp/lend.py
        for a, b in segs[(r - 1) % n]:
            E.send(right, kind, dc, total, as_bytes(flat[a:b]), lend=True)
        for s in range(n - 1):
            forward = s < n - 2 or allgather
            for a, b in segs[(r - s - 2) % n]:
                t = tmp[:b - a]

                def reduced(a=a, b=b, t=t, forward=forward):
                    reduce_into(flat[a:b], t, op)
                    if forward:
                        E.send(right, kind, dc, total, as_bytes(flat[a:b]), lend=True)
                E.recv(left, kind, dc, total, as_bytes(t), reduced)
        if allgather:
            for t_step in range(n - 1):
                forward = t_step < n - 2
                for a, b in segs[(r - t_step - 1) % n]:
                    view = as_bytes(flat[a:b])
                    cb = ((lambda v=view: E.send(right, kind, dc, total, v, lend=True))
                          if forward else None)
                    E.recv(left, kind, dc, total, view, cb)
        E.run(settle=last)

    def broadcast(self, flat, root, chain: bool) -> None:
        """broadcast: a binomial tree up to ``SMALL_BCAST``, else a pipelined chain."""
        n, r, E = self.size, self.rank, self._engine
        kind, dc, total = K["broadcast"], W.dtype_code(flat.dtype), flat.nbytes
        v = (r - root) % n
        real = lambda vv: (vv + root) % n  # noqa: E731
        if not chain:
            kids = [self.conns[real(c)] for c in _children(v, n)]
            payload = W.as_bytes(flat)

            def forward():  # to the children
                for c in kids:
                    E.send(c, kind, dc, total, payload)
            if v == 0:
                forward()
            else:
                E.recv(self.conns[real(_parent(v))], kind, dc, total, payload, forward)
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

    def reduce(self, flat, root, op, chain: bool) -> None:
        """reduce: a binomial tree up to ``SMALL_BCAST``, else a pipelined chain."""
        n, r, E = self.size, self.rank, self._engine
        kind, dc, total = K["reduce"], W.dtype_code(flat.dtype), flat.nbytes
        acc = flat if r == root else flat.copy()
        op, post = _kernels.avg_plan(acc, op, n)
        v = (r - root) % n
        real = lambda vv: (vv + root) % n  # noqa: E731
        if not chain:
            # kids in a fixed order: the same result whatever the arrival order
            kids = sorted(_children(v, n))
            rows = np.empty((len(kids) + 1, acc.size), acc.dtype)
            rows[0] = acc
            for i, c in enumerate(kids, 1):
                E.recv(self.conns[real(c)], kind, dc, total, W.as_bytes(rows[i]))
            E.run()
            _reduce_rows(acc, rows, op)
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

    def allgather(self, blocks, src, ring: bool) -> None:
        """all_gather (this rank's block already in place): direct up to ``SMALL_ALLGATHER``,
        else the ring."""
        n, r, E = self.size, self.rank, self._engine
        kind, dc, total = K["all_gather"], W.dtype_code(src.dtype), src.nbytes
        if not ring:
            self.exchange_direct(src, range(n), kind, into=blocks)
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

    def reduce_scatter(self, out, scratch, op, ring: bool) -> None:
        """``scratch`` (n x m, ours to modify) -> out = reduction of block ``rank``: direct up to
        ``SMALL_ALLGATHER``, else the ring."""
        n, r, m = self.size, self.rank, out.size
        op, post = _kernels.avg_plan(scratch, op, n)
        kind = K["reduce_scatter"]
        if n > 1 and not ring:
            bufs = np.empty((n, m), out.dtype)
            self.exchange(bufs, scratch.reshape(n, m), range(n), kind, (scratch.nbytes,) * 2)
            bufs[r] = scratch[r * m:(r + 1) * m]
            _reduce_rows(out, bufs, op)
        else:
            if n > 1:
                self._ring(scratch, [(j * m, (j + 1) * m) for j in range(n)], op, kind,
                           allgather=False)
            out[...] = scratch[r * m:(r + 1) * m]
        if post is not None:
            _kernels.scale_into(out, post)

    def alltoall(self, dsts, srcs) -> None:
        """all_to_all (this rank's own block already in place): pairwise exchanges. Blocks may
        differ in size per peer (as in torch); every frame's size is compared with what its
        receiver expects, so there is no whole-op total to check."""
        self.exchange(dsts, srcs, range(self.size), K["all_to_all"])

    def rooted(self, mine, blocks, root, gather: bool) -> None:
        """gather (every rank sends its block ``mine`` straight to the root, into ``blocks``)
        and scatter (the root sends each rank its block of ``blocks``, into ``mine``);
        ``blocks`` is the root's."""
        n, r, E = self.size, self.rank, self._engine
        kind = K["gather"] if gather else K["scatter"]
        dc, total = W.dtype_code(mine.dtype), mine.nbytes
        if r == root:
            if gather:
                blocks[r].reshape(-1)[...] = mine
            else:
                mine.reshape(-1)[...] = blocks[r]
            for j in range(n):
                if j != r:
                    (E.recv if gather else E.send)(self.conns[j], kind, dc, total,
                                                   W.as_bytes(blocks[j]))
        else:
            (E.send if gather else E.recv)(self.conns[root], kind, dc, total, W.as_bytes(mine))
        E.run()

    def barrier(self) -> None:
        """Dissemination: after round k, every rank has heard from 2^(k+1) ranks."""
        n, r, E = self.size, self.rank, self._engine
        dist = 1
        while dist < n:
            E.send(self.conns[(r + dist) % n], K["barrier"], 0, 0, W._EMPTY)
            E.recv(self.conns[(r - dist) % n], K["barrier"], 0, 0, W._EMPTY)
            E.run()
            dist <<= 1
