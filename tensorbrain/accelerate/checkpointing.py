"""``Accelerator``'s model and state methods: unwrap_model, get_state_dict, save_model,
save_state / load_state (one folder of safetensors and JSON files)."""
from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .utils import ProjectConfiguration


class StateMixin:
    """The model and checkpoint methods of :class:`~tensorbrain.accelerate.Accelerator`.

    Requires of the class it is mixed into: ``num_processes``, ``fsdp_plugin``,
    ``project_configuration``, ``project_dir``, ``is_main_process`` and ``wait_for_everyone()``.
    """

    num_processes: int
    fsdp_plugin: Any
    project_configuration: ProjectConfiguration
    if TYPE_CHECKING:
        @property
        def project_dir(self) -> str | None: ...
        @property
        def is_main_process(self) -> bool: ...
        def wait_for_everyone(self) -> None: ...

    def unwrap_model(self, model, keep_fp32_wrapper: bool = True):
        """The user's module inside DDP/FSDP wrappers.

        Args:
            model: a prepared model.
            keep_fp32_wrapper: accepted for Accelerate compatibility.

        Returns:
            The innermost module.
        """
        from .. import nn
        while hasattr(model, "module") and isinstance(model.module, nn.Module):
            model = model.module
        return model

    def get_state_dict(self, model, unwrap: bool = True) -> dict:
        """The model's full state dict (gathered from the shards under FSDP; a collective
        then).

        Args:
            model: a prepared model.
            unwrap: take the state of the unwrapped module (keys without ``module.``).

        Returns:
            The state dict.
        """
        if self.fsdp_plugin is not None and self.num_processes > 1:
            from ..distributed.fsdp import (FullStateDictConfig, FullyShardedDataParallel,
                                            StateDictType)
            cfg = FullStateDictConfig(offload_to_cpu=True, rank0_only=False)
            with FullyShardedDataParallel.state_dict_type(model, StateDictType.FULL_STATE_DICT,
                                                          cfg):
                return model.state_dict()
        return self.unwrap_model(model).state_dict() if unwrap else model.state_dict()

    def save(self, obj, f, safe_serialization: bool = True) -> None:
        """``tb.save`` on the main process only.

        Args:
            obj: what to save (state dicts, numbers, strings...).
            f: the path or binary file.
            safe_serialization: accepted; TensorBrain always writes safetensors.
        """
        import tensorbrain as tb
        if self.is_main_process:
            tb.save(obj, f)

    def save_model(self, model, save_directory, safe_serialization: bool = True,
                   max_shard_size=None) -> None:
        """Write the unwrapped model's weights to ``save_directory/model.safetensors``.

        Args:
            model: a prepared model.
            save_directory: the folder (created).
            safe_serialization: accepted; always safetensors.
            max_shard_size: accepted; one file is written.
        """
        import tensorbrain as tb
        state = self.get_state_dict(model)
        if self.is_main_process:
            os.makedirs(save_directory, exist_ok=True)
            tb.save(state, os.path.join(save_directory, "model.safetensors"))
        self.wait_for_everyone()

    def save_state(self, output_dir=None) -> str:
        """Save models, optimizers, schedulers, the loss scaler, the step counter and every
        process's random states (a collective).

        Args:
            output_dir: the folder (default ``project_dir/checkpoints``; with a
                ``ProjectConfiguration(automatic_checkpoint_naming=True)``
                ``project_dir/checkpoints/checkpoint_<iteration>``, keeping ``total_limit``).

        Returns:
            The folder written.

        Raises:
            ValueError: neither ``output_dir`` nor ``project_dir`` was given, or the automatic
                folder exists already.
        """
        config = self.project_configuration
        if config.automatic_checkpoint_naming:
            if self.project_dir is None:
                raise ValueError("automatic_checkpoint_naming needs a project_dir")
            output_dir = _next_automatic(self, config)
        elif output_dir is None:
            if self.project_dir is None:
                raise ValueError("save_state() needs output_dir (or project_dir on the "
                                 "Accelerator)")
            output_dir = os.path.join(self.project_dir, "checkpoints")
        _save(self, output_dir)
        if config.automatic_checkpoint_naming:
            config.iteration += 1
        return output_dir

    def load_state(self, input_dir=None) -> None:
        """Load what :meth:`save_state` wrote (the same objects must have been prepared).

        Args:
            input_dir: the folder (default ``project_dir/checkpoints``; with automatic naming
                the newest ``checkpoint_<n>`` there, and the next save is ``n + 1``).

        Raises:
            FileNotFoundError: no such folder.
        """
        config = self.project_configuration
        if input_dir is None:
            input_dir = os.path.join(self.project_dir or ".", "checkpoints")
            if config.automatic_checkpoint_naming:
                numbers = _automatic_numbers(input_dir)
                if not numbers:
                    raise FileNotFoundError(f"load_state: no checkpoint_<n> folder in "
                                            f"{input_dir!r}")
                input_dir = os.path.join(input_dir, f"checkpoint_{numbers[-1]}")
                config.iteration = numbers[-1] + 1
        _load(self, input_dir)


