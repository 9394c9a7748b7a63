"""``tensorbrain.accelerate.utils``: Accelerate's helper names (``set_seed``, ``DistributedType``,
``FullyShardedDataParallelPlugin``) and reading an Accelerate YAML config file."""
from __future__ import annotations

import enum
import json
import os
import random
from dataclasses import dataclass, field

import numpy as np

from .. import _yaml


class DistributedType(str, enum.Enum):
    """How the :class:`~tensorbrain.accelerate.Accelerator` runs (Accelerate's names)."""

    NO = "NO"
    MULTI_CPU = "MULTI_CPU"
    MULTI_GPU = "MULTI_GPU"
    FSDP = "FSDP"
    DEEPSPEED = "DEEPSPEED"


def set_seed(seed: int, device_specific: bool = False, deterministic: bool = False) -> None:
    """Seed Python's ``random``, NumPy and TensorBrain (CPU and CUDA) at once.

    Args:
        seed: the seed.
        device_specific: add the process index to the seed, so every rank draws differently.
        deterministic: accepted for Accelerate compatibility; TensorBrain is deterministic.

    Example:
        >>> from tensorbrain.accelerate.utils import set_seed
        >>> set_seed(42)
    """
    import tensorbrain as tb
    if device_specific:
        seed += int(os.environ.get("RANK", "0"))
    random.seed(seed)
    np.random.seed(seed % 2 ** 32)
    tb.manual_seed(seed)


def rng_states() -> dict:
    """Every random generator's state (Python, NumPy, TensorBrain) as JSON-ready data."""
    from .. import _random
    py = random.getstate()
    return {"python": [py[0], list(py[1]), py[2]],
            "numpy": _np_state(np.random.get_state()),
            "tensorbrain": _random.default_generator.rng.bit_generator.state}  # JSON-able dict


