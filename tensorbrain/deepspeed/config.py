"""Reading and checking a DeepSpeed config (a dict or a JSON file), DeepSpeed's rules."""
from __future__ import annotations

import json
import warnings

#: keys the engine implements
SUPPORTED = {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
             "optimizer", "scheduler", "gradient_clipping", "fp16", "bf16", "zero_optimization",
             "steps_per_print", "zero_allow_untested_optimizer", "seed"}
#: keys that only tune GPU kernels, communication or profiling: accepted with a warning
GPU_ONLY = {"wall_clock_breakdown", "flops_profiler", "activation_checkpointing", "aio",
            "communication_data_type", "prescale_gradients", "gradient_predivide_factor",
            "sparse_gradients", "memory_breakdown", "tensorboard", "wandb", "csv_monitor",
            "comms_logger", "dump_state", "amp", "torch_autocast", "zero_force_ds_cpu_optimizer"}
ZERO_SUPPORTED = {"stage", "offload_optimizer", "offload_param"}
ZERO_GPU_ONLY = {"allgather_partitions", "allgather_bucket_size", "overlap_comm", "reduce_scatter",
                 "reduce_bucket_size", "contiguous_gradients", "sub_group_size",
                 "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold",
                 "stage3_max_live_parameters", "stage3_max_reuse_distance",
                 "stage3_gather_16bit_weights_on_model_save", "round_robin_gradients",
                 "elastic_checkpoint", "load_from_fp32_weights", "cpu_offload",
                 "ignore_unused_parameters", "zero_hpz_partition_size", "zero_quantized_weights",
                 "zero_quantized_gradients", "memory_efficient_linear", "use_multi_rank_bucket_allreduce",
                 "reduce_scatter_dtype", "stage3_gather_fp16_weights_on_model_save", "mics_shard_size"}
FP16_KEYS = {"enabled", "loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis",
             "min_loss_scale", "consecutive_hysteresis", "auto_cast", "fp16_master_weights_and_grads"}
OFFLOAD_KEYS = {"device", "pin_memory", "buffer_count", "buffer_size", "max_in_cpu", "fast_init",
                "nvme_path", "pipeline_read", "pipeline_write", "ratio"}


class DeepSpeedConfigError(ValueError):
    """A DeepSpeed config TensorBrain cannot run, naming the key."""


def load(config) -> dict:
    """``config`` as a dict.

    Args:
        config: a dict (copied), or the path of a JSON file.

    Returns:
        The config dict.

    Raises:
        DeepSpeedConfigError: no config.
    """
    if config is None:
        raise DeepSpeedConfigError("deepspeed.initialize needs config= (a dict or the path of a "
                                   "ds_config.json)")
    if isinstance(config, dict):
        return json.loads(json.dumps(config))   # a private copy
    with open(config) as f:
        return json.load(f)


def _check_keys(section: dict, supported: set, gpu_only: set, where: str,
                ignored: list | None = None) -> None:
    for key in section:
        if key in supported:
            continue
        if key in gpu_only:
            if ignored is not None:
                ignored.append(f"{where}{key}")
            continue
        raise DeepSpeedConfigError(
            f"DeepSpeed config key {where}{key!r} is not supported by tensorbrain.deepspeed "
            f"(supported: {sorted(supported)}); remove it or see docs/deepspeed.md")


def check(cfg: dict, world_size: int) -> dict:
    """Validate ``cfg`` and fill in the batch sizes (DeepSpeed's arithmetic).

    ``train_batch_size = train_micro_batch_size_per_gpu * gradient_accumulation_steps *
    world_size``: any two give the third; inconsistent values raise DeepSpeed's error.

    Args:
        cfg: the config dict (completed in place).
        world_size: the number of processes.

    Returns:
        ``cfg``.

    Raises:
        DeepSpeedConfigError: an unknown key (named), inconsistent batch sizes, fp16 and bf16
            together, an unknown ZeRO stage or offload device.
    """
    ignored: list = []
    _check_keys(cfg, SUPPORTED, GPU_ONLY, "", ignored)
    zero = cfg.setdefault("zero_optimization", {})
    if isinstance(zero, bool):
        zero = cfg["zero_optimization"] = {"stage": 1 if zero else 0}
    _check_keys(zero, ZERO_SUPPORTED, ZERO_GPU_ONLY, "zero_optimization.", ignored)
    if ignored:   # one warning for all of them (a typical ds_config.json has several)
        warnings.warn(f"DeepSpeed config keys {ignored} only tune GPUs/communication or "
                      f"profiling; TensorBrain accepts them and they have no effect",
                      stacklevel=3)
    stage = int(zero.get("stage", 0))
    if stage not in (0, 1, 2, 3):
        raise DeepSpeedConfigError(f"zero_optimization.stage must be 0, 1, 2 or 3, got {stage}")
    for part in ("offload_optimizer", "offload_param"):
        off = zero.get(part)
        if off is None:
            continue
        _check_keys(off, OFFLOAD_KEYS, set(), f"zero_optimization.{part}.")
        device = str(off.get("device", "none")).lower()
        if device not in ("cpu", "none"):
            raise DeepSpeedConfigError(f"zero_optimization.{part}.device {device!r} is not "
                                       f"supported (only 'cpu' or 'none'; NVMe offload is not)")
        if part == "offload_param" and device == "cpu" and stage != 3:
            raise DeepSpeedConfigError("zero_optimization.offload_param needs stage 3 (as in "
                                       f"DeepSpeed), got stage {stage}")
    for part in ("fp16", "bf16"):
        section = cfg.get(part) or {}
        _check_keys(section, FP16_KEYS if part == "fp16" else {"enabled", "immediate_grad_update"},
                    set(), f"{part}.")
    if (cfg.get("fp16") or {}).get("enabled") and (cfg.get("bf16") or {}).get("enabled"):
        raise DeepSpeedConfigError("fp16 and bf16 cannot both be enabled")
    _batch_sizes(cfg, world_size)
    return cfg


def _batch_sizes(cfg: dict, world: int) -> None:
    tbs = cfg.get("train_batch_size")
    mbs = cfg.get("train_micro_batch_size_per_gpu")
    gas = cfg.get("gradient_accumulation_steps")
    if tbs is not None and mbs is not None and gas is not None:
        pass
    elif tbs is not None and mbs is not None:
        gas = tbs // (mbs * world)
    elif tbs is not None and gas is not None:
        mbs = tbs // (gas * world)
    elif mbs is not None and gas is not None:
        tbs = mbs * gas * world
    elif tbs is not None:
        gas, mbs = 1, tbs // world
    elif mbs is not None:
        gas, tbs = 1, mbs * world
    else:
        raise DeepSpeedConfigError("Either train_batch_size or train_micro_batch_size_per_gpu "
                                   "needs to be provided")
    for name, value in (("train_batch_size", tbs), ("train_micro_batch_size_per_gpu", mbs),
                        ("gradient_accumulation_steps", gas)):
        if int(value) <= 0:
            raise DeepSpeedConfigError(f"{name}: {value} has to be greater than 0 (world size "
                                       f"{world})")
    if tbs != mbs * gas * world:
        raise DeepSpeedConfigError(
            f"Check batch related parameters. train_batch_size is not equal to "
            f"micro_batch_per_gpu * gradient_acc_step * world_size {tbs} != {mbs} * {gas} * "
            f"{world}")
    cfg["train_batch_size"], cfg["train_micro_batch_size_per_gpu"] = int(tbs), int(mbs)
    cfg["gradient_accumulation_steps"] = int(gas)
