"""A stand-in for NCCL and CuPy so the ``nccl`` backend's multi-rank code runs in CI on CPUs.

Why it exists: NCCL refuses two ranks on one GPU, the lent GPU machine has one, and CI has none,
so without a stand-in the multi-rank paths of ``tensorbrain/distributed/backends/nccl.py``
(unique-id exchange, dtype and op mapping, grouped send/recv for gather/scatter/all_to_all,
staging of non-contiguous arrays, the watchdog, aborts) would never run before a user's job.
This module replaces exactly the two things the backend gets from ``NCCLBackend._runtime``:

* ``StandInCuda``: the part of CuPy the backend uses. Arrays are NumPy arrays viewed as
  :class:`DeviceArray` (``.data.ptr``, ``.device.id``). A :class:`Stream` other than the null
  stream is a worker thread running its queue in order, so work launched on it is asynchronous
  to the host, as on a GPU; assignments into a `DeviceArray` made while such a stream is current
  (the backend's copy-outs) are queued on it too. `Event` records a point in a stream's queue,
  ``stream.wait_event`` makes a stream wait for it. The null stream is the host itself: work on
  it runs at once, and waiting on an event from it blocks the host.
* ``StandInNccl``: the binding's API (``Communicator``, ``group_start``/``group_end``, ``DTYPES``,
  ``RED_OPS``, ...). Each communicator is a ``tcp`` backend of its own over the group's store;
  its calls take raw pointers and a stream pointer, as NCCL's do, and are queued on that stream.
  Calls between ``group_start`` and ``group_end`` run as one queued step (sends/receives through
  one batched exchange, so two ranks sending to each other do not deadlock). A call that fails
  makes ``get_async_error`` report an error (with the text in ``last_error``), as NCCL reports
  asynchronous errors, so the backend's watchdog path runs for real.

Register it in a worker with :func:`register` and use ``init_process_group("nccl-standin")``
on CPU tensors. It is a test tool: the real thing's speed, memory pools and CUDA errors are not
modelled.
"""
from __future__ import annotations

import ctypes
import os
import queue
import threading

import numpy as np

from ..distributed.backends.nccl import NCCLBackend

_TLS = threading.local()


# ***** CuPy's part: arrays, devices, streams, events *****
class _Ptr:
    __slots__ = ("ptr",)

    def __init__(self, ptr):
        self.ptr = ptr


class _Dev:
    __slots__ = ("id",)

    def __init__(self, ident=0):
        self.id = ident


class DeviceArray(np.ndarray):
    """A NumPy array posing as a CuPy one: ``.data.ptr`` is its address, ``.device.id`` 0."""

    @property
    def data(self):  # noqa: D401 - CuPy's MemoryPointer stand-in
        """CuPy's ``MemoryPointer`` stand-in: ``.ptr`` is the array's address."""
        return _Ptr(self.ctypes.data)

    @property
    def device(self):
        """CuPy's device stand-in: ``.id`` is 0."""
        return _Dev(0)

    def __setitem__(self, key, value):
        stream = current_stream()
        if stream.is_null:
            np.ndarray.__setitem__(self, key, value)
        else:  # a copy-out launched on the communication stream: runs in stream order
            stream.enqueue(lambda: np.ndarray.__setitem__(self, key, value))


class Stream:
    """A queue of work run in order by its own thread (the null stream runs work at once)."""

    _registry: dict = {}
    _ids = iter(range(1, 1 << 62))

    def __init__(self, non_blocking: bool = True, null: bool = False):
        self.is_null = null
        self.ptr = 0 if null else next(Stream._ids)
        if not null:
            self._queue: queue.SimpleQueue = queue.SimpleQueue()
            self._thread = threading.Thread(target=self._run, name=f"standin-stream-{self.ptr}",
                                            daemon=True)
            self._thread.start()
            Stream._registry[self.ptr] = self

    def enqueue(self, fn) -> None:
        """Queue ``fn`` to run in stream order (at once on the null stream).

        Args:
            fn: a callable without arguments.
        """
        if self.is_null:
            _execute(fn, host=True)
        else:
            self._queue.put(fn)

    def _run(self) -> None:
        while True:
            _execute(self._queue.get())

    def wait_event(self, event) -> None:
        """Make later work on this stream wait for ``event``.

        Args:
            event: an ``Event`` recorded on some stream.
        """
        if self.is_null:
            event._done.wait()
        else:
            self.enqueue(event._done.wait)

    def synchronize(self) -> None:
        """Block until everything queued on this stream so far has run."""
        marker = Event()
        marker.record(self)
        marker._done.wait()

    def __enter__(self):
        _stack().append(self)
        return self

    def __exit__(self, *exc):
        _stack().pop()


