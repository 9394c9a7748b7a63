"""``tbrun``: start N worker processes per node, watch them, restart or stop them together.

Usage (``tbrun`` is the console script; ``python -m tensorbrain.distributed.run`` is the same)::

    tbrun --nproc_per_node 4 train.py --epochs 3            # one node, 4 workers
    tbrun --standalone --nproc_per_node auto train.py       # free port, fresh run id
    tbrun --nnodes 2 --node_rank 0 --master_addr host0 --nproc_per_node 4 train.py  # on host0
    tbrun --nnodes 2 --node_rank 1 --master_addr host0 --nproc_per_node 4 train.py  # on host1
    tbrun --nproc_per_node 2 -m mypkg.train --lr 0.1        # run a module
    tbrun --nproc_per_node 2 --max_restarts 3 train.py      # restart the group on failure

Everything after the script (or ``-m module``) is passed to every worker unchanged.

Options (dashed and underscored spellings both work: ``--nproc-per-node`` = ``--nproc_per_node``)
------------------------------------------------------------------------------------------------
``--nproc_per_node N|cpu|gpu|auto`` (default 1)
    Workers on this node. ``cpu``: one per CPU core; ``gpu``: one per CUDA device (error without
    one); ``auto``: ``gpu`` when CUDA is available, else ``cpu``.
``--nnodes N`` or ``MIN:MAX`` (default 1)
    Nodes in the job. ``N``: exactly N nodes, each started with its own ``--node_rank``.
    ``MIN:MAX``: the round closes when MAX nodes joined, or when at least MIN joined and no new node
    arrived for ``last_call_timeout`` seconds (``--rdzv_conf last_call_timeout=5``); node ranks are
    then given in order of arrival and the node that serves the store is node 0.
``--node_rank R`` (not given: by arrival)
    This node's index, 0..nnodes-1 (static rendezvous). Node 0 serves the launcher's store.
    Two nodes claiming the same index is an error naming both hosts. Not given (or
    ``--rdzv_backend c10d``), as torchrun's c10d: node ranks by arrival at the endpoint's store,
    whose host is node 0; the rendezvous goes in rounds (``TB_ROUND``) and a node that arrives
    after its round closed with fewer than MAX nodes makes the running agents stop their workers
    and start round + 1 with it (not counted as a restart).
``--master_addr HOST`` (default 127.0.0.1), ``--master_port PORT`` (default 29500)
    Where node 0's launcher serves the TCPStore that nodes and workers meet through. Other nodes
    must reach HOST:PORT. A port already in use is an error saying which port and what to do.
``--rdzv_endpoint HOST[:PORT]``
    Same as ``--master_addr``/``--master_port`` (torchrun's spelling); wins over them.
``--rdzv_id ID``
    Run id shared by all nodes (default: random, chosen by node 0 and shared through the store).

Under ``srun`` with one task per node (``srun tbrun ...`` in an sbatch script), ``--nnodes``,
``--node_rank``, ``--master_addr`` (first host of the step's nodelist), ``--master_port``
(15000 + the job id's last four digits) and ``--rdzv_id`` default from Slurm's variables.
``--hostfile FILE`` (DeepSpeed's ``host slots=N``), ``-np N -H host1:2,host2:2`` (horovodrun's)
    One agent per host over plain ``ssh`` (``--ssh_port``, ``--ssh_opts``), rendezvous on the
    first host; Ctrl-C or a failure on one host ends every host's workers (see ``_fanout``).
``--rdzv_backend NAME``
    ``static`` (default, ``tcp``): ``--node_rank`` decides; ``c10d``/``etcd``: by arrival. The
    store is always a TCPStore served by the agent at the endpoint.
``--rdzv_conf k=v,...``
    ``join_timeout`` (seconds to wait for all nodes, default 900), ``last_call_timeout``
    (elastic ``MIN:MAX`` only, default 5).
``--standalone``
    Single node: picks a free port and a fresh run id; ignores master address/port.
``--max_restarts N`` (default 0)
    When a worker fails, the whole node group (every node) is stopped and started again, at most
    N times. Workers see the attempt in ``TB_RESTART_COUNT`` (0, 1, ...). Ranks are not promised
    to be stable across restarts: save checkpoints and resume from them.
``--monitor_interval SECONDS`` (default 0.1)
    How often worker liveness is polled.
``--stop_timeout SECONDS`` (default 10)
    Grace period between SIGTERM and SIGKILL when stopping workers (torchrun waits 30 s).
``-r/--redirects SPEC``, ``-t/--tee SPEC``
    Send worker stdout/stderr to files in ``--log_dir`` instead of (redirects) or as well as (tee)
    the console. SPEC is 0 (none), 1 (stdout), 2 (stderr), 3 (both), or per local rank
    ``0:3,1:2``. Files: ``LOG_DIR/RUN_ID/attempt_K/LOCAL_RANK/{stdout,stderr}.log``.
``--log_dir DIR``
    Where those files go (default: a new temporary directory, printed at start).
``--local_ranks_filter 0,2``
    Show only these local ranks' output on the console (files still get everything).
``-m/--module``
    Run the script argument as a module (``python -m``). ``--no_python``: run it as a program.
``--no-prefix``
    Leave workers' output untouched.
torchrun's other options
    ``--role`` (``ROLE_NAME``), ``--run-path``, ``--start-method`` (no effect: workers are
    always fresh processes), ``--local-addr``, ``--logs-specs`` (default only),
    ``--shutdown-timeout`` (= ``--stop_timeout``), ``--signals-to-handle``, ``--numa-binding``
    and ``--event-log-handler`` (no effect), ``--virtual-local-rank``,
    ``--duplicate-stdout-filters``/``--duplicate-stderr-filters`` (matching lines also go to
    ``LOG_DIR/RUN_ID/filtered_std{out,err}.log``); ``PET_<OPTION>``
    variables supply options not on the command line. Other launchers' names (``accelerate
    launch``, DeepSpeed, ``horovodrun``): see docs/launcher.md and ``_launch_compat``.
``--as-torch``
    Run an unmodified PyTorch script: in every worker, ``import torch`` resolves to TensorBrain
    (``python -m tensorbrain.as_torch``; see docs/compat.md). Said once at start-up.

What each worker sees
---------------------
``RANK`` (global), ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK`` and
``NODE_RANK`` (this node's index), ``ROLE_RANK``/``ROLE_WORLD_SIZE`` (= rank/world size),
``MASTER_ADDR``/``MASTER_PORT`` (the launcher's store), ``TB_USE_AGENT_STORE=1`` (so
``init_process_group("env://")`` connects to that store instead of starting one on rank 0),
``TB_RESTART_COUNT``, ``TB_MAX_RESTARTS``, ``TB_RUN_ID``, ``TB_ROUND``, torchrun's
``GROUP_WORLD_SIZE``, ``ROLE_NAME``, ``TORCHELASTIC_RESTART_COUNT``/``_MAX_RESTARTS``/``_RUN_ID``
and ``TORCHELASTIC_ERROR_FILE`` (an uncaught exception is written there as JSON, torch's
``@record`` format, and shown in the failure summary), ``OMP_NUM_THREADS=1`` when unset and more
than one worker runs on the node (with a notice: N workers each using every core would
oversubscribe them), and ``PYTHONUNBUFFERED=1`` when unset (so lines arrive as they are printed).
Global ranks are numbered node by node: node 0's workers first.

Output
------
Every line a worker prints is shown as ``[rank N] line`` on tbrun's stdout or stderr (whichever the
worker used). Output is cut at ``\\n`` and ``\\r`` (so a tqdm bar redraws live, prefix kept);
complete lines are written under one lock, so lines of different ranks never interleave within
a line; a final line without a newline gets one (see ``_output``).

Failure modes, and what tbrun does
----------------------------------
* A worker exits non-zero or is killed by a signal: the other workers on every node are stopped
  (SIGTERM to each worker's process group, so its children die too; SIGKILL after
  ``--stop_timeout``). With restarts left, every node starts a new attempt (``TB_RESTART_COUNT``
  + 1); a new attempt's rendezvous keys never see the previous attempt's. Otherwise tbrun exits
  with status 1 and prints a summary: the first failed rank, its node and pid, its exit code or
  signal name (``SIGSEGV``), and the last lines of its stderr, then the other failed ranks.
* Ctrl-C (SIGINT) or SIGTERM to tbrun: the signal is passed to every worker's process group,
  SIGKILL follows after the grace period, and tbrun exits with 128 + signal number (130 for
  Ctrl-C). No worker outlives tbrun; if tbrun itself is SIGKILLed, the kernel sends SIGKILL to its
  workers (``PR_SET_PDEATHSIG`` on Linux).
* Every worker runs in its own process group (session); whatever is left in those groups when the
  workers are stopped, or after they all exited 0, is killed, so no child of a worker outlives
  the job (a child that starts its own session on purpose, like a daemon, is left alone).
* After workers stop (failure, signal or success), shared-memory segments named
  ``/dev/shm/tb_<run_id>_*`` (the shm transport's naming) are removed on this node.
* A node never arrives: after ``join_timeout`` every waiting node exits with an error naming the
  missing node ranks and the endpoint. Node 0 not up yet: other nodes retry connecting until
  the join timeout, then name ``HOST:PORT``.
* Node 0's launcher dies: other nodes lose the store, stop their workers and exit 1 naming it.
* Bad options (``--nproc_per_node 0``, ``--node_rank`` >= ``--nnodes``, ``--standalone`` with
  several nodes, an unparsable spec): exit status 2 with the reason.

Exit status: 0 when every worker of the last attempt exited 0 on every node; 1 after a failure
with no restarts left or a rendezvous error; 2 for usage errors; 128 + N after signal N.
"""
from __future__ import annotations

