"""The backend contract and the collective pipeline, on raw arrays.

A backend moves bytes for ONE process group; the process-group layer (``_collectives.py``)
unwraps Tensors to their arrays (``numpy`` or ``cupy``) and calls the methods below, named after
the MPI operations. The pipeline (a :class:`Call`, checked once, numbered and fingerprinted once,
run by the first enabled :class:`Impl`) is drawn file by file in docs/architecture.md. What each
collective does, its arguments and ``async_op`` are documented once, on the public function in
``tensorbrain.distributed`` (``dist.all_reduce`` ...); the methods here take them as arrays.

Contract
--------
* Construction: ``Backend(store, rank, size, timeout, group_name)``, collective: every rank of
  the group calls it, and it returns once the group can communicate (or raises
  `DistBackendError`/`DistTimeoutError` naming the ranks that did not show up).
* Every operation returns a `Work` (``distributed._work``), complete unless ``async_op``.
* In place where torch is: ``allreduce`` and ``broadcast`` overwrite their arrays; ``reduce``
  writes the root's array only; outputs are written, inputs are not.
* Ordering: each group numbers its collectives 0, 1, 2, ... in issue order and runs them one at a
  time in that order; every rank must issue the same collectives in the same order. Point-to-point
  ops never take a collective sequence number. Groups are independent.
* Errors: as the public functions' ``Raises`` say (and naming the group); after a failure the
  group is poisoned: every later op raises at once, naming the first failure.
* ``op`` is one of ``_validate.REDUCE_OPS``; float16 reductions do not overflow on the way when
  the result fits. Arrays may be non-contiguous or on a CUDA device (staged through host buffers
  with ``_staging.stage`` where the transport needs it).
"""
from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from .. import _fingerprint as FP
from .. import _work
from . import _validate
from ._executor import FailureState
from ._validate import REDUCE_OPS

if TYPE_CHECKING:
    from ..store import Store

#: a NumPy or CuPy array (CuPy ships no type information, so to mypy this is Any)
Array = Any


class Capabilities(NamedTuple):
    """What a backend can do; the pipeline's check reads it.

    Attributes:
        ops: the reduce ops it supports (a subset of ``REDUCE_OPS``).
        dtypes: the dtype names it reduces (data movement takes any dtype).
        refused: the error for a reduce op outside ``ops`` (``{OP}``: its name).
    """

    ops: tuple = REDUCE_OPS
    dtypes: tuple = ("bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32",
                     "float64")
    refused: str = "ReduceOp.{OP} is not supported by this backend"


class Call:
    """One collective as the process-group layer asked for it, described once.

    Attributes:
        kind: the collective (``"all_reduce"``, ``"all_gather_into_tensor"``, ...: the public
            function's name).
        inputs: the arrays read (for in-place collectives, the arrays written too).
        outputs: the arrays written (``inputs`` for in-place ones; ``[]`` off the root of gather).
        op: the reduce op, or None.
        root: the root's group rank, or None.
        splits: all_to_all_single's ``(output rows, input rows)`` per rank, as given.
        rows: all_to_all_single's splits once checked (``_validate.check``): lists.

    ``async_op`` is the public function's (``dist.all_reduce`` ...).
    """

    __slots__ = ("kind", "inputs", "outputs", "op", "root", "splits", "async_op", "rows")

    def __init__(self, kind: str, inputs: Sequence[Array], outputs: Sequence[Array],
                 op: str | None = None, root: int | None = None,
                 splits: tuple[Sequence[int] | None, Sequence[int] | None] | None = None,
                 async_op: bool = True) -> None:
        self.kind, self.inputs, self.outputs = kind, inputs, outputs
        self.op, self.root, self.splits, self.async_op = op, root, splits, async_op
        self.rows: tuple[list[int], list[int]] | None = None

    @property
    def result(self) -> Any:
        """What the Work's ``result()`` gives: the arrays written by the list collectives (None
        off gather's root), else the one array written (None for barrier)."""
        if self.kind == "gather":
            return self.outputs or None
        if self.kind in ("all_reduce", "all_gather", "all_to_all"):
            return self.outputs
        return self.outputs[0] if self.outputs else None

    def __repr__(self) -> str:
        return f"Call({self.kind}, op={self.op}, root={self.root})"


class Impl(NamedTuple):
    """One way a backend runs a kind of collective (Horovod's ``AllreduceOp``).

    Attributes:
        name: what it is (``"shared memory"``, ``"sockets ring"``).
        enabled: ``enabled(call)``, True when it takes the call; None: always.
        run: ``run(call)``, what the backend's executor runs.
    """

    name: str
    enabled: Callable[[Call], bool] | None
    run: Callable[..., Any]


