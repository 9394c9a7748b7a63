"""``tb.profiler.profile``: torch.profiler's API over TensorBrain's ops, autograd, optimizers and
collectives (where it listens: ``_hooks.py``; what it produces: ``_events.py``).

>>> import tensorbrain as tb
>>> from tensorbrain.profiler import profile, record_function, ProfilerActivity
>>> x, w = tb.randn(64, 32, requires_grad=True), tb.randn(16, 32)
>>> with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
...     with record_function("step"):
...         tb.nn.functional.linear(x, w).relu().sum().backward()
>>> sorted({e.key for e in prof.key_averages()})
['AddmmBackward', 'ReluBackward', 'SumBackward', 'linear', 'relu', 'step', 'sum']
"""
from __future__ import annotations

import enum
import os
import threading
import time
from collections.abc import Callable, Iterable

from . import _events, _hooks

_ACTIVE: list = [None]  # the profile recording in this process (one at a time, as torch)


class ProfilerActivity(enum.Enum):
    """What to record: ``CPU`` (ops, backward, optimizers, collectives), ``CUDA`` (the kernels of
    ops on CUDA tensors, timed with CUDA events; needs CuPy and a GPU)."""
    CPU = "CPU"
    CUDA = "CUDA"


def supported_activities() -> set:
    """The activities this machine can record (``CUDA`` with a usable GPU)."""
    return {ProfilerActivity.CPU} | ({ProfilerActivity.CUDA} if _hooks.cuda_available() else set())


class ProfilerAction(enum.Enum):
    """What :func:`schedule` says for a step (torch's values)."""
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0,
             skip_first: int = 0) -> Callable[[int], ProfilerAction]:
    """torch's schedule: after ``skip_first`` steps, cycles of ``wait`` idle steps, ``warmup``
    steps (hooks on, nothing kept) and ``active`` recorded steps, the last of which hands the
    trace to ``on_trace_ready``; ``repeat`` cycles (0: for ever).

    Args:
        wait: idle steps at the start of each cycle.
        warmup: steps recorded and thrown away (the hooks' first calls).
        active: recorded steps.
        repeat: how many cycles; 0 repeats until the profile ends.
        skip_first: idle steps before the first cycle.

    Returns:
        A function from the step number to its :class:`ProfilerAction`.

    Raises:
        ValueError: a negative count, or ``active < 1``.

    Example:
        >>> from tensorbrain.profiler import schedule
        >>> s = schedule(wait=1, warmup=1, active=2, repeat=1)
        >>> [s(i).name for i in range(5)]
        ['NONE', 'WARMUP', 'RECORD', 'RECORD_AND_SAVE', 'NONE']
    """
    if min(wait, warmup, repeat, skip_first) < 0 or active < 1:
        raise ValueError(f"schedule: wait={wait}, warmup={warmup}, repeat={repeat}, "
                         f"skip_first={skip_first} must be >= 0 and active={active} >= 1")

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        pos = step % cycle
        if pos < wait:
            return ProfilerAction.NONE
        if pos < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD_AND_SAVE if pos == cycle - 1 else ProfilerAction.RECORD
    return action


