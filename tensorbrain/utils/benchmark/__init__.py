"""``tb.utils.benchmark`` (``torch.utils.benchmark``): :class:`Timer` and :class:`Compare`.

``Timer(stmt, setup, globals=...)`` runs ``stmt`` with :mod:`timeit`; ``timeit(n)``,
``blocked_autorange(min_run_time)`` and ``adaptive_autorange()`` return a
:class:`Measurement` (``mean``, ``median``, ``iqr``, ``times``, torch's attribute names);
:class:`Compare` prints measurements side by side. CUDA work is synchronised around each
block, as torch's Timer does.

>>> from tensorbrain.utils.benchmark import Timer
>>> m = Timer("x + 1", globals={"x": 1}).timeit(10)
>>> m.mean > 0
True
"""
from __future__ import annotations

import statistics
import timeit as _timeit

from ... import _xp


def _sync():
    if _xp.cuda_available():
        _xp.cupy().cuda.Device().synchronize()


class Measurement:
    """The times of a benchmark: per-run seconds in ``times``.

    Args:
        number_per_run: statement executions per timed block.
        raw_times: seconds per block.
        task_spec: the :class:`Timer` that ran it.
    """

    def __init__(self, number_per_run, raw_times, task_spec=None):
        self.number_per_run = number_per_run
        self.raw_times = list(raw_times)
        self.task_spec = task_spec
        self.times = [t / number_per_run for t in self.raw_times]

    @property
    def mean(self) -> float:
        """The mean seconds per run."""
        return statistics.fmean(self.times)

    @property
    def median(self) -> float:
        """The median seconds per run."""
        return statistics.median(self.times)

    @property
    def iqr(self) -> float:
        """The interquartile range of the per-run times."""
        if len(self.times) < 2:
            return 0.0
        q = statistics.quantiles(self.times, n=4)
        return q[2] - q[0]

    @property
    def label(self):
        """The timer's label."""
        return getattr(self.task_spec, "label", None)

    @property
    def description(self):
        """The timer's description."""
        return getattr(self.task_spec, "description", None)

    def __repr__(self):
        spec = self.task_spec
        head = f"{spec.label}: {spec.stmt}" if spec is not None and spec.label else \
            getattr(spec, "stmt", "")
        return (f"<Measurement>\n{head}\n  {self.median * 1e6:.2f} us\n  1 measurement, "
                f"{self.number_per_run} runs per measurement, {len(self.times)} measurements")


class Timer:
    """Time a statement, as ``torch.utils.benchmark.Timer``.

    Args:
        stmt: the code to time.
        setup: code run once first.
        global_setup: accepted.
        timer: the clock (default ``time.perf_counter``).
        globals: the names ``stmt`` sees.
        label: a label for :class:`Compare`.
        sub_label: a sub-label.
        description: a column name.
        env: accepted.
        num_threads: accepted.
        language: ``"python"`` only.

    Raises:
        NotImplementedError: a language other than Python.
    """

    def __init__(self, stmt="pass", setup="pass", global_setup="", timer=None, globals=None,
                 label=None, sub_label=None, description=None, env=None, num_threads=1,
                 language="python"):
        if str(language).lower() not in ("python", "language.python", "py"):
            raise NotImplementedError("Timer(language='c++') is not supported by TensorBrain")
        self.stmt, self.setup, self.label = stmt, setup, label
        self.sub_label, self.description, self.num_threads = sub_label, description, num_threads
        kwargs = {} if timer is None else {"timer": timer}
        self._timer = _timeit.Timer(stmt, setup, globals=dict(globals or {}), **kwargs)

    def _block(self, number):
        _sync()
        t = self._timer.timeit(number)
        _sync()
        return t

    def timeit(self, number: int = 1000000) -> Measurement:
        """Run ``stmt`` ``number`` times (after one warm-up).

        Args:
            number: the runs.
        """
        self._block(1)
        return Measurement(number, [self._block(number)], self)

    def repeat(self, repeat: int = -1, number: int = -1):
        """Refused, as torch's ``Timer.repeat`` is (use :meth:`blocked_autorange`).

        Args:
            repeat: accepted.
            number: accepted.

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def blocked_autorange(self, callback=None, min_run_time: float = 0.2) -> Measurement:
        """Time blocks of runs until ``min_run_time`` seconds have passed.

        Args:
            callback: called with ``(number, seconds)`` after each block.
            min_run_time: the total time to spend.
        """
        number = 1
        while True:   # a block of about 10 ms
            t = self._block(number)
            if t >= 0.01 or number >= 10 ** 8:
                break
            number *= 10
        times: list[float] = []
        total = 0.0
        while total < min_run_time or not times:
            t = self._block(number)
            times.append(t)
            total += t
            if callback is not None:
                callback(number, t)
        return Measurement(number, times, self)

    def adaptive_autorange(self, threshold: float = 0.1, *, min_run_time: float = 0.01,
                           max_run_time: float = 10.0, callback=None) -> Measurement:
        """Time blocks until the IQR is below ``threshold`` of the median (or time runs out).

        Args:
            threshold: the relative spread to reach.
            min_run_time: the least total time.
            max_run_time: the most total time.
            callback: called with ``(number, seconds)`` after each block.
        """
        m = self.blocked_autorange(callback, min_run_time)
        total = sum(m.raw_times)
        while total < max_run_time and len(m.times) > 3 and m.iqr / m.median > threshold:
            t = self._block(m.number_per_run)
            m = Measurement(m.number_per_run, m.raw_times + [t], self)
            total += t
        return m


class Compare:
    """Measurements in one table (rows by ``sub_label``, columns by ``description``).

    Args:
        results: :class:`Measurement` objects.
    """

    def __init__(self, results):
        self._results = list(results)

    def __str__(self):
        rows = {}
        cols = []
        for m in self._results:
            spec = m.task_spec
            row = (getattr(spec, "label", "") or "", getattr(spec, "sub_label", "") or
                   getattr(spec, "stmt", ""))
            col = getattr(spec, "description", "") or ""
            if col not in cols:
                cols.append(col)
            rows.setdefault(row, {})[col] = m.median * 1e6
        lines = ["[" + " | ".join(["", *cols]) + "]  (median, us)"]
        for (label, sub), vals in rows.items():
            lines.append(f"{label} {sub}: " + " | ".join(
                f"{vals[c]:10.1f}" if c in vals else " " * 10 for c in cols))
        return "\n".join(lines)

    def print(self) -> None:
        """Print the table."""
        print(str(self))

    def trim_significant_figures(self) -> None:
        """Accepted (the table prints one decimal)."""

    def colorize(self, rowwise: bool = False) -> None:
        """Accepted (no colours).

        Args:
            rowwise: accepted.
        """


__all__ = ["Compare", "Measurement", "Timer"]
