"""Observing collectives: the timeline (``TB_TIMELINE``) and INFO summaries (``TB_DISTRIBUTED_DEBUG``).

The process-group layer passes every backend through :func:`wrap` once, when the group is made
(``ProcessGroup.__init__``). With ``TB_TIMELINE`` unset and ``TB_DISTRIBUTED_DEBUG`` below INFO
it returns the backend itself: collectives pay nothing. Otherwise it returns an
:class:`_Observed` proxy whose collective methods note the start, the bytes and, when the op's
Work completes (synchronous ops: before they return; async ops: in the completing thread), the
end; everything else passes through to the backend.

The timeline is Chrome's trace-event JSON (``chrome://tracing``, https://ui.perfetto.dev), as
Horovod's timeline: one file per rank, ``pid`` = rank, one ``tid`` (track) per process group
plus one for DDP buckets; each collective is a complete event (``ph: "X"``) with ``args``: op,
group, seq, bytes, dtype, elements, ``blocked_us`` (time the calling thread was blocked in the
call; the whole op for synchronous ones) and ``async``. :func:`merge` joins the ranks' files into
one and adds ``wait_us``: how long each rank waited for the last rank to arrive at the same
collective (matched by group and seq; start times are wall-clock, so ranks on one host, or
hosts with synchronised clocks, line up).

>>> from tensorbrain.distributed import _observe
>>> _observe.timeline_path("/tmp/t.json", 3), _observe.timeline_path("/tmp/t_{rank}.json", 3)
('/tmp/t.rank3.json', '/tmp/t_3.json')
"""
from __future__ import annotations

import atexit
import json
import os
import threading
import time
from typing import Any

#: backend methods that are collectives or point-to-point ops (what the timeline records)
OPS = ("allreduce", "broadcast", "reduce", "allgather", "allgather_into", "gather", "scatter",
       "reduce_scatter", "reduce_scatter_into", "alltoall", "alltoall_single", "barrier", "send",
       "recv", "batch_p2p")
_NAMES = {"allreduce": "all_reduce", "allgather": "all_gather",
          "allgather_into": "all_gather_into_tensor", "reduce_scatter_into":
          "reduce_scatter_tensor", "alltoall": "all_to_all", "alltoall_single":
          "all_to_all_single"}


def timeline_path(path: str, rank: int) -> str:
    """This rank's file: ``{rank}`` replaced, else ``.rank<N>`` before the extension."""
    if "{rank}" in path:
        return path.replace("{rank}", str(rank))
    root, ext = os.path.splitext(path)
    return f"{root}.rank{rank}{ext or '.json'}"


class Timeline:
    """The events of this process (one per rank), written as Chrome-trace JSON.

    ``rank0_at_path``: rank 0 writes ``path`` itself (``HOROVOD_TIMELINE``: Horovod's rank 0
    writes the one file at the path the user gave), the other ranks beside it.
    """

    def __init__(self, path: str, rank: int, rank0_at_path: bool = False):
        exact = rank0_at_path and rank == 0 and "{rank}" not in path
        self.path, self.rank = (path if exact else timeline_path(path, rank)), rank
        self.events: list = []
        self.raw: list = []
        self.tracks: dict = {}
        self.lock = threading.Lock()
        self.closed = False
        self._meta("process_name", 0, {"name": f"rank {rank}"})
        self._meta("process_sort_index", 0, {"sort_index": rank})

    def _meta(self, name, tid, args):
        self.events.append({"name": name, "ph": "M", "pid": self.rank, "tid": tid, "args": args})

    def track(self, name: str) -> int:
        tid = self.tracks.get(name)
        if tid is None:
            with self.lock:
                tid = self.tracks.setdefault(name, len(self.tracks) + 1)
                if tid == len(self.tracks):
                    self._meta("thread_name", tid, {"name": name})
        return tid

    def complete(self, name: str, track: str, start_s: float, end_s: float, args: dict):
        """One complete event; times are ``time.time()`` seconds."""
        self.events.append({"name": name, "cat": track.split(" ")[0], "ph": "X",
                            "pid": self.rank, "tid": self.track(track),
                            "ts": round(start_s * 1e6, 3),
                            "dur": round(max(end_s - start_s, 0.0) * 1e6, 3), "args": args})

    def collective(self, record: tuple) -> None:
        """A collective as a tuple (cheap on the hot path; a dict only at :meth:`write`)."""
        self.raw.append(record)

    def _raw_events(self) -> list:
        out = []
        for (op, group, tid, start, end, blocked, nbytes, dtype, count, seq, async_op,
             failed) in list(self.raw):
            out.append({"name": op, "cat": "collectives", "ph": "X", "pid": self.rank,
                        "tid": tid, "ts": round(start * 1e6, 3),
                        "dur": round(max(end - start, 0.0) * 1e6, 3),
                        "args": {"op": op, "group": group, "seq": seq, "bytes": nbytes,
                                 "dtype": str(dtype) if dtype is not None else "",
                                 "elements": count, "async": bool(async_op),
                                 "blocked_us": round(blocked * 1e6, 3), "failed": failed}})
        return out

    def write(self) -> str:
        """Write the file atomically (temporary file, then rename); returns its path."""
        with self.lock:
            events = sorted(list(self.events) + self._raw_events(),
                            key=lambda e: (e["ph"] != "M", e.get("ts", 0)))
            doc = {"traceEvents": events, "displayTimeUnit": "ms",
                   "otherData": {"rank": self.rank, "producer": "tensorbrain TB_TIMELINE"}}
        directory = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(directory, exist_ok=True)
        tmp = f"{self.path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, self.path)
        return self.path


