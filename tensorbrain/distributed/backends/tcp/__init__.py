"""The ``tcp`` backend (alias ``gloo``): a full mesh of stream sockets and size-aware algorithms.

Its components (``Mesh``, the progress ``Engine``, ``SocketAlgorithms``, ``PointToPoint``, shared
memory's ``IntraHost``, the ``OpQueue``) and its pipeline: docs/architecture.md. The fingerprint
travels in band, in every frame (``wire.py``) and shared-memory control block. A failed op
poisons the group: peers get an abort frame naming the failed rank.
"""
from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from .... import _kernels
from ... import _fingerprint as FP
from ...errors import DistBackendError
from .._executor import OpQueue
from .._staging import finisher, stage, stage_in
from .._validate import per_row, row_bytes
from ..base import Backend, Call, Capabilities, Impl, first_enabled
from . import wire as W
from .algorithms import SMALL_ALLGATHER, SMALL_ALLREDUCE, SMALL_BCAST, SocketAlgorithms
from .mesh import Mesh, _iface_ip  # noqa: F401 - tcp._iface_ip (tests)
from .p2p import PointToPoint

K = W.KIND


class TCPBackend(Backend):
    """Collectives over a socket mesh; see the module docstring and docs/distributed.md.

    Args:
        store, rank, size, timeout, group_name: as for ``base.Backend``.
        deadline: a monotonic deadline for the set-up; None for ``timeout`` from now.
    """

    name = "tcp"
    fingerprint = "in band"
    capabilities = Capabilities(dtypes=tuple(_kernels.DTYPES))

    def __init__(self, store, rank: int, size: int, timeout: float, group_name: str,
                 deadline: float | None = None):
        super().__init__(store, rank, size, timeout, group_name)
        self.mesh = Mesh(store, rank, size, self.timeout, group_name, deadline)
        self.conns = self.mesh.conns
        self._engine = W.Engine(self.mesh)
        self._ops = OpQueue(f"tb-tcp-{group_name}-r{rank}", self._failure, self._engine.begin,
                            self._on_failure, self.timeout)
        self.sockets = SocketAlgorithms(self.mesh, self._engine)
        self.p2p = PointToPoint(self.mesh, self._engine, self._ops.submit)
        self._debug = FP.detail_enabled()
        self._shm: Any = None   # the same-host transport (docs/shm.md), once the mesh is up
        if size > 1:
            from ..._shm.transport import IntraHost  # None with TB_SHM=0 or no same-host peer
            self._shm = IntraHost.create(self.mesh, self.sockets)
        self._guard: _SigintGuard | None = None   # the fast path's Ctrl-C guard, once made
        self._impls = self._declare()
        # each family's staging: _prepare_all_reduce ... _prepare_barrier
        self._prepare = {kind: getattr(self, f"_prepare_{kind}") for kind in FP.KINDS[1:]}

    # ***** the pipeline: kind -> implementations, run on the op queue *****
    def _declare(self) -> dict:
        """The lists, fixed for the group's life: what the group's shape decides (one rank;
        shared memory here, for every rank or not) is settled now, what the call decides
        (sizes) is each implementation's ``enabled``."""
        shm, n, A = self._shm, self.size, self.sockets
        whole = shm is not None and shm.whole

        def here(*impls):  # shared-memory implementations: listed when every rank is here
            return list(impls) if whole else []
        impls = {
            "all_reduce": ([Impl("shared memory", None, lambda f, op: shm.allreduce(f, op))]
                           if shm is not None else []) + [  # (hierarchical across hosts)
                Impl("sockets direct", lambda c: _nbytes(c.inputs) * (n - 1) <= SMALL_ALLREDUCE,
                     lambda f, op: A.allreduce(f, op, False)),
                Impl("sockets ring", None, lambda f, op: A.allreduce(f, op, True))],
            "broadcast": here(
                Impl("shared memory", None, lambda f, root: shm.broadcast(f, root))) + [
                Impl("tree", lambda c: c.inputs[0].nbytes <= SMALL_BCAST,
                     lambda f, root: A.broadcast(f, root, False)),
                Impl("chain", None, lambda f, root: A.broadcast(f, root, True))],
            "reduce": [
                Impl("tree", lambda c: c.inputs[0].nbytes <= SMALL_BCAST,
                     lambda f, root, op: A.reduce(f, root, op, False)),
                Impl("chain", None, lambda f, root, op: A.reduce(f, root, op, True))],
            "all_gather": here(Impl("shared memory", None, lambda b, s: shm.allgather(b, s))) + [
                Impl("sockets direct", lambda c: c.inputs[0].nbytes * n <= SMALL_ALLGATHER,
                     lambda b, s: A.allgather(b, s, False)),
                Impl("sockets ring", None, lambda b, s: A.allgather(b, s, True))],
            "gather": [Impl("direct", None, partial(A.rooted, gather=True))],
            "scatter": [Impl("direct", None, partial(A.rooted, gather=False))],
            "reduce_scatter": here(Impl("shared memory", None,
                                        lambda o, sc, op: shm.reduce_scatter(o, sc, op))) + [
                Impl("sockets direct", lambda c: c.outputs[0].nbytes * n <= SMALL_ALLGATHER,
                     lambda o, sc, op: A.reduce_scatter(o, sc, op, False)),
                Impl("sockets ring", None, lambda o, sc, op: A.reduce_scatter(o, sc, op, True))],
            "all_to_all": here(Impl("shared memory", _uniform,
                                    lambda d, s: shm.alltoall(d, s))) + [
                Impl("pairwise", None, A.alltoall)],
            "barrier": here(Impl("shared memory", None, lambda: shm.barrier())) + [
                Impl("dissemination", None, A.barrier)],
        }
        if n == 1:  # a group of one: results in place are there already (all_gather's own
            # block is copied by its staging; the others copy theirs in the algorithms)
            impls.update({kind: [Impl("alone", None, _nothing)] for kind in (
                "all_reduce", "broadcast", "reduce", "all_gather", "barrier")})
        for kind, family in FP.FAMILY.items():  # all_gather_into_tensor is an all_gather ...
            impls[kind] = impls[family]
        return impls

    def execute(self, call: Call, impl: Impl):
        """Stage the call's arrays (contiguous host buffers) and run ``impl`` on the op queue,
        whose number the frames carry with the fingerprint tag (op and root)."""
        family = FP.FAMILY.get(call.kind, call.kind)
        args, finish = self._prepare[family](call)
        run, op, impls = impl.run, call.op, self._impls["all_reduce"]
        coalesced = call.kind == "all_reduce" and len(call.inputs) > 1  # each its own way
        agree = call.root is not None and call.kind != "broadcast" and self._shm is not None
        # DETAIL: the call and the caller's line, taken before any thread hop
        detail = (_describe(call), FP.call_site()) if self._debug and self.size > 1 else None

        def body():
            if detail is not None:
                self._check_fingerprint(family, *detail)
            if agree:  # same-host ranks agree on the root first
                self._shm.agree_root(call.kind, call.root)
            if not coalesced:
                return run(*args())
            for a in args()[0]:
                first_enabled(impls, Call("all_reduce", [a], [a], op)).run(a, op)
        return self._ops.submit(family, body, call.async_op, finish, call.result, True,
                                FP.wire_tag(call.op, call.root))

    # staging (issue time, in the caller's thread): (arguments(), finish) per family; the
    # arguments are made when the op runs (local copies, scratch space)
    def _prepare_all_reduce(self, call):
        staged = [stage(a) for a in call.inputs]
        flats = [h.reshape(-1) for h, _ in staged]
        return (lambda: (flats[0], call.op) if len(flats) == 1 else (flats,)), finisher(staged)

    def _prepare_broadcast(self, call):
        host, finish = stage(call.inputs[0], copy_in=(self.rank == call.root))
        return (lambda: (host.reshape(-1), call.root)), finish

    def _prepare_reduce(self, call):
        host, copy_back = stage(call.inputs[0])
        finish = copy_back if self.rank == call.root else None  # non-roots keep their input
        return (lambda: (host.reshape(-1), call.root, call.op)), finish

    def _prepare_all_gather(self, call):
        src = stage_in(call.inputs[0]).reshape(-1)
        if call.kind == "all_gather":
            staged = [stage(o, copy_in=False) for o in call.outputs]
            blocks = [h.reshape(-1) for h, _ in staged]
            finish = finisher(staged)
        else:  # all_gather_into_tensor: blocks of one flat output
            host, finish = stage(call.outputs[0], copy_in=False)
            flat, m = host.reshape(-1), src.size
            blocks = [flat[j * m:(j + 1) * m] for j in range(self.size)]

        def args():
            blocks[self.rank][...] = src
            return blocks, src
        return args, finish

    def _prepare_gather(self, call):
        src = stage_in(call.inputs[0]).reshape(-1)
        staged = [stage(o, copy_in=False) for o in call.outputs] if self.rank == call.root else []
        outs = [h for h, _ in staged]
        return (lambda: (src, outs, call.root)), finisher(staged)

    def _prepare_scatter(self, call):
        host, finish = stage(call.outputs[0], copy_in=False)
        srcs = [stage_in(x).reshape(-1) for x in call.inputs] if self.rank == call.root else []
        return (lambda: (host, srcs, call.root)), finish

    def _prepare_reduce_scatter(self, call):
        host, finish = stage(call.outputs[0], copy_in=False)
        if call.kind == "reduce_scatter":
            srcs = [stage_in(x).reshape(-1) for x in call.inputs]
            scratch = lambda: np.concatenate(srcs) if srcs else host  # noqa: E731
        else:  # reduce_scatter_tensor: one flat input, copied (the algorithms reduce in it)
            src = stage_in(call.inputs[0]).reshape(-1)
            scratch = src.copy
        return (lambda: (host.reshape(-1), scratch(), call.op)), finish

    def _prepare_all_to_all(self, call):
        n, r = self.size, self.rank
        if call.kind == "all_to_all":
            srcs = [stage_in(x).reshape(-1) for x in call.inputs]
            staged = [stage(o, copy_in=False) for o in call.outputs]
            dsts = [h.reshape(-1) for h, _ in staged]
            finish = finisher(staged)
        else:  # all_to_all_single: blocks of rows along dim 0
            src, (host, finish) = stage_in(call.inputs[0]), stage(call.outputs[0], copy_in=False)
            out_rows, in_rows = call.rows
            row_in, row_out = per_row(src), per_row(host)
            fs, fd = src.reshape(-1), host.reshape(-1)
            oi = np.concatenate([[0], np.cumsum(in_rows)]) * row_in
            oo = np.concatenate([[0], np.cumsum(out_rows)]) * row_out
            srcs = [fs[oi[j]:oi[j + 1]] for j in range(n)]
            dsts = [fd[oo[j]:oo[j + 1]] for j in range(n)]

        def args():
            dsts[r][...] = srcs[r]
            return dsts, srcs
        return args, finish

    def _prepare_barrier(self, call):
        return tuple, None

    # ***** the pipeline's first step for dist.all_reduce *****
    def fast_all_reduce(self):
        """``fast(array, op) -> bool`` on the native shared-memory all_reduce, when every rank of
        the group shares this host and the native module is there (not under
        ``TB_DISTRIBUTED_DEBUG=DETAIL``); else None."""
        shm = self._shm
        native = getattr(shm.group, "all_reduce_inplace", None) if shm is not None else None
        if native is None or not shm.whole or self._debug:  # the twin transport has none
            return None
        if self._guard is None:
            from ..._shm import _interrupt
            self._guard = _SigintGuard(shm.group)
            # False off the main thread: Ctrl-C then waits for the call to end, as before
            self._guard.watched = _interrupt.watch(self._guard)
        guard, run_inline = self._guard, self._ops.run_inline

        def call(arr, avg) -> bool:
            try:
                return native(arr, avg)
            except BaseException as exc:  # noqa: BLE001 - worded as the general path words it
                if guard.fired or isinstance(exc, KeyboardInterrupt):
                    guard.fired = False
                    raise KeyboardInterrupt("all_reduce over shared memory was interrupted") \
                        from None
                shm._run("all_reduce", _raise, exc)   # a peer's failure, by its group rank
                raise

        def fast(arr, op) -> bool:
            avg = _AVG.get(op)
            return avg is not None and run_inline("all_reduce", call, arr, avg)
        return fast

    def resident_arena(self, dtype, count: int, want: bool, region: bool = False):
        """Collective: DDP's gradient arena resident in shared memory
        (``IntraHost.resident_arena``), or None. Its reductions take the latency path
        (``OpQueue.run_inline``: in this thread, no ``Work``) when nothing is queued, else
        they queue behind what is."""
        if self._shm is None:
            return None
        ops = self._ops

        def run(op, fn):
            # True once fn ran: run_inline takes a false result for "declined, not run"
            if not ops.run_inline(op, lambda: fn() or True):
                ops.submit(op, fn, async_op=False)
        return self._shm.resident_arena(dtype, count, want and not self._debug, run, region)

    # ***** failures *****
    def _on_failure(self, work, exc: BaseException) -> BaseException:
        """Every failure poisons the group: peers may be mid-op with us, and closing our sockets
        makes them fail at once instead of at their timeout."""
        where = f"{work.op} (seq {work.seq}) of group {self.group_name!r} on rank {self.rank}"
        if isinstance(exc, KeyboardInterrupt):  # stays a KeyboardInterrupt for the caller
            reason = self._failure.interrupted(work.op, work.seq)
            self._poison(reason)
            return reason
        if not isinstance(exc, (DistBackendError, TypeError, ValueError)):
            exc = DistBackendError(f"{where} failed: {type(exc).__name__}: {exc}")
        elif isinstance(exc, DistBackendError) and f"seq {work.seq}" not in str(exc):
            # a transport below (e.g. shared memory) that does not know the sequence number
            blamed = getattr(exc, "culprits", None) or [getattr(exc, "rank", None)]
            try:
                exc = type(exc)(f"{where}: {exc}")
            except Exception:  # noqa: BLE001 - an exception class with another signature
                exc = DistBackendError(f"{where}: {exc}")
            setattr(exc, "culprits", [r for r in blamed if r is not None])  # noqa: B010
        self._poison(exc)
        return exc

    def _poison(self, exc: BaseException) -> None:
        first = self._failure.first is None
        self._failure.record(exc)
        if first:
            # Tell every peer why, in band (the store may be gone): they name the failed rank.
            culprits = getattr(exc, "culprits", None) or [-1]
            for c in self.conns:
                if c is not None and c.peer != culprits[0]:
                    c.send_abort(culprits[0], str(exc)[:W.MAX_ABORT_TEXT])
            # Tell peers why (they see our sockets close and look this up), bounded: the store
            # may live in the process that just died, or one that is frozen. 0.1 s: a live store
            # answers in well under that; waiting longer made a rank whose store host was
            # SIGSTOPped report its timeout 1 s late (the write goes on in the background).
            self.mesh._bounded(lambda: self.store.set(f"tcp/abort/{self.rank}", str(exc)[:4000]),
                               0.1)
        if self._shm is not None:
            self._shm.abort()  # same-host peers waiting in shared memory fail at once too
        self.mesh.close()

    def _check_fingerprint(self, op: str, desc: str, site: str = "?") -> None:
        """TB_DISTRIBUTED_DEBUG=DETAIL: before the op, every rank sends every peer what it is
        about to run (op, dtypes, shapes, root, reduce op) and its Python call site over the
        sockets, whatever transport then runs the op; a difference in the call (not the site)
        raises on every rank, naming each rank's call and site (as torch's DETAIL mode)."""
        mine = FP.encode_detail(f"{op} {desc} | at {site}")  # (tag 0: no op or root in it)
        rows = self.sockets.exchange_direct(mine, range(self.size), K["check"], tag=0)
        rows[self.rank] = mine
        calls = [FP.decode_detail(row) for row in rows]
        if len({c.partition(" | at ")[0] for c in calls}) > 1:
            detail = "; ".join(f"rank {j}: {c}" for j, c in enumerate(calls))
            raise DistBackendError(
                f"{op} (seq {self._engine.seq}) of group {self.group_name!r} on rank "
                f"{self.rank}: mismatch between ranks detected by TB_DISTRIBUTED_DEBUG=DETAIL: "
                f"{detail}")

    # ***** point to point (p2p.py) *****
    def recv(self, array, src, tag=0, *, async_op=True):
        """The next p2p frame with ``tag`` from ``src`` (None: any rank); see ``Backend.recv``."""
        return self.p2p.recv(array, src, tag, async_op)

    def batch_p2p(self, ops, *, async_op=True, op="batch_isend_irecv"):
        """p2p frames progressed together in one run; see ``Backend.batch_p2p``."""
        return self.p2p.batch_p2p(ops, async_op, op)

    # ***** lifetime *****
    def shutdown(self) -> None:
        """Drain the op queue, then close the engine, shared memory (if idle) and the mesh."""
        if self._failure.closed:
            return
        self._failure.closed = True
        idle = self._ops.close(self.timeout + 1.0)
        self._engine.close()
        self._unwatch()
        if self._shm is not None and idle:
            self._shm.close()  # unmap only when no collective can be running in it
        self.mesh.close()

    def abort(self) -> None:
        """Fail the group and wake same-host peers waiting in shared memory."""
        self._failure.abort()
        self._unwatch()
        if self._shm is not None:
            self._shm.abort()  # wakes same-host peers waiting in shared memory
        self.mesh.close()
        self._ops.fail_queued()

    def _unwatch(self) -> None:
        guard, self._guard = self._guard, None
        if guard is not None and guard.watched:
            from ..._shm import _interrupt
            _interrupt.unwatch(guard)


