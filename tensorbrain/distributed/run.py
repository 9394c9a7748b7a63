"""``tbrun``: start N worker processes per node, watch them, restart or stop them together.

Usage (``tbrun`` is the console script; ``python -m tensorbrain.distributed.run`` is the same)::

    tbrun --nproc_per_node 4 train.py --epochs 3            # one node, 4 workers
    tbrun --standalone --nproc_per_node auto train.py       # free port, fresh run id
    tbrun --nnodes 2 --node_rank 0 --master_addr host0 --nproc_per_node 4 train.py  # on host0
    tbrun --nnodes 2 --node_rank 1 --master_addr host0 --nproc_per_node 4 train.py  # on host1
    tbrun --nproc_per_node 2 -m mypkg.train --lr 0.1        # run a module
    tbrun --nproc_per_node 2 --max_restarts 3 train.py      # restart the group on failure

Everything after the script (or ``-m module``) is passed to every worker unchanged, except
torchrun's macro ``${local_rank}`` (the worker's local rank; ``string.Template``, as torchrun).
``python -m tensorbrain.distributed.launch`` (torch's deprecated launcher) is tbrun that also
hands each worker ``--local-rank=N`` first, unless ``--use-env``.

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

``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` (``MASTER_PORT``) exported before tbrun (the recipe
``export RANK=4 WORLD_SIZE=8 ...; torchrun --nproc_per_node=4 train.py``, where torchrun ignores
them) are taken as ``--nnodes WORLD_SIZE/N --node_rank RANK/N`` and the store's address when they
describe whole nodes and no placement option is given (not inside a worker: ``LOCAL_RANK`` set).
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
``--fault_tolerant``
    Live recovery (workers written with ``tb.distributed.ft``, ``tb.distributed.elastic`` or
    ``hvd.elastic``; workers get ``TB_FAULT_TOLERANT=1``): a worker that fails is replaced
    alone, by a new process that joins the running ones at their next step boundary (at most
    ``--max_restarts`` replacements per node); the other workers are never stopped. With
    ``--nnodes MIN:MAX``, a node that arrives after the round closed starts its workers, which
    join the running ones the same way (no restart of anyone). The launcher's store on node 0
    must outlive the job: it stays up until every node that joined is done. ``RANK`` and
    ``WORLD_SIZE`` describe the first round only; the live ones come from the quorum. Exit
    status 1 if some worker failed with no replacement left, after the others finished.
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
    launch``, DeepSpeed, ``horovodrun``): see docs/launcher.md and ``_launch_compat``; with
    DeepSpeed's (``--num_gpus``, ``--num_nodes``, ``--hostfile`` without ``-np``) each worker
    gets ``--local_rank=N`` first, as ``deepspeed`` passes it (``--no_local_rank``: not).
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
import os
import signal
import sys
import uuid

from . import _launch_compat as _compat

# The agent and the worker processes live in tensorbrain.distributed._launcher; their names stay
# importable from here, where scripts and tests have always found them.
from ._launcher.agent import Agent
from ._launcher.agent import is_local as _is_local
from ._launcher.config import Config
from ._launcher.notice import notice
from ._launcher.workers import Stop as _Stop
from ._launcher.workers import Worker, cleanup_shm, stop_workers  # noqa: F401  (re-exported)
from .errors import DistError

__all__ = ["main", "get_args_parser", "parse_args", "run"]


class UsageError(ValueError):
    """A bad command line or option value; tbrun prints ``tbrun: error: ...`` and exits 2."""
    pass


class _Fanout(Exception):
    """parse_args found a host list naming other hosts: main() runs the ssh fan-out."""

    def __init__(self, hosts, ns, argv, script_at):
        super().__init__("fan-out")
        self.hosts, self.ns, self.argv, self.script_at = hosts, ns, argv, script_at


# ***** options *****

def _add(parser, name, *more, **kw):
    """Add ``--a_b`` and ``--a-b`` for one option (torchrun accepts both)."""
    names = [f"--{name}"]
    if "_" in name:
        names.append(f"--{name.replace('_', '-')}")
    parser.add_argument(*more, *names, dest=name, **kw)


def get_args_parser() -> argparse.ArgumentParser:
    """The ``argparse`` parser of tbrun's command line (torchrun's options, ``--a_b`` and
    ``--a-b``)."""
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
    _add(p, "fault_tolerant", action="store_true",
         help="live recovery: replace a failed worker alone, admit late nodes without restarts")
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
        raise UsageError(f"--nproc_per_node {text!r}: expected a number, cpu, gpu or auto") \
            from None
    if n < 1:
        raise UsageError(f"--nproc_per_node {n}: needs at least 1 worker")
    return n


def parse_args(argv=None) -> Config:
    """Parse tbrun's command line (and Slurm's environment) into a :class:`Config`.

    Args:
        argv (list[str] | None): the arguments after the program name; None for
            ``sys.argv[1:]``.

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
        ns.local_rank_arg = _compat.local_rank_argument(ns, argv[:script_at])
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
        extra_env = _compat.accelerate_env(ns)
    except _compat.CompatError as exc:
        raise UsageError(str(exc)) from None
    if ns.shutdown_timeout is not None:
        ns.stop_timeout = float(ns.shutdown_timeout)
    if ns.run_path:
        ns.no_python = False
    nproc = _nproc(ns.nproc_per_node)
    from_env = _compat.placement_from_env(ns, nproc)
    if from_env:
        notice(from_env)
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
    script_args = list(ns.training_script_args)
    if ns.local_rank_arg:
        if ns.local_rank_arg == "--local_rank":
            notice("DeepSpeed's options: each worker also gets --local_rank=<its local rank> "
                   "before its arguments, as deepspeed passes it (--no_local_rank: not)")
        script_args.insert(0, f"{ns.local_rank_arg}=${{local_rank}}")
    run_id = ns.rdzv_id or (uuid.uuid4().hex[:12] if ns.standalone or hi == 1 else "")
    return Config(
        min_nodes=lo, max_nodes=hi, nproc=nproc, node_rank=ns.node_rank, master_addr=addr,
        master_port=port, standalone=ns.standalone, run_id=run_id, max_restarts=ns.max_restarts,
        monitor_interval=ns.monitor_interval, stop_timeout=ns.stop_timeout,
        join_timeout=join_timeout, last_call=last_call,
        redirects=_std_spec(ns.redirects, nproc, "redirects"), tee=_std_spec(ns.tee, nproc, "tee"),
        log_dir=ns.log_dir, shown=shown, cmd=cmd + script_args, env_placement=bool(from_env), extra_env=extra_env,
        elastic=dynamic, watch_stdin=ns.watch_stdin, dup_filters=dup_filters,
        mixed_precision=ns.mixed_precision, role=ns.role, local_addr=ns.local_addr,
        virtual_local_rank=ns.virtual_local_rank, no_prefix=ns.no_prefix, signals=signals,
        fault_tolerant=ns.fault_tolerant)