_TIMELINE: Timeline | None = None
_STATE = {"checked": False, "path": "", "info": False, "horovod": False}
# Other recorders of collectives and buckets while they run: tensorbrain.profiler's profile,
# which has Timeline's sink methods (track, collective, complete) and puts itself here.
_SINKS: list = []


def _settings():
    if not _STATE["checked"]:
        from .. import _config
        # Horovod programs ask for the timeline with HOROVOD_TIMELINE; TB_TIMELINE wins
        _STATE["path"] = _config.get("TB_TIMELINE") or _config.get("HOROVOD_TIMELINE")
        _STATE["horovod"] = not _config.get("TB_TIMELINE") and bool(_STATE["path"])
        _STATE["info"] = _config.get("TB_DISTRIBUTED_DEBUG") in ("INFO", "DETAIL")
        _STATE["checked"] = True
    return _STATE["path"], _STATE["info"]


def timeline():
    """The process's timeline (or a profiler recording), or None when nothing records."""
    return _TIMELINE if _TIMELINE is not None or not _SINKS else _SINKS[-1]


def _start_timeline(path: str, rank: int) -> Timeline:
    global _TIMELINE
    if _TIMELINE is None or _TIMELINE.closed:
        _TIMELINE = Timeline(path, rank, rank0_at_path=bool(_STATE["horovod"]))
        atexit.register(_flush_at_exit)
    return _TIMELINE


def flush() -> str | None:
    """Write the timeline now (destroy_process_group and exit call it); returns the path."""
    t = _TIMELINE
    if t is None:
        return None
    return t.write()


def _flush_at_exit() -> None:
    """At exit: write the timeline and say where (one line per rank, on stderr)."""
    path = flush()
    if path is not None:
        import sys
        print(f"tensorbrain: timeline written to {path} (merge the ranks' files: python -m "
              f"tensorbrain.distributed.timeline merge ...)", file=sys.stderr)


def reset() -> None:
    """Forget the settings and the timeline (after destroy_process_group; tests)."""
    global _TIMELINE
    if _TIMELINE is not None:
        _TIMELINE.closed = True
    _TIMELINE = None
    _STATE["checked"] = False


def wrap(backend, group_name: str, global_rank: int):
    """The backend itself, or an observing proxy when TB_TIMELINE / TB_DISTRIBUTED_DEBUG ask."""
    path, info = _settings()
    if not path and not info:
        return backend
    tl = _start_timeline(path, global_rank) if path else None
    log = None
    if info:
        from .._logging import get_logger
        log = get_logger("tensorbrain.distributed")
    return _Observed(backend, group_name, tl, log)


