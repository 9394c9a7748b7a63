"""This node's worker processes: spawn them, copy their output, stop them, clean up after them.

Every worker runs in its own session (process group), so stopping a worker signals its whole
group and none of its children outlives the job. The kernel SIGKILLs the workers if tbrun itself
dies (``PR_SET_PDEATHSIG``), and a :class:`..._guardian.Guardian` kills their groups then too.
"""
from __future__ import annotations

import collections
import ctypes
import glob
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from string import Template
from typing import TYPE_CHECKING

from .. import _output
from .config import Config
from .notice import notice

if TYPE_CHECKING:
    from .._guardian import Guardian

_TAIL_LINES = 20


class Stop(BaseException):
    """Raised from tbrun's signal handler so blocking waits (store, sleep) end at once."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def substitute_local_rank(cmd: list, local_rank: int) -> list:
    """torchrun's ``${local_rank}`` macro: each argument with the worker's local rank put in
    (``string.Template.safe_substitute``, as torch's ``macros.substitute``; so ``$$`` becomes
    ``$`` there too). tbrun's ``--local-rank=``/``--local_rank=`` arguments are built on it.

    Args:
        cmd: the worker's command line.
        local_rank: the worker's index on this node.

    Returns:
        list: the command line with the macro replaced.
    """
    return [Template(a).safe_substitute(local_rank=str(local_rank)) if "$" in a else a
            for a in cmd]


def _pdeathsig():
    """preexec_fn: the kernel SIGKILLs the worker if tbrun dies (even by SIGKILL)."""
    if _LIBC is None:
        return
    try:
        _LIBC.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


try:
    _LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
except OSError:
    _LIBC = None


@dataclass
class Worker:
    """One worker process of this node: its ranks, its ``Popen``, the tail of its output and
    how it ended."""
    rank: int
    local_rank: int
    proc: subprocess.Popen
    tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=_TAIL_LINES))
    readers: list = field(default_factory=list)
    files: list = field(default_factory=list)
    returncode: int | None = None
    ended_at: float | None = None
    stopped: bool = False
    error_file: str = ""


def exit_text(code: int) -> str:
    """How a process ended, in words: ``exited with code 3``, ``killed by signal SIGSEGV (11)``."""
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name} ({-code})"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def _kill_group(pid: int, sig: int):
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_workers(workers: list[Worker], sig=signal.SIGTERM, grace: float = 10.0):
    """Signal every live worker's process group, wait up to ``grace``, then SIGKILL the groups.

    Args:
        workers: the workers; those already stopped are skipped.
        sig: the first signal sent.
        grace: seconds to wait before SIGKILL.
    """
    workers = [w for w in workers if not w.stopped]
    for w in workers:
        if w.proc.poll() is None:
            _kill_group(w.proc.pid, sig)
    deadline = time.monotonic() + grace
    for w in workers:
        try:
            w.proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for w in workers:
        # the group may hold grandchildren even when the worker itself has exited
        _kill_group(w.proc.pid, signal.SIGKILL)
        if w.proc.poll() is None:
            w.proc.wait()
    for w in workers:
        for t in w.readers:
            t.join(2.0)
        for f in w.files:
            f.close()
        w.stopped = True


def cleanup_shm(run_id: str, root: str = "/dev/shm") -> list[str]:
    """Remove this run's leftover shared-memory segments (``tb_<run_id>_*``).

    Args:
        run_id: the run whose segments are removed.
        root: the shared-memory folder.

    Returns:
        list: the paths removed.
    """
    removed: list[str] = []
    if not run_id:
        return removed
    safe = run_id.replace("/", "-")[:200]  # as the shm transport spells it (_shm/_layout.py)
    for path in glob.glob(os.path.join(root, f"tb_{glob.escape(safe)}_*")):
        try:
            os.unlink(path)
            removed.append(path)
        except OSError:
            pass
    return removed


class WorkerGroup:
    """This node's workers for one attempt at a time, their output and their log files.

    Args:
        cfg: the node's settings (command, output options, stop timeout).
    """

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.workers: list[Worker] = []
        self.guardian: Guardian | None = None  # kills the workers' process groups if tbrun is SIGKILLed
        # A signal arriving between fork and the Popen assignment would orphan that worker, so
        # tbrun's handler defers it (``pending_signal``) while ``spawning``. (Blocking signals
        # instead would leak the blocked mask into the workers: they would then ignore SIGTERM.)
        self.spawning, self.pending_signal = False, None
        self.log_root = None
        self.dups: dict[str, _output.Duplicator] = {}
        self.tmp_errors: str | None = None
        self.omp_noticed = False
        if any(cfg.redirects.values()) or any(cfg.tee.values()) or cfg.dup_filters:
            self.log_root = cfg.log_dir or tempfile.mkdtemp(prefix="tbrun_logs_")
            if not cfg.log_dir:
                notice(f"worker logs go to {self.log_root}")

    def error_root(self) -> str:
        """Folder for the workers' TORCHELASTIC_ERROR_FILEs (the log folder, else a temporary
        one removed at exit)."""
        if self.log_root:
            return self.log_root
        if self.tmp_errors is None:
            self.tmp_errors = tempfile.mkdtemp(prefix="tbrun_errors_")
        return self.tmp_errors

    def base_env(self) -> dict:
        """tbrun's environment with the defaults every worker gets (``OMP_NUM_THREADS``,
        ``PYTHONUNBUFFERED``) filled in where unset."""
        base = dict(os.environ)
        if "OMP_NUM_THREADS" not in base and "OMP_NUM_THREADS" not in self.cfg.extra_env \
                and self.cfg.nproc > 1:
            if not self.omp_noticed:
                self.omp_noticed = True
                notice(f"setting OMP_NUM_THREADS=1 for each of the {self.cfg.nproc} workers so "
                       "they do not oversubscribe the cores; set it yourself to override")
            base["OMP_NUM_THREADS"] = "1"
        base.setdefault("PYTHONUNBUFFERED", "1")
        return base

    def start(self, envs: list[dict], round_: int):
        """Start one worker per environment (local rank = index) and the threads copying its output.

        Args:
            envs: each worker's full environment (``RANK``, ``LOCAL_RANK`` and
                ``TORCHELASTIC_ERROR_FILE`` are read back from it).
            round_: the rendezvous round, naming the log folder ``attempt_<round>``.

        Raises:
            Stop: a signal arrived while spawning; every worker started is recorded first.
        """
        self.workers = []
        self.spawning, self.pending_signal = True, None
        try:
            for lr, env in enumerate(envs):
                self.workers.append(self._spawn(lr, env, round_))
        finally:
            self.spawning = False
        if self.pending_signal is not None:
            raise Stop(self.pending_signal)

    def replace(self, lr: int, env: dict, round_: int | str) -> Worker:
        """Start a new worker in local rank ``lr``'s place (tbrun --fault_tolerant): the failed
        one's output threads are finished and its process group is killed first.

        Args:
            lr: the local rank whose worker failed.
            env: the new worker's environment.
            round_: the rendezvous round (log folder ``attempt_<round_>``).

        Returns:
            Worker: the new worker.
        """
        stop_workers([self.workers[lr]], signal.SIGKILL, 0)
        self._forget_stopped()
        self.spawning, self.pending_signal = True, None
        try:
            self.workers[lr] = self._spawn(lr, env, round_)
        finally:
            self.spawning = False
        if self.pending_signal is not None:
            raise Stop(self.pending_signal)
        return self.workers[lr]

    def _spawn(self, lr: int, env: dict, round_: int | str) -> Worker:
        proc = subprocess.Popen(substitute_local_rank(self.cfg.cmd, lr), env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True,
                                preexec_fn=_pdeathsig if _LIBC is not None else None)
        w = Worker(int(env["RANK"]), lr, proc, error_file=env["TORCHELASTIC_ERROR_FILE"])
        if self.guardian is None:
            from .._guardian import Guardian
            self.guardian = Guardian(self.cfg.run_id)
        self.guardian.add(proc.pid)
        self._start_pumps(w, round_)
        return w

    def _start_pumps(self, w: Worker, round_: int | str):
        cfg = self.cfg
        prefix = b"" if cfg.no_prefix else f"[rank {w.rank}] ".encode()
        shown = cfg.shown is None or w.local_rank in cfg.shown
        for bit, pipe, console, name in ((1, w.proc.stdout, sys.stdout.buffer, "stdout"),
                                         (2, w.proc.stderr, sys.stderr.buffer, "stderr")):
            redirect, tee = cfg.redirects[w.local_rank] & bit, cfg.tee[w.local_rank] & bit
            logf = None
            if (redirect or tee) and self.log_root:
                d = os.path.join(self.log_root, cfg.run_id, f"attempt_{round_}", str(w.local_rank))
                os.makedirs(d, exist_ok=True)
                logf = open(os.path.join(d, f"{name}.log"), "wb")
                w.files.append(logf)
            out = console if shown and not redirect else None
            # prefixed pieces (ending in \n or \r) to the console, raw to the log file
            t = threading.Thread(target=_output.pump, args=(pipe, out, prefix, logf,
                                                            w.tail if bit == 2 else None,
                                                            self._duplicator(name)), daemon=True)
            t.start()
            w.readers.append(t)

    def _duplicator(self, name):
        """The shared ``filtered_{stdout,stderr}.log`` writer, when filters were given."""
        filters = self.cfg.dup_filters.get(name)
        if not filters or not self.log_root:
            return None
        if name not in self.dups:
            d = os.path.join(self.log_root, self.cfg.run_id)
            os.makedirs(d, exist_ok=True)
            self.dups[name] = _output.Duplicator(os.path.join(d, f"filtered_{name}.log"), filters)
        return self.dups[name]

    def poll(self, now: float):
        """Record the exit status and time of every worker that ended since the last poll."""
        for w in self.workers:
            if w.returncode is None and w.proc.poll() is not None:
                w.returncode, w.ended_at = w.proc.returncode, now

    def _forget_stopped(self):
        if self.guardian is not None:
            for w in self.workers:
                if w.stopped:
                    self.guardian.forget(w.proc.pid)

    def stop(self, sig):
        """Stop the workers (``sig``, then SIGKILL after the stop timeout) and remove the run's
        shared-memory segments on this node."""
        stop_workers(self.workers, sig, self.cfg.stop_timeout)
        self._forget_stopped()
        removed = cleanup_shm(self.cfg.run_id)
        if removed:
            notice(f"removed {len(removed)} leftover shared-memory segment(s) of run "
                   f"{self.cfg.run_id}")

    def finish(self):
        """After every worker exited 0: kill what is left in their process groups (children
        they started and did not wait for) and remove the run's shared-memory segments."""
        stop_workers(self.workers, signal.SIGKILL, 0)
        self._forget_stopped()
        cleanup_shm(self.cfg.run_id)

    def close(self, sig=signal.SIGTERM):
        """Stop the workers still running and release the guardian, log files and temporary folders.

        Args:
            sig: the signal sent to the workers first (SIGKILL follows after the stop timeout).
        """
        if self.workers:
            self.stop(sig)
        if self.guardian is not None:
            self.guardian.close()
            self.guardian = None
        for d in self.dups.values():
            d.close()
        self.dups = {}
        if self.tmp_errors is not None:
            import shutil
            shutil.rmtree(self.tmp_errors, ignore_errors=True)
            self.tmp_errors = None