def _execute(fn, host: bool = False) -> None:
    """Run one item of a stream (``host``: the null stream, in the caller's thread). A failed
    NCCL call is reported as NCCL reports it: like a real kernel whose peer is gone, the step
    "hangs" (later work on the stream waits; on the null stream, the host) until the
    communicator is aborted, then returns, and the communicator reports an asynchronous error.
    Anything else that fails raises to the caller on the null stream (a worker drops it)."""
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - reported as NCCL reports it
        failed = getattr(fn, "comm", None)
        if failed is None:
            if host:
                raise
            return
        failed._set_error(exc)
        failed._aborted.wait()


def _stack() -> list:
    if not hasattr(_TLS, "streams"):
        _TLS.streams = []
    return _TLS.streams


_NULL = Stream(null=True)


def current_stream() -> Stream:
    """The stream of the innermost ``with stream:`` in this thread, or the null stream.

    Returns:
        A ``Stream``.
    """
    stack = _stack()
    return stack[-1] if stack else _NULL


class Event:
    """A point in a stream's queue; ``done`` once the stream has run everything before it."""

    def __init__(self, disable_timing: bool = True):
        self._done = threading.Event()

    def record(self, stream=None) -> None:
        """Mark the current end of ``stream``'s queue; ``done`` turns True when it is reached.

        Args:
            stream: the stream (default: the current one).
        """
        self._done.clear()
        (stream or current_stream()).enqueue(self._done.set)

    @property
    def done(self) -> bool:
        """Whether the stream has run everything queued before ``record``."""
        return self._done.is_set()

    def synchronize(self) -> None:
        """Block until the event is reached."""
        self._done.wait()


class Device:
    """``cupy.cuda.Device``: one device, id 0; usable as a context manager."""

    def __init__(self, ident=None):
        self.id = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


class _Cuda:
    Device, Stream, Event = Device, Stream, Event

    @staticmethod
    def get_current_stream():
        return current_stream()


def _dev(array) -> DeviceArray:
    return np.asarray(array).view(DeviceArray)


class StandInCuda:
    """The functions of CuPy that ``NCCLBackend`` calls, on `DeviceArray`; copies run in stream
    order on the current stream, allocations at once."""

    ndarray = DeviceArray
    int32 = np.int32
    int64 = np.int64
    cuda = _Cuda

    @staticmethod
    def asarray(array):
        """A host-to-device copy, synchronous as CuPy's from a NumPy array."""
        return _dev(np.array(array))

    @staticmethod
    def asnumpy(array):
        """A device-to-host copy after the current stream's work (CuPy's default)."""
        current_stream().synchronize()
        return np.array(np.asarray(array))

    @staticmethod
    def empty(shape, dtype):
        """An uninitialised device-array stand-in (as ``cupy.empty``).

        Args:
            shape: the shape.
            dtype: the dtype.

        Returns:
            A ``DeviceArray``.
        """
        return _dev(np.empty(shape, dtype))

    @staticmethod
    def zeros(shape, dtype):
        """A zero-filled device-array stand-in (as ``cupy.zeros``).

        Args:
            shape: the shape.
            dtype: the dtype.

        Returns:
            A ``DeviceArray``.
        """
        return _dev(np.zeros(shape, dtype))

    @staticmethod
    def ascontiguousarray(array):
        """A contiguous copy made in stream order (as ``cupy.ascontiguousarray``).

        Args:
            array: the source array.

        Returns:
            A ``DeviceArray`` filled when the current stream reaches the copy.
        """
        out = _dev(np.empty(array.shape, array.dtype))
        current_stream().enqueue(lambda: np.copyto(out, array))
        return out

    @staticmethod
    def stack(arrays):
        """Stack arrays along a new first axis, in stream order (as ``cupy.stack``).

        Args:
            arrays: arrays of one shape and dtype.

        Returns:
            A ``DeviceArray`` filled when the current stream reaches the copy.
        """
        arrays = list(arrays)
        out = _dev(np.empty((len(arrays),) + arrays[0].shape, arrays[0].dtype))
        current_stream().enqueue(lambda: np.stack(arrays, out=out))
        return out


# ***** NCCL's part: the binding over a tcp backend *****
class NcclError(RuntimeError):
    """The binding's error type."""


_NP_TYPES = {0: "int8", 1: "uint8", 2: "int32", 3: "uint32", 4: "int64", 5: "uint64",
             6: "float16", 7: "float32", 8: "float64"}
_OPS = {0: "sum", 1: "prod", 2: "max", 3: "min", 4: "avg"}