# ***** entry point *****

def main(argv=None) -> int:
    """Console entry point: ``tbrun [options] script [args...]``; returns the exit status.

    Args:
        argv (list[str] | None): the arguments after the program name; None for
            ``sys.argv[1:]``.

    Returns:
        int: 0 when every worker exited 0; 1 after a worker failure (a summary names it); 2
        for a usage error; 128 + the signal when tbrun was stopped by one.

    Example:
        >>> from tensorbrain.distributed.run import main
        >>> main(["--nproc_per_node", "0", "train.py"])
        2
    """
    try:
        cfg = parse_args(argv)
    except UsageError as exc:
        print(f"tbrun: error: {exc}", file=sys.stderr)
        return 2
    except _Fanout as fan:
        from ._fanout import run_fanout
        return run_fanout(fan.hosts, fan.ns, fan.argv, fan.script_at, notice)
    return _run(cfg)


def run(args) -> None:
    """Run a parsed command line as tbrun does (``torch.distributed.run.run``).

    Args:
        args (Config | list[str]): :func:`parse_args`'s result, or the arguments to parse.

    Raises:
        TypeError: ``args`` is an ``argparse.Namespace`` of another parser (build it with
            ``tensorbrain.distributed.run.parse_args(argv)``).
        ChildFailedError: a worker failed (its summary names it), as torch's ``run``.
        SystemExit: a usage error (status 2) or a signal (128 + its number).

    Example:
        >>> from tensorbrain.distributed.run import parse_args, run
        >>> cfg = parse_args(["--nproc_per_node", "1", "-m", "json.tool", "--help"])
        >>> cfg.nproc
        1
    """
    if isinstance(args, (list, tuple)):
        try:
            args = parse_args(args)
        except UsageError as exc:
            print(f"tbrun: error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
    if not isinstance(args, Config):
        raise TypeError(f"run(args): args must be what tensorbrain.distributed.run.parse_args(argv) "
                        f"returns (a Config) or the argument list, got {type(args).__name__}")
    code = _run(args)
    if code == 1:
        from .elastic.multiprocessing.errors import ChildFailedError
        raise ChildFailedError(" ".join(args.cmd), {})
    if code:
        raise SystemExit(code)


def _run(cfg) -> int:
    warn_placement_overrides(cfg)
    agent = Agent(cfg)

    def on_signal(signum, frame):
        if agent.group.spawning:  # deferred until every worker forked is recorded
            agent.group.pending_signal = signum
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
    if cfg.env_placement:  # taken as this node's placement (and said so)
        return []
    # the store address tbrun serves anyway is not overridden
    same = {"MASTER_ADDR": cfg.master_addr, "MASTER_PORT": str(cfg.master_port)}
    found = [k for k in PLACEMENT_VARS if k in env and env[k] != same.get(k)]
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
