"""``tb.distributed.launcher.api`` (``torch.distributed.launcher.api``): run a function (or a
script) as ``nproc_per_node`` workers of one process group, from Python.

``elastic_launch(LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=2), fn)(*args)``
starts the workers with torchrun's variables (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``/``MASTER_PORT``, ``TORCHELASTIC_RUN_ID``...), so ``fn`` calls
``init_process_group()`` as under ``tbrun``, and returns ``{rank: fn's return value}``. A
function travels to the workers by pickle (a local parent/child hand-off, started with
``start_method``, ``"spawn"`` by default, as torch); a script path runs as
``python script *args`` and returns ``{rank: None}``. When a worker fails, the others are
stopped and the whole group is started again, up to ``max_restarts`` times; then
:class:`~tensorbrain.distributed.elastic.multiprocessing.errors.ChildFailedError` names each
failed rank and its error. One node only: several nodes go through ``tbrun``.
"""
from __future__ import annotations

import dataclasses
import multiprocessing
import os
import subprocess
import sys
import time
import traceback
import uuid
from typing import Any
from collections.abc import Callable

from ..elastic.multiprocessing.errors import ChildFailedError
from ..elastic.utils.distributed import get_free_port


@dataclasses.dataclass
class LaunchConfig:
    """torch's launch options; TensorBrain uses ``nproc_per_node``, ``run_id``, ``role``,
    ``max_restarts``, ``monitor_interval`` and ``start_method`` and accepts the rest.

    Args:
        min_nodes: 1 (one node).
        max_nodes: 1 (one node).
        nproc_per_node: the workers to start.
        run_id: the job id (``TORCHELASTIC_RUN_ID``; a fresh one when empty).
        role: the workers' role name (``ROLE_NAME``).
        max_restarts: how often the group is restarted after a failure.
        monitor_interval: seconds between checks of the workers.
        start_method: ``"spawn"``, ``"forkserver"`` or ``"fork"`` (for a function).
    """

    min_nodes: int
    max_nodes: int
    nproc_per_node: int
    logs_specs: Any = None
    run_id: str = ""
    role: str = "default_role"
    rdzv_endpoint: str = ""
    rdzv_backend: str = "etcd"
    rdzv_configs: dict[str, Any] = dataclasses.field(default_factory=dict)
    rdzv_timeout: int = -1
    max_restarts: int = 3
    monitor_interval: float = 0.1
    start_method: str = "spawn"
    log_line_prefix_template: str | None = None
    metrics_cfg: dict[str, str] = dataclasses.field(default_factory=dict)
    local_addr: str | None = None
    event_log_handler: str = "null"
    numa_options: Any = None
    signals_to_handle: str = "SIGTERM,SIGINT,SIGHUP,SIGQUIT"
    duplicate_stdout_filters: list[str] | None = None
    duplicate_stderr_filters: list[str] | None = None
    virtual_local_rank: bool = False
    shutdown_timeout: int | None = None

    def __post_init__(self) -> None:
        if self.rdzv_timeout != -1:
            self.rdzv_configs["timeout"] = self.rdzv_timeout
        self.rdzv_configs.setdefault("timeout", 900)


class elastic_launch:
    """``elastic_launch(config, entrypoint)(*args)``: run ``entrypoint`` as the workers of
    ``config`` and return ``{rank: return value}`` (see the module docstring).

    Args:
        config: the :class:`LaunchConfig`.
        entrypoint: a picklable function, or the path of a Python script.
        health_check_server: accepted for torch's signature.
    """

    def __init__(self, config: LaunchConfig, entrypoint: Callable | str | None,
                 health_check_server: Any = None) -> None:
        self._config, self._entrypoint = config, entrypoint

    def __call__(self, *args: Any) -> dict[int, Any]:
        return launch_agent(self._config, self._entrypoint, list(args))


def _worker(entrypoint: Callable, args: list, env: dict, queue: Any) -> None:
    os.environ.update(env)
    rank = int(env["RANK"])
    try:
        value = entrypoint(*args)
    except BaseException:   # noqa: BLE001 - reported to the parent, then this worker fails
        queue.put((rank, False, traceback.format_exc()))
        sys.exit(1)
    queue.put((rank, True, value))