def _view(ptr: int, count: int, dtype: int) -> np.ndarray:
    """The ``count`` elements of NCCL type ``dtype`` at address ``ptr``, as a NumPy view."""
    np_type = np.dtype(_NP_TYPES[dtype])
    raw = (ctypes.c_ubyte * (count * np_type.itemsize)).from_address(ptr)
    return np.frombuffer(memoryview(raw), dtype=np_type)


class StandInNccl:
    """The binding's API for one group; communicators are tcp backends over ``store``."""

    UNIQUE_ID_BYTES = 128
    DTYPES = {name: code for code, name in _NP_TYPES.items()}
    RED_OPS = {"sum": 0, "product": 1, "max": 2, "min": 3, "avg": 4}
    IN_PROGRESS, TIMEOUT = 7, 8
    NcclError = NcclError

    def __init__(self, store, timeout: float, group_name: str):
        self._store, self._timeout, self._group_name = store, timeout, group_name

    @staticmethod
    def get_unique_id() -> bytes:
        """A random 128-byte id, as ``ncclGetUniqueId`` (rank 0 shares it through the store).

        Returns:
            bytes.
        """
        return os.urandom(StandInNccl.UNIQUE_ID_BYTES)

    @staticmethod
    def get_error_string(code: int) -> str:
        """The message for an NCCL result code (as ``ncclGetErrorString``).

        Args:
            code: the result code.

        Returns:
            The message.
        """
        return {0: "no error", 3: "internal error (stand-in)", 6: "remote process exited or "
                "there was a network error (stand-in)"}.get(code, f"error {code} (stand-in)")

    @staticmethod
    def group_start() -> None:
        """Start an NCCL group (``ncclGroupStart``): p2p calls are collected until ``group_end``."""
        _TLS.group = getattr(_TLS, "group", None) or []
        _TLS.depth = getattr(_TLS, "depth", 0) + 1

    @staticmethod
    def group_end() -> None:
        """End an NCCL group (``ncclGroupEnd``): the collected p2p calls run as one step."""
        _TLS.depth -= 1
        if _TLS.depth:
            return
        calls, _TLS.group = _TLS.group, None
        if not calls:
            return
        comm, stream = calls[0][0], calls[0][1]
        comm._queue(stream, lambda: comm._p2p([c[2] for c in calls]))

    def Communicator(self, nranks: int, unique_id: bytes, rank: int):  # noqa: N802 - binding name
        """A communicator of ``nranks`` ranks (``ncclCommInitRank``) over a tcp backend.

        Args:
            nranks: the number of ranks.
            unique_id: the id from ``get_unique_id`` (the same on every rank).
            rank: this rank.

        Returns:
            A communicator with the binding's collective methods.
        """
        return _Communicator(self, nranks, bytes(unique_id), rank)