class _SigintGuard:
    """What the SIGINT watcher aborts: the group, but only while a fast-path call runs in it
    (one difference from the general path: a Ctrl-C, delivered to the main thread, also aborts
    a fast-path collective that another thread of the process is waiting in)."""

    def __init__(self, group):
        self.group, self.fired, self.watched = group, False, False

    def abort(self) -> None:
        if self.group.abort_if_busy():
            self.fired = True


_AVG = {"sum": False, "avg": True}


def _nothing(*args) -> None:
    """A group of one: the collective's result is this rank's own data (already in place)."""


def _raise(exc):
    raise exc


def _nbytes(arrays) -> int:
    return arrays[0].nbytes if arrays else 0


def _uniform(call: Call) -> bool:
    """all_to_all blocks of one size and dtype (shared memory's all_to_all; others: sockets)."""
    if call.kind == "all_to_all":
        blocks = list(call.inputs) + list(call.outputs)
        return len({b.nbytes for b in blocks}) == 1 and len({b.dtype for b in blocks}) == 1
    assert call.rows is not None
    out_rows, in_rows = call.rows
    row_in, row_out = row_bytes(call.inputs[0]), row_bytes(call.outputs[0])
    return len({k * row_in for k in in_rows} | {k * row_out for k in out_rows}) == 1


def _describe(call: Call) -> str:
    """What a call moves, for the DETAIL check: dtypes and shapes, plus root/op."""
    kind = call.kind
    if kind == "all_to_all":
        return f"{call.inputs[0].dtype if call.inputs else '-'} x{len(call.inputs)}"
    if kind == "all_to_all_single":
        return f"{call.inputs[0].dtype} single"
    if kind == "barrier":
        return ""
    arrays = FP.arrays_of(call)
    if kind == "gather":
        arrays = [a.reshape(-1) for a in arrays]
    parts = [",".join(f"{a.dtype}{list(a.shape)}" for a in arrays)]
    if call.root is not None:
        parts.append(f"root={call.root}")
    if call.op is not None:
        parts.append(f"op={call.op}")
    return " ".join(parts)
