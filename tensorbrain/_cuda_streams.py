"""CUDA streams, events and the device context, as ``torch.cuda.Stream`` / ``Event`` /
``stream`` / ``device``, on CuPy's.

TensorBrain's GPU ops run on CuPy's current stream, so ``with tb.cuda.stream(s):`` makes ``s``
current for them, as torch's does for its kernels. Without a GPU, making a Stream or an Event
raises torch's error for a build without CUDA; ``stream(None)`` and ``device(None)`` /
``device(-1)`` are contexts that do nothing, as torch's.

``Tensor.record_stream`` is accepted and does nothing: CuPy's pool keeps one arena per stream
and does not reuse a block freed on one stream for another, so the hazard it guards against in
torch (a block handed to a new owner while a side stream still reads it) is narrower; a program
that frees a tensor still in use on another stream must synchronise first.
"""
from __future__ import annotations

from . import _xp


def _no_cuda(what: str) -> RuntimeError:
    return RuntimeError(f"{what} requires CUDA support: {_xp._CUPY_ERROR}; "
                        f"{_xp.CUDA_INSTALL_HINT}")


def _device_index(device) -> int | None:
    if device is None or isinstance(device, int):
        return device
    index = getattr(device, "index", None)
    if index is None and isinstance(device, str):
        _, _, ordinal = device.partition(":")
        index = int(ordinal) if ordinal else None
    return index


class Stream:
    """A CUDA stream (``torch.cuda.Stream``): a queue of GPU work, run in order.

    Args:
        device: the GPU (index, ``"cuda:N"`` or device); None for the current one.
        priority: lower is higher priority, as CUDA's (0 is the default).
        **kwargs: accepted for torch compatibility.

    Raises:
        RuntimeError: no usable GPU.
    """

    def __init__(self, device=None, priority: int = 0, **kwargs):
        if not _xp.cuda_available():
            raise _no_cuda("torch.cuda.Stream")
        cp = _xp.cupy()
        index = _device_index(device)
        with cp.cuda.Device(cp.cuda.runtime.getDevice() if index is None else index) as d:
            self._cp = kwargs.pop("_cupy_stream", None) or cp.cuda.Stream(non_blocking=True,
                                                                           priority=priority)
            self.device_index = d.id
        self.priority = priority

    @classmethod
    def _wrap(cls, cp_stream, device_index):
        s = cls.__new__(cls)
        s._cp, s.device_index, s.priority = cp_stream, device_index, 0
        return s

    @property
    def cuda_stream(self) -> int:
        """The ``cudaStream_t`` as an int."""
        return int(self._cp.ptr)

    @property
    def device(self):
        """The stream's device."""
        from ._device import device
        return device("cuda", self.device_index)

    def synchronize(self) -> None:
        """Wait until all work queued on this stream has finished."""
        self._cp.synchronize()

    def query(self) -> bool:
        """Whether all work queued on this stream has finished.

        Returns:
            bool: True when the stream is idle.
        """
        return bool(self._cp.done)

    def record_event(self, event=None):
        """Record ``event`` (a new one when None) on this stream.

        Args:
            event: an :class:`Event`, or None.

        Returns:
            Event: the recorded event.
        """
        event = Event() if event is None else event
        event.record(self)
        return event

    def wait_event(self, event) -> None:
        """Make future work on this stream wait for ``event``.

        Args:
            event: an :class:`Event`.
        """
        self._cp.wait_event(event._cp)

    def wait_stream(self, stream) -> None:
        """Make future work on this stream wait for the work queued on ``stream`` so far.

        Args:
            stream: another :class:`Stream`.
        """
        self.wait_event(stream.record_event())

    def __enter__(self):
        self._cp.__enter__()
        return self

    def __exit__(self, *exc):
        return self._cp.__exit__(*exc)

    def __eq__(self, other):
        return isinstance(other, Stream) and self.cuda_stream == other.cuda_stream

    def __hash__(self):
        return hash(self.cuda_stream)

    def __repr__(self):
        return f"<tb.cuda.Stream device=cuda:{self.device_index} cuda_stream={self.cuda_stream:#x}>"


