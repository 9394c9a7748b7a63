"""``torch.distributed.elastic.multiprocessing``'s ``start_processes``: start one process per
local rank (a program, or a Python function in a spawned interpreter), with its own
environment, optionally its stdout/stderr in per-rank log files, and watch them as a group.

As torch's: ``wait()`` returns a :class:`RunProcsResult` when every process has exited with 0
(``return_values`` holds a function's return values by rank) or as soon as one fails (the
others are then terminated; ``failures`` names the failed ranks with their exit codes and error
files, which a function's uncaught exception fills in torch's JSON format). ``tee`` (copying a
redirected stream to the console too) is not supported: ``tbrun --tee`` does it.

>>> import sys
>>> from tensorbrain.distributed.elastic.multiprocessing import DefaultLogsSpecs, start_processes
>>> ctx = start_processes("demo", sys.executable, {0: ("-c", "pass"), 1: ("-c", "pass")},
...                       {0: {}, 1: {}}, DefaultLogsSpecs())
>>> ctx.wait().is_failed()
False
"""
from __future__ import annotations

import enum
import json
import multiprocessing as mp
import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_VALUE_REGEX = r"^[0-3]$"
_MAPPING_REGEX = r"^(\d:[0-3],)*(\d:[0-3])$"


class Std(enum.IntFlag):
    """Standard streams: NONE, OUT, ERR, ALL (torch's)."""

    NONE = 0
    OUT = 1
    ERR = 2
    ALL = OUT | ERR

    @classmethod
    def from_str(cls, vm: str) -> Std | dict[int, Std]:
        """``"1"`` -> ``Std.OUT``; ``"0:3,1:0"`` -> ``{0: Std.ALL, 1: Std.NONE}``.

        Args:
            vm: a value, or ``local_rank:value`` pairs.

        Raises:
            ValueError: anything else, as torch's.
        """
        if re.match(_VALUE_REGEX, vm):
            return cls(int(vm))
        if re.match(_MAPPING_REGEX, vm):
            return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
        raise ValueError(f"{vm} does not match: <{_VALUE_REGEX}> or <{_MAPPING_REGEX}>")


@dataclass
class ProcessFailure:
    """A failed process: its local rank, pid, exit code and error file (torch's).

    Args:
        local_rank: the rank.
        pid: the process id.
        exitcode: its exit code (negative: killed by that signal).
        error_file: the JSON error file (may not exist).
    """
    local_rank: int
    pid: int
    exitcode: int
    error_file: str
    message: str = ""
    timestamp: int = 0

    def __post_init__(self):
        self.timestamp = int(time.time())
        if os.path.isfile(self.error_file):
            try:
                with open(self.error_file) as f:
                    self.message = json.load(f)["message"]["message"]
            except (OSError, ValueError, KeyError, TypeError):
                self.message = f"(unreadable error file {self.error_file})"
        elif self.exitcode < 0:
            self.message = f"Signal {-self.exitcode} received by PID {self.pid}"
        else:
            self.message = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"


@dataclass
class RunProcsResult:
    """How a group of processes ended (torch's): return values and failures by local rank, and
    the log files of redirected streams."""
    return_values: dict[int, Any] = field(default_factory=dict)
    failures: dict[int, ProcessFailure] = field(default_factory=dict)
    stdouts: dict[int, str] = field(default_factory=dict)
    stderrs: dict[int, str] = field(default_factory=dict)

    def is_failed(self) -> bool:
        """Whether a process failed."""
        return len(self.failures) > 0


class LogsSpecs:
    """Where the processes' streams and error files go (torch's base class)."""

    def reify(self, envs: dict[int, dict[str, str]]) -> dict:
        """The files of each local rank: ``{"stdouts", "stderrs", "error_files"}`` dicts."""
        raise NotImplementedError


def _per_rank(value, rank: int) -> Std:
    return value.get(rank, Std.NONE) if isinstance(value, dict) else value