class _Communicator:
    def __init__(self, nccl: StandInNccl, nranks: int, uid: bytes, rank: int):
        from ..distributed.backends.tcp import TCPBackend
        from ..distributed.store import PrefixStore
        store = PrefixStore(f"nccl-standin/{uid[:8].hex()}", nccl._store)
        self._tcp = TCPBackend(store, rank, nranks, nccl._timeout, f"{nccl._group_name}-standin")
        self._rank, self._size = rank, nranks
        self._error, self._error_text, self.alive = 0, "", True
        self._aborted = threading.Event()
        self._last = threading.Event()  # the last call issued has run (none yet)
        self._last.set()

    # bookkeeping
    def _set_error(self, exc: BaseException) -> None:
        if not self._error:
            self._error, self._error_text = 6, f"{type(exc).__name__}: {exc}"

    def _queue(self, stream_ptr: int, fn) -> None:
        if not self.alive:
            raise NcclError("the communicator was destroyed or aborted")
        stream = Stream._registry.get(stream_ptr) if stream_ptr else _NULL
        if stream is None:
            raise NcclError(f"unknown stream {stream_ptr:#x}")
        # NCCL runs one communicator's operations in the order they were issued, whatever their
        # streams (it orders each after the last with an event): each call here waits for the
        # one issued before it.
        before, done = self._last, threading.Event()
        self._last = done

        def step():
            before.wait()
            try:
                fn()
            finally:
                done.set()
        step.comm = self  # type: ignore[attr-defined]
        stream.enqueue(step)

    def _call(self, stream_ptr: int, fn) -> None:
        group = getattr(_TLS, "group", None)
        if group is not None:
            raise NcclError("the stand-in groups only send/recv (as the backend uses groups)")
        self._queue(stream_ptr, fn)

    def _p2p(self, ops) -> None:
        # NCCL lets a rank send to itself inside a group; pair those in issue order locally.
        mine = [op for op in ops if op[2] == self._rank]
        sends = [op[1] for op in mine if op[0] == "send"]
        recvs = [op[1] for op in mine if op[0] == "recv"]
        if len(sends) != len(recvs):
            raise NcclError(f"rank {self._rank} posted {len(sends)} sends to itself but "
                            f"{len(recvs)} receives")
        for src, dst in zip(sends, recvs):
            dst[...] = src
        others = [op for op in ops if op[2] != self._rank]
        if others:
            self._tcp.batch_p2p(others, async_op=False).wait()

    def _p2p_call(self, kind: str, ptr: int, count: int, dtype: int, peer: int, stream: int):
        op = (kind, _view(ptr, count, dtype), peer, 0)
        group = getattr(_TLS, "group", None)
        if group is None:  # a lone send/recv (the backend always groups; kept for completeness)
            self._queue(stream, lambda: self._p2p([op]))
        else:
            group.append((self, stream, op))

    # NCCL's calls
    def all_reduce(self, send, recv, count, dtype, op, stream):
        def run():
            src, dst = _view(send, count, dtype), _view(recv, count, dtype)
            if src.ctypes.data != dst.ctypes.data:
                dst[...] = src
            self._tcp.allreduce([dst], _OPS[op], async_op=False).wait()
        self._call(stream, run)

    def broadcast(self, send, recv, count, dtype, root, stream):
        def run():
            dst = _view(recv, count, dtype)
            if self._rank == root and send != recv:
                dst[...] = _view(send, count, dtype)
            self._tcp.broadcast(dst, root, async_op=False).wait()
        self._call(stream, run)

    def reduce(self, send, recv, count, dtype, op, root, stream):
        def run():
            buf = _view(send, count, dtype).copy()
            self._tcp.reduce(buf, root, _OPS[op], async_op=False).wait()
            if self._rank == root:
                _view(recv, count, dtype)[...] = buf
        self._call(stream, run)

    def all_gather(self, send, recv, send_count, dtype, stream):
        def run():
            out = _view(recv, send_count * self._size, dtype)
            self._tcp.allgather_into(out, _view(send, send_count, dtype).copy(),
                                    async_op=False).wait()
        self._call(stream, run)

    def reduce_scatter(self, send, recv, recv_count, dtype, op, stream):
        def run():
            packed = _view(send, recv_count * self._size, dtype).copy()
            self._tcp.reduce_scatter_into(_view(recv, recv_count, dtype), packed, _OPS[op],
                                          async_op=False).wait()
        self._call(stream, run)

    def send(self, buffer, count, dtype, peer, stream):
        self._p2p_call("send", buffer, count, dtype, peer, stream)

    def recv(self, buffer, count, dtype, peer, stream):
        self._p2p_call("recv", buffer, count, dtype, peer, stream)

    # lifetime and errors
    def get_async_error(self) -> int:
        return self._error

    def last_error(self) -> str:
        return self._error_text

    def count(self) -> int:
        return self._size

    def user_rank(self) -> int:
        return self._rank

    def cu_device(self) -> int:
        return 0

    def destroy(self) -> None:
        if self.alive:
            self.alive = False
            self._tcp.shutdown()

    def abort(self) -> None:
        if self.alive:
            self.alive = False
            self._tcp.abort()
        self._aborted.set()


# ***** the backend *****
def _to_device(value):
    """NumPy arrays (also inside lists and p2p tuples) as `DeviceArray` views, so the backend's
    CUDA checks pass and writes land in the caller's memory."""
    if isinstance(value, np.ndarray):
        return value.view(DeviceArray)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(v) for v in value)
    return value


class StandInNCCLBackend(NCCLBackend):
    """``NCCLBackend`` with :class:`StandInNccl` and :class:`StandInCuda` as its runtime; takes
    CPU tensors. Every operation is the real backend's code."""

    name = "nccl-standin"

    def _runtime(self, store):
        return StandInNccl(store, self.timeout, self.group_name), StandInCuda


def _forward(name):
    real = getattr(NCCLBackend, name)

    def op(self, *args, **kwargs):
        return real(self, *_to_device(args), **kwargs)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = real.__doc__
    return op


for _name in ("allreduce", "broadcast", "reduce", "allgather", "allgather_into", "gather",
              "scatter", "reduce_scatter", "reduce_scatter_into", "alltoall", "alltoall_single",
              "send", "recv", "batch_p2p"):
    setattr(StandInNCCLBackend, _name, _forward(_name))
del _name


def register() -> None:
    """Register the stand-in as backend ``"nccl-standin"`` in this process."""
    from ..distributed import backends
    backends.register_backend("nccl-standin", StandInNCCLBackend, devices=("cpu",))
