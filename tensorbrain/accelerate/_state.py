"""``Accelerator.save_state`` / ``load_state``: one folder, safetensors and JSON files."""
from __future__ import annotations

import json
import os


def _files(i: int, kind: str) -> str:
    return f"{kind}.safetensors" if i == 0 else f"{kind}_{i}.safetensors"


def save(acc, output_dir: str) -> None:
    """Write every prepared object's state; each rank writes its own random states."""
    import tensorbrain as tb
    os.makedirs(output_dir, exist_ok=True)
    model_states = [acc.get_state_dict(m) for m in acc._models]
    sharded_optim = acc.fsdp_plugin is not None and acc.num_processes > 1
    if acc.is_main_process:
        for i, state in enumerate(model_states):
            tb.save(state, os.path.join(output_dir, _files(i, "model")))
        for i, s in enumerate(acc._schedulers):
            tb.save(s.state_dict(), os.path.join(output_dir, _files(i, "scheduler")))
        if acc.scaler is not None:
            tb.save(acc.scaler.state_dict(), os.path.join(output_dir, "scaler.safetensors"))
        acc._write_json(os.path.join(output_dir, "accelerator.json"),
                        {"step": acc.step, "num_processes": acc.num_processes})
    for i, o in enumerate(acc._optimizers):
        if sharded_optim:   # each rank's optimizer holds its own shards
            tb.save(o.state_dict(), os.path.join(
                output_dir, f"optimizer_{i}_rank{acc.process_index}.safetensors"))
        elif acc.is_main_process:
            tb.save(o.state_dict(), os.path.join(output_dir, _files(i, "optimizer")))
    acc._write_json(os.path.join(output_dir, f"random_states_{acc.process_index}.json"),
                    acc._rng_states())
    acc.wait_for_everyone()


def load(acc, input_dir: str) -> None:
    """Read what :func:`save` wrote into the prepared objects."""
    import tensorbrain as tb
    if not os.path.isdir(input_dir):
        raise FileNotFoundError(f"load_state: no checkpoint folder {input_dir!r}")
    for i, m in enumerate(acc._models):
        state = tb.load(os.path.join(input_dir, _files(i, "model")), map_location=str(acc.device))
        if acc.fsdp_plugin is not None and acc.num_processes > 1:
            from ..distributed.fsdp import FullyShardedDataParallel, StateDictType
            with FullyShardedDataParallel.state_dict_type(m, StateDictType.FULL_STATE_DICT):
                m.load_state_dict(state)
        else:
            acc.unwrap_model(m).load_state_dict(state)
    sharded_optim = acc.fsdp_plugin is not None and acc.num_processes > 1
    for i, o in enumerate(acc._optimizers):
        name = (f"optimizer_{i}_rank{acc.process_index}.safetensors" if sharded_optim
                else _files(i, "optimizer"))
        o.load_state_dict(tb.load(os.path.join(input_dir, name), map_location=str(acc.device)))
    for i, s in enumerate(acc._schedulers):
        s.load_state_dict(tb.load(os.path.join(input_dir, _files(i, "scheduler"))))
    if acc.scaler is not None:
        acc.scaler.load_state_dict(tb.load(os.path.join(input_dir, "scaler.safetensors")))
    with open(os.path.join(input_dir, "accelerator.json")) as f:
        acc.step = int(json.load(f)["step"])
    path = os.path.join(input_dir, f"random_states_{acc.process_index}.json")
    if os.path.exists(path):
        with open(path) as f:
            acc._set_rng_states(json.load(f))