import argparse
import collections
import ctypes
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

from . import _launch_compat as _compat
from . import _output
from .errors import DistError, DistNetworkError, DistStoreError
from .store import PrefixStore, TCPStore

__all__ = ["main", "get_args_parser", "parse_args"]

_NOTICE = "tbrun:"
_TAIL_LINES = 20


class UsageError(ValueError):
    """A bad command line or option value; tbrun prints ``tbrun: error: ...`` and exits 2."""
    pass


class _Fanout(Exception):
    """parse_args found a host list naming other hosts: main() runs the ssh fan-out."""

    def __init__(self, hosts, ns, argv, script_at):
        super().__init__("fan-out")
        self.hosts, self.ns, self.argv, self.script_at = hosts, ns, argv, script_at


class _Stop(BaseException):
    """Raised from the signal handler so blocking waits (store, sleep) end at once."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


# ***** options *****

def _add(parser, name, *more, **kw):
    """Add ``--a_b`` and ``--a-b`` for one option (torchrun accepts both)."""
    names = [f"--{name}"]
    if "_" in name:
        names.append(f"--{name.replace('_', '-')}")
    parser.add_argument(*more, *names, dest=name, **kw)


def get_args_parser() -> argparse.ArgumentParser:
    """The ``argparse`` parser of tbrun's command line (torchrun's options, ``--a_b`` and ``--a-b``)."""
    p = argparse.ArgumentParser(
        prog="tbrun", description="Launch distributed TensorBrain workers (torchrun's options).",
        epilog="See `python -c 'import tensorbrain.distributed.run as r; help(r)'` or "
               "docs/launcher.md for every option, variable and failure mode.")
    _add(p, "nnodes", default="1", help="N or MIN:MAX (default 1)")
    _add(p, "nproc_per_node", default="1", help="N, cpu, gpu or auto (default 1)")
    _add(p, "node_rank", type=int, default=None,
         help="this node's index; not given: by arrival at the rendezvous (c10d)")
    _add(p, "master_addr", default="127.0.0.1", help="host of node 0 (default 127.0.0.1)")
    _add(p, "master_port", type=int, default=29500, help="port of the store (default 29500)")
    _add(p, "standalone", action="store_true", help="single node, free port, fresh run id")
    _add(p, "rdzv_endpoint", default="", help="HOST[:PORT], same as --master_addr/--master_port")
    _add(p, "rdzv_id", default="", help="run id shared by all nodes (default random)")
    _add(p, "rdzv_backend", default="static", help="accepted for torchrun compatibility")
    _add(p, "rdzv_conf", default="", help="join_timeout=S,last_call_timeout=S")
    _add(p, "max_restarts", type=int, default=0, help="restarts of the group on failure")
    _add(p, "monitor_interval", type=float, default=0.1, help="seconds between liveness polls")
    _add(p, "stop_timeout", type=float, default=10.0, help="SIGTERM -> SIGKILL grace seconds")
    _add(p, "redirects", "-r", default="0", help="0|1|2|3 or 0:3,1:2 (files instead of console)")
    _add(p, "tee", "-t", default="0", help="0|1|2|3 or 0:3,1:2 (files and console)")
    _add(p, "log_dir", default="", help="directory for redirected/teed output")
    _add(p, "local_ranks_filter", default="", help="show only these local ranks (e.g. 0,2)")
    _add(p, "module", "-m", action="store_true", help="run the target as a module (python -m)")
    _add(p, "no_python", action="store_true", help="run the target as a program, not python")
    _add(p, "as_torch", action="store_true", help="`import torch` runs TensorBrain in the workers")
    _compat.add_options(p)
    p.add_argument("training_script", help="the script (or module with -m) each worker runs")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p


@dataclass
class Config:
    """The launch settings of one node, as parsed from the command line by :func:`parse_args`."""
    min_nodes: int
    max_nodes: int
    nproc: int
    node_rank: int
    master_addr: str
    master_port: int
    standalone: bool
    run_id: str
    max_restarts: int
    monitor_interval: float
    stop_timeout: float
    join_timeout: float
    last_call: float
    redirects: dict
    tee: dict
    log_dir: str
    shown: set | None
    cmd: list
    elastic: bool = False
    watch_stdin: bool = False
    dup_filters: dict = field(default_factory=dict)
    mixed_precision: str | None = None
    role: str = "default"
    local_addr: str | None = None
    virtual_local_rank: bool = False
    no_prefix: bool = False
    signals: tuple = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


def _std_spec(text: str, nproc: int, what: str) -> dict[int, int]:
    """``3`` -> every local rank 3; ``0:1,1:2`` -> per local rank (others 0)."""
    text = text.strip()
    try:
        if ":" not in text:
            mode = int(text)
            out = {r: mode for r in range(nproc)}
        else:
            out = {r: 0 for r in range(nproc)}
            for part in text.split(","):
                r, m = part.split(":")
                out[int(r)] = int(m)
    except ValueError:
        raise UsageError(f"--{what} {text!r}: expected 0..3 or LOCAL_RANK:MODE,... ") from None
    if any(m not in (0, 1, 2, 3) for m in out.values()):
        raise UsageError(f"--{what} {text!r}: modes are 0 (none), 1 (stdout), 2 (stderr), 3 (both)")
    return out


def _nproc(text: str) -> int:
    text = text.strip().lower()
    if text in ("gpu", "auto"):
        from .. import cuda
        if cuda.is_available() and cuda.device_count() > 0:
            return cuda.device_count()
        if text == "gpu":
            raise UsageError(f"--nproc_per_node gpu: no CUDA device ({cuda.why_unavailable()})")
        return os.cpu_count() or 1
    if text == "cpu":
        return os.cpu_count() or 1
    try:
        n = int(text)
    except ValueError:
        raise UsageError(f"--nproc_per_node {text!r}: expected a number, cpu, gpu or auto") from None
    if n < 1:
        raise UsageError(f"--nproc_per_node {n}: needs at least 1 worker")
    return n


def parse_args(argv=None) -> Config:
    """Parse tbrun's command line (and Slurm's environment) into a :class:`Config`.

    Args:
        argv: the arguments after the program name; None for ``sys.argv[1:]``.

    Returns:
        Config: the settings.

    Raises:
        UsageError: an option value is invalid; the message names it and what is expected.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = get_args_parser()
    try:
        _compat.apply_slurm_env(parser)
        _compat.config_file_defaults(parser, argv)
        _compat.apply_pet_env(parser)
        ns = parser.parse_args(argv)
        script_at = len(argv) - 1 - len(ns.training_script_args)
        _compat.drop_python(ns)
        signals = tuple(_compat.parse_signals(ns.signals_to_handle))
    except _compat.CompatError as exc:
        raise UsageError(str(exc)) from None
    if ns.hostfile or ns.hosts:
        from ._fanout import HostsError, apply_hosts
        try:
            hosts = apply_hosts(ns, _is_local)
        except HostsError as exc:
            raise UsageError(str(exc)) from None
        if hosts is not None:
            raise _Fanout(hosts, ns, argv, script_at)
    if ns.logs_specs not in (None, "", "default", "DefaultLogsSpecs"):
        raise UsageError(f"--logs_specs {ns.logs_specs}: custom LogsSpecs plugins are not "
                         "supported; tbrun writes LOG_DIR/RUN_ID/attempt_K/LOCAL_RANK/*.log")
    dup_filters = {name: [f for f in text.split(",") if f] for name, text in
                   (("stdout", ns.duplicate_stdout_filters),
                    ("stderr", ns.duplicate_stderr_filters)) if text}
    try:
        _compat.resolve_totals(ns)
    except _compat.CompatError as exc:
        raise UsageError(str(exc)) from None
    if ns.shutdown_timeout is not None:
        ns.stop_timeout = float(ns.shutdown_timeout)
    if ns.run_path:
        ns.no_python = False
    nproc = _nproc(ns.nproc_per_node)
    try:
        parts = [int(x) for x in ns.nnodes.split(":")]
        lo, hi = (parts[0], parts[0]) if len(parts) == 1 else tuple(parts)
    except ValueError:
        raise UsageError(f"--nnodes {ns.nnodes!r}: expected N or MIN:MAX") from None
    if not 1 <= lo <= hi:
        raise UsageError(f"--nnodes {ns.nnodes!r}: need 1 <= MIN <= MAX")
    conf = {}
    for item in filter(None, ns.rdzv_conf.split(",")):
        k, _, v = item.partition("=")
        conf[k.strip()] = v.strip()
    try:
        join_timeout = float(conf.get("join_timeout", 900))
        last_call = float(conf.get("last_call_timeout", 5))
    except ValueError:
        raise UsageError(f"--rdzv_conf {ns.rdzv_conf!r}: timeouts are seconds") from None
    addr, port = ns.master_addr, ns.master_port
    if ns.rdzv_endpoint:
        host, sep, p = ns.rdzv_endpoint.rpartition(":")
        if sep and p.isdigit() and not host.endswith(":"):
            addr, port = host.strip("[]"), int(p)
        else:
            addr = ns.rdzv_endpoint.strip("[]")
    if ns.standalone:
        if hi != 1:
            raise UsageError("--standalone runs one node; drop --nnodes or --standalone")
        addr, port = "127.0.0.1", 0
    if not 0 <= port <= 65535:
        raise UsageError(f"--master_port {port}: not a TCP port")
    # torchrun: the c10d (and etcd) backends give node ranks by arrival; so does tbrun whenever
    # --node_rank is not given
    dynamic = hi > 1 and (lo != hi or ns.node_rank is None
                          or ns.rdzv_backend not in ("static", "tcp", ""))
    if ns.node_rank is None:
        ns.node_rank = 0
    if not dynamic and not 0 <= ns.node_rank < hi:
        raise UsageError(f"--node_rank {ns.node_rank} is out of range for --nnodes {hi} "
                         f"(node ranks are 0..{hi - 1})")
    if ns.max_restarts < 0 or ns.monitor_interval <= 0 or ns.stop_timeout < 0:
        raise UsageError("--max_restarts must be >= 0, --monitor_interval > 0, --stop_timeout >= 0")
    shown = None
    if ns.local_ranks_filter:
        try:
            shown = {int(x) for x in ns.local_ranks_filter.split(",")}
        except ValueError:
            raise UsageError(f"--local_ranks_filter {ns.local_ranks_filter!r}: expected 0,1,...") \
                from None
    if ns.module and ns.no_python:
        raise UsageError("-m/--module and --no_python exclude each other")
    if ns.as_torch and ns.no_python:
        raise UsageError("--as-torch runs Python workers; it excludes --no_python")
    if ns.as_torch:
        from ..as_torch import notice as as_torch_notice
        notice(as_torch_notice())
        cmd = [sys.executable, "-u", "-m", "tensorbrain.as_torch", "--quiet"] + \
            (["-m"] if ns.module else []) + [ns.training_script]
    elif ns.no_python:
        cmd = [ns.training_script]
    elif ns.module:
        cmd = [sys.executable, "-u", "-m", ns.training_script]
    else:
        cmd = [sys.executable, "-u", ns.training_script]
    run_id = ns.rdzv_id or (uuid.uuid4().hex[:12] if ns.standalone or hi == 1 else "")
    return Config(
        min_nodes=lo, max_nodes=hi, nproc=nproc, node_rank=ns.node_rank, master_addr=addr,
        master_port=port, standalone=ns.standalone, run_id=run_id, max_restarts=ns.max_restarts,
        monitor_interval=ns.monitor_interval, stop_timeout=ns.stop_timeout,
        join_timeout=join_timeout, last_call=last_call,
        redirects=_std_spec(ns.redirects, nproc, "redirects"), tee=_std_spec(ns.tee, nproc, "tee"),
        log_dir=ns.log_dir, shown=shown, cmd=cmd + list(ns.training_script_args),
        elastic=dynamic, watch_stdin=ns.watch_stdin, dup_filters=dup_filters,
        mixed_precision=ns.mixed_precision, role=ns.role, local_addr=ns.local_addr,
        virtual_local_rank=ns.virtual_local_rank, no_prefix=ns.no_prefix, signals=signals)


