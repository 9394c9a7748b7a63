"""Submit a function (or a launch command) to Slurm from Python, or run it here the same way.

nntool's idea, TensorBrain's names::

    from tensorbrain.distributed.slurm import SlurmConfig, slurm_fn

    config = SlurmConfig(partition="gpu", job_name="train", nodes=2, tasks_per_node=1,
                         gpus_per_node=4, time="02:00:00", output="runs/slurm")

    @slurm_fn(config)
    def train(lr):
        ...
        return final_loss

    job = train(0.1)          # submitted with sbatch (through submitit); returns at once
    print(job.job_id, job.state, job.stdout_path)
    loss = job.result()       # waits; a failure in the job raises here with its traceback

``SlurmConfig(mode="local")`` runs the same call in this process (no Slurm) and returns an
already finished job, so a script can be tried on a laptop and submitted unchanged.

What is written where: submission goes through `submitit <https://github.com/facebookincubator/
submitit>`_ (``pip install submitit``). submitit pickles the function and its arguments
(with its own pickling dependency; docs/slurm.md names it) into ``output/<job id>_submitted.pkl`` and each task's return value into
``output/<job id>_<task>_result.pkl``, next to the sbatch script and the ``.out``/``.err`` logs.
``output`` must therefore be on a filesystem every node sees, and those files are as trusted as
the code that wrote them (never load another user's folder). This module itself does not
import ``pickle``; it only calls submitit.

With ``use_distributed_env=True`` each task gets torchrun's variables (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``, ``MASTER_ADDR``,
``MASTER_PORT``) from Slurm's before the function runs, so ``init_process_group()`` works in it.
With ``distributed_launch_command`` each task (one per node: set ``tasks_per_node=1``) instead
runs that command with ``{num_processes} {nproc_per_node} {num_machines} {machine_rank}
{main_process_ip} {main_process_port}`` filled from Slurm's variables (see
:func:`fill_launch_command`), e.g. ``"tbrun --nproc_per_node {nproc_per_node} --nnodes
{num_machines} --node_rank {machine_rank} --master_addr {main_process_ip} --master_port
{main_process_port} train.py"``; the function is then not called (pass ``None``).
"""
from __future__ import annotations

import functools
import itertools
import os
import re
import shlex
import subprocess
import traceback
from dataclasses import dataclass, field

from . import _env

__all__ = ["SlurmConfig", "SlurmJob", "submit", "slurm_fn", "fill_launch_command",
           "distributed_env"]

_MODES = ("slurm", "local")
_FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
          "PREEMPTED", "BOOT_FAIL", "DEADLINE"}


def _scontrol_state(job_id: str) -> str:
    """The job's state from slurmctld (works where ``sacct`` has no accounting database)."""
    try:
        r = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "UNKNOWN"
    for word in r.stdout.split():
        if word.startswith("JobState="):
            return word.split("=", 1)[1]
    return "UNKNOWN"
_local_ids = itertools.count(1)


