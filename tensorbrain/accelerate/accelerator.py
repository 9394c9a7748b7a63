"""``Accelerator``: Hugging Face Accelerate's training front door on TensorBrain."""
from __future__ import annotations

import contextlib
import os

from ._wrappers import AcceleratedOptimizer, AcceleratedScheduler
from .collectives import CollectivesMixin, _recurse, _split  # noqa: F401
from .checkpointing import StateMixin
from .data_loader import DataLoaderShard, skip_first_batches
from .utils import (DistributedType, FullyShardedDataParallelPlugin, ProjectConfiguration,
                    fsdp_plugin_from_config, load_config_from_file, rng_states, set_rng_states,
                    write_json)


class GradientState:
    """Whether this step synchronises gradients, and where the active DataLoader is.

    Args:
        num_steps: the gradient accumulation steps.
    """

    def __init__(self, num_steps: int):
        self.num_steps = num_steps
        self.sync_gradients = True
        self.end_of_dataloader = False
        self.active_dataloader = None
        self.remainder = -1

    def begin_dataloader(self, loader) -> None:
        """``loader`` starts an epoch."""
        self.active_dataloader, self.end_of_dataloader = loader, False
        self.remainder = loader.remainder

    def end_dataloader(self, loader) -> None:
        """``loader`` finished its epoch."""
        if self.active_dataloader is loader:
            self.active_dataloader, self.end_of_dataloader = None, False


def _dist():
    from .. import distributed
    return distributed


