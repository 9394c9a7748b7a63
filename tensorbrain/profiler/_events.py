"""What a profile holds: events, their averages by name, torch's table and the Chrome trace.

An event is a span on one thread (``cpu_op``, ``backward``, ``user_annotation``) or of a
collective (``collectives``, ``ddp buckets``), with times in microseconds since the epoch, so
several ranks' traces line up. Self time is the span minus the spans directly nested in it on the
same thread (``linear`` inside a ``record_function`` block).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field


@dataclass
class FunctionEvent:
    """One span (``torch.autograd.profiler_util.FunctionEvent``'s fields that apply).

    Attributes:
        name: the op (``linear``), ``<op> backward``, a ``record_function`` label, a collective.
        category: ``cpu_op``, ``backward``, ``user_annotation``, ``collectives``, ``ddp buckets``.
        thread: the thread's id (collectives: their track).
        start_us: the start, microseconds since the epoch.
        end_us: the end.
        input_shapes: the tensor arguments' shapes (``record_shapes=True``), else ``[]``.
        device_time: the CUDA time of the op's kernels in us (``ProfilerActivity.CUDA``), or 0.
        args: extra fields for the trace (a collective's bytes, group, seq, ...).
    """
    name: str
    category: str
    thread: int
    start_us: float
    end_us: float
    input_shapes: list = field(default_factory=list)
    device_time: float = 0.0
    args: dict = field(default_factory=dict)
    self_cpu_time_total: float = 0.0

    @property
    def cpu_time_total(self) -> float:
        """The span's length in us."""
        return self.end_us - self.start_us

    @property
    def device_time_total(self) -> float:
        """The op's CUDA time in us (0 without ``ProfilerActivity.CUDA``)."""
        return self.device_time


@dataclass
class FunctionEventAvg:
    """The events of one name (and shapes, when grouped by them) summed, as torch's.

    Attributes:
        key: the name.
        count: how many events.
        cpu_time_total: their spans summed, us.
        self_cpu_time_total: their self times summed, us.
        device_time_total: their CUDA times summed, us.
        input_shapes: the shapes (``group_by_input_shape=True``), else ``[]``.
    """
    key: str
    count: int = 0
    cpu_time_total: float = 0.0
    self_cpu_time_total: float = 0.0
    device_time_total: float = 0.0
    input_shapes: list = field(default_factory=list)

    @property
    def cpu_time(self) -> float:
        """The mean span, us."""
        return self.cpu_time_total / max(self.count, 1)

    @property
    def self_cpu_time(self) -> float:
        """The mean self time, us."""
        return self.self_cpu_time_total / max(self.count, 1)

    @property
    def device_time(self) -> float:
        """The mean CUDA time, us."""
        return self.device_time_total / max(self.count, 1)

    @property
    def cuda_time_total(self) -> float:
        """torch's older name of :attr:`device_time_total`."""
        return self.device_time_total


#: ``table(sort_by=...)``: torch's keys (``cuda_*`` and ``device_*`` are the same figures)
SORT_KEYS = {
    "cpu_time_total": "cpu_time_total", "self_cpu_time_total": "self_cpu_time_total",
    "cpu_time": "cpu_time", "self_cpu_time": "self_cpu_time", "count": "count",
    "device_time_total": "device_time_total", "self_device_time_total": "device_time_total",
    "device_time": "device_time", "cuda_time_total": "device_time_total",
    "self_cuda_time_total": "device_time_total", "cuda_time": "device_time",
}


class EventList(list):
    """A list of events or averages with torch's ``table()``."""

    def table(self, sort_by: str | None = None, row_limit: int = 100,
              max_name_column_width: int = 55, header: str | None = None,
              top_level_events_only: bool = False) -> str:
        """torch's text table: name, self CPU, CPU total, average, calls (and CUDA, shapes).

        Args:
            sort_by: one of ``SORT_KEYS`` (``"cpu_time_total"``, ``"self_cpu_time_total"``,
                ``"count"``, ``"cuda_time_total"``, ...), descending; None keeps the order.
            row_limit: at most this many rows (-1: all).
            max_name_column_width: names longer than this are cut with ``...``.
            header: a line printed above the table.
            top_level_events_only: accepted for torch's signature; every row is shown.

        Returns:
            str: the table.

        Raises:
            ValueError: an unknown ``sort_by``.
        """
        rows = list(self)
        if sort_by is not None:
            attr = SORT_KEYS.get(sort_by)
            if attr is None:
                from .._config import did_you_mean
                raise ValueError(f"table(sort_by={sort_by!r}): unknown key;"
                                 f"{did_you_mean(sort_by, SORT_KEYS)} use one of "
                                 f"{', '.join(SORT_KEYS)}")
            rows.sort(key=lambda r: getattr(r, attr), reverse=True)
        if row_limit >= 0:
            rows = rows[:row_limit]
        return _format(list(self), rows, max_name_column_width, header)

    def export_chrome_trace(self, path: str) -> None:
        """Write the events as a Chrome trace (see :func:`chrome_trace`)."""
        _write_json(path, chrome_trace(self, os.getpid()))

    def total_average(self) -> FunctionEventAvg:
        """Every row summed into one."""
        total = FunctionEventAvg("Total")
        for r in self:
            total.count += getattr(r, "count", 1)
            total.cpu_time_total += r.cpu_time_total
            total.self_cpu_time_total += r.self_cpu_time_total
            total.device_time_total += r.device_time_total
        return total


def with_self_times(events: list) -> list:
    """Set each event's ``self_cpu_time_total``: its span minus the spans nested directly in it
    on the same thread."""
    by_thread: dict = {}
    for e in events:
        if e.category in ("cpu_op", "backward", "user_annotation"):
            by_thread.setdefault(e.thread, []).append(e)
        else:
            e.self_cpu_time_total = e.cpu_time_total
    for spans in by_thread.values():
        spans.sort(key=lambda e: (e.start_us, -e.end_us))
        stack: list = []
        for e in spans:
            e.self_cpu_time_total = e.cpu_time_total
            while stack and stack[-1].end_us <= e.start_us:
                stack.pop()
            if stack:
                stack[-1].self_cpu_time_total -= e.cpu_time_total
            stack.append(e)
    return events


def averages(events: list, group_by_input_shape: bool = False) -> EventList:
    """``key_averages``: the events summed by name (and shapes), in order of first appearance."""
    out: dict = {}
    for e in events:
        key = (e.name, str(e.input_shapes)) if group_by_input_shape else e.name
        avg = out.get(key)
        if avg is None:
            avg = out[key] = FunctionEventAvg(e.name, input_shapes=e.input_shapes
                                              if group_by_input_shape else [])
        avg.count += 1
        avg.cpu_time_total += e.cpu_time_total
        avg.self_cpu_time_total += e.self_cpu_time_total
        avg.device_time_total += e.device_time
    return EventList(out.values())


def _us(value: float) -> str:
    """torch's time cells: ``12.345us``, ``1.234ms``, ``2.345s``."""
    if value >= 1e6:
        return f"{value / 1e6:.3f}s"
    if value >= 1e3:
        return f"{value / 1e3:.3f}ms"
    return f"{value:.3f}us"


def _format(everything: list, rows: list, width: int, header: str | None) -> str:
    self_total = sum(r.self_cpu_time_total for r in everything) or 1.0
    device_total = sum(r.device_time_total for r in everything)
    shapes = any(getattr(r, "input_shapes", None) for r in rows)
    cols = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if device_total:
        cols += ["Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"]
    cols += ["# of Calls"]
    if shapes:
        cols += ["Input Shapes"]
    cells = []
    for r in rows:
        name = r.key if hasattr(r, "key") else r.name
        if len(name) > width:
            name = name[:width - 3] + "..."
        count = getattr(r, "count", 1)
        line = [name, f"{100 * r.self_cpu_time_total / self_total:.2f}%",
                _us(r.self_cpu_time_total), f"{100 * r.cpu_time_total / self_total:.2f}%",
                _us(r.cpu_time_total), _us(r.cpu_time_total / max(count, 1))]
        if device_total:
            line += [_us(r.device_time_total), f"{100 * r.device_time_total / device_total:.2f}%",
                     _us(r.device_time_total), _us(r.device_time_total / max(count, 1))]
        line += [str(count)]
        if shapes:
            line += [str(r.input_shapes)]
        cells.append(line)
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]
    rule = "  ".join("-" * w for w in widths)
    fmt = "  ".join(f"{{:>{w}}}" for w in widths)
    out = [header] if header else []
    out += [rule, fmt.format(*cols), rule]
    out += [fmt.format(*row) for row in cells]
    out += [rule, f"Self CPU time total: {_us(sum(r.self_cpu_time_total for r in everything))}"]
    if device_total:
        out.append(f"Self CUDA time total: {_us(device_total)}")
    return "\n".join(out) + "\n"


def chrome_trace(events: list, pid: int, process_name: str = "") -> dict:
    """Chrome's trace-event JSON (``chrome://tracing``, https://ui.perfetto.dev): one complete
    (``ph: "X"``) event per span, one named track per thread and per collective track."""
    names: dict = {}
    out = []
    if process_name:
        out.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                    "args": {"name": process_name}})
    for e in sorted(events, key=lambda e: e.start_us):
        track = e.args.get("track") or ("python thread" if e.category != "cuda" else "cuda")
        tid = names.setdefault((track, e.thread), len(names) + 1)
        args = {k: v for k, v in e.args.items() if k != "track"}
        if e.input_shapes:
            args["Input Dims"] = e.input_shapes
        if e.device_time:
            args["device_time_us"] = round(e.device_time, 3)
        out.append({"name": e.name, "cat": e.category, "ph": "X", "pid": pid, "tid": tid,
                    "ts": round(e.start_us, 3), "dur": round(e.cpu_time_total, 3), "args": args})
    for (track, thread), tid in names.items():
        label = track if track != "python thread" else f"thread {thread}"
        out.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                    "args": {"name": label}})
    return {"traceEvents": out, "displayTimeUnit": "ms",
            "otherData": {"producer": "tensorbrain.profiler"}}


def _write_json(path: str, doc: dict) -> None:
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, path)
