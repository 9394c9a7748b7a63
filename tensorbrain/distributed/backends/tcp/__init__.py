"""The ``tcp`` backend (alias ``gloo``): a full mesh of stream sockets and size-aware algorithms.

The package's parts: ``mesh`` (set-up of the connections, what is known of each peer), ``wire``
(frames, connections, the progress engine), ``algorithms`` (the collectives over the sockets),
``p2p`` (send/recv). This module is the dispatcher: it checks and stages each call, runs it on
the group's op queue (``_executor.OpQueue``: sequence numbers, one op at a time, the failure
state) and asks the same-host shared-memory transport first (``_shm.transport``), when it is on
and takes that op, before the sockets.

Every frame carries the collective's fingerprint (kind, op, root, dtype, byte count, sequence
number), compared by the receiver before it reads a byte, so a mismatched collective raises on
the ranks involved; ``TB_DISTRIBUTED_DEBUG=DETAIL`` adds an exchange of shapes and call sites.
A failed op poisons the group: peers get an abort frame naming the failed rank, and every later
op raises at once. Integer AVG is refused (as torch's Gloo does).
"""
from __future__ import annotations

import numpy as np

from .... import _config
from ... import _fingerprint as FP
from ...errors import DistBackendError
from .. import _validate
from .._executor import FailureState, OpQueue
from .._staging import finisher, stage, stage_in
from ..base import Backend, Capabilities
from . import wire as W
from .algorithms import Algorithms
from .mesh import Mesh, _host_identity, _iface_ip  # noqa: F401 - public names of this module
from .p2p import PointToPoint

K = W.KIND
_FP_BYTES = 256  # one call's description under TB_DISTRIBUTED_DEBUG=DETAIL
_CHECKED: set = set()  # (op, dtype) pairs this backend accepted