class Accelerator(CollectivesMixin, StateMixin):
    """One object for device placement, data parallelism, mixed precision and accumulation.

    Under ``tbrun`` (WORLD_SIZE > 1) it joins the process group (``gloo``/tcp on the CPU, nccl on
    GPUs); ``prepare`` wraps the model in DDP (or FSDP with ``fsdp_plugin``), shards DataLoaders
    so process ``i`` gets batches ``i, i+n, ...``, and wraps optimizers and schedulers.

    Args:
        mixed_precision: "no", "fp16" (autocast float16 + dynamic loss scaling) or "bf16".
            Default: ``ACCELERATE_MIXED_PRECISION`` or the config file's, else "no".
        gradient_accumulation_steps: backward passes per optimizer step.
        cpu: run on the CPU even when a GPU is present.
        log_with: only None (trackers are not supported).
        project_dir: default folder for ``save_state``.
        project_config: a ``ProjectConfiguration`` (automatic checkpoint naming).
        kwargs_handlers: ``DistributedDataParallelKwargs`` (passed to DDP),
            ``InitProcessGroupKwargs`` (``timeout``...), ``GradScalerKwargs``.
        split_batches: False (Accelerate's default; see the class doc) or True (each batch of
            the loader is split between processes).
        even_batches: complete the last round so every process gets as many batches.
        fsdp_plugin: a :class:`FullyShardedDataParallelPlugin`.
        config_file: an Accelerate YAML config (default: ``ACCELERATE_CONFIG_FILE`` if set).

    Raises:
        ValueError: an unknown ``mixed_precision``, or a tracker in ``log_with``.

    Example:
        >>> acc = Accelerator(cpu=True)
        >>> acc.num_processes, acc.is_main_process
        (1, True)
    """

    def __init__(self, mixed_precision=None, gradient_accumulation_steps: int = 1,
                 cpu: bool = False, log_with=None, project_dir=None, split_batches: bool = False,
                 even_batches: bool = True, fsdp_plugin=None, step_scheduler_with_optimizer=True,
                 config_file=None, device_placement: bool = True, rng_types=None,
                 kwargs_handlers=None, deepspeed_plugin=None, project_config=None):
        import tensorbrain as tb
        handlers = _handlers(kwargs_handlers)
        config_file = config_file or os.environ.get("ACCELERATE_CONFIG_FILE")
        config = load_config_from_file(config_file) if config_file else {}
        if mixed_precision is None:
            mixed_precision = os.environ.get("ACCELERATE_MIXED_PRECISION",
                                             config.get("mixed_precision", "no"))
        mixed_precision = str(mixed_precision).lower()
        if mixed_precision not in ("no", "fp16", "bf16"):
            raise ValueError(f"mixed_precision must be 'no', 'fp16' or 'bf16', got "
                             f"{mixed_precision!r} (fp8 is not supported by TensorBrain)")
        if log_with not in (None, [], ()):
            raise ValueError(f"log_with={log_with!r}: experiment trackers are not supported by "
                             f"tensorbrain.accelerate; log yourself on the main process")
        if deepspeed_plugin is not None:
            raise ValueError("deepspeed_plugin is not supported by tensorbrain.accelerate; use "
                             "tensorbrain.deepspeed.initialize directly")
        if fsdp_plugin is None and str(config.get("distributed_type", "")).upper() == "FSDP":
            fsdp_plugin = fsdp_plugin_from_config(config.get("fsdp_config") or {})
        if gradient_accumulation_steps == 1 and "gradient_accumulation_steps" in config:
            gradient_accumulation_steps = int(config["gradient_accumulation_steps"])
        if int(gradient_accumulation_steps) < 1:
            raise ValueError(f"gradient_accumulation_steps must be >= 1, got "
                             f"{gradient_accumulation_steps}")
        cpu = cpu or bool(config.get("use_cpu", False))
        dist = _dist()
        world = int(os.environ.get("WORLD_SIZE", "1"))
        self._owns_group = False
        if world > 1 and not dist.is_initialized():
            init = handlers.get("InitProcessGroupKwargs")
            init_kwargs = init.to_kwargs() if init is not None else {}
            init_kwargs.pop("backend", None)   # chosen from the device, as without the handler
            dist.init_process_group(**init_kwargs)
            self._owns_group = True
        self.num_processes = dist.get_world_size() if dist.is_initialized() else 1
        self.process_index = dist.get_rank() if dist.is_initialized() else 0
        self.local_process_index = int(os.environ.get("LOCAL_RANK", self.process_index))
        expected = config.get("num_processes")
        if expected is not None and int(expected) != self.num_processes and self.num_processes > 1:
            raise ValueError(f"accelerate config {config_file}: num_processes={expected} but "
                             f"this run has {self.num_processes} processes")
        use_cuda = not cpu and tb.cuda.is_available()
        self.device = tb.device(f"cuda:{self.local_process_index % tb.cuda.device_count()}"
                                if use_cuda else "cpu")
        self.mixed_precision = mixed_precision
        self.gradient_accumulation_steps = int(gradient_accumulation_steps)
        self.split_batches = bool(split_batches)
        self.even_batches = bool(even_batches)
        self.step_scheduler_with_optimizer = step_scheduler_with_optimizer
        self.device_placement = device_placement
        self.project_configuration = project_config or ProjectConfiguration()
        if project_dir is not None:
            self.project_configuration.set_directories(project_dir)
        self._ddp_kwargs = handlers["DistributedDataParallelKwargs"].to_kwargs() \
            if "DistributedDataParallelKwargs" in handlers else {}
        self.fsdp_plugin = fsdp_plugin
        if fsdp_plugin is not None and not isinstance(fsdp_plugin, FullyShardedDataParallelPlugin):
            raise TypeError(f"fsdp_plugin must be a FullyShardedDataParallelPlugin, got "
                            f"{type(fsdp_plugin).__name__}")
        if self.num_processes == 1:
            self.distributed_type = DistributedType.NO
        elif fsdp_plugin is not None:
            self.distributed_type = DistributedType.FSDP
        else:
            self.distributed_type = DistributedType.MULTI_GPU if use_cuda else \
                DistributedType.MULTI_CPU
        self.gradient_state = GradientState(self.gradient_accumulation_steps)
        scaler = handlers["GradScalerKwargs"].to_kwargs() if "GradScalerKwargs" in handlers else {}
        self.scaler = tb.amp.GradScaler(self.device.type, **scaler) \
            if mixed_precision == "fp16" else None
        self.step = 0
        self._models: list = []
        self._optimizers: list = []
        self._schedulers: list = []
        self._dataloaders: list = []

    # ---- who am I ---------------------------------------------------------------------------
    @property
    def project_dir(self):
        """The project folder (``project_dir=`` or the ``ProjectConfiguration``'s)."""
        return self.project_configuration.project_dir

    @property
    def is_main_process(self) -> bool:
        """True on global rank 0."""
        return self.process_index == 0

    @property
    def is_local_main_process(self) -> bool:
        """True on local rank 0 (the first process of each machine)."""
        return self.local_process_index == 0

    @property
    def is_last_process(self) -> bool:
        """True on the last rank."""
        return self.process_index == self.num_processes - 1

    @property
    def sync_gradients(self) -> bool:
        """Whether the current step ends an accumulation cycle."""
        return self.gradient_state.sync_gradients

    @property
    def optimizer_step_was_skipped(self) -> bool:
        """Whether an optimizer skipped its last step (fp16 overflow)."""
        return any(o.step_was_skipped for o in self._optimizers)

    @property
    def use_distributed(self) -> bool:
        """Whether more than one process runs."""
        return self.num_processes > 1

    def print(self, *args, **kwargs) -> None:
        """``print`` on the local main process only.

        Args:
            *args: what ``print`` takes.
            **kwargs: ``print``'s keywords (``sep``, ``end``, ``flush``...).
        """
        if self.is_local_main_process:
            print(*args, **kwargs)

    def wait_for_everyone(self) -> None:
        """A barrier across every process."""
        if self.num_processes > 1:
            _dist().barrier()

    @contextlib.contextmanager
    def main_process_first(self):
        """The main process runs the block first, then the others (e.g. to download once)."""
        if not self.is_main_process:
            self.wait_for_everyone()
        yield
        if self.is_main_process:
            self.wait_for_everyone()

    @contextlib.contextmanager
    def local_main_process_first(self):
        """As :meth:`main_process_first`, per machine (here: the same barrier)."""
        with self.main_process_first():
            yield

    @contextlib.contextmanager
    def split_between_processes(self, inputs, apply_padding: bool = False):
        """Yield this process's contiguous share of a list/tuple/tensor/dict of them.

        Args:
            inputs: a list, tuple, tensor (split on dim 0) or a dict of them.
            apply_padding: repeat the last element of the shorter shares so every process gets
                the same length (the first ``len % n`` processes get one element more).

        Example:
            >>> acc = Accelerator(cpu=True)
            >>> with acc.split_between_processes([1, 2, 3]) as mine:
            ...     print(mine)
            [1, 2, 3]
        """
        yield _split(inputs, self.num_processes, self.process_index, apply_padding)

    # ---- preparing ------------------------------------------------------------------------
    def prepare(self, *args, device_placement=None):
        """Prepare models, optimizers, DataLoaders and schedulers, in any order.

        Args:
            *args: modules (moved to the device, wrapped in DDP/FSDP with several processes),
                optimizers (stepping at accumulation boundaries), DataLoaders (sharded: process
                ``i`` gets batches ``i, i+n, ...``), LR schedulers; anything else is returned as is.
            device_placement: accepted for Accelerate compatibility.

        Returns:
            The prepared objects in the same order (one object when one was given).

        Raises:
            ValueError: with FSDP, an optimizer that cannot be pointed at the flat shards.
            TypeError: an object of the real PyTorch (a ``torch.nn.Module``, optimizer,
                DataLoader, ...): it would be returned unprepared and every process would
                train alone; the message says what to change.
        """
        from .. import nn, optim
        from .._real_torch import check_not_pytorch
        for a in args:
            check_not_pytorch(a, "Accelerator.prepare")
        from ..utils.data import DataLoader
        models = [a for a in args if isinstance(a, nn.Module)]
        param_ids = {id(m): {id(p) for p in m.parameters()} for m in models}
        prepared_models = {id(m): self.prepare_model(m) for m in models}
        out = []
        for a in args:
            if isinstance(a, nn.Module):
                out.append(prepared_models[id(a)])
            elif isinstance(a, optim.Optimizer):
                self._retarget(a, models, prepared_models, param_ids)
                out.append(self.prepare_optimizer(a))
            elif isinstance(a, DataLoader):
                out.append(self.prepare_data_loader(a))
            else:
                out.append(a)
        for i, a in enumerate(out):
            if _is_scheduler(a):
                out[i] = self.prepare_scheduler(a)
        return out[0] if len(out) == 1 else tuple(out)

    def prepare_model(self, model, device_placement=None, evaluation_mode: bool = False):
        """Move ``model`` to the device and wrap it in DDP/FSDP when several processes run.

        Args:
            model: the module.
            device_placement: move it to :attr:`device` (default: the Accelerator's setting).
            evaluation_mode: do not wrap it (inference only).

        Returns:
            The prepared module.
        """
        place = self.device_placement if device_placement is None else device_placement
        if place:
            model = model.to(self.device)
        if self.num_processes > 1 and not evaluation_mode:
            if self.fsdp_plugin is not None:
                from ..distributed.fsdp import FullyShardedDataParallel
                model = FullyShardedDataParallel(model, **self.fsdp_plugin.fsdp_kwargs())
            else:
                from ..nn.parallel import DistributedDataParallel
                model = DistributedDataParallel(model, **self._ddp_kwargs)
        if self.mixed_precision != "no":
            model.forward = _autocast_forward(model.forward, self.device.type,
                                              self.mixed_precision)
        self._models.append(model)
        return model

    def _retarget(self, optimizer, models, prepared, param_ids) -> None:
        """FSDP replaces the parameters: point an optimizer at the wrapped model's."""
        for m in models:
            wrapped = prepared[id(m)]
            if self.fsdp_plugin is None or wrapped is m or self.fsdp_plugin.use_orig_params:
                continue
            old = param_ids[id(m)]
            mine = [p for g in optimizer.param_groups for p in g["params"] if id(p) in old]
            if not mine:
                continue
            if len(optimizer.param_groups) != 1 or optimizer.state:
                raise ValueError("with FSDP, prepare() can retarget only an optimizer with one "
                                 "parameter group and no state yet; create the optimizer from "
                                 "the prepared model's parameters() instead")
            optimizer.param_groups[0]["params"] = list(wrapped.parameters())

    def prepare_optimizer(self, optimizer, device_placement=None):
        """Wrap ``optimizer`` so it steps only at accumulation boundaries.

        Args:
            optimizer: the optimizer.
            device_placement: accepted for Accelerate compatibility.

        Returns:
            An ``AcceleratedOptimizer``.
        """
        wrapped = AcceleratedOptimizer(optimizer, self.gradient_state, self.scaler)
        self._optimizers.append(wrapped)
        return wrapped

    def prepare_scheduler(self, scheduler):
        """Wrap ``scheduler`` so it steps with the optimizer (see AcceleratedScheduler).

        Args:
            scheduler: the LR scheduler.

        Returns:
            An ``AcceleratedScheduler``.
        """
        wrapped = AcceleratedScheduler(scheduler, self._optimizers, self.gradient_state,
                                       self.num_processes, self.split_batches,
                                       self.step_scheduler_with_optimizer)
        self._schedulers.append(wrapped)
        return wrapped

    def prepare_data_loader(self, data_loader, device_placement=None):
        """Shard ``data_loader``: process ``i`` gets batches ``i, i+n, ...``.

        Args:
            data_loader: a map-style DataLoader.
            device_placement: accepted for Accelerate compatibility.

        Returns:
            A ``DataLoaderShard``.

        Raises:
            ValueError: ``split_batches=True``, or an IterableDataset loader (not supported).
        """
        if self.split_batches:
            raise ValueError("split_batches=True is not supported by tensorbrain.accelerate yet; "
                             "use the default (each process gets whole batches)")
        if data_loader.batch_sampler is None:
            raise ValueError("prepare(): DataLoaders over an IterableDataset (or with "
                             "batch_size=None) are not supported by tensorbrain.accelerate yet; "
                             "use a map-style Dataset with a batch_size")
        seed = _shared_seed(self.num_processes)
        loader = DataLoaderShard(data_loader, self.gradient_state, self.num_processes,
                                 self.process_index, self.even_batches, seed)
        self._dataloaders.append(loader)
        return loader

    def skip_first_batches(self, dataloader, num_batches: int = 0):
        """``dataloader`` without its first ``num_batches`` batches (resuming mid-epoch).

        Args:
            dataloader: a prepared DataLoader.
            num_batches: this process's batches to skip.

        Returns:
            A loader over the remaining batches of this epoch.
        """
        return skip_first_batches(dataloader, num_batches)

    # ---- training -------------------------------------------------------------------------
    def backward(self, loss, **kwargs) -> None:
        """``loss.backward()``, divided by the accumulation steps and loss-scaled with fp16.

        Args:
            loss: the scalar loss.
            **kwargs: passed to ``backward`` (``retain_graph``...).
        """
        if self.gradient_accumulation_steps > 1:
            loss = loss / self.gradient_accumulation_steps
        if self.scaler is not None:
            loss = self.scaler.scale(loss)
        loss.backward(**kwargs)

    @contextlib.contextmanager
    def accumulate(self, *models):
        """One micro-step: gradients are synchronised (and optimizers step) only every
        ``gradient_accumulation_steps``-th call, or at the loader's last batch.

        Args:
            *models: the prepared models (their DDP ``no_sync`` is entered in between).
        """
        state = self.gradient_state
        if state.end_of_dataloader:   # the loader's last batch ends the cycle; the next epoch
            self.step = 0             # starts a fresh one (Accelerate's _do_sync)
            state.sync_gradients = True
        else:
            self.step += 1
            state.sync_gradients = self.step % self.gradient_accumulation_steps == 0
        with contextlib.ExitStack() as stack:
            if not state.sync_gradients:
                for m in models:
                    if hasattr(m, "no_sync"):
                        stack.enter_context(m.no_sync())
            yield

    @contextlib.contextmanager
    def no_sync(self, model):
        """Skip the gradient all-reduce for the backward passes in the block.

        Args:
            model: the prepared model.
        """
        cm = model.no_sync() if hasattr(model, "no_sync") else contextlib.nullcontext()
        with cm:
            yield

    @contextlib.contextmanager
    def autocast(self):
        """Autocast with the Accelerator's mixed precision (no-op for "no")."""
        import tensorbrain as tb
        if self.mixed_precision == "no":
            yield
            return
        dtype = tb.float16 if self.mixed_precision == "fp16" else tb.bfloat16
        with tb.autocast(self.device.type, dtype=dtype):
            yield

    def unscale_gradients(self, optimizer=None) -> None:
        """Divide the gradients by the fp16 loss scale (before clipping); no-op without fp16.

        Args:
            optimizer: one prepared optimizer (default: all of them).
        """
        if self.scaler is None:
            return
        for opt in ([optimizer] if optimizer is not None else self._optimizers):
            inner = getattr(opt, "optimizer", opt)
            from ..amp.grad_scaler import _READY
            if self.scaler._opt_state(inner)["stage"] == _READY:   # not unscaled yet
                self.scaler.unscale_(inner)

    def clip_grad_norm_(self, parameters, max_norm, norm_type=2):
        """Unscale (fp16), then clip the total gradient norm.

        Args:
            parameters: the parameters whose gradients are clipped.
            max_norm: the largest total norm.
            norm_type: p of the p-norm.

        Returns:
            The total norm before clipping.
        """
        from ..nn.utils import clip_grad_norm_
        self.unscale_gradients()
        return clip_grad_norm_(list(parameters), max_norm, norm_type=norm_type)

    def clip_grad_value_(self, parameters, clip_value) -> None:
        """Unscale (fp16), then clamp every gradient to ``[-clip_value, clip_value]``.

        Args:
            parameters: the parameters whose gradients are clipped.
            clip_value: the bound.
        """
        from ..nn.utils import clip_grad_value_
        self.unscale_gradients()
        clip_grad_value_(list(parameters), clip_value)

    # ---- models and state -----------------------------------------------------------------
    def free_memory(self, *objects):
        """Forget the prepared objects.

        Args:
            *objects: references the caller drops.

        Returns:
            As many Nones, as Accelerate.
        """
        self._models: list = []
        self._optimizers: list = []
        self._schedulers: list = []
        self._dataloaders: list = []
        return [None for _ in objects]

    def init_trackers(self, project_name, config=None, init_kwargs=None) -> None:
        """No trackers are supported; with ``log_with=None`` this does nothing, as Accelerate.

        Args:
            project_name: ignored.
            config: ignored.
            init_kwargs: ignored.
        """

    def log(self, values: dict, step=None, log_kwargs=None) -> None:
        """No trackers are supported; with ``log_with=None`` this does nothing, as Accelerate.

        Args:
            values: ignored.
            step: ignored.
            log_kwargs: ignored.
        """

    def end_training(self) -> None:
        """Finish: wait for every process and leave the process group this object joined."""
        if self._owns_group and _dist().is_initialized():
            self.wait_for_everyone()
            _dist().destroy_process_group()
            self._owns_group = False

    # state used by _state
    _rng_states, _set_rng_states, _write_json = staticmethod(rng_states), \
        staticmethod(set_rng_states), staticmethod(write_json)


