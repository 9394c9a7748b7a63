"""The tcp backend's same-host transport: shared memory for the ranks of a group on one host.

``IntraHost.create(mesh, sockets)`` is called once by ``TCPBackend`` after its mesh is up (host
identities = hostname + boot id, exchanged through the store). It returns None when ``TB_SHM=0``
or when no other rank of the group shares this host; otherwise the local ranks build one segment
together (``connect``) and:

* every rank on one host: the whole collective runs in shared memory (all_reduce, reduce,
  broadcast, all_gather, reduce_scatter, all_to_all with equal blocks, barrier);
* several hosts: all_reduce is hierarchical (reduce within each host in shared memory, an
  all_reduce between one leader per host over the backend's sockets, a broadcast within each
  host in shared memory); the other collectives stay on the sockets.

The backend lists one ``shared memory`` implementation per kind it takes (``whole``: every rank
on this host), before its socket algorithms; every rank takes the same decision, from the group
shape, sizes and dtypes only. The arguments are those of the socket algorithm for that kind
(contiguous host arrays). The exchange between host leaders goes through the socket algorithms'
``exchange_direct``. ``op`` may be "avg",
with the tcp backend's semantics: float16 contributions are divided by the group size in float32
before the sum (an average that fits in float16 never overflows on the way), float32/64 are
summed and then scaled by 1/size.
"""
from __future__ import annotations

import numpy as np

from ... import _config, _kernels
from ..errors import DistBackendError, DistTimeoutError
from . import _interrupt
from . import close, connect, native_available, reduce_ranks as _twin_reduce_ranks


