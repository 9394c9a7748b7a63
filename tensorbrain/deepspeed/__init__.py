"""``tensorbrain.deepspeed``: DeepSpeed's front door (``deepspeed.initialize``) on TensorBrain.

A program written for DeepSpeed runs with ``import deepspeed`` changed to
``import tensorbrain.deepspeed as deepspeed`` (or unchanged under ``python -m
tensorbrain.as_torch`` / ``tbrun --as-torch``). ZeRO stages map onto TensorBrain's DDP,
ZeroRedundancyOptimizer and FSDP; see ``docs/deepspeed.md``.
"""
from __future__ import annotations

from . import lr_schedules
from .comm import init_distributed
from .config import DeepSpeedConfigError
from .engine import DeepSpeedEngine
from .loss_scaler import DynamicLossScaler

__version__ = "0.0.0+tensorbrain"


def initialize(args=None, model=None, optimizer=None, model_parameters=None, training_data=None,
               lr_scheduler=None, distributed_port=29500, mpu=None, dist_init_required=None,
               collate_fn=None, config=None, config_params=None, mesh_param=None):
    """Build the engine (DeepSpeed's ``deepspeed.initialize``).

    Args:
        args: an argparse namespace; its ``deepspeed_config`` names the config when ``config``
            is not given.
        model: the module to train.
        optimizer: a client optimizer (or a callable taking the parameters), unless the config
            has an ``optimizer`` section.
        model_parameters: the parameters (or groups) for the config's optimizer.
        training_data: a Dataset: a DataLoader of ``train_micro_batch_size_per_gpu`` over a
            DistributedSampler is returned for it.
        lr_scheduler: a client scheduler (or a callable taking the optimizer).
        collate_fn: for the returned DataLoader.
        config: a dict or the path of a JSON file (``config_params`` is an older name).

    Returns:
        ``(engine, optimizer, training_dataloader, lr_scheduler)``.

    Raises:
        DeepSpeedConfigError: an unknown config key (named), or inconsistent batch sizes.
        TypeError: a model, optimizer, scheduler or dataset of the real PyTorch (the message
            says to import ``tensorbrain as torch`` or run with ``tbrun --as-torch``).
        ValueError: mpu / mesh_param (model parallelism is not supported), or a client
            optimizer together with a config optimizer.
    """
    from . import config as _config
    if model is None:
        raise ValueError("deepspeed.initialize needs model=")
    from .._real_torch import check_not_pytorch
    for name, obj in (("model", model), ("optimizer", optimizer),
                      ("lr_scheduler", lr_scheduler), ("training_data", training_data)):
        check_not_pytorch(obj, f"deepspeed.initialize({name}=)")
    if mpu is not None or mesh_param is not None:
        raise ValueError("mpu/mesh_param (model parallelism) is not supported by "
                         "tensorbrain.deepspeed; use tensorbrain.distributed.tensor.parallel")
    if config is None:
        config = config_params
    if config is None and args is not None:
        config = getattr(args, "deepspeed_config", None)
    init_distributed()
    from .zero import gather_init_partitioned
    gather_init_partitioned(model)   # parameters built under deepspeed.zero.Init
    from .engine import _world
    rank, world = _world()
    cfg = _config.check(_config.load(config), world)
    engine = DeepSpeedEngine(model, cfg, optimizer=optimizer, model_parameters=model_parameters,
                             lr_scheduler=lr_scheduler)
    loader = None
    if training_data is not None:
        from ..utils.data import DataLoader, DistributedSampler
        sampler = DistributedSampler(training_data, num_replicas=world, rank=rank)
        loader = DataLoader(training_data, batch_size=cfg["train_micro_batch_size_per_gpu"],
                            sampler=sampler, collate_fn=collate_fn)
    return engine, engine.optimizer, loader, engine.lr_scheduler


def add_config_arguments(parser):
    """Add DeepSpeed's ``--deepspeed`` and ``--deepspeed_config`` options to ``parser``.

    Args:
        parser: an ``argparse.ArgumentParser``.

    Returns:
        The parser.
    """
    group = parser.add_argument_group("DeepSpeed", "DeepSpeed configurations")
    group.add_argument("--deepspeed", default=False, action="store_true",
                       help="Enable DeepSpeed (accepted; TensorBrain's engine is always used)")
    group.add_argument("--deepspeed_config", default=None, type=str,
                       help="DeepSpeed json configuration file.")
    return parser


from . import accelerator, comm, zero  # noqa: E402  (deepspeed.comm, .accelerator, .zero)

__all__ = ["DeepSpeedConfigError", "DeepSpeedEngine", "DynamicLossScaler", "accelerator",
           "add_config_arguments", "comm", "init_distributed", "initialize", "lr_schedules", "zero"]
