"""DeepSpeed-style checkpoint folders: ``save_dir/tag/`` with the model states (rank 0), one
optimizer file per rank, and a ``latest`` file naming the tag. Files are safetensors/JSON,
written atomically."""
from __future__ import annotations

import json
import os

MODEL = "mp_rank_00_model_states.safetensors"


def _optim_file(rank: int) -> str:
    return f"zero_pp_rank_{rank}_mp_rank_00_optim_states.safetensors"


def _write_text(path: str, text: str) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _barrier(engine) -> None:
    if engine.world_size > 1:
        from .. import distributed
        distributed.barrier()


def save(engine, save_dir, tag, client_state, save_latest) -> bool:
    import tensorbrain as tb
    tag = str(tag) if tag is not None else f"global_step{engine.global_steps}"
    folder = os.path.join(str(save_dir), tag)
    os.makedirs(folder, exist_ok=True)
    module_state = engine.full_state_dict()
    if engine.global_rank == 0:
        tb.save({"module": module_state,
                 "lr_scheduler": (engine.lr_scheduler.state_dict()
                                  if engine.lr_scheduler is not None else None),
                 "counters": json.dumps({"global_steps": engine.global_steps,
                                         "global_samples": engine.global_samples,
                                         "micro_steps": engine.micro_steps,
                                         "skipped_steps": engine.skipped_steps}),
                 "loss_scaler": (json.dumps(engine.loss_scaler.state_dict())
                                 if engine.loss_scaler is not None else None),
                 "client_state": client_state or {}}, os.path.join(folder, MODEL))
    local = engine._local_optimizer()
    if local is not engine.optimizer:   # ZeRO-1: the shard's groups get the outer lr (the
        # scheduler set it after the last step; ZeroRedundancyOptimizer copies it only in step)
        for outer, inner in zip(engine.optimizer.param_groups, local.param_groups, strict=True):
            inner.update({k: v for k, v in outer.items() if k != "params"})
    tb.save({"optimizer_state_dict": local.state_dict(),
             "world_size": engine.world_size, "zero_stage": engine.stage},
            os.path.join(folder, _optim_file(engine.global_rank)))
    _barrier(engine)
    if save_latest and engine.global_rank == 0:
        _write_text(os.path.join(str(save_dir), "latest"), tag)
    _barrier(engine)
    return True


def load(engine, load_dir, tag, strict, load_optimizer, load_scheduler, module_only):
    import warnings

    import tensorbrain as tb
    if tag is None:
        latest = os.path.join(str(load_dir), "latest")
        if not os.path.exists(latest):
            warnings.warn(f"Unable to find latest file at {latest}, if trying to load latest "
                          f"checkpoint please pass a tag", stacklevel=3)
            return None, None
        with open(latest) as f:
            tag = f.read().strip()
    folder = os.path.join(str(load_dir), str(tag))
    path = os.path.join(folder, MODEL)
    if not os.path.exists(path):
        raise FileNotFoundError(f"load_checkpoint: {path} does not exist (tag {tag!r})")
    state = tb.load(path, map_location=str(engine.device))
    if engine._sharded():
        from ..distributed.fsdp import FullyShardedDataParallel, StateDictType
        with FullyShardedDataParallel.state_dict_type(engine._wrapped,
                                                      StateDictType.FULL_STATE_DICT):
            engine._wrapped.load_state_dict(state["module"], strict=strict)
    else:
        engine.module.load_state_dict(state["module"], strict=strict)
    if not module_only:
        counters = json.loads(state["counters"])
        for k, v in counters.items():
            setattr(engine, k, v)
        if engine.loss_scaler is not None and state.get("loss_scaler"):
            engine.loss_scaler.load_state_dict(json.loads(state["loss_scaler"]))
        if load_scheduler and engine.lr_scheduler is not None and state.get("lr_scheduler"):
            engine.lr_scheduler.load_state_dict(state["lr_scheduler"])
        if load_optimizer:
            opt_path = os.path.join(folder, _optim_file(engine.global_rank))
            saved = tb.load(opt_path, map_location=str(engine.device))
            if int(saved["world_size"]) != engine.world_size and engine.stage >= 1:
                raise ValueError(f"load_checkpoint: the optimizer states were saved by "
                                 f"{saved['world_size']} ranks at ZeRO stage {saved['zero_stage']}; "
                                 f"this run has {engine.world_size} (resharding is not supported)")
            local = engine._local_optimizer()
            local.load_state_dict(saved["optimizer_state_dict"])
            if local is not engine.optimizer:   # ZeRO-1: the outer groups' lr etc. too
                for outer, inner in zip(engine.optimizer.param_groups, local.param_groups,
                                        strict=True):
                    outer.update({k: v for k, v in inner.items() if k != "params"})
    _barrier(engine)
    return folder, state.get("client_state") or {}