class DefaultLogsSpecs(LogsSpecs):
    """torch's default: ``log_dir/<run id>/attempt_<restart>/<rank>/{stdout,stderr}.log`` and
    ``error.json`` (a fresh temporary directory when ``log_dir`` is None).

    Args:
        log_dir: the root folder.
        redirects: the streams (``Std``, or per rank) written to files instead of the console.
        tee: only ``Std.NONE`` (copying to the console too is ``tbrun --tee``'s).
        local_ranks_filter: accepted (the ranks whose console output is shown).

    Raises:
        NotImplementedError: ``tee`` other than ``Std.NONE``.
    """

    def __init__(self, log_dir: str | None = None, redirects=Std.NONE, tee=Std.NONE,
                 local_ranks_filter: set[int] | None = None):
        if tee != Std.NONE and not (isinstance(tee, dict) and not any(tee.values())):
            raise NotImplementedError("DefaultLogsSpecs(tee=...) is not supported by "
                                      "TensorBrain's start_processes; use tbrun --tee")
        self._root_log_dir = log_dir
        self._redirects, self._tee = redirects, tee
        self._local_ranks_filter = local_ranks_filter

    @property
    def root_log_dir(self) -> str:
        """The root folder (made on first use when none was given)."""
        if self._root_log_dir is None:
            self._root_log_dir = tempfile.mkdtemp(prefix="torchelastic_")
        return self._root_log_dir

    def reify(self, envs: dict[int, dict[str, str]]) -> dict:
        """The per-rank files (folders made).

        Args:
            envs: each rank's environment (``TORCHELASTIC_RUN_ID``,
                ``TORCHELASTIC_RESTART_COUNT`` name the folder).
        """
        first = envs.get(0, next(iter(envs.values()), {}))
        run = first.get("TORCHELASTIC_RUN_ID", "none")
        attempt = first.get("TORCHELASTIC_RESTART_COUNT", "0")
        base = os.path.join(self.root_log_dir, f"{run}_{os.getpid()}", f"attempt_{attempt}")
        out: dict[str, dict[int, str]] = {"stdouts": {}, "stderrs": {}, "error_files": {}}
        for rank in envs:
            folder = os.path.join(base, str(rank))
            os.makedirs(folder, exist_ok=True)
            r = _per_rank(self._redirects, rank)
            out["stdouts"][rank] = os.path.join(folder, "stdout.log") if r & Std.OUT else ""
            out["stderrs"][rank] = os.path.join(folder, "stderr.log") if r & Std.ERR else ""
            out["error_files"][rank] = os.path.join(folder, "error.json")
        return out


def _run_function(fn, args, env, stdout, stderr, error_file, queue, rank):   # pragma: no cover
    """A spawned child: set the environment and streams, run ``fn``, send its result."""
    import sys
    os.environ.update(env)
    os.environ["TORCHELASTIC_ERROR_FILE"] = error_file
    if stdout:
        sys.stdout = open(stdout, "w", buffering=1)   # noqa: SIM115  (open for the process' life)
    if stderr:
        sys.stderr = open(stderr, "w", buffering=1)   # noqa: SIM115
    from .errors import record
    queue.put((rank, record(fn)(*args)))