_HANDLERS = ("DistributedDataParallelKwargs", "InitProcessGroupKwargs", "GradScalerKwargs")


def _handlers(kwargs_handlers) -> dict:
    """The ``kwargs_handlers`` by class name; an unsupported or repeated one is an error."""
    out: dict = {}
    for h in kwargs_handlers or ():
        name = type(h).__name__
        if name not in _HANDLERS:
            raise ValueError(f"kwargs_handlers: {name} is not supported by "
                             f"tensorbrain.accelerate (supported: {', '.join(_HANDLERS)})")
        if name in out:
            raise ValueError(f"You can only pass one {name} in `kwargs_handler`.")
        out[name] = h
    return out


def _autocast_forward(forward, device_type: str, precision: str):
    import functools

    import tensorbrain as tb
    dtype = tb.float16 if precision == "fp16" else tb.bfloat16

    @functools.wraps(forward)
    def run(*args, **kwargs):
        with tb.autocast(device_type, dtype=dtype):
            out = forward(*args, **kwargs)
        return _recurse(out, lambda t: t.float() if t.dtype in (tb.float16, tb.bfloat16) else t)
    return run


def _is_scheduler(obj) -> bool:
    from ..optim.lr_scheduler import LRScheduler
    return isinstance(obj, LRScheduler) or type(obj).__name__ == "ReduceLROnPlateau"


def _shared_seed(num_processes: int) -> int:
    """One seed for shuffled loaders, drawn from TensorBrain's generator on rank 0."""
    from .. import _random
    seed = int(_random.default_generator.rng.integers(0, 2 ** 31))
    if num_processes > 1:
        box = [seed]
        _dist().broadcast_object_list(box, src=0)
        seed = int(box[0])
    return seed