@dataclass
class SlurmConfig:
    """How to run a job.

    Args:
        partition: Slurm partition (``None``: the cluster's default).
        job_name: the job's name in ``squeue``.
        nodes: nodes to allocate.
        tasks_per_node: tasks (processes) per node; each runs the function.
        cpus_per_task: CPU cores per task.
        gpus_per_node: GPUs per node (0: none requested).
        mem: memory per node, Slurm's syntax (``"16G"``, ``"4000M"``); ``None``: default.
        time: time limit: minutes (int) or ``"HH:MM:SS"`` / ``"D-HH:MM:SS"``.
        node_list: run on these nodes (Slurm's ``--nodelist``, e.g. ``"node[1-2]"``).
        output: folder for logs, the sbatch script and submitit's pickles.
        use_distributed_env: set torchrun's variables from Slurm's in each task.
        distributed_launch_command: a command template run by each task instead of the function.
        nproc_per_node: ``{nproc_per_node}`` in the template (default: ``gpus_per_node`` or 1).
        mode: ``"slurm"`` (sbatch through submitit) or ``"local"`` (this process, at once).
        extra: more sbatch options for submitit, e.g. ``{"slurm_account": "proj"}``.
    """
    partition: str | None = None
    job_name: str = "tensorbrain"
    nodes: int = 1
    tasks_per_node: int = 1
    cpus_per_task: int = 1
    gpus_per_node: int = 0
    mem: str | None = None
    time: int | str = 60
    node_list: str | None = None
    output: str = "slurm_jobs"
    use_distributed_env: bool = False
    distributed_launch_command: str | None = None
    nproc_per_node: int | None = None
    mode: str = "slurm"
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.mode not in _MODES:
            raise ValueError(f"SlurmConfig(mode={self.mode!r}): expected one of {_MODES}")
        for name in ("nodes", "tasks_per_node", "cpus_per_task"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"SlurmConfig({name}={getattr(self, name)}): must be >= 1")
        if self.gpus_per_node < 0:
            raise ValueError(f"SlurmConfig(gpus_per_node={self.gpus_per_node}): must be >= 0")
        self.timeout_min()  # validates `time`

    def timeout_min(self) -> int:
        """``time`` in whole minutes (rounded up)."""
        if isinstance(self.time, int):
            if self.time < 1:
                raise ValueError(f"SlurmConfig(time={self.time}): minutes must be >= 1")
            return self.time
        m = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", str(self.time).strip())
        if not m:
            raise ValueError(f"SlurmConfig(time={self.time!r}): expected minutes or "
                             "'HH:MM:SS' / 'D-HH:MM:SS'")
        d, h, mi, s = (int(x or 0) for x in m.groups())
        return max(1, d * 1440 + h * 60 + mi + (1 if s else 0))

    def submitit_parameters(self) -> dict:
        """The parameters given to ``submitit.AutoExecutor.update_parameters``."""
        p = dict(name=self.job_name, nodes=self.nodes, tasks_per_node=self.tasks_per_node,
                 cpus_per_task=self.cpus_per_task, timeout_min=self.timeout_min())
        if self.gpus_per_node:
            p["gpus_per_node"] = self.gpus_per_node
        if self.partition:
            p["slurm_partition"] = self.partition
        if self.mem:
            p["slurm_mem"] = self.mem
        if self.node_list:
            p["slurm_additional_parameters"] = {"nodelist": self.node_list}
        p.update(self.extra)
        return p


class SlurmJob:
    """A submitted (or locally run) job.

    Attributes:
        job_id: Slurm's job id (``"local-N"`` for mode="local").
        stdout_path, stderr_path: the task-0 log files (``None`` for mode="local": output goes
            to this process's own streams).
    """

    def __init__(self, job_id, stdout_path=None, stderr_path=None, *, submitit_job=None,
                 local_result=None, local_error=None):
        self.job_id = str(job_id)
        self.stdout_path, self.stderr_path = stdout_path, stderr_path
        self._job = submitit_job
        self._result, self._error = local_result, local_error

    @property
    def state(self) -> str:
        """Slurm's state name (``PENDING``, ``RUNNING``, ``COMPLETED``, ``FAILED``, ...)."""
        if self._job is None:
            return "FAILED" if self._error is not None else "COMPLETED"
        state = self._job.state  # submitit asks sacct
        if not state or state.startswith("UNKNOWN"):
            state = _scontrol_state(self.job_id)
        return state.split()[0]

    def done(self) -> bool:
        """Whether the job has ended (either way)."""
        return self._job is None or self.state in _FINAL

    def wait(self) -> str:
        """Block until the job ends; returns its final state."""
        import time
        while not self.done():
            time.sleep(0.5)
        return self.state

    def result(self):
        """Task 0's return value; waits for the job.

        Raises:
            RuntimeError: the job failed (its traceback in the message) or was cancelled.
        """
        if self._job is None:
            if self._error is not None:
                raise RuntimeError(f"local job {self.job_id} failed:\n{self._error}")
            return self._result
        try:
            self.wait()
            # task 0's own result: submitit's job.result() refuses a job of several tasks
            # ("You should use `results()`"), which read as "failed (COMPLETED)"
            return self._job.task(0).result()
        except Exception as exc:  # submitit's UncompletedJobError / FailedJobError
            raise RuntimeError(f"Slurm job {self.job_id} failed ({self.state}): {exc}") from None

    def results(self) -> list:
        """Every task's return value (one per task)."""
        if self._job is None:
            return [self.result()]
        self.wait()
        return self._job.results()

    def cancel(self) -> None:
        """``scancel`` the job."""
        if self._job is not None:
            self._job.cancel(check=False)

    def __repr__(self):
        return f"SlurmJob(job_id={self.job_id!r}, state={self.state!r})"


def distributed_env(env=None) -> dict:
    """torchrun's variables for this Slurm task, from Slurm's (see ``_env.resolve``)."""
    env = os.environ if env is None else env
    p = _env.resolve(env)
    return {"RANK": str(p.rank), "WORLD_SIZE": str(p.world_size), "LOCAL_RANK": str(p.local_rank),
            "LOCAL_WORLD_SIZE": str(p.local_world_size), "GROUP_RANK": str(p.node_rank),
            "NODE_RANK": str(p.node_rank), "MASTER_ADDR": p.master_addr or "127.0.0.1",
            "MASTER_PORT": str(p.master_port)}


