"""Run a function in N real processes joined in a process group (for distributed tests).

``run_workers("pkg.module:function", world_size)`` starts ``world_size`` fresh interpreters on
127.0.0.1 (``python -c``; the function is imported by name in each, nothing is pickled), joins
them in a process group through a TCPStore hosted by the calling process, calls
``function(rank, world_size, *args)`` on every rank, and returns the per-rank return values
(anything the safe object codec carries). A rank that raises, exits, or outlives ``timeout`` makes
``run_workers`` raise `WorkerFailure` naming the rank, with its traceback and the tail of its
output; every process still running is killed first, so nothing is left behind.

``init``: ``"store"`` (default, described above), ``"env"`` (workers call
``init_process_group(backend)`` with ``env://`` on a free port, rank 0 hosting the store, as under
``tbrun``), or ``None`` (RANK/WORLD_SIZE/MASTER_* are set and the function initialises itself).
With ``raise_on_error=False`` the outcomes are returned as `WorkerResult` objects instead.

>>> from tensorbrain.testing.distributed import run_workers
>>> run_workers("tensorbrain.testing.distributed:_example", 2)   # doctest: +SKIP
[[0, 2, 1.0], [1, 2, 1.0]]
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from typing import cast

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class WorkerResult:
    """What one rank of ``run_workers`` returned or how it failed (value, error, output, exit code)."""
    rank: int
    value: object = None
    error_type: str | None = None
    message: str | None = None
    traceback: str | None = None
    exitcode: int | None = None
    output: str = ""
    timed_out: bool = False
    pid: int = 0

    @property
    def ok(self) -> bool:
        """Whether the rank returned a value and exited 0 within the timeout."""
        return self.error_type is None and self.exitcode == 0 and not self.timed_out

    def describe(self) -> str:
        """A readable account of the rank's outcome: the error and traceback, and its output's tail.

        Returns:
            ``"ok"`` or a multi-line description.
        """
        if self.timed_out:
            head = "still running at the harness timeout (killed)"
        elif self.error_type:
            head = f"raised {self.error_type}: {self.message}"
        elif self.exitcode != 0:
            head = f"exited with code {self.exitcode} without a result"
        else:
            return "ok"
        tail = "\n".join(self.output.strip().splitlines()[-15:])
        tb_text = f"\n{self.traceback.rstrip()}" if self.traceback else ""
        return f"rank {self.rank} {head}{tb_text}" + (f"\n--- output tail ---\n{tail}" if tail else "")


class WorkerFailure(AssertionError):
    """One or more ranks failed; ``results`` holds every rank's `WorkerResult`."""

    def __init__(self, results):
        self.results = results
        bad = [r for r in results if not r.ok]
        super().__init__(f"{len(bad)} of {len(results)} ranks failed:\n\n"
                         + "\n\n".join(r.describe() for r in bad))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for tests' rendezvous addresses).

    Returns:
        The port number.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_workers(fn_ref: str, world_size: int, *args, backend: str = "tcp", timeout: float = 60.0,
                group_timeout: float | None = None, env: dict | None = None,
                init: str | None = "store", raise_on_error: bool = True, ranks_env=None):
    """Run ``fn_ref`` ("module:qualname") on ``world_size`` processes; see the module doc."""
    from ..distributed._codec import decode, encode
    from ..distributed.store import TCPStore
    if ":" not in fn_ref:
        raise ValueError(f"fn_ref must be 'module:qualname', got {fn_ref!r}")
    group_timeout = group_timeout if group_timeout is not None else max(5.0, timeout - 5.0)
    tmp = tempfile.mkdtemp(prefix="tb-workers-")
    store = None
    port = free_port()
    if init == "store":
        store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                         timeout=timeout)
        port = store.port
    procs, outs = [], []
    try:
        for rank in range(world_size):
            wenv = dict(os.environ)
            wenv.update({
                "RANK": str(rank), "WORLD_SIZE": str(world_size), "LOCAL_RANK": str(rank),
                "LOCAL_WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1",
                "PYTHONPATH": os.pathsep.join(p for p in (_REPO_ROOT, os.getcwd(),
                                                          wenv.get("PYTHONPATH", "")) if p),
                "TB_TEST_FN": fn_ref, "TB_TEST_BACKEND": backend or "",
                "TB_TEST_INIT": init or "", "TB_TEST_GROUP_TIMEOUT": str(group_timeout),
                "TB_TEST_ARGS": encode(list(args)).hex(),
                "TB_TEST_RESULT": os.path.join(tmp, f"result-{rank}"),
            })
            if env:
                wenv.update({k: str(v) for k, v in env.items()})
            if ranks_env and rank in ranks_env:
                wenv.update({k: str(v) for k, v in ranks_env[rank].items()})
            out = open(os.path.join(tmp, f"out-{rank}.txt"), "w+b")
            outs.append(out)
            procs.append(subprocess.Popen(
                [sys.executable, "-c",
                 "from tensorbrain.testing.distributed import _worker_main; _worker_main()"],
                env=wenv, cwd=os.getcwd(), stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True))
        deadline = time.monotonic() + timeout
        timed_out = set()
        for rank, p in enumerate(procs):
            left = deadline - time.monotonic()
            try:
                p.wait(max(0.01, left))
            except subprocess.TimeoutExpired:
                timed_out.add(rank)
    finally:
        for p in procs:
            if p.poll() is None:
                _kill(p)
        if store is not None:
            store.close()
    results = []
    for rank, p in enumerate(procs):
        outs[rank].seek(0)
        text = outs[rank].read().decode(errors="replace")
        outs[rank].close()
        res = WorkerResult(rank, exitcode=p.returncode, output=text,
                           timed_out=rank in timed_out, pid=p.pid)
        path = os.path.join(tmp, f"result-{rank}")
        if os.path.exists(path):
            with open(path, "rb") as f:
                blob = f.read()
            if blob[:1] == b"{":
                info = json.loads(blob)
                res.error_type, res.message = info["type"], info["message"]
                res.traceback = info["traceback"]
            else:
                res.value = decode(blob)
        elif not res.timed_out and res.exitcode == 0:
            res.error_type, res.message = "NoResult", "the worker exited without a result"
        results.append(res)
    _cleanup(tmp)
    if raise_on_error and not all(r.ok for r in results):
        raise WorkerFailure(results)
    return [r.value for r in results] if raise_on_error else results