# ***** workers and their output *****

def _emit(stream, data: bytes):
    _output.emit(stream, data)


def notice(msg: str):
    """Print one of tbrun's notices (``tbrun: ...`` on stderr): a WARNING record of the
    ``tensorbrain.distributed.run`` logger, shown unless ``TB_LOG_LEVEL`` hides it.

    Args:
        msg: the text.
    """
    _notices().warning(msg)  # a WARNING record of tensorbrain.distributed.run (TB_LOG_LEVEL)


def _notices():
    from .._logging import prefixed_logger
    return prefixed_logger("tensorbrain.distributed.run", _NOTICE,
                           lambda data: _emit(sys.stderr.buffer, data))


def _pdeathsig():
    """preexec_fn: the kernel SIGKILLs the worker if tbrun dies (even by SIGKILL)."""
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
    """One worker process of this node: its ranks, its ``Popen``, the tail of its output and how it ended."""
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


def _pump(pipe, console, prefix: bytes, logf, tail: collections.deque | None, dup=None):
    """Copy a worker pipe: prefixed pieces (ending in a newline or carriage return) to the
    console, raw to the log file (see ``_output``)."""
    _output.pump(pipe, console, prefix, logf, tail, dup)


def _exit_text(code: int) -> str:
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
    removed = []
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