class TCPBackend(Mesh, Algorithms, PointToPoint, Backend):
    """Collectives over a socket mesh; see the module docstring and docs/distributed.md.

    Args:
        store: a store private to this group (prefixed).
        rank: this process's rank in the group.
        size: the number of ranks in the group.
        timeout: the group timeout in seconds.
        group_name: the group's name, used in error messages.
        deadline: a monotonic deadline for the set-up; None for ``timeout`` from now.
    """

    name = "tcp"
    capabilities = Capabilities(dtypes=tuple(__import__("tensorbrain._kernels",
                                                        fromlist=["DTYPES"]).DTYPES),
                                batched_p2p=True, devices=("cpu", "cuda"))

    def __init__(self, store, rank: int, size: int, timeout: float, group_name: str,
                 deadline: float | None = None):
        super().__init__(store, rank, size, timeout, group_name)
        self._setup_deadline = deadline  # init_process_group's one deadline (None: timeout)
        self.conns: list = [None] * size
        self.hosts: list = [None] * size
        self.local_ranks: list = [rank]
        self._failure = FailureState(group_name, rank)
        self._engine = W.Engine(self)
        self._ops = OpQueue(f"tb-tcp-{group_name}-r{rank}", self._failure, self._engine.begin,
                            self._on_failure, self.timeout)
        self._abort_reasons: dict = {}
        self._shm = None
        self._debug = FP.detail_enabled()
        if size > 1:
            self._connect_mesh()
        else:
            self.hosts = [_host_identity()[0]]

    # ***** dispatch: checks, the op queue, shared memory first *****
    def _submit(self, op: str, body, async_op: bool, finish=None, result=None,
                collective: bool = True, desc=None, ftag: int = 0):
        # ftag: op and root (_fingerprint.wire_tag), carried in every frame of the op and
        # compared by the receiver together with kind, dtype, byte count and sequence number.
        if self._debug and desc is not None and self.size > 1:
            inner, site = body, FP.call_site()  # the caller's line, before any thread hop

            def body():
                self._check_fingerprint(op, desc(), site)
                return inner()
        return self._ops.submit(op, body, async_op, finish, result, collective, ftag)

    def _dispatch(self, kind: str, sockets, *args) -> None:
        """Run collective ``kind`` on shared memory when that transport takes it, else on the
        sockets. Every rank takes the same decision (from sizes, dtypes and group shape)."""
        shm = self._shm
        run = shm.route(kind, *args) if shm is not None else None
        (run or sockets)(*args)

    def _agree_root(self, what: str, root: int) -> None:
        """Rooted collectives on the sockets: with shared memory on, the ranks first check in
        it that they name the same root (see ``IntraHost.agree_root``)."""
        if self._shm is not None:
            self._shm.agree_root(what, root)

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
            exc.culprits = [r for r in blamed if r is not None]
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
            self._bounded(lambda: self.store.set(f"tcp/abort/{self.rank}", str(exc)[:4000]), 0.1)
        if self._shm is not None:
            self._shm.abort()  # same-host peers waiting in shared memory fail at once too
        for c in self.conns:
            if c is not None:
                c.close()

    def _check_fingerprint(self, op: str, desc: str, site: str = "?") -> None:
        """TB_DISTRIBUTED_DEBUG=DETAIL: before the op, every rank sends every peer what it is
        about to run (op, dtypes, shapes, root, reduce op) and its Python call site over the
        sockets, whatever transport then runs the op; a difference in the call (not the site)
        raises on every rank, naming each rank's call and site (as torch's DETAIL mode)."""
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

    def _check_op(self, op: str, dtype) -> None:
        if (op, dtype) not in _CHECKED:  # the latency path: one set lookup per call
            _validate.check_reduce(op, dtype, self.capabilities.dtypes, self.name)
            _CHECKED.add((op, dtype))

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
            self._check_op(op, h.dtype)

        def body():
            for h in hosts:
                self._allreduce_one(h, op)

        return self._submit("all_reduce", body, async_op, finisher(staged), list(arrays),
                            desc=lambda: _fp(*hosts, op=op), ftag=FP.wire_tag(op))

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

    def reduce(self, array, root, op="sum", *, async_op=True):
        """Reduce into ``root``'s ``array``; other ranks' arrays are unchanged (MPI_Reduce).

        Args:
            array: this rank's contribution; on ``root`` overwritten with the result.
            root: the group rank that holds (or receives) the data.
            op: the reduction, one of ``"sum", "avg", "prod", "min", "max", "band", "bor", "bxor"``.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        host, copy_back = stage(array)
        self._check_op(op, host.dtype)
        finish = copy_back if self.rank == root else None  # non-roots keep their input unchanged

        def body() -> None:
            self._agree_root("reduce", root)
            self._reduce(host.reshape(-1), root, op)
        return self._submit("reduce", body, async_op, finish, array,
                            desc=lambda: _fp(host, root=root, op=op),
                            ftag=FP.wire_tag(op, root))

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
                            async_op, finisher(staged), list(outputs), desc=lambda: _fp(src))

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
            self._agree_root("gather", root)
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
        return self._submit("gather", body, async_op, finisher(staged), outputs,
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
            self._agree_root("scatter", root)
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
        self._check_op(op, host.dtype)

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
        self._check_op(op, host.dtype)
        if src.size != host.size * self.size:
            raise ValueError(f"reduce_scatter_tensor: the input must hold world_size x output "
                             f"= {self.size} x {host.size} elements, got {src.size}")
        return self._submit("reduce_scatter",
                            lambda: self._reduce_scatter(host.reshape(-1), src.copy(), op),
                            async_op, finish, output, desc=lambda: _fp(host, op=op),
                            ftag=FP.wire_tag(op))

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
        # Blocks may differ in size per peer (as in torch); every frame's size is compared with
        # what its receiver expects, so there is no whole-op total to check.
        return self._submit("all_to_all", lambda: self._alltoall(dsts, srcs, check_total=False),
                            async_op, finisher(staged), list(outputs),
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
        in_splits = _validate.splits(in_splits, rows_in, n, "input_split_sizes")
        out_splits = _validate.splits(out_splits, rows_out, n, "output_split_sizes")
        row_in = src.size // max(rows_in, 1)
        row_out = host.size // max(rows_out, 1)
        fs, fd = src.reshape(-1), host.reshape(-1)
        oi = np.concatenate([[0], np.cumsum(in_splits)]) * row_in
        oo = np.concatenate([[0], np.cumsum(out_splits)]) * row_out
        srcs = [fs[oi[j]:oi[j + 1]] for j in range(n)]
        dsts = [fd[oo[j]:oo[j + 1]] for j in range(n)]
        return self._submit("all_to_all", lambda: self._alltoall(dsts, srcs, check_total=False),
                            async_op, finish, output, desc=lambda: f"{src.dtype} single")

    def barrier(self, *, async_op=True):
        """Return once every rank has entered the barrier.

        Args:
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        def body():
            self._dispatch("barrier", self._barrier_sockets)
        return self._submit("barrier", body, async_op, desc=lambda: "")

    # ***** lifetime *****
    def shutdown(self) -> None:
        """Finish queued ops, then release connections and threads."""
        if self._failure.closed:
            return
        self._failure.shut_down()
        idle = self._ops.close(self.timeout + 1.0)
        self._engine.close()
        if self._shm is not None and idle:
            self._shm.close()  # unmap only when no collective can be running in it
        for c in self.conns:
            if c is not None:
                c.close()

    def abort(self) -> None:
        """Fail pending ops at once and close everything."""
        self._failure.abort()
        if self._shm is not None:
            self._shm.abort()  # wakes same-host peers waiting in shared memory
        for c in self.conns:
            if c is not None:
                c.close()
        self._ops.fail_queued()


def _fp(*arrays, **extra) -> str:
    """What a call moves, for the DETAIL check: dtypes and shapes, plus root/op."""
    parts = [",".join(f"{a.dtype}{list(a.shape)}" for a in arrays)]
    parts += [f"{k}={v}" for k, v in extra.items()]
    return " ".join(parts)