def set_rng_states(states: dict) -> None:
    """Restore the states :func:`rng_states` returned.

    Args:
        states: what :func:`rng_states` returned.
    """
    from .. import _random
    py = states["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    n = states["numpy"]
    np.random.set_state((n[0], np.array(n[1], dtype=np.uint32), n[2], n[3], n[4]))
    _random.default_generator.set_state(states["tensorbrain"])


def _np_state(state):
    return [state[0], [int(v) for v in state[1]], int(state[2]), int(state[3]), float(state[4])]


def write_json(path: str, obj) -> None:
    """Write ``obj`` as JSON to ``path`` atomically (a temporary file, then a rename).

    Args:
        path: the file.
        obj: JSON-ready data.
    """
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


@dataclass
class FullyShardedDataParallelPlugin:
    """Ask :meth:`Accelerator.prepare` to wrap the model in FSDP instead of DDP.

    Args:
        sharding_strategy: a ``ShardingStrategy`` or its name ("FULL_SHARD", "SHARD_GRAD_OP",
            "NO_SHARD", "HYBRID_SHARD") or Accelerate's number (1-4).
        cpu_offload: True, or a ``CPUOffload``: keep the shards on the CPU.
        use_orig_params: passed to FSDP.
    """

    sharding_strategy: object = "FULL_SHARD"
    cpu_offload: object = False
    use_orig_params: bool = False
    extra: dict = field(default_factory=dict)

    def fsdp_kwargs(self) -> dict:
        """The keyword arguments for ``FullyShardedDataParallel``."""
        from ..distributed.fsdp import CPUOffload, ShardingStrategy
        strategy = self.sharding_strategy
        if isinstance(strategy, int) or (isinstance(strategy, str) and strategy.isdigit()):
            strategy = ["FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD"][int(strategy) - 1]
        if isinstance(strategy, str):
            if strategy not in ShardingStrategy.__members__:
                raise ValueError(f"fsdp sharding_strategy {strategy!r} is not one of "
                                 f"{sorted(ShardingStrategy.__members__)}")
            strategy = ShardingStrategy[strategy]
        offload = self.cpu_offload
        if not isinstance(offload, CPUOffload):
            offload = CPUOffload(offload_params=bool(offload))
        return {"sharding_strategy": strategy, "cpu_offload": offload,
                "use_orig_params": bool(self.use_orig_params)}


# ---- kwargs handlers and the project configuration ------------------------------------------

class KwargsHandler:
    """Accelerate's base of the ``kwargs_handlers``: a dataclass whose non-default fields are
    passed on to the object it configures."""

    def to_kwargs(self) -> dict:
        """The fields that differ from their defaults."""
        default = type(self)()
        return {k: v for k, v in vars(self).items() if getattr(default, k) != v}


@dataclass
class DistributedDataParallelKwargs(KwargsHandler):
    """Keywords for the ``DistributedDataParallel`` wrapper ``prepare`` builds."""

    dim: int = 0
    broadcast_buffers: bool = True
    bucket_cap_mb: int = 25
    find_unused_parameters: bool = False
    check_reduction: bool = False
    gradient_as_bucket_view: bool = False
    static_graph: bool = False


@dataclass
class InitProcessGroupKwargs(KwargsHandler):
    """Keywords for ``init_process_group`` (``timeout`` is the usual one)."""

    backend: str | None = "nccl"
    init_method: str | None = None
    timeout: object = None


@dataclass
class GradScalerKwargs(KwargsHandler):
    """Keywords for the fp16 ``GradScaler``."""

    init_scale: float = 65536.0
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000
    enabled: bool = True


@dataclass
class ProjectConfiguration:
    """Where ``save_state`` writes: with ``automatic_checkpoint_naming``, each call without a
    folder writes ``project_dir/checkpoints/checkpoint_<iteration>`` (keeping the newest
    ``total_limit``), and ``load_state()`` reads the newest.

    Args:
        project_dir: the project folder.
        logging_dir: accepted (trackers are not supported).
        automatic_checkpoint_naming: name the checkpoint folders automatically.
        total_limit: how many automatic checkpoints to keep.
        iteration: the next automatic checkpoint's number.
        save_on_each_node: accepted (one machine writes).
    """

    project_dir: str | None = None
    logging_dir: str | None = None
    automatic_checkpoint_naming: bool = False
    total_limit: int | None = None
    iteration: int = 0
    save_on_each_node: bool = False

    def set_directories(self, project_dir: str | None = None) -> None:
        """Set ``project_dir`` (and ``logging_dir`` when unset).

        Args:
            project_dir: the project folder.
        """
        self.project_dir = project_dir
        if self.logging_dir is None:
            self.logging_dir = project_dir


# ---- Accelerate's YAML config file ------------------------------------------------------------

_CONFIG_KEYS = {"compute_environment", "distributed_type", "num_processes", "mixed_precision",
                "fsdp_config", "gradient_accumulation_steps", "use_cpu", "machine_rank",
                "num_machines", "main_process_ip", "main_process_port", "main_training_function",
                "rdzv_backend", "same_network", "tpu_env", "tpu_use_cluster", "tpu_use_sudo",
                "downcast_bf16", "debug", "gpu_ids", "enable_cpu_affinity", "deepspeed_config",
                "dynamo_config", "megatron_lm_config", "ipex_config", "mpirun_config"}


parse_yaml = _yaml.parse


def load_config_from_file(path: str) -> dict:
    """Read an Accelerate config file (``accelerate config`` writes them; YAML or JSON).

    Args:
        path: the file.

    Returns:
        The settings as a dict (``distributed_type``, ``num_processes``, ``mixed_precision``,
        ``fsdp_config``, ...).

    Raises:
        ValueError: an unknown top-level key (named), or a ``distributed_type`` / ``mixed_precision``
            TensorBrain does not run.
    """
    with open(path) as f:
        text = f.read()
    config = json.loads(text) if path.endswith(".json") else parse_yaml(text)
    unknown = sorted(set(config) - _CONFIG_KEYS)
    if unknown:
        raise ValueError(f"accelerate config {path}: unknown key(s) {unknown}; known keys are "
                         f"{sorted(_CONFIG_KEYS)}")
    kind = str(config.get("distributed_type", "NO")).upper()
    if kind not in ("NO", "MULTI_CPU", "MULTI_GPU", "FSDP"):
        raise ValueError(f"accelerate config {path}: distributed_type {kind!r} is not supported "
                         f"by tensorbrain.accelerate (use NO, MULTI_CPU, MULTI_GPU or FSDP; for "
                         f"DeepSpeed use tensorbrain.deepspeed directly)")
    precision = str(config.get("mixed_precision", "no")).lower()
    if precision not in ("no", "fp16", "bf16"):
        raise ValueError(f"accelerate config {path}: mixed_precision {precision!r} is not one "
                         f"of 'no', 'fp16', 'bf16'")
    return config


def fsdp_plugin_from_config(fsdp_config: dict) -> FullyShardedDataParallelPlugin:
    """A :class:`FullyShardedDataParallelPlugin` from a config file's ``fsdp_config`` section.

    Args:
        fsdp_config: the section (``fsdp_sharding_strategy``, ``fsdp_offload_params``,
            ``fsdp_use_orig_params``).
    """
    return FullyShardedDataParallelPlugin(
        sharding_strategy=fsdp_config.get("fsdp_sharding_strategy", "FULL_SHARD"),
        cpu_offload=bool(fsdp_config.get("fsdp_offload_params", False)),
        use_orig_params=bool(fsdp_config.get("fsdp_use_orig_params", False)))


__all__ = ["DistributedDataParallelKwargs", "DistributedType", "FullyShardedDataParallelPlugin",
           "GradScalerKwargs", "InitProcessGroupKwargs", "KwargsHandler", "ProjectConfiguration",
           "fsdp_plugin_from_config",
           "load_config_from_file", "parse_yaml", "rng_states", "set_rng_states", "set_seed"]