class PContext:
    """The started processes (torch's ``PContext``): :meth:`wait`, :meth:`pids`, :meth:`close`.

    Args:
        name: the group's name.
        entrypoint: a program path or a picklable function.
        args: local rank -> its arguments.
        envs: local rank -> its extra environment variables.
        logs_specs: where the streams go.
        start_method: ``"spawn"`` (functions; ``"fork"``/``"forkserver"`` accepted too).
    """

    def __init__(self, name: str, entrypoint, args: dict, envs: dict, logs_specs: LogsSpecs,
                 start_method: str = "spawn"):
        if set(args) != set(envs):
            raise RuntimeError(f"args and envs must have the same local ranks: {sorted(args)} "
                               f"vs {sorted(envs)}")
        self.name, self.entrypoint = name, entrypoint
        self.args, self.envs, self.start_method = args, envs, start_method
        files = logs_specs.reify(envs)
        self.stdouts, self.stderrs = files["stdouts"], files["stderrs"]
        self.error_files = files["error_files"]
        self._procs: dict[int, Any] = {}
        self._handles: list = []
        self._queue: Any = None
        self._returns: dict[int, Any] = {}

    def start(self) -> None:
        """Start one process per local rank."""
        if callable(self.entrypoint):
            ctx: Any = mp.get_context(self.start_method)
            self._queue = ctx.SimpleQueue()
            for rank in sorted(self.args):
                p = ctx.Process(target=_run_function, name=f"{self.name}-{rank}",
                                args=(self.entrypoint, tuple(self.args[rank]),
                                      dict(self.envs[rank]), self.stdouts[rank],
                                      self.stderrs[rank], self.error_files[rank], self._queue,
                                      rank))
                p.start()
                self._procs[rank] = p
            return
        for rank in sorted(self.args):
            env = {**os.environ, **self.envs[rank],
                   "TORCHELASTIC_ERROR_FILE": self.error_files[rank]}
            out = open(self.stdouts[rank], "w") if self.stdouts[rank] else None  # noqa: SIM115
            err = open(self.stderrs[rank], "w") if self.stderrs[rank] else None  # noqa: SIM115
            self._handles += [h for h in (out, err) if h is not None]
            self._procs[rank] = subprocess.Popen(
                [str(self.entrypoint), *map(str, self.args[rank])], env=env, stdout=out,
                stderr=err, start_new_session=True)

    def pids(self) -> dict[int, int]:
        """Local rank -> process id."""
        return {r: p.pid for r, p in self._procs.items()}

    def _code(self, p) -> int | None:
        return p.poll() if isinstance(p, subprocess.Popen) else p.exitcode

    def _drain(self) -> None:
        while self._queue is not None and not self._queue.empty():
            rank, value = self._queue.get()
            self._returns[rank] = value

    def wait(self, timeout: float = -1, period: float = 1) -> RunProcsResult | None:
        """Wait for the group: the result once all succeed or one fails (the others are then
        terminated); None if ``timeout`` (seconds; -1: forever, 0: just look) passes first.

        Args:
            timeout: seconds to wait.
            period: seconds between looks (at most).
        """
        deadline = None if timeout < 0 else time.monotonic() + timeout
        while True:
            self._drain()
            codes = {r: self._code(p) for r, p in self._procs.items()}
            failed = {r: c for r, c in codes.items() if c not in (None, 0)}
            if failed or all(c == 0 for c in codes.values()):
                if failed:
                    self.close()
                self._drain()
                res = RunProcsResult(stdouts=dict(self.stdouts), stderrs=dict(self.stderrs))
                if failed:
                    res.failures = {r: ProcessFailure(r, self._procs[r].pid, c,
                                                      self.error_files[r])
                                    for r, c in failed.items()}
                else:
                    res.return_values = (dict(sorted(self._returns.items()))
                                         if callable(self.entrypoint)
                                         else {r: None for r in self._procs})
                self._close_handles()
                return res
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(min(period, 0.05) if period > 0 else 0.05)

    def close(self, death_sig: signal.Signals | None = None, timeout: int = 30) -> None:
        """Stop the processes still running: ``death_sig`` (SIGTERM), then SIGKILL after
        ``timeout`` seconds.

        Args:
            death_sig: the first signal.
            timeout: seconds before SIGKILL.
        """
        sig = death_sig or signal.SIGTERM
        for p in self._procs.values():
            if self._code(p) is None:
                try:
                    os.kill(p.pid, sig)
                except ProcessLookupError:
                    pass
        end = time.monotonic() + timeout
        for p in self._procs.values():
            while self._code(p) is None and time.monotonic() < end:
                time.sleep(0.05)
            if self._code(p) is None:
                p.kill()
            if not isinstance(p, subprocess.Popen):
                p.join(1)
        self._close_handles()

    def _close_handles(self) -> None:
        for h in self._handles:
            h.close()
        self._handles = []


def start_processes(name: str, entrypoint: Callable | str, args: dict, envs: dict,
                    logs_specs: LogsSpecs, log_line_prefixes: dict | None = None,
                    start_method: str = "spawn", numa_options=None,
                    duplicate_stdout_filters=None, duplicate_stderr_filters=None) -> PContext:
    """Start ``entrypoint`` once per local rank and return the running group, as torch's.

    Args:
        name: the group's name.
        entrypoint: a program (str: run with ``args[rank]`` as its arguments) or a picklable
            function (run in a fresh interpreter, ``start_method``).
        args: local rank -> arguments.
        envs: local rank -> extra environment variables.
        logs_specs: a :class:`DefaultLogsSpecs` (streams to files, error files).
        log_line_prefixes: accepted (console lines are not prefixed).
        start_method: for functions.
        numa_options: accepted (no NUMA binding).
        duplicate_stdout_filters: accepted.
        duplicate_stderr_filters: accepted.

    Returns:
        PContext: started; call ``wait()``.

    Raises:
        RuntimeError: ``args`` and ``envs`` name different ranks.
    """
    ctx = PContext(name, entrypoint, args, envs, logs_specs, start_method)
    ctx.start()
    return ctx


__all__ = ["DefaultLogsSpecs", "LogsSpecs", "PContext", "ProcessFailure", "RunProcsResult", "Std",
           "start_processes"]