def _kill(p) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)  # its own session: the worker and anything it started
    except (ProcessLookupError, PermissionError):
        pass
    try:
        p.wait(5)
    except subprocess.TimeoutExpired:
        p.kill()


def _cleanup(tmp: str) -> None:
    for name in os.listdir(tmp):
        try:
            os.unlink(os.path.join(tmp, name))
        except OSError:
            pass
    try:
        os.rmdir(tmp)
    except OSError:
        pass


def _import(ref: str):
    from ..distributed.rpc._agent import resolve   # "module:qualname", as RPC names functions
    return resolve(ref)


def _worker_main() -> None:
    """Entry point of one worker process (see run_workers)."""
    # A worker stands for a rank started at a terminal, with Python's KeyboardInterrupt handler.
    # A test run that is a background job of a non-interactive shell (`bash .ci/run &`) starts
    # with SIGINT ignored, inherited across exec, and Python then installs no handler: restore
    # it before the group is made (tb's Ctrl-C watcher installs only over Python's handler).
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    from ..distributed._codec import decode, encode
    env = os.environ
    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    result_path = env["TB_TEST_RESULT"]
    code = 0
    try:
        fn = _import(env["TB_TEST_FN"])
        args = cast(tuple, decode(bytes.fromhex(env["TB_TEST_ARGS"])))  # run_workers' tuple
        init = env.get("TB_TEST_INIT")
        backend = env.get("TB_TEST_BACKEND") or None
        gto = float(env["TB_TEST_GROUP_TIMEOUT"])
        import tensorbrain.distributed as dist
        if init == "store":
            store = dist.TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), is_master=False,
                                  timeout=gto)
            dist.init_process_group(backend, store=store, rank=rank, world_size=world,
                                    timeout=gto)
        elif init == "env":
            dist.init_process_group(backend, init_method="env://", timeout=gto)
        try:
            value = fn(rank, world, *args)
        finally:
            if init and dist.is_initialized():
                dist.destroy_process_group()
        blob = encode(value)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        blob = json.dumps({"type": type(exc).__name__, "message": str(exc),
                           "traceback": traceback.format_exc()}).encode()
        code = 1
    with open(result_path + ".tmp", "wb") as f:
        f.write(blob)
    os.replace(result_path + ".tmp", result_path)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown (daemon threads, sockets): fast, no hangs


def _example(rank, world_size):
    import tensorbrain as tb
    import tensorbrain.distributed as dist
    t = tb.tensor([1.0])
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    return [rank, world_size, t.item()]