# ***** the agent *****

class Agent:
    """One per node: rendezvous with the other nodes, run the workers, restart or stop them.

    Args:
        cfg: the node's settings (see :func:`parse_args`).
    """

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.workers: list[Worker] = []
        self.store_server: TCPStore | None = None
        self.store: PrefixStore | None = None
        self.restarts = 0  # failures restarted so far (TORCHELASTIC_RESTART_COUNT)
        # rendezvous round: + 1 on every restart and every membership change; elastic nodes
        # other than the store's learn the current one from the store
        self.round = None if cfg.elastic else 0
        self.started = False
        self.multi = cfg.max_nodes > 1
        self.guardian = None  # kills the workers' process groups if tbrun is SIGKILLed
        self.log_root = None
        self.dups = {}
        if any(cfg.redirects.values()) or any(cfg.tee.values()) or cfg.dup_filters:
            self.log_root = cfg.log_dir or tempfile.mkdtemp(prefix="tbrun_logs_")
            if not cfg.log_dir:
                notice(f"worker logs go to {self.log_root}")

    def error_root(self) -> str:
        """Folder for the workers' TORCHELASTIC_ERROR_FILEs (the log folder, else a temporary
        one removed at exit)."""
        if self.log_root:
            return self.log_root
        if getattr(self, "tmp_errors", None) is None:
            self.tmp_errors = tempfile.mkdtemp(prefix="tbrun_errors_")
        return self.tmp_errors

    # ---- store and rendezvous ---------------------------------------------------------------
    def _is_host(self) -> bool:
        if not self.cfg.elastic:
            return self.cfg.node_rank == 0
        return False  # elastic: decided by trying to bind (see _open_store)

    def _open_store(self):
        cfg = self.cfg
        timeout = timedelta(seconds=cfg.join_timeout)
        if self._is_host() or (cfg.elastic and _is_local(cfg.master_addr)):
            try:
                self.store_server = TCPStore(cfg.master_addr, cfg.master_port, None, True, timeout)
            except DistNetworkError:
                if not cfg.elastic:
                    raise
        if self.store_server is not None:
            cfg.master_port = self.store_server.port
            raw = self.store_server
            self.node_rank = 0 if cfg.elastic else cfg.node_rank
            if self.round is None:
                self.round = 0
            if not cfg.run_id:
                cfg.run_id = uuid.uuid4().hex[:12]
            raw.set("tbrun/run_id", cfg.run_id)
        else:
            raw = TCPStore(cfg.master_addr, cfg.master_port, None, False, timeout)
            if not cfg.run_id:
                cfg.run_id = raw.get("tbrun/run_id").decode()
        self.raw_store = raw
        self.store = PrefixStore(f"tbrun/{cfg.run_id}", raw)

    def _rendezvous(self) -> tuple[int, int, int]:
        """Meet the other nodes for this round: (node_rank, rank offset, world size)."""
        cfg = self.cfg
        if not self.multi:
            return 0, 0, cfg.nproc
        me = json.dumps({"host": cfg.local_addr or socket.gethostname(),
                         "nproc": cfg.nproc}).encode()
        if cfg.elastic:
            node_rank, nnodes = self._join_round(me)
            s = PrefixStore(f"rdzv/{self.round}", self.store)
        else:
            s = PrefixStore(f"rdzv/{self.round}", self.store)
            node_rank, nnodes = cfg.node_rank, cfg.max_nodes
            claimed = s.compare_set(f"node/{node_rank}", "", me)
            if claimed != me:
                other = json.loads(claimed)["host"]
                raise DistError(f"node rank {node_rank} is already taken by host {other}; give "
                                f"every node its own --node_rank in 0..{nnodes - 1}")
        keys = [f"node/{r}" for r in range(nnodes)]
        try:
            s.wait(keys, timedelta(seconds=cfg.join_timeout))
        except DistStoreError:
            missing = [r for r in range(nnodes) if not s.check([f"node/{r}"])]
            raise DistStoreError(
                f"node(s) {missing} of {nnodes} did not join within {cfg.join_timeout:g} s "
                f"(rendezvous at {cfg.master_addr}:{cfg.master_port}, round {self.round}); "
                "start tbrun on every node with the same --nnodes/--master_addr/--master_port "
                "and its own --node_rank") from None
        infos = [json.loads(v) for v in s.multi_get(keys)]
        offset = sum(i["nproc"] for i in infos[:node_rank])
        world = sum(i["nproc"] for i in infos)
        self.nnodes = nnodes
        return node_rank, offset, world

    def _join_round(self, me) -> tuple[int, int]:
        """c10d-style: node ranks by arrival through the store, one round at a time.

        The agent serving the store is node 0 and publishes the current round number. A node
        that finds the round closed (or arrives as it closes) asks the running nodes for a new
        round (key ``late``) and joins round + 1; they stop their workers and join it too."""
        cfg = self.cfg
        if self.store_server is not None:
            self.store.set("round", str(self.round))
        elif self.round is None:
            self.round = int(self.store.get("round"))
        while True:
            s = PrefixStore(f"rdzv/{self.round}", self.store)
            if self.store_server is not None:
                node_rank = 0
            elif s.check(["closed"]):
                node_rank = None
            else:
                node_rank = int(s.add("next", 1))
                if node_rank >= cfg.max_nodes:
                    node_rank = None
            if node_rank is not None:
                s.set(f"node/{node_rank}", me)
            n, restarts = self._close_round(s, node_rank)
            if node_rank is not None and node_rank < n:
                self.restarts = restarts
                return node_rank, n
            if n >= cfg.max_nodes:
                raise DistError(f"round {self.round} of run {cfg.run_id} already has the maximum "
                                f"of {cfg.max_nodes} node(s) (--nnodes {cfg.min_nodes}:"
                                f"{cfg.max_nodes}); this node is not needed")
            notice(f"round {self.round} closed with {n} node(s) before this node joined; asking "
                   f"the running nodes to start round {self.round + 1} with it")
            s.add("late", 1)
            self.round += 1

    def _close_round(self, s, node_rank) -> tuple[int, int]:
        """Node 0 decides how many nodes this round has: (nodes, restart count)."""
        cfg = self.cfg
        if node_rank != 0:
            n, restarts = s.get("closed").decode().split()
            return int(n), int(restarts)
        deadline = time.monotonic() + cfg.join_timeout
        last, last_change = 1, time.monotonic()
        while True:
            n = 1 + int(s.add("next", 0))
            if n != last:
                last, last_change = n, time.monotonic()
            now = time.monotonic()
            if n >= cfg.max_nodes or (n >= cfg.min_nodes and now - last_change >= cfg.last_call):
                n = min(n, cfg.max_nodes)
                s.set("closed", f"{n} {self.restarts}")
                return n, self.restarts
            if now > deadline:
                raise DistStoreError(
                    f"node(s) {list(range(n, cfg.min_nodes))} of {cfg.min_nodes} did not join "
                    f"within {cfg.join_timeout:g} s (rendezvous at {cfg.master_addr}:"
                    f"{cfg.master_port}, round {self.round}); start the same tbrun command on "
                    "every node")
            time.sleep(0.05)

    # ---- workers ---------------------------------------------------------------------------
    def _spawn(self, node_rank, offset, world):
        cfg = self.cfg
        base = dict(os.environ)
        if "OMP_NUM_THREADS" not in base and cfg.nproc > 1:
            if not getattr(self, "omp_noticed", False):
                self.omp_noticed = True
                notice(f"setting OMP_NUM_THREADS=1 for each of the {cfg.nproc} workers so they do "
                       "not oversubscribe the cores; set it yourself to override")
            base["OMP_NUM_THREADS"] = "1"
        base.setdefault("PYTHONUNBUFFERED", "1")
        self.workers = []
        # A signal arriving between fork and the Popen assignment would orphan that worker, so
        # the handler defers it until every worker is recorded. (Blocking signals instead would
        # leak the blocked mask into the workers: they would then ignore SIGTERM.)
        self.spawning, self.pending_signal = True, None
        try:
            for lr in range(cfg.nproc):
                rank = offset + lr
                env = dict(base, RANK=str(rank), LOCAL_RANK=str(lr), WORLD_SIZE=str(world),
                           LOCAL_WORLD_SIZE=str(cfg.nproc), GROUP_RANK=str(node_rank),
                           NODE_RANK=str(node_rank), ROLE_RANK=str(rank),
                           ROLE_WORLD_SIZE=str(world), MASTER_ADDR=cfg.master_addr,
                           MASTER_PORT=str(cfg.master_port), TB_USE_AGENT_STORE="1",
                           TB_RESTART_COUNT=str(self.restarts), TB_ROUND=str(self.round),
                           TB_MAX_RESTARTS=str(cfg.max_restarts), TB_RUN_ID=cfg.run_id,
                           TB_RAW_ESCAPE="1")
                env.update(_compat.worker_env(cfg, self, lr, node_rank))
                proc = subprocess.Popen(cfg.cmd, env=env, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        start_new_session=True,
                                        preexec_fn=_pdeathsig if _LIBC is not None else None)
                w = Worker(rank, lr, proc, error_file=env["TORCHELASTIC_ERROR_FILE"])
                self.workers.append(w)
                if self.guardian is None:
                    from ._guardian import Guardian
                    self.guardian = Guardian(cfg.run_id)
                self.guardian.add(proc.pid)
                self._start_pumps(w)
        finally:
            self.spawning = False
        if self.pending_signal is not None:
            raise _Stop(self.pending_signal)

    def _start_pumps(self, w: Worker):
        cfg = self.cfg
        prefix = b"" if cfg.no_prefix else f"[rank {w.rank}] ".encode()
        shown = cfg.shown is None or w.local_rank in cfg.shown
        for bit, pipe, console, name in ((1, w.proc.stdout, sys.stdout.buffer, "stdout"),
                                         (2, w.proc.stderr, sys.stderr.buffer, "stderr")):
            redirect, tee = cfg.redirects[w.local_rank] & bit, cfg.tee[w.local_rank] & bit
            logf = None
            if (redirect or tee) and self.log_root:
                d = os.path.join(self.log_root, cfg.run_id, f"attempt_{self.round}",
                                 str(w.local_rank))
                os.makedirs(d, exist_ok=True)
                logf = open(os.path.join(d, f"{name}.log"), "wb")
                w.files.append(logf)
            out = console if shown and not redirect else None
            t = threading.Thread(target=_pump, args=(pipe, out, prefix, logf,
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

    # ---- one attempt -----------------------------------------------------------------------
    def _monitor(self, node_rank) -> tuple[str, dict | None]:
        """Until this attempt ends: ("done", None) or ("failed", failure description)."""
        cfg = self.cfg
        s = PrefixStore(f"attempt/{self.round}", self.store) if self.multi else None
        rs = PrefixStore(f"rdzv/{self.round}", self.store) if cfg.elastic else None
        local_done = False
        while True:
            time.sleep(cfg.monitor_interval)
            now = time.time()
            for w in self.workers:
                if w.returncode is None and w.proc.poll() is not None:
                    w.returncode, w.ended_at = w.proc.returncode, now
            failed = [w for w in self.workers if w.returncode not in (None, 0)]
            if failed:
                first = min(failed, key=lambda w: (w.ended_at, w.rank))
                for t in first.readers:  # its pipes are at EOF unless a child still holds them
                    t.join(1.0)
                info = dict(node=node_rank, host=socket.gethostname(), rank=first.rank,
                            local_rank=first.local_rank, pid=first.proc.pid,
                            code=first.returncode, tail=list(first.tail)[-10:],
                            error=_compat.read_error_file(first.error_file))
                if s is not None:
                    s.compare_set("failed", "", json.dumps(info))
                self._stop_local(signal.SIGTERM)
                info["tail"] = list(first.tail)[-10:]
                info["others"] = [(w.rank, w.returncode) for w in failed if w is not first]
                return "failed", info
            if not local_done and all(w.returncode == 0 for w in self.workers):
                local_done = True
                if s is None:
                    return "done", None
                s.set(f"done/{node_rank}", "1")
            if s is not None:
                if s.check(["failed"]):
                    info = json.loads(s.get("failed"))
                    self._stop_local(signal.SIGTERM)
                    return "failed", info
                if local_done and s.check([f"done/{r}" for r in range(self.nnodes)]):
                    return "done", None
            if rs is not None and not local_done and self.nnodes < cfg.max_nodes \
                    and rs.check(["late"]):
                notice(f"a node is waiting to join; stopping the workers to start round "
                       f"{self.round + 1} with it")
                self._stop_local(signal.SIGTERM)
                return "rejoin", None

    def _forget_stopped(self):
        if self.guardian is not None:
            for w in self.workers:
                if w.stopped:
                    self.guardian.forget(w.proc.pid)

    def _stop_local(self, sig):
        stop_workers(self.workers, sig, self.cfg.stop_timeout)
        self._forget_stopped()
        removed = cleanup_shm(self.cfg.run_id)
        if removed:
            notice(f"removed {len(removed)} leftover shared-memory segment(s) of run "
                   f"{self.cfg.run_id}")

    def run(self) -> int:
        """Rendezvous, start the workers and watch them until the job ends, restarting the group
        on failures up to ``max_restarts`` times (and on membership changes when elastic).

        Returns:
            int: the exit status: 0 when every worker exited 0, else 1 (a summary names the failed
            rank, its host and exit code).
        """
        cfg = self.cfg
        self._open_store()
        while True:
            node_rank, offset, world = self._rendezvous()
            if not self.started or cfg.elastic:
                self.started = True
                notice(f"run {cfg.run_id}: node {node_rank}, {cfg.nproc} worker(s) (ranks "
                       f"{offset}..{offset + cfg.nproc - 1} of {world}), store at "
                       f"{cfg.master_addr}:{cfg.master_port}")
            self._spawn(node_rank, offset, world)
            outcome, info = self._monitor(node_rank)
            if outcome == "rejoin":
                self.round += 1
                continue
            if outcome == "done":
                # every worker exited 0; what is left in their process groups (children they
                # started and did not wait for) must not outlive the job either
                stop_workers(self.workers, signal.SIGKILL, 0)
                self._forget_stopped()
                cleanup_shm(cfg.run_id)
                self._goodbye()
                return 0
            if self.restarts < cfg.max_restarts:
                notice(f"{_failure_line(info)}; restarting all workers (restart "
                       f"{self.restarts + 1} of {cfg.max_restarts})")
                self.restarts += 1
                self.round += 1
                continue
            notice(_summary(info, self.restarts, cfg))
            self._goodbye()
            return 1

    def _goodbye(self):
        """Node 0 keeps the store up until every node has read the outcome."""
        if not self.multi:
            return
        try:
            n = self.store.add("bye", 1)
            if self.store_server is not None:
                deadline = time.monotonic() + 10
                while n < self.nnodes and time.monotonic() < deadline:
                    time.sleep(0.05)
                    n = self.store.add("bye", 0)
        except DistError:
            pass

    def close(self, sig=signal.SIGTERM):
        """Stop the workers still running and release the store, log files and temporary folders.

        Args:
            sig: the signal sent to the workers first (SIGKILL follows after the stop timeout).
        """
        if self.workers:
            self._stop_local(sig)
        if self.guardian is not None:
            self.guardian.close()
            self.guardian = None
        for s in (getattr(self, "raw_store", None), self.store_server):
            if s is not None:
                s.close()
        for d in self.dups.values():
            d.close()
        self.dups = {}
        if getattr(self, "tmp_errors", None) is not None:
            import shutil
            shutil.rmtree(self.tmp_errors, ignore_errors=True)
            self.tmp_errors = None


def _failure_line(info) -> str:
    return (f"rank {info['rank']} (local rank {info['local_rank']} on node {info['node']}, "
            f"{info['host']}, pid {info['pid']}) {_exit_text(info['code'])}")


def _summary(info, attempt, cfg) -> str:
    lines = [f"worker failure after {attempt + 1} attempt(s) (max_restarts={cfg.max_restarts}):",
             f"  first failure: {_failure_line(info)}"]
    err = info.get("error")
    if err:
        lines.append(f"  its uncaught exception (TORCHELASTIC_ERROR_FILE): {err['message']}")
        tb_lines = err["traceback"].rstrip("\n").splitlines()[-8:]
        lines += [f"    {t}" for t in tb_lines]
    if info.get("tail"):
        lines.append("  last lines of its stderr:")
        lines += [f"    {t}" for t in info["tail"]]
    else:
        lines.append("  (it wrote nothing to stderr)")
    for rank, code in info.get("others", []):
        lines.append(f"  also: rank {rank} {_exit_text(code)}")
    lines.append("  the other workers were stopped by tbrun")
    return "\n".join(lines)


def _is_local(host: str) -> bool:
    try:
        addrs = {i[4][0] for i in socket.getaddrinfo(host, None)}
    except socket.gaierror:
        return False
    for a in addrs:
        try:
            with socket.socket(socket.AF_INET6 if ":" in a else socket.AF_INET) as s:
                s.bind((a, 0))
            return True
        except OSError:
            continue
    return False


# ***** entry point *****

def main(argv=None) -> int:
    """Console entry point: ``tbrun [options] script [args...]``; returns the exit status.

    Args:
        argv: the arguments after the program name; None for ``sys.argv[1:]``.
    """
    try:
        cfg = parse_args(argv)
    except UsageError as exc:
        print(f"tbrun: error: {exc}", file=sys.stderr)
        return 2
    except _Fanout as fan:
        from ._fanout import run_fanout
        return run_fanout(fan.hosts, fan.ns, fan.argv, fan.script_at, notice)
    warn_placement_overrides(cfg)
    agent = Agent(cfg)

    def on_signal(signum, frame):
        if getattr(agent, "spawning", False):
            agent.pending_signal = signum
            return
        raise _Stop(signum)

    old = {s: signal.signal(s, on_signal) for s in cfg.signals}
    if cfg.watch_stdin:  # started by a --hostfile/-H driver over ssh: its end is ours
        from ._fanout import watch_stdin
        watch_stdin(lambda: os.kill(os.getpid(), signal.SIGTERM))
    try:
        try:
            return agent.run()
        except _Stop as stop:
            name = signal.Signals(stop.signum).name
            notice(f"received {name}; stopping {len(agent.workers)} worker(s)")
            # ignore repeats while stopping so the cleanup itself cannot be interrupted
            for s in old:
                signal.signal(s, signal.SIG_IGN)
            agent.close(stop.signum)
            return 128 + stop.signum
        except (DistError, OSError) as exc:
            notice(f"error: {exc}")
            for s in old:
                signal.signal(s, signal.SIG_IGN)
            agent.close()
            return 1
    finally:
        agent.close()
        for s, h in old.items():
            signal.signal(s, h)


#: variables tbrun sets for every worker (so values already in its environment are overridden)
PLACEMENT_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                  "NODE_RANK", "MASTER_ADDR", "MASTER_PORT")


def warn_placement_overrides(cfg, env=None) -> list:
    """Warn when placement variables tbrun will override are already set: exporting
    RANK/WORLD_SIZE/MASTER_PORT and then running ``tbrun --nproc_per_node 4`` on two machines
    used to end with rc 0 and each machine training alone. Returns the names warned about.

    Args:
        cfg: the node's settings.
        env: the environment to check; None for ``os.environ``.
    """
    env = os.environ if env is None else env
    found = [k for k in PLACEMENT_VARS if k in env]
    if not found:
        return []
    shown = ", ".join(f"{k}={env[k]}" for k in found)
    world = cfg.nproc * cfg.max_nodes
    notice(f"warning: {shown} {'is' if len(found) == 1 else 'are'} set in tbrun's environment; "
           f"tbrun sets these itself for each worker and ignores these values (this job: "
           f"--nnodes {cfg.max_nodes} x --nproc_per_node {cfg.nproc} = world size {world}, store "
           f"at {cfg.master_addr}:{cfg.master_port}). For several machines pass --nnodes, "
           "--node_rank, --master_addr and --master_port (or --rdzv_endpoint) on each one.")
    if "WORLD_SIZE" in env and env["WORLD_SIZE"].isdigit() and int(env["WORLD_SIZE"]) != world:
        notice(f"warning: WORLD_SIZE={env['WORLD_SIZE']} differs from this job's world size "
               f"{world}: did you mean --nnodes {max(1, int(env['WORLD_SIZE']) // cfg.nproc)}?")
    return found


def _entry():
    sys.exit(main())


if __name__ == "__main__":
    _entry()