def _always(step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


_RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


class profile:
    """Record ops, backward, optimizer steps and collectives (``torch.profiler.profile``).

    Used as a context manager (or :meth:`start`/:meth:`stop`). Without a ``schedule`` everything
    inside is recorded; with one, call :meth:`step` at the end of each training step. What is
    recorded: every op of the op table and of ``tb.nn.functional`` called through ``tb.*``, a
    Tensor method or operator, or ``F.*`` (a module's forward); each autograd node's backward
    (``AddmmBackward``); ``Optimizer.step#<class>.step``; :class:`record_function` blocks; and,
    once ``tb.distributed`` has groups, every collective and DDP bucket (their own tracks). With
    no profile running, none of these paths changes (the benchmark: ``benchmarks/ops.py``).

    Args:
        activities (Iterable[ProfilerActivity] | None): ``CPU`` and/or ``CUDA``; None: what
            :func:`supported_activities` says.
        schedule (Callable[[int], ProfilerAction] | None): see :func:`schedule`.
        on_trace_ready (Callable[[profile], None] | None): called with this profile at the end
            of each recorded cycle (e.g. :func:`tensorboard_trace_handler`).
        record_shapes (bool): keep the shapes of each op's tensor arguments.
        profile_memory (bool): not supported (raises).
        with_stack (bool): not supported (raises).
        with_flops (bool): not supported (raises).
        with_modules (bool): not supported (raises).
        experimental_config: accepted for torch's signature; must be None.
        use_cuda (bool | None): torch's deprecated spelling of ``CUDA`` in ``activities``.

    Raises:
        NotImplementedError: an option TensorBrain does not record (memory, stacks, FLOPs,
            modules), or CUDA asked for without a GPU.
        RuntimeError: another profile is already recording in this process.

    Example:
        >>> import tensorbrain as tb
        >>> from tensorbrain.profiler import profile
        >>> a = tb.ones(8, 8)
        >>> with profile() as prof:
        ...     y = a @ a + 1
        >>> [(e.key, e.count) for e in prof.key_averages()]
        [('matmul', 1), ('add', 1)]
    """

    def __init__(self, *, activities: Iterable[ProfilerActivity] | None = None,
                 schedule: Callable[[int], ProfilerAction] | None = None,
                 on_trace_ready: Callable[[profile], None] | None = None,
                 record_shapes: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_flops: bool = False, with_modules: bool = False,
                 experimental_config=None, use_cuda: bool | None = None, **unsupported):
        for flag, on in (("profile_memory", profile_memory), ("with_stack", with_stack),
                         ("with_flops", with_flops), ("with_modules", with_modules),
                         ("experimental_config", experimental_config is not None),
                         *((k, True) for k in unsupported)):
            if on:
                raise NotImplementedError(
                    f"tb.profiler.profile({flag}=...) is not supported: TensorBrain records op, "
                    f"backward, optimizer and collective spans with their times (and shapes with "
                    f"record_shapes=True); remove the argument")
        acts = set(supported_activities() if activities is None else activities)
        if use_cuda:
            acts.add(ProfilerActivity.CUDA)
        if ProfilerActivity.CUDA in acts and activities is not None and \
                not _hooks.cuda_available():
            raise NotImplementedError("ProfilerActivity.CUDA needs a CUDA GPU and CuPy, which "
                                      "this process cannot use; profile the CPU only")
        self.activities = acts
        self.cuda = ProfilerActivity.CUDA in acts and _hooks.cuda_available()
        self.record_shapes = bool(record_shapes)
        self.schedule = schedule or _always
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.recording = False
        self._installed: _hooks.Installed | None = None
        self._raw: list = []        # (name, category, thread, start_ns, end_ns, shapes, cuda, args)
        self._finished: list = []   # the last completed cycle's events
        self._lock = threading.Lock()
        self._tracks: dict = {}
        self._offset_ns = time.time_ns() - time.perf_counter_ns()
        self.clock = time.perf_counter_ns

    # ***** recording (called by _hooks) *****
    def add(self, name, category, thread, start, end, args, cuda) -> None:
        """One span (hooks call this; times are ``perf_counter_ns``)."""
        shapes = [list(a.shape) for a in args if hasattr(a, "_data")] if args else []
        if cuda is not None:
            end_event = cuda.__class__()
            end_event.record()
            cuda = (cuda, end_event)
        self._raw.append((name, category, thread, start, end, shapes, cuda, None))

    def cuda_start(self, args):
        """A started CUDA event when an op has a CUDA tensor argument, else None."""
        return _hooks.cuda_pair(args)

    # the sink interface of tensorbrain/distributed/_observe.py (collectives, DDP buckets)
    def track(self, name: str) -> int:
        """The id of a named track (a process group's collectives, DDP buckets).

        Args:
            name: the track's name.
        """
        return self._tracks.setdefault(name, len(self._tracks) + 1)

    def collective(self, record: tuple) -> None:
        """One collective, as ``_observe`` reports it (times are ``time.time()`` seconds).

        Args:
            record: ``(op, group, track, start, end, blocked, bytes, dtype, elements, seq,
                async, failed)``.
        """
        if not self.recording:
            return
        (op, group, tid, start, end, blocked, nbytes, dtype, count, seq, async_op, failed) = record
        args = {"track": f"collectives {group}", "op": op, "group": group, "seq": seq,
                "bytes": nbytes, "dtype": str(dtype) if dtype is not None else "",
                "elements": count, "async": bool(async_op), "blocked_us": round(blocked * 1e6, 3),
                "failed": failed}
        self._raw.append((op, "collectives", -tid, self._ns(start), self._ns(end), [], None, args))

    def complete(self, name: str, track: str, start_s: float, end_s: float, args: dict) -> None:
        """One span on a named track (a DDP bucket), times in ``time.time()`` seconds.

        Args:
            name: the span's name.
            track: the track's name.
            start_s: the start.
            end_s: the end.
            args: fields for the trace.
        """
        if not self.recording:
            return
        self._raw.append((name, track.split(" ")[0] if track != "ddp buckets" else track,
                          -self.track(track), self._ns(start_s), self._ns(end_s), [], None,
                          {"track": track, **args}))

    def _ns(self, epoch_s: float) -> int:
        return int(epoch_s * 1e9) - self._offset_ns

    # ***** the lifecycle *****
    def __enter__(self) -> profile:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        """Install the hooks and begin the first step."""
        if _ACTIVE[0] is not None:
            raise RuntimeError("tb.profiler.profile: another profile is already recording in "
                               "this process; stop it first (one at a time, as torch)")
        _ACTIVE[0] = self
        self._installed = _hooks.install(self)
        self._apply(self.schedule(self.step_num))

    def stop(self) -> None:
        """End recording: the current cycle's events become the result; remove the hooks."""
        if _ACTIVE[0] is not self:
            return
        try:
            if self.schedule(self.step_num) in _RECORDING:
                self._finish()
        finally:
            self.recording = False
            if self._installed is not None:
                _hooks.uninstall(self._installed)
            _ACTIVE[0] = None

    def step(self) -> None:
        """Mark the end of a training step (with a ``schedule``)."""
        before = self.schedule(self.step_num)
        self.step_num += 1
        if before == ProfilerAction.RECORD_AND_SAVE:
            self._finish()
        self._apply(self.schedule(self.step_num), before)

    def _apply(self, action: ProfilerAction, before: ProfilerAction | None = None) -> None:
        self.recording = action != ProfilerAction.NONE
        if not (action in _RECORDING and before == ProfilerAction.RECORD):
            self._raw = []  # a new window: idle and warm-up spans are not kept

    def _finish(self) -> None:
        self._finished = self._collect(self._raw)
        self._raw = []
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def _collect(self, raw: list) -> list:
        off = self._offset_ns
        events = []
        for name, cat, thread, start, end, shapes, cuda, args in raw:
            device = 0.0
            if cuda is not None:
                cuda[1].synchronize()
                device = _hooks._xp.cupy().cuda.get_elapsed_time(*cuda) * 1e3
            events.append(_events.FunctionEvent(name, cat, thread, (start + off) / 1e3,
                                                (end + off) / 1e3, shapes, device, args or {}))
        return _events.with_self_times(events)

    # ***** results *****
    def events(self) -> _events.EventList:
        """Every span of the last recorded cycle (or of the whole block without a schedule)."""
        return _events.EventList(self._finished)

    def key_averages(self, group_by_input_shape: bool = False,
                     group_by_stack_n: int = 0) -> _events.EventList:
        """The spans summed by name (and input shapes): torch's ``key_averages``.

        Args:
            group_by_input_shape: one row per (name, shapes); needs ``record_shapes=True``.
            group_by_stack_n: accepted for torch's signature; must be 0 (no stacks recorded).

        Returns:
            EventList: rows with ``key``, ``count``, ``cpu_time_total``, ``self_cpu_time_total``,
            ``device_time_total``; ``.table(sort_by=...)`` prints them.
        """
        if group_by_stack_n:
            raise NotImplementedError("key_averages(group_by_stack_n=...): stacks are not "
                                      "recorded (with_stack is not supported)")
        return _events.averages(self._finished, group_by_input_shape)

    def export_chrome_trace(self, path: str) -> None:
        """Write the last cycle as a Chrome trace (``chrome://tracing``, Perfetto): one track per
        thread, per collective group and for DDP buckets; ``pid`` is the rank under
        ``tb.distributed`` (so ``python -m tensorbrain.distributed.timeline merge`` joins the
        ranks' files), else the process id. Written atomically.

        Args:
            path: the JSON file.
        """
        rank = _rank()
        pid = rank if rank is not None else os.getpid()
        name = f"rank {rank}" if rank is not None else f"process {os.getpid()}"
        _events._write_json(path, _events.chrome_trace(self._finished, pid, name))


def _rank():
    import sys
    dist = sys.modules.get("tensorbrain.distributed")
    try:
        return dist.get_rank() if dist is not None and dist.is_initialized() else None
    except Exception:  # noqa: BLE001 - a trace is still written without a rank
        return None


class record_function:
    """A named span around a block or a function (``torch.profiler.record_function``); costs one
    check when no profile records.

    Args:
        name (str): the span's name in the table and the trace.
        args (str | None): a string kept with the span (torch's ``args``).

    Example:
        >>> import tensorbrain as tb
        >>> from tensorbrain.profiler import profile, record_function
        >>> with profile() as prof:
        ...     with record_function("data"):
        ...         pass
        >>> [e.key for e in prof.key_averages()]
        ['data']
    """

    def __init__(self, name: str, args: str | None = None):
        self.name, self.args = name, args
        self._start = 0

    def __enter__(self) -> record_function:
        rec = _ACTIVE[0]
        self._start = rec.clock() if rec is not None and rec.recording else 0
        return self

    def __exit__(self, *exc) -> None:
        rec = _ACTIVE[0]
        if self._start and rec is not None and rec.recording:
            rec._raw.append((self.name, "user_annotation", threading.get_ident(), self._start,
                             rec.clock(), [], None, {"args": self.args} if self.args else None))

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with record_function(self.name, self.args):
                return fn(*args, **kwargs)
        return wrapped


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None,
                              use_gzip: bool = False) -> Callable[[profile], None]:
    """An ``on_trace_ready`` that writes each cycle to ``dir_name/<worker>.<step>.pt.trace.json``
    (torch's file names; TensorBoard's profiler plugin and Perfetto open them).

    Args:
        dir_name: the folder (made if missing).
        worker_name: the file's prefix; default ``<host>_<pid>``.
        use_gzip: add ``.gz`` and compress.

    Returns:
        The handler.
    """
    import socket

    def handler(prof: profile) -> None:
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        path = os.path.join(dir_name, f"{worker}.{time.time_ns() // 1000000}.pt.trace.json")
        prof.export_chrome_trace(path)
        if use_gzip:
            import gzip
            import shutil
            with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.unlink(path)
    return handler