class Event:
    """A CUDA event (``torch.cuda.Event``): a marker in a stream, to wait on or to time.

    Args:
        enable_timing: whether :meth:`elapsed_time` can be asked.
        blocking: whether :meth:`synchronize` blocks the thread instead of spinning.
        interprocess: whether the event can be shared between processes.

    Raises:
        RuntimeError: no usable GPU.
    """

    def __init__(self, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False):
        if not _xp.cuda_available():
            raise _no_cuda("torch.cuda.Event")
        self._cp = _xp.cupy().cuda.Event(block=blocking, disable_timing=not enable_timing,
                                          interprocess=interprocess)

    def record(self, stream=None) -> None:
        """Record the event on ``stream`` (the current one when None).

        Args:
            stream: a :class:`Stream`, or None.
        """
        self._cp.record(None if stream is None else stream._cp)

    def wait(self, stream=None) -> None:
        """Make future work on ``stream`` (the current one when None) wait for this event.

        Args:
            stream: a :class:`Stream`, or None.
        """
        (current_stream() if stream is None else stream).wait_event(self)

    def query(self) -> bool:
        """Whether the work before the event has finished.

        Returns:
            bool: True when done.
        """
        return bool(self._cp.done)

    def synchronize(self) -> None:
        """Wait until the work before the event has finished."""
        self._cp.synchronize()

    def elapsed_time(self, end_event) -> float:
        """Milliseconds between this event and ``end_event`` (both recorded, with timing).

        Args:
            end_event: the later :class:`Event`.

        Returns:
            float: milliseconds.
        """
        return float(_xp.cupy().cuda.get_elapsed_time(self._cp, end_event._cp))


def current_stream(device=None) -> Stream:
    """The stream TensorBrain's GPU ops run on now (``torch.cuda.current_stream``).

    Args:
        device: the GPU; None for the current one.

    Returns:
        Stream: the current stream.

    Raises:
        RuntimeError: no usable GPU.
    """
    cp = _xp.cupy()
    index = _device_index(device)
    index = cp.cuda.runtime.getDevice() if index is None else index
    with cp.cuda.Device(index):
        return Stream._wrap(cp.cuda.get_current_stream(), index)


def default_stream(device=None) -> Stream:
    """The GPU's default (null) stream (``torch.cuda.default_stream``).

    Args:
        device: the GPU; None for the current one.

    Returns:
        Stream: the default stream.

    Raises:
        RuntimeError: no usable GPU.
    """
    cp = _xp.cupy()
    index = _device_index(device)
    return Stream._wrap(cp.cuda.Stream.null, cp.cuda.runtime.getDevice() if index is None
                        else index)


def set_stream(stream) -> None:
    """Make ``stream`` current (``torch.cuda.set_stream``); None does nothing.

    Args:
        stream: a :class:`Stream`, or None.
    """
    if stream is not None:
        stream._cp.use()


class StreamContext:
    """``with tb.cuda.stream(s):`` runs the block's GPU work on ``s``; None does nothing.

    Args:
        stream: a :class:`Stream`, or None.
    """

    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        if self.stream is not None:
            self.stream.__enter__()
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            self.stream.__exit__(*exc)
        return False


def stream(stream) -> StreamContext:
    """A context that makes ``stream`` current (``torch.cuda.stream``).

    Args:
        stream: a :class:`Stream`, or None (the context does nothing).

    Returns:
        StreamContext: the context manager.
    """
    return StreamContext(stream)


class device:
    """``with tb.cuda.device(i):`` makes GPU ``i`` current for the block (``torch.cuda.device``).

    Args:
        device: an index, ``"cuda:N"`` or a device; None or -1 makes the context do nothing.

    Raises:
        RuntimeError: entering it for a GPU without a usable one.
    """

    def __init__(self, device):
        self.idx = _device_index(device)
        self._ctx = None

    def __enter__(self):
        if self.idx is None or self.idx < 0:
            return self
        if not _xp.cuda_available():
            raise _no_cuda(f"torch.cuda.device({self.idx})")
        self._ctx = _xp.cupy().cuda.Device(self.idx)
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        if self._ctx is not None:
            self._ctx.__exit__(*exc)
            self._ctx = None
        return False


def is_current_stream_capturing() -> bool:
    """Always False: TensorBrain never captures CUDA graphs."""
    return False


__all__ = ["Event", "Stream", "StreamContext", "current_stream", "default_stream", "device",
           "is_current_stream_capturing", "set_stream", "stream"]
