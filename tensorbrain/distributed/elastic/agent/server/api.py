"""``torch.distributed.elastic.agent.server.api``: the data an elastic agent keeps about its
workers, with torch's fields, defaults and checks: :class:`WorkerSpec` (what to run and how
often to restart it), :class:`Worker`, :class:`WorkerGroup`, :class:`WorkerState` and
:class:`RunResult`. Programs that subclass torch's agent build and read these; TensorBrain's own
agent is ``tbrun`` (see docs/launch.md), and torch's ``LocalElasticAgent`` is refused by name.

>>> from tensorbrain.distributed.elastic.agent.server.api import WorkerGroup, WorkerSpec
>>> group = WorkerGroup(WorkerSpec("trainer", 2, None, entrypoint="train.py"))
>>> [str(w) for w in group.workers][1], group.state.value
('local_rank=1,global_rank=-1,role_rank=-1,world_size=-1,role_world_size=-1', 'INIT')
"""
from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


@dataclass
class WorkerSpec:
    """What an agent runs: ``local_world_size`` copies of ``entrypoint`` (a program path or a
    function) with ``args``, restarted up to ``max_restarts`` times, as torch's.

    Args:
        role: the workers' role name.
        local_world_size: workers on this node (> 0).
        rdzv_handler: the rendezvous handler.
        fn: deprecated: the entrypoint function.
        entrypoint: a program (str) or a function.
        args: its arguments.
        max_restarts: restarts allowed.
        monitor_interval: seconds between health checks (> 0).
        master_port: the port of rank 0's store (None: chosen).
        master_addr: rank 0's address (None: chosen).
        local_addr: this node's address.
        event_log_handler: torch's event log handler name.
        numa_options: NUMA binding options.
        duplicate_stdout_filters: lines of stdout copied to the agent's log.
        duplicate_stderr_filters: lines of stderr copied.
        virtual_local_rank: give every worker LOCAL_RANK 0.

    Raises:
        AssertionError: ``local_world_size`` or ``monitor_interval`` not positive, or no
            entrypoint (torch's checks).
    """

    role: str
    local_world_size: int
    rdzv_handler: Any
    fn: Callable | None = None
    entrypoint: Callable | str | None = None
    args: tuple = ()
    max_restarts: int = 3
    monitor_interval: float = 0.1
    master_port: int | None = None
    master_addr: str | None = None
    local_addr: str | None = None
    event_log_handler: str = "null"
    numa_options: Any = None
    duplicate_stdout_filters: list[str] | None = None
    duplicate_stderr_filters: list[str] | None = None
    virtual_local_rank: bool = False

    def __post_init__(self):
        if self.local_world_size <= 0:
            raise AssertionError(f"local_world_size must be positive, got {self.local_world_size}")
        if self.monitor_interval <= 0:
            raise AssertionError(f"monitor_interval must be positive, got {self.monitor_interval}")
        if self.fn:
            warnings.warn("WorkerSpec.fn will be deprecated, please use WorkerSpec.entrypoint "
                          "instead", stacklevel=2)
            self.entrypoint = self.fn
        if not self.entrypoint:
            raise AssertionError("WorkerSpec needs an entrypoint (a program path or a function)")

    def get_entrypoint_name(self) -> str:
        """The program's file name, or the function's qualified name."""
        if isinstance(self.entrypoint, str):
            return os.path.basename(self.entrypoint)
        assert self.entrypoint is not None
        return self.entrypoint.__qualname__


class Worker:
    """One worker process's ranks (-1 until a rendezvous assigns them), as torch's.

    Args:
        local_rank: its rank on this node.
        global_rank: its rank among all workers.
        role_rank: its rank among the workers of its role.
        world_size: all workers.
        role_world_size: the workers of its role.
    """

    __slots__ = ["id", "local_rank", "global_rank", "role_rank", "world_size",
                 "role_world_size"]

    def __init__(self, local_rank: int, global_rank: int = -1, role_rank: int = -1,
                 world_size: int = -1, role_world_size: int = -1):
        self.id: Any = None
        self.local_rank, self.global_rank, self.role_rank = local_rank, global_rank, role_rank
        self.world_size, self.role_world_size = world_size, role_world_size

    def __str__(self):
        return (f"local_rank={self.local_rank},global_rank={self.global_rank}"
                f",role_rank={self.role_rank},world_size={self.world_size}"
                f",role_world_size={self.role_world_size}")

    __repr__ = __str__


class WorkerState(str, Enum):
    """A worker group's state (torch's values)."""

    UNKNOWN = "UNKNOWN"
    INIT = "INIT"
    HEALTHY = "HEALTHY"
    UNHEALTHY = "UNHEALTHY"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"

    @staticmethod
    def is_running(state: WorkerState) -> bool:
        """HEALTHY or UNHEALTHY.

        Args:
            state: the state.
        """
        return state in {WorkerState.HEALTHY, WorkerState.UNHEALTHY}


class WorkerGroup:
    """A spec's workers on this node and what the rendezvous gave them, as torch's.

    Args:
        spec: the :class:`WorkerSpec`.
    """

    __slots__ = ["spec", "workers", "store", "group_rank", "group_world_size", "state",
                 "master_addr", "master_port"]

    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        self.workers = [Worker(local_rank=i) for i in range(spec.local_world_size)]
        self.store: Any = None
        self.group_rank: int | None = None
        self.group_world_size: int | None = None
        self.master_addr: str | None = None
        self.master_port: int | None = None
        self.state = WorkerState.INIT


@dataclass
class RunResult:
    """How a run of the workers ended: the state, each worker's return value (function
    entrypoints) and failures, by global rank.

    Args:
        state: the final :class:`WorkerState`.
        return_values: rank -> value.
        failures: rank -> failure.
    """

    state: WorkerState
    return_values: dict[int, Any] = field(default_factory=dict)
    failures: dict[int, Any] = field(default_factory=dict)

    def is_failed(self) -> bool:
        """Whether the state is FAILED."""
        return self.state == WorkerState.FAILED


__all__ = ["RunResult", "Worker", "WorkerGroup", "WorkerSpec", "WorkerState"]
