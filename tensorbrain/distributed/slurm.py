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

nntool's own spelling works as written: a bare ``@slurm_fn``, the configuration given at the call
(``train[config](0.1)``), ``processes_per_task``, and, with ``use_distributed_env=True`` and a
``distributed_launch_command``, the relaunch: each task runs the command followed by this
program's arguments (``sys.argv[1:]``), with ``TB_SLURM_LAUNCHED=1`` set, so the launched
processes reach the same ``train[config](...)`` line and, seeing the variable, call ``train``
directly (nntool's ``NNTOOL_SLURM_HAS_BEEN_SET_UP``)::

    @slurm_fn
    def main(config):
        ...                                  # Accelerator() / init_process_group() here

    config = SlurmConfig(gpus_per_node=4, processes_per_task=4, use_distributed_env=True,
                         distributed_launch_command="tbrun --num_processes {num_processes} "
                         "--num_machines {num_machines} --machine_rank {machine_rank} "
                         "--main_process_ip {main_process_ip} --main_process_port "
                         "{main_process_port} main.py")
    job = main[config](config)

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
import sys
from dataclasses import InitVar, dataclass, field

from . import _env

__all__ = ["SlurmConfig", "SlurmFunction", "SlurmJob", "submit", "slurm_fn",
           "fill_launch_command", "distributed_env"]

#: "run" and "debug" are nntool's in-process modes: here they are "local"
_MODES = ("slurm", "local", "run", "debug")
#: nntool's SlurmConfig names -> ours
_NNTOOL_NAMES = {"num_of_node": "nodes", "slurm_partition": "partition",
                 "slurm_job_name": "job_name"}
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
        nproc_per_node: ``{nproc_per_node}`` in the template (default: ``tasks_per_node x
            processes_per_task`` when that is given, else ``gpus_per_node`` or 1).
        processes_per_task: nntool's field: processes each task's launch command starts (not
            a Slurm option); ``{num_processes}`` is then ``nodes x tasks_per_node x
            processes_per_task``, as nntool computes it.
        mode: ``"slurm"`` (sbatch through submitit) or ``"local"`` (this process, at once;
            nntool's ``"run"`` and ``"debug"`` mean the same).
        extra: more sbatch options for submitit, e.g. ``{"slurm_account": "proj"}``.
        num_of_node, slurm_partition, slurm_job_name: nntool's names of ``nodes``,
            ``partition``, ``job_name``.
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
    processes_per_task: int | None = None
    mode: str = "slurm"
    extra: dict = field(default_factory=dict)
    num_of_node: InitVar[int | None] = None
    slurm_partition: InitVar[str | None] = None
    slurm_job_name: InitVar[str | None] = None

    def __post_init__(self, num_of_node=None, slurm_partition=None, slurm_job_name=None):
        for theirs, value in zip(_NNTOOL_NAMES, (num_of_node, slurm_partition, slurm_job_name)):
            if value is not None:
                setattr(self, _NNTOOL_NAMES[theirs], value)
        if self.mem:  # nntool's examples write "192GB"; sbatch's suffixes are K, M, G, T
            self.mem = re.sub(r"^(\d+)([KMGTkmgt])[Bb]$", r"\1\2", str(self.mem))
        if self.processes_per_task is not None and int(self.processes_per_task) < 1:
            raise ValueError(f"SlurmConfig(processes_per_task={self.processes_per_task}): must "
                             f"be >= 1")
        if self.mode not in _MODES:
            raise ValueError(f"SlurmConfig(mode={self.mode!r}): expected one of {_MODES}")
        for name in ("nodes", "tasks_per_node", "cpus_per_task"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"SlurmConfig({name}={getattr(self, name)}): must be >= 1")
        if self.gpus_per_node < 0:
            raise ValueError(f"SlurmConfig(gpus_per_node={self.gpus_per_node}): must be >= 0")
        self.timeout_min()  # validates `time`

    def launch_nproc_per_node(self) -> int:
        """``{nproc_per_node}`` of the launch command: ``nproc_per_node``, else ``tasks_per_node
        x processes_per_task`` (nntool), else ``gpus_per_node`` or 1."""
        if self.nproc_per_node:
            return int(self.nproc_per_node)
        if self.processes_per_task:
            return int(self.tasks_per_node) * int(self.processes_per_task)
        return self.gpus_per_node or 1

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


def _task(fn, config: SlurmConfig, args, kwargs, argv=None):
    """What each task runs (inside the job). ``argv``: the submitting program's arguments,
    appended to the launch command (nntool's relaunch; see the module doc)."""
    if config.distributed_launch_command:
        cmd = fill_launch_command(config.distributed_launch_command,
                                  nproc_per_node=config.launch_nproc_per_node())
        if argv is not None:
            cmd = " ".join([cmd, *(shlex.quote(a) for a in argv)])
        r = subprocess.run(shlex.split(cmd), env=dict(os.environ, TB_SLURM_LAUNCHED="1"))
        if r.returncode != 0:
            raise RuntimeError(f"{cmd!r} exited with status {r.returncode}")
        return r.returncode
    if config.use_distributed_env:
        os.environ.update(distributed_env())
    return fn(*args, **kwargs)


def submit(fn, config: SlurmConfig, *args, **kwargs) -> SlurmJob:
    """Run ``fn(*args, **kwargs)`` as a job described by ``config``.

    With ``use_distributed_env=True`` and a ``distributed_launch_command``, ``fn`` is run by the
    processes that command launches (nntool's relaunch, module doc), not by the task itself.

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
    relaunch = fn is not None and bool(config.distributed_launch_command) and \
        config.use_distributed_env
    if not relaunch and (fn is None) == (config.distributed_launch_command is None):
        raise ValueError("submit: give a function, or fn=None with "
                         "SlurmConfig(distributed_launch_command=...), not both or neither "
                         "(a function with a launch command needs use_distributed_env=True: "
                         "the launched processes then run it)")
    argv = list(sys.argv[1:]) if relaunch else None
    if config.mode != "slurm":
        job_id = f"local-{next(_local_ids)}"
        try:
            return SlurmJob(job_id, local_result=_task(fn, config, args, kwargs, argv))
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
    job = executor.submit(_task, fn, config, args, kwargs, argv)
    return SlurmJob(job.job_id, str(job.paths.stdout), str(job.paths.stderr), submitit_job=job)


class SlurmFunction:
    """A function that a call submits as a Slurm job (what :func:`slurm_fn` returns).

    ``f[config]`` gives the same function with that configuration (nntool's idiom); calling it
    submits (see :func:`submit`) and returns the :class:`SlurmJob`. In a process started by a
    launch command of nntool's relaunch (``TB_SLURM_LAUNCHED=1``), a call runs the function
    here and returns its value. ``f.run_here(...)`` always runs it here.

    Args:
        fn: the function.
        config: its configuration, or None (give it with ``f[config]``).
    """

    def __init__(self, fn, config: SlurmConfig | None = None):
        functools.update_wrapper(self, fn)
        self.run_here, self.config = fn, config

    def __getitem__(self, config: SlurmConfig) -> SlurmFunction:
        """This function with ``config`` (``main[config](...)``).

        Args:
            config: the job's resources and mode.
        """
        if not isinstance(config, SlurmConfig):
            raise TypeError(f"{self.run_here.__name__}[...] takes a SlurmConfig, got "
                            f"{type(config).__name__}")
        return SlurmFunction(self.run_here, config)

    def __call__(self, *args, **kwargs):
        from .. import _config
        if _config.get("TB_SLURM_LAUNCHED"):
            return self.run_here(*args, **kwargs)
        if self.config is None:
            raise TypeError(f"{self.run_here.__name__}() has no SlurmConfig: call it as "
                            f"{self.run_here.__name__}[config](...) or decorate it with "
                            f"@slurm_fn(config)")
        return submit(self.run_here, self.config, *args, **kwargs)


def slurm_fn(fn_or_config):
    """Make calls of a function submit it as a Slurm job.

    ``@slurm_fn`` (nntool's bare form; configure at the call: ``f[config](...)``) or
    ``@slurm_fn(config)`` (``f(...)`` submits with ``config``).

    Args:
        fn_or_config: the function, or the :class:`SlurmConfig` to decorate with.

    Returns:
        A :class:`SlurmFunction` (bare form), or a decorator that makes one.

    Example:
        >>> @slurm_fn
        ... def add(a, b):
        ...     return a + b
        >>> add[SlurmConfig(mode="local")](2, 3).result()
        5
    """
    if isinstance(fn_or_config, SlurmConfig):
        return lambda fn: SlurmFunction(fn, fn_or_config)
    if not callable(fn_or_config):
        raise TypeError(f"slurm_fn takes a function or a SlurmConfig, got "
                        f"{type(fn_or_config).__name__}")
    return SlurmFunction(fn_or_config)