def first_enabled(impls: Sequence[Impl], call: Call) -> Impl:
    """The first implementation of ``impls`` (the backend's list for the call's kind) that takes
    ``call``; every rank decides the same, from sizes, dtypes and the group's shape. ValueError
    when none does."""
    for impl in impls:
        if impl.enabled is None or impl.enabled(call):
            return impl
    raise ValueError(f"{call.kind}: no implementation of this backend takes this call "
                     f"(tried {[i.name for i in impls]})")


class Backend(abc.ABC):
    """Base of all backends: the collectives as methods that build a :class:`Call` and run it
    through :meth:`run`. A backend declares its implementation lists (``_impls``, returned by
    :meth:`implementations`) and provides :meth:`execute`.

    Args:
        store: a store private to this group (prefixed).
        rank: this process's rank in the group.
        size: the number of ranks in the group.
        timeout: the group timeout in seconds.
        group_name: the group's name, used in error messages.

    Raises:
        ValueError: ``rank`` is not in ``[0, size)``.
    """

    #: registry name ("tcp", "mpi", "nccl"); set by subclasses
    name = "base"
    #: what the backend supports; each backend declares its own
    capabilities = Capabilities()
    #: how its collectives carry their fingerprint: "in band", "attached" or "exchanged"
    fingerprint = "in band"

    #: how many store-based monitored_barriers ran (``_store_barrier``)
    _mb_seq = 0
    #: set by the backends: kind -> its implementations (:meth:`implementations`)
    _impls: dict[str, list[Impl]]

    def __init__(self, store: Store, rank: int, size: int, timeout: float,
                 group_name: str) -> None:
        if not 0 <= rank < size:
            raise ValueError(f"rank {rank} is out of range for a group of size {size}")
        self.store, self.rank, self.size = store, rank, size
        self.timeout, self.group_name = float(timeout), group_name
        self._failure = FailureState(group_name, rank)  # the group's first failure
        if self.fingerprint != "in band":  # what :meth:`_claim` numbers and fingerprints with
            self._seq = 0
            self._verify = FP.Verifier(size, self._failure, FP.detail_enabled())

    # ***** the pipeline *****
    def run(self, call: Call) -> _work.Work:
        """Check ``call``, then hand it and the first implementation that takes it to the
        backend's executor; the Work is complete unless ``call.async_op``."""
        _validate.check(call, self)
        return self.execute(call, first_enabled(self.implementations()[call.kind], call))

    def implementations(self) -> dict[str, list[Impl]]:
        """Kind -> the implementations that can run it, in order of preference: the
        ``_impls`` the backend's constructor declared."""
        return self._impls

    @abc.abstractmethod
    def execute(self, call: Call, impl: Impl) -> _work.Work:
        """Number ``call``, carry its fingerprint (:attr:`fingerprint`) and run ``impl``."""

    def _claim(self, call: Call) -> tuple[int, Any]:
        """For an executor that attaches or exchanges fingerprints: raise if the group failed
        earlier, claim the next collective number (``self._seq``) and return it with the call's
        words (``_fingerprint.of_call``; None in a group of one)."""
        failure = self._failure
        if failure.first is not None:
            raise failure.unusable(FP.FAMILY.get(call.kind, call.kind))
        seq = self._seq
        self._seq = seq + 1
        if self.size == 1:
            return seq, None
        return seq, FP.of_call(call, seq, self.rank, self.size, self._verify.detail)

    # ***** the collectives (documented on tensorbrain.distributed's functions) *****
    def allreduce(self, arrays: Sequence[Array], op: str = "sum", *,
                  async_op: bool = True) -> _work.Work:
        """``dist.all_reduce`` / ``all_reduce_coalesced`` on arrays, in place."""
        arrays = list(arrays)
        return self.run(Call("all_reduce", arrays, arrays, op=op, async_op=async_op))

    def broadcast(self, array: Array, root: int, *, async_op: bool = True) -> _work.Work:
        """``dist.broadcast`` on an array."""
        return self.run(Call("broadcast", [array], [array], root=root, async_op=async_op))

    def reduce(self, array: Array, root: int, op: str = "sum", *,
               async_op: bool = True) -> _work.Work:
        """``dist.reduce`` on an array."""
        return self.run(Call("reduce", [array], [array], op=op, root=root, async_op=async_op))

    def allgather(self, outputs: Sequence[Array], input: Array, *,
                  async_op: bool = True) -> _work.Work:
        """``dist.all_gather`` on arrays."""
        return self.run(Call("all_gather", [input], list(outputs), async_op=async_op))

    def allgather_into(self, output: Array, input: Array, *, async_op: bool = True) -> _work.Work:
        """``dist.all_gather_into_tensor`` on arrays."""
        return self.run(Call("all_gather_into_tensor", [input], [output], async_op=async_op))

    def gather(self, outputs: Sequence[Array] | None, input: Array, root: int, *,
               async_op: bool = True) -> _work.Work:
        """``dist.gather`` on arrays (``outputs`` None off the root)."""
        return self.run(Call("gather", [input], list(outputs or ()), root=root,
                             async_op=async_op))

    def scatter(self, output: Array, inputs: Sequence[Array] | None, root: int, *,
                async_op: bool = True) -> _work.Work:
        """``dist.scatter`` on arrays (``inputs`` None off the root)."""
        return self.run(Call("scatter", list(inputs or ()), [output], root=root,
                             async_op=async_op))

    def reduce_scatter(self, output: Array, inputs: Sequence[Array], op: str = "sum", *,
                       async_op: bool = True) -> _work.Work:
        """``dist.reduce_scatter`` on arrays."""
        return self.run(Call("reduce_scatter", list(inputs), [output], op=op, async_op=async_op))

    def reduce_scatter_into(self, output: Array, input: Array, op: str = "sum", *,
                            async_op: bool = True) -> _work.Work:
        """``dist.reduce_scatter_tensor`` on arrays."""
        return self.run(Call("reduce_scatter_tensor", [input], [output], op=op,
                             async_op=async_op))

    def alltoall(self, outputs: Sequence[Array], inputs: Sequence[Array], *,
                 async_op: bool = True) -> _work.Work:
        """``dist.all_to_all`` on arrays."""
        return self.run(Call("all_to_all", list(inputs), list(outputs), async_op=async_op))

    def alltoall_single(self, output: Array, input: Array, out_splits: Sequence[int] | None = None,
                        in_splits: Sequence[int] | None = None, *,
                        async_op: bool = True) -> _work.Work:
        """``dist.all_to_all_single`` on arrays."""
        return self.run(Call("all_to_all_single", [input], [output],
                             splits=(out_splits, in_splits), async_op=async_op))

    def barrier(self, *, async_op: bool = True) -> _work.Work:
        """``dist.barrier``."""
        return self.run(Call("barrier", [], [], async_op=async_op))

    # ***** point to point *****
    def send(self, array: Array, dst: int, tag: int = 0, *, async_op: bool = True) -> _work.Work:
        """``dist.send``/``isend`` on an array (``dst``: a group rank): a batch of one send."""
        return self.batch_p2p([("send", array, dst, tag)], async_op=async_op, op="send")

    @abc.abstractmethod
    def recv(self, array: Array, src: int | None, tag: int = 0, *,
             async_op: bool = True) -> _work.Work:
        """``dist.recv``/``irecv`` on an array (``src`` None: any rank); the result is the
        source."""

    @abc.abstractmethod
    def batch_p2p(self, ops: Sequence[tuple], *, async_op: bool = True,
                  op: str = "batch_isend_irecv") -> _work.Work:
        """``dist.batch_isend_irecv``'s ``(kind, array, peer, tag)`` list as one Work (named
        ``op``), posted together so that exchanges in both directions cannot deadlock."""

    # ***** lifetime *****
    @abc.abstractmethod
    def shutdown(self) -> None:
        """Finish queued ops, then release connections and threads."""

    @abc.abstractmethod
    def abort(self) -> None:
        """Fail pending ops at once and close everything."""

    # ***** optional, with defaults *****
    def fast_all_reduce(self) -> Callable[[Any, Any], bool] | None:
        """The pipeline's first step for ``dist.all_reduce`` on the default group, or None.

        A backend that can run a synchronous all_reduce of one tensor with less than the whole
        pipeline returns ``fast(tensor, op) -> bool`` (False: not taken, the pipeline runs it):
        the checks, sequence number, fingerprint and errors stay the pipeline's own.
        """
        return None

    def monitored_barrier(self, timeout: float, wait_all_ranks: bool = False) -> None:
        """``dist.monitored_barrier``: through the group's store by default (``_store_barrier``);
        backends with a channel of their own (mpi) override it."""
        from ._store_barrier import monitored_barrier
        monitored_barrier(self, timeout, wait_all_ranks)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} group={self.group_name!r} rank={self.rank}/{self.size}>"