def _automatic_numbers(folder: str) -> list:
    """The ``n`` of the ``checkpoint_<n>`` folders in ``folder``, in order."""
    if not os.path.isdir(folder):
        return []
    return sorted(int(name.split("_", 1)[1]) for name in os.listdir(folder)
                  if name.startswith("checkpoint_") and name.split("_", 1)[1].isdigit())


def _next_automatic(acc, config) -> str:
    """``project_dir/checkpoints/checkpoint_<iteration>``, after removing the oldest ones
    beyond ``total_limit`` (main process)."""
    import shutil
    base = os.path.join(acc.project_dir, "checkpoints")
    os.makedirs(base, exist_ok=True)
    numbers = _automatic_numbers(base)
    if config.total_limit is not None and acc.is_main_process:
        for n in numbers[:max(0, len(numbers) + 1 - int(config.total_limit))]:
            shutil.rmtree(os.path.join(base, f"checkpoint_{n}"))
    acc.wait_for_everyone()
    folder = os.path.join(base, f"checkpoint_{config.iteration}")
    if os.path.exists(folder):
        raise ValueError(f"Checkpoint directory {folder} ({config.iteration}) already exists. "
                         f"Please manually override `self.save_iteration` with what iteration "
                         f"to start with.")
    return folder


def _sampler_epoch(acc, loader):
    """The epoch a shuffled loader's next iteration uses; saved mid-epoch, the epoch being
    iterated, so a resumed run (``skip_first_batches``) sees the same order."""
    epoch = getattr(getattr(loader, "_epoch_sampler", None), "epoch", None)
    if epoch is not None and acc.gradient_state.active_dataloader is loader:
        epoch -= 1   # SeedableRandomSampler counts an epoch as soon as its iteration starts
    return epoch


def _files(i: int, kind: str) -> str:
    return f"{kind}.safetensors" if i == 0 else f"{kind}_{i}.safetensors"


def _save(acc, output_dir: str) -> None:
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
                        {"step": acc.step, "num_processes": acc.num_processes,
                         "sampler_epochs": [_sampler_epoch(acc, d) for d in acc._dataloaders]})
    for i, o in enumerate(acc._optimizers):
        if sharded_optim:   # each rank's optimizer holds its own shards
            tb.save(o.state_dict(), os.path.join(
                output_dir, f"optimizer_{i}_rank{acc.process_index}.safetensors"))
        elif acc.is_main_process:
            tb.save(o.state_dict(), os.path.join(output_dir, _files(i, "optimizer")))
    acc._write_json(os.path.join(output_dir, f"random_states_{acc.process_index}.json"),
                    acc._rng_states())
    acc.wait_for_everyone()


def _load(acc, input_dir: str) -> None:
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
        saved = json.load(f)
    acc.step = int(saved["step"])
    # the shuffled loaders go on with the epoch they had reached (their permutation), as
    # Accelerate's restored sampler/generator state does, also without set_epoch calls
    for loader, epoch in zip(acc._dataloaders, saved.get("sampler_epochs", []), strict=False):
        if epoch is not None:
            loader.set_epoch(epoch)
    path = os.path.join(input_dir, f"random_states_{acc.process_index}.json")
    if os.path.exists(path):
        with open(path) as f:
            acc._set_rng_states(json.load(f))