class IntraHost:
    """Shared-memory collectives for the mesh's ranks on this host; see the module doc.

    Args:
        mesh: the tcp backend's ``Mesh`` (rank, size, host ids, the store).
        sockets: its ``SocketAlgorithms`` (the exchange between host leaders).
        group: this host's ``ShmGroup`` (None for a rank alone on its host).
        local_ranks: the group ranks on this host.
    """

    def __init__(self, mesh, sockets, group, local_ranks):
        self.mesh, self.sockets = mesh, sockets
        self.group, self.local_ranks = group, list(local_ranks)
        self.whole = len(self.local_ranks) == mesh.size
        host_ids = mesh.host_ids
        hosts = list(dict.fromkeys(host_ids))  # in order of first rank
        self.leaders = [host_ids.index(h) for h in hosts]  # lowest rank of each host
        self.is_leader = mesh.rank == self.local_ranks[0]
        self._arenas: list = []  # resident gradient arenas (arena.py): aborted with the group

    @classmethod
    def create(cls, mesh, sockets):
        """None unless shared memory is on and a peer shares this host (collective per host)."""
        if not _config.get("TB_SHM") or mesh.size == 1:
            return None
        local = list(mesh.local_ranks)
        if len(local) < 2:
            # Alone on this host. If another host's ranks share memory they run the hierarchical
            # all_reduce, so this rank must run it too, as its host's leader (no segment here);
            # the flat socket all_reduce would wait for data they never send.
            if len(set(mesh.host_ids)) == mesh.size:
                return None  # every rank alone: plain sockets everywhere
            return cls(mesh, sockets, None, local)
        from ..store import PrefixStore
        key = f"shm/{local[0]}"  # one key space per host: its lowest rank creates the segment
        group = connect(PrefixStore(key, mesh.store), local.index(mesh.rank), len(local),
                        mesh.timeout, deadline=mesh.setup_deadline)
        return cls(mesh, sockets, group, local)

    # ***** failures: name the group, the op and the GROUP rank of the peer *****
    def _run(self, what: str, fn, *args) -> None:
        watched = _interrupt.watch(self)  # Ctrl-C must not wait for the native wait to end
        try:
            fn(*args)
        except (DistBackendError, DistTimeoutError) as exc:
            if watched and _interrupt.consume(self):
                raise KeyboardInterrupt(f"{what} over shared memory was interrupted") from None
            local = getattr(exc, "rank", -1)
            peer = self.local_ranks[local] if 0 <= local < len(self.local_ranks) else None
            who = f"; peer: group rank {peer}" if peer is not None else ""
            err = type(exc)(f"{what} over shared memory in group {self.mesh.group_name!r} "
                            f"(rank {self.mesh.rank}){who}: {exc} (set TB_SHM=0 to use "
                            "sockets between same-host ranks)")
            err.rank = peer
            raise err from None
        finally:
            if watched:
                _interrupt.unwatch(self)

    # ***** collectives *****
    def allreduce(self, flat: np.ndarray, op: str) -> None:
        g = self.group  # None for a rank alone on its host: it only joins the leaders
        op, post = _kernels.avg_plan(flat, op, self.mesh.size)
        if g is not None:
            self._run("all_reduce", g.all_reduce, flat, flat, op)
        if not self.whole:
            if self.is_leader:  # hierarchical: leaders exchange host results over the sockets
                self._leaders_allreduce(flat, op)
            if g is not None:
                self._run("all_reduce (host broadcast)", g.broadcast, flat, 0)
        if post is not None:
            _kernels.scale_into(flat, post)

    def _leaders_allreduce(self, flat: np.ndarray, op: str) -> None:
        """Direct exchange between host leaders; reduce in leader order (same bits everywhere)."""
        bufs = self.sockets.exchange_direct(flat, self.leaders)
        me = self.leaders.index(self.mesh.rank)
        srcs = [flat.copy() if i == me else bufs[i] for i in range(len(self.leaders))]
        reduce_ranks(flat, srcs, op)

    def broadcast(self, flat: np.ndarray, root: int) -> None:
        self._run("broadcast", self.group.broadcast, flat, root)

    def allgather(self, blocks, src: np.ndarray) -> None:
        out = _contiguous_blocks(blocks)
        if out is None:
            tmp = np.empty((len(blocks), src.size), src.dtype)
            self._run("all_gather", self.group.all_gather, src, tmp)
            for j, blk in enumerate(blocks):
                blk[...] = tmp[j]
        else:
            self._run("all_gather", self.group.all_gather, np.ascontiguousarray(src), out)

    def reduce_scatter(self, out: np.ndarray, scratch: np.ndarray, op: str) -> None:
        op, post = _kernels.avg_plan(scratch, op, self.mesh.size)
        self._run("reduce_scatter", self.group.reduce_scatter, scratch, out, op)
        if post is not None:
            _kernels.scale_into(out, post)

    def alltoall(self, dsts, srcs, check_total=True) -> None:
        src = np.concatenate(srcs)
        out = _contiguous_blocks(dsts)
        if out is None:
            tmp = np.empty_like(src)
            self._run("all_to_all", self.group.all_to_all, src, tmp)
            m = srcs[0].size
            for j, d in enumerate(dsts):
                d[...] = tmp[j * m:(j + 1) * m]
        else:
            self._run("all_to_all", self.group.all_to_all, src, out)

    def barrier(self) -> None:
        self._run("barrier", self.group.barrier)

    def agree_root(self, what: str, root: int) -> None:
        """Before a rooted collective that runs on the sockets (gather, scatter, reduce): check
        that every rank names the same root, as a broadcast of 0 bytes whose fingerprint
        carries the root (one synchronisation, a few us). Without it, a scatter whose ranks
        each believe they are the root returns on all of them and leaves its frames unread in
        the sockets, which later collectives over shared memory never look at: the mismatch
        went unreported. Whole-host groups only (their local ranks are the group ranks)."""
        if self.whole:
            self._run(f"{what} (do the ranks agree on the root?)", self.group.broadcast,
                      _NO_BYTES, root)

    def resident_arena(self, dtype, count: int, want: bool, submit, region: bool = False):
        """Collective: a gradient arena of ``count`` elements of ``dtype`` resident in a
        segment of its own (arena.py), or None on every rank unless every rank of the group is
        on this host, has the native transport and ``want`` s it.

        Args:
            dtype: float32 or float64.
            count: elements per rank (the same on every rank, else ValueError everywhere).
            want: this rank's wish (the reducer's conditions).
            submit: ``submit(op, fn)`` runs ``fn`` as the backend's collective ``op``.
            region: room for an output region per rank (``ResidentArena.region``), as rank
                0's reducer asks (every rank of a DDP has the same options).
        """
        g = self.group
        if not self.whole:
            return None
        can = want and hasattr(g, "arena_reduce") and np.dtype(dtype).name in ("float32",
                                                                              "float64")
        flags = np.array([int(bool(can)), count, -count], np.int64)
        submit("all_reduce", lambda: self._run("all_reduce", g.all_reduce, flags, flags, "min"))
        if flags[0] == 0:
            return None
        if flags[1] != -flags[2]:
            raise ValueError(f"resident gradient arena: the ranks of group "
                             f"{self.mesh.group_name!r} hold between {flags[1]} and {-flags[2]} "
                             f"elements; every rank must have the same parameters")
        from ..store import PrefixStore
        from .arena import ResidentArena
        # a slot is two buffers: the arena, or the arena and then its output region
        buf = -(-count * np.dtype(dtype).itemsize // (1 if region else 2))
        key = f"shm/{self.local_ranks[0]}/arena{len(self._arenas)}"
        arena_group = connect(PrefixStore(key, self.mesh.store),
                              self.local_ranks.index(self.mesh.rank), len(self.local_ranks),
                              self.mesh.timeout, buf_bytes=max(4096, -(-buf // 4096) * 4096),
                              native=True)
        arena = ResidentArena(self, arena_group, dtype, count, submit)
        self._arenas.append(arena)
        return arena

    # ***** lifetime *****
    def abort(self) -> None:
        """Wake and fail the local peers; safe while another thread is inside a collective."""
        if self.group is not None and not self.group.closed:
            self.group.abort()
        for arena in self._arenas:  # unmapped only when their arrays are gone (ShmGroup's own)
            arena.group.abort()

    def close(self) -> None:
        """Unmap the segment (call only when no collective is running)."""
        if self.group is not None:
            close(self.group)


_NO_BYTES = np.empty(0, np.uint8)


def reduce_ranks(dst: np.ndarray, srcs, op: str) -> None:
    """The native n-ary kernel when available, else its NumPy twin (same bits)."""
    if native_available():
        from ... import _native
        _native.module().shm_reduce_ranks(dst, list(srcs), op)
    else:
        _twin_reduce_ranks(dst, srcs, op)


def _contiguous_blocks(blocks):
    """The one contiguous 1-D array that ``blocks`` are consecutive equal views of, or None
    (then the caller goes through a temporary)."""
    try:
        first = blocks[0]
        if not all(isinstance(b, np.ndarray) and b.flags.c_contiguous and b.flags.writeable
                   and b.dtype == first.dtype and b.size == first.size for b in blocks):
            return None
        start = first.__array_interface__["data"][0]
        if any(b.__array_interface__["data"][0] != start + j * first.nbytes
               for j, b in enumerate(blocks)):
            return None
        owner = first.base
        if not isinstance(owner, np.ndarray) or not owner.flags.c_contiguous:
            return None
        flat = owner.reshape(-1).view(first.dtype)
        off, rem = divmod(start - flat.__array_interface__["data"][0], first.itemsize)
        if rem or off < 0 or off + len(blocks) * first.size > flat.size:
            return None
        return flat[off:off + len(blocks) * first.size]
    except (IndexError, ValueError, TypeError, AttributeError):
        return None
