"""One node's launch settings, as tbrun's command line gives them (``run.parse_args``)."""
from __future__ import annotations

import signal
from dataclasses import dataclass, field


@dataclass
class Config:
    """The launch settings of one node, as parsed from the command line by
    :func:`tensorbrain.distributed.run.parse_args`."""
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
    env_placement: bool = False
    extra_env: dict = field(default_factory=dict)
    fault_tolerant: bool = False
    signals: tuple = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