def fill_launch_command(template: str, env=None, nproc_per_node: int = 1) -> str:
    """Fill a launch-command template from Slurm's variables.

    Args:
        template: text with ``{num_processes}`` (all nodes), ``{nproc_per_node}``,
            ``{num_machines}``, ``{machine_rank}``, ``{main_process_ip}``,
            ``{main_process_port}``.
        env: the environment (default ``os.environ``).
        nproc_per_node: processes each node's launcher starts.

    Returns:
        The command line.

    Raises:
        KeyError: the template names a field that does not exist.

    Example:
        >>> fill_launch_command("tbrun --nnodes {num_machines} --node_rank {machine_rank} "
        ...     "--master_addr {main_process_ip} --master_port {main_process_port} t.py",
        ...     {"SLURM_JOB_NUM_NODES": "2", "SLURM_NODEID": "1", "SLURM_JOB_ID": "4321",
        ...      "SLURM_JOB_NODELIST": "gpu[07-08]"})
        'tbrun --nnodes 2 --node_rank 1 --master_addr gpu07 --master_port 19321 t.py'
    """
    env = os.environ if env is None else env
    nodes = int(env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES") or 1)
    hosts = _env.expand_nodelist(env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or "")
    job = env.get("SLURM_JOB_ID", "")
    port = env.get("MASTER_PORT") or (str(15000 + int(job[-4:])) if job.isdigit()
                                      else str(_env.DEFAULT_PORT))
    fields = dict(num_processes=nodes * nproc_per_node, nproc_per_node=nproc_per_node,
                  num_machines=nodes, machine_rank=int(env.get("SLURM_NODEID") or 0),
                  main_process_ip=env.get("MASTER_ADDR") or (hosts[0] if hosts else "127.0.0.1"),
                  main_process_port=port)
    try:
        return template.format(**fields)
    except KeyError as exc:
        raise KeyError(f"distributed_launch_command names {exc}; the fields are "
                       f"{sorted(fields)}") from None


def _task(fn, config: SlurmConfig, args, kwargs):
    """What each task runs (inside the job)."""
    if config.distributed_launch_command:
        cmd = fill_launch_command(config.distributed_launch_command,
                                  nproc_per_node=config.nproc_per_node or config.gpus_per_node
                                  or 1)
        r = subprocess.run(shlex.split(cmd))
        if r.returncode != 0:
            raise RuntimeError(f"{cmd!r} exited with status {r.returncode}")
        return r.returncode
    if config.use_distributed_env:
        os.environ.update(distributed_env())
    return fn(*args, **kwargs)


def submit(fn, config: SlurmConfig, *args, **kwargs) -> SlurmJob:
    """Run ``fn(*args, **kwargs)`` as a job described by ``config``.

    Args:
        fn: the function each task runs (``None`` with ``distributed_launch_command``).
        config: the job's resources and mode.
        *args, **kwargs: passed to ``fn``.

    Returns:
        A :class:`SlurmJob`. mode="slurm": submitted, possibly still pending. mode="local":
        already finished.

    Raises:
        ImportError: mode="slurm" without submitit installed.
        ValueError: neither or both of ``fn`` and ``distributed_launch_command``.
    """
    if (fn is None) == (config.distributed_launch_command is None):
        raise ValueError("submit: give a function, or fn=None with "
                         "SlurmConfig(distributed_launch_command=...), not both or neither")
    if config.mode == "local":
        job_id = f"local-{next(_local_ids)}"
        try:
            return SlurmJob(job_id, local_result=_task(fn, config, args, kwargs))
        except Exception:
            return SlurmJob(job_id, local_error=traceback.format_exc())
    try:
        import submitit
    except ImportError:
        raise ImportError("SlurmConfig(mode='slurm') submits through submitit: pip install "
                          "submitit (or use mode='local' to run here)") from None
    os.makedirs(config.output, exist_ok=True)
    executor = submitit.AutoExecutor(folder=config.output, cluster="slurm")
    executor.update_parameters(**config.submitit_parameters())
    job = executor.submit(_task, fn, config, args, kwargs)
    return SlurmJob(job.job_id, str(job.paths.stdout), str(job.paths.stderr), submitit_job=job)


def slurm_fn(config: SlurmConfig):
    """Decorator: calling the function submits it (see :func:`submit`) and returns the job.

    Args:
        config: the job's resources and mode.

    Returns:
        A decorator.
    """
    def wrap(fn):
        @functools.wraps(fn)
        def call(*args, **kwargs) -> SlurmJob:
            return submit(fn, config, *args, **kwargs)
        call.run_here = fn
        return call
    return wrap