class _Observed:
    """Forwards to the backend; its collective methods are timed (see the module docstring)."""

    def __init__(self, backend, group_name, tl, log):
        self._backend, self._group, self._tl, self._log = backend, group_name, tl, log
        self._track = f"collectives {group_name}"

    def __getattr__(self, name):
        attr = getattr(self._backend, name)
        if name not in OPS or not callable(attr):
            return attr
        observed = self._observer(_NAMES.get(name, name), attr)
        self.__dict__[name] = observed  # later calls skip __getattr__
        return observed

    def _observer(self, op_name, method):
        tl, group, record = self._tl, self._group, self._record
        tid = tl.track(self._track) if tl is not None else 0
        clock = time.time

        def observed(*args, **kwargs):
            # bytes: the first array argument's (a list's total): the tensor of all_reduce,
            # broadcast, send; the output list of all_gather (world x input, as nccl-tests)
            first: Any = args[0] if args else None
            if hasattr(first, "nbytes"):
                nbytes, dtype, count = first.nbytes, first.dtype, first.size
            elif isinstance(first, (list, tuple)) and first and hasattr(first[0], "nbytes"):
                nbytes = sum(a.nbytes for a in first)
                dtype, count = first[0].dtype, sum(a.size for a in first)
            else:
                nbytes, dtype, count = 0, None, 0
            async_op = kwargs.get("async_op", True)
            start = clock()
            work = method(*args, **kwargs)
            blocked = clock() - start
            if work is None or not hasattr(work, "_on_done") or work.is_completed():
                record(op_name, group, tid, work, start, clock(), blocked, nbytes, dtype, count,
                       async_op)
            else:
                work._on_done(lambda w: record(op_name, group, tid, w, start, clock(), blocked,
                                               nbytes, dtype, count, async_op))
            return work

        return observed

    def _record(self, op, group, tid, work, start, end, blocked, nbytes, dtype, count,
                async_op):
        seq = getattr(work, "seq", -1)
        failed = getattr(work, "_exc", None) is not None
        if self._tl is not None:
            self._tl.collective((op, group, tid, start, end, blocked, int(nbytes), dtype,
                                 int(count), seq, async_op, failed))
        if self._log is not None:
            self._log.info("%s (seq %s) of group %r: %s x %d (%d B), %.3f ms%s%s", op, seq,
                           group, dtype if dtype is not None else "-", count, nbytes,
                           (end - start) * 1e3, ", async" if async_op else "",
                           ", FAILED" if failed else "")


def bucket_event(index: int, nbytes: int, n_params: int, start_s: float, end_s: float) -> None:
    """A DDP bucket's all-reduce on the timeline (launch to completion), when one is recorded."""
    for t in (_TIMELINE, *_SINKS):
        if t is not None:
            t.complete(f"bucket {index}", "ddp buckets", start_s, end_s,
                       {"bucket": index, "bytes": nbytes, "params": n_params})


def merge(paths, out_path: str) -> dict:
    """Join per-rank timeline files into one, adding ``wait_us`` to every collective.

    ``wait_us`` = (the latest start among the ranks at the same collective, matched by group and
    seq) - (this rank's start): the time this rank waited for the last one to arrive.

    Args:
        paths: the ranks' files (``TB_TIMELINE`` output).
        out_path: the merged file to write (atomically).

    Returns:
        dict: the merged document.
    """
    events: list = []
    latest: dict = {}
    for p in paths:
        with open(p) as f:
            events.extend(json.load(f)["traceEvents"])
    for e in events:
        if e.get("ph") == "X" and "seq" in e.get("args", {}):
            key = (e["args"]["group"], e["args"]["seq"], e["name"])
            latest[key] = max(latest.get(key, e["ts"]), e["ts"])
    for e in events:
        if e.get("ph") == "X" and "seq" in e.get("args", {}):
            key = (e["args"]["group"], e["args"]["seq"], e["name"])
            e["args"]["wait_us"] = round(latest[key] - e["ts"], 3)
    doc = {"traceEvents": events, "displayTimeUnit": "ms"}
    tmp = f"{out_path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, out_path)
    return doc