def launch_agent(config: LaunchConfig, entrypoint: Callable | str | None,
                 args: list) -> dict[int, Any]:
    """Run the workers (what :class:`elastic_launch` calls).

    Args:
        config: the options.
        entrypoint: a function or a script path.
        args: the arguments for it.

    Returns:
        ``{rank: return value}`` (None for a script).

    Raises:
        ValueError: bad options (several nodes, no entrypoint, ``nproc_per_node`` < 1).
        ChildFailedError: workers failed after ``max_restarts`` restarts.
    """
    if config.max_nodes != 1 or config.min_nodes != 1:
        raise ValueError(f"elastic_launch runs one node in TensorBrain (min_nodes=max_nodes=1, "
                         f"got {config.min_nodes}:{config.max_nodes}); start several nodes "
                         f"with tbrun --nnodes")
    if config.nproc_per_node < 1:
        raise ValueError(f"nproc_per_node must be >= 1, got {config.nproc_per_node}")
    if entrypoint is None or not (callable(entrypoint) or isinstance(entrypoint, str)):
        raise ValueError(f"entrypoint must be a function or a script path, got "
                         f"{type(entrypoint).__name__}")
    run_id = config.run_id or uuid.uuid4().hex[:12]
    name = entrypoint if isinstance(entrypoint, str) else \
        getattr(entrypoint, "__qualname__", repr(entrypoint))
    for attempt in range(config.max_restarts + 1):
        results, failures = _run_group(config, entrypoint, args, run_id, attempt)
        if not failures:
            return results
    summary = "".join(f"[rank {r}] {err}\n" for r, err in sorted(failures.items()))
    print(f"elastic_launch: {name} failed after {config.max_restarts + 1} attempt(s):\n"
          f"{summary}", file=sys.stderr, flush=True)   # the summary ChildFailedError refers to
    raise ChildFailedError(name, failures)


def _run_group(config: LaunchConfig, entrypoint: Callable | str, args: list, run_id: str,
               attempt: int) -> tuple[dict[int, Any], dict[int, Any]]:
    n, port = config.nproc_per_node, get_free_port()
    envs = [{"RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(n),
             "LOCAL_WORLD_SIZE": str(n), "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1",
             "ROLE_RANK": str(r), "ROLE_WORLD_SIZE": str(n), "ROLE_NAME": config.role,
             "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
             "TORCHELASTIC_RUN_ID": run_id, "TORCHELASTIC_RESTART_COUNT": str(attempt),
             "TORCHELASTIC_MAX_RESTARTS": str(config.max_restarts)} for r in range(n)]
    results: dict[int, Any] = {}
    failures: dict[int, Any] = {}
    if isinstance(entrypoint, str):
        procs: list[Any] = [subprocess.Popen([sys.executable, "-u", entrypoint, *map(str, args)],
                                             env={**os.environ, **e}) for e in envs]
        codes = _watch(procs, lambda p: p.poll(), config.monitor_interval)
        for r, code in enumerate(codes):
            if code:
                failures[r] = f"exit code {code}"
            else:
                results[r] = None
        return results, failures
    ctx: Any = multiprocessing.get_context(config.start_method)
    queue = ctx.SimpleQueue()
    procs = [ctx.Process(target=_worker, args=(entrypoint, args, e, queue)) for e in envs]
    for p in procs:
        p.start()
    codes = _watch(procs, lambda p: p.exitcode, config.monitor_interval)
    while not queue.empty():
        rank, ok, value = queue.get()
        (results if ok else failures)[rank] = value
    for r, code in enumerate(codes):
        if code and r not in failures:
            failures[r] = f"exit code {code} (no Python error reported)"
    return results, failures


def _watch(procs: list, exitcode: Callable[[Any], int | None], interval: float) -> list:
    """Wait for every worker; once one fails, stop the others (torch's agent does the same)."""
    while True:
        codes = [exitcode(p) for p in procs]
        if all(c is not None for c in codes):
            return codes
        if any(c not in (None, 0) for c in codes):
            time.sleep(1.0)   # a peer's error reaches the others first; then stop them
            for p in procs:
                if exitcode(p) is None:
                    p.terminate()
            for p in procs:
                p.wait() if hasattr(p, "wait") else p.join()
            return [exitcode(p) if exitcode(p) is not None else -15 for p in procs]
        time.sleep(interval)


__all__ = ["LaunchConfig", "elastic_launch", "launch_agent"]
