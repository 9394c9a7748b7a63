"""``DeepSpeedEngine``: the object ``deepspeed.initialize`` returns, on TensorBrain's DDP,
ZeroRedundancyOptimizer and FSDP."""
from __future__ import annotations

import os

from . import loss_scaler as _ls
from .lr_schedules import SCHEDULES


def _dist():
    from .. import distributed
    return distributed


def _world() -> tuple[int, int]:
    dist = _dist()
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class DeepSpeedEngine:
    """Runs the forward (under autocast with fp16/bf16), ``backward`` (scaled by the loss scale
    and ``1/gradient_accumulation_steps``) and ``step`` (at accumulation boundaries only: unscale,
    overflow check, clipping, optimizer and scheduler) of one model.

    ZeRO stages: 0 = DDP, 1 and 2 = DDP + ZeroRedundancyOptimizer (optimizer state partitioned;
    every rank keeps the full parameters, updated after each step, as DeepSpeed's stages 0-2
    do; the gradients are all-reduced whole rather than reduce-scattered, so stage 2 does not
    save their memory here), 3 = FSDP ``FULL_SHARD`` over the original parameters (each one
    this rank's 1-D partition outside forward/backward, as DeepSpeed's ``ds_tensor``; read or
    edit them whole with ``deepspeed.zero.GatheredParameters``; with
    ``offload_param``/``offload_optimizer`` ``cpu``: FSDP's ``CPUOffload``).

    Use :func:`tensorbrain.deepspeed.initialize` to build one.

    Args:
        model: the module.
        config: the checked config (``config.check``).
        optimizer: a client optimizer or a callable taking the parameters (or None: the
            config's ``optimizer``).
        model_parameters: the parameters (or groups) for the config's optimizer.
        lr_scheduler: a client scheduler or a callable taking the optimizer.
    """

    def __init__(self, model, config: dict, optimizer=None, model_parameters=None,
                 lr_scheduler=None):
        import tensorbrain as tb
        self.config = config
        self.global_rank, self.world_size = _world()
        self.local_rank = int(os.environ.get("LOCAL_RANK", self.global_rank))
        self.module = model
        self.device = next(iter(model.parameters())).device
        zero = config["zero_optimization"]
        self.stage = int(zero.get("stage", 0))
        fp16, bf16 = config.get("fp16") or {}, config.get("bf16") or {}
        self._fp16, self._bf16 = bool(fp16.get("enabled")), bool(bf16.get("enabled"))
        self.loss_scaler = _ls.from_config(fp16) if self._fp16 else None
        self._low_dtype = tb.float16 if self._fp16 else tb.bfloat16 if self._bf16 else None
        self.global_steps = self.global_samples = self.micro_steps = self.skipped_steps = 0
        self._step_applied = False
        self._frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
        self._wrapped = self._wrap(model, zero)
        self.optimizer = self._build_optimizer(optimizer, model_parameters)
        self.lr_scheduler = self._build_scheduler(lr_scheduler)

    # ---- construction -----------------------------------------------------------------------
    def _wrap(self, model, zero):
        if self.world_size == 1:
            return model
        from .moe.utils import is_moe_param
        self._moe = any(is_moe_param(p) for p in model.parameters())
        if self._moe:
            if self.stage != 0:
                raise NotImplementedError(
                    f"a model with deepspeed.moe layers at ZeRO stage {self.stage} is not "
                    f"supported by tensorbrain.deepspeed yet: use ZeRO stage 0")
            self._sync_moe_params(model)
            return model   # the engine reduces the gradients itself (_reduce_moe_grads)
        if self.stage <= 2:
            from ..nn.parallel import DistributedDataParallel
            return DistributedDataParallel(model)
        from ..distributed.fsdp import CPUOffload, FullyShardedDataParallel, ShardingStrategy
        trained = [n for n, p in model.named_parameters() if p.requires_grad]
        if self._frozen and trained:
            raise ValueError(f"ZeRO stage {self.stage} with several processes is FSDP here, "
                             f"which cannot mix frozen parameters "
                             f"({sorted(self._frozen)}) with trained ones: "
                             f"tensorbrain.deepspeed does not support this yet; use ZeRO stage 0-2 "
                             f"or give initialize a module without the frozen part")
        offload = any(str((zero.get(k) or {}).get("device", "none")).lower() == "cpu"
                      for k in ("offload_optimizer", "offload_param"))
        wrapped = FullyShardedDataParallel(model, sharding_strategy=ShardingStrategy.FULL_SHARD,
                                           cpu_offload=CPUOffload(offload_params=offload),
                                           use_orig_params=True)
        for p in model.parameters():   # deepspeed.zero.GatheredParameters finds the owner here
            p._ds_owner = wrapped
        return wrapped

    # ---- MoE: shared parameters over the world, experts over their data-parallel group ----
    def _moe_groups(self, params):
        """(shared params, {expert-data-parallel group: expert params})."""
        from .moe.sharded_moe import expert_groups
        from .moe.utils import is_moe_param
        shared, experts = [], {}
        for p in params:
            if is_moe_param(p):
                ep_size = int(str(p.group_name).rsplit("_", 1)[-1])
                experts.setdefault(ep_size, []).append(p)
            else:
                shared.append(p)
        return shared, {expert_groups(n)[1]: ps for n, ps in experts.items()}

    def _sync_moe_params(self, model) -> None:
        """Start alike: shared parameters from rank 0, each expert from the first rank that
        holds it (DeepSpeed's broadcast at initialize)."""
        from .. import no_grad
        dist = _dist()
        shared, experts = self._moe_groups(model.parameters())
        with no_grad():
            for p in shared:
                dist.broadcast(p, src=0)
            for group, ps in experts.items():
                src = dist.get_global_rank(group, 0) if group is not None else 0
                for p in ps:
                    dist.broadcast(p, src=src, group=group)

    def _reduce_moe_grads(self, params) -> None:
        """Average shared gradients over the world and expert gradients over the ranks that
        hold the same experts, as DeepSpeed's engine does."""
        dist = _dist()
        shared, experts = self._moe_groups(params)
        for group, ps in [(None, shared), *experts.items()]:
            n = dist.get_world_size(group)
            for p in ps:
                if p.grad is None:
                    continue
                if n > 1:
                    dist.all_reduce(p.grad, group=group)
                    p.grad._data /= p.grad._data.dtype.type(n)

    def _clip_moe(self, max_norm: float):
        """DeepSpeed's norm with experts: each rank's own total norm (shared gradients, alike
        everywhere, and its own experts'), averaged over the ranks, so every rank clips alike
        (``deepspeed.runtime.utils.clip_grad_norm_``)."""
        import tensorbrain as tb
        params = [p for g in self.optimizer.param_groups for p in g["params"]
                  if p.grad is not None]
        local = sum(float((p.grad._data.astype("float64") ** 2).sum()) for p in params) ** 0.5
        t = tb.tensor([local / self.world_size], dtype=tb.float64)
        _dist().all_reduce(t)
        norm = float(t.item())
        coef = max_norm / (norm + 1e-6)
        if coef < 1:
            for p in params:
                p.grad._data *= p.grad._data.dtype.type(coef)
        return tb.tensor(norm)

    def _sharded(self) -> bool:
        return self.world_size > 1 and self.stage >= 3

    def _build_optimizer(self, client, model_parameters):
        from .. import optim
        spec = self.config.get("optimizer")
        if client is not None and spec is not None:
            raise ValueError("Not sure how to proceed, we were given a client optimizer and a "
                             "config optimizer: pass one of them (as DeepSpeed)")
        if self._sharded():
            if model_parameters is not None and any(isinstance(p, dict) for p in model_parameters):
                raise ValueError("ZeRO stage 3 (FSDP) takes one parameter group: pass "
                                 "model_parameters=model.parameters()")
            params = list(self._wrapped.parameters())
        else:
            params = list(model_parameters) if model_parameters is not None else \
                [p for p in self.module.parameters() if p.requires_grad]
        if spec is not None:
            cls, kwargs = _optimizer_from_config(spec)
        elif isinstance(client, optim.Optimizer):
            if self.stage == 0 or self.world_size == 1:
                return client
            if len(client.param_groups) != 1 or client.state:
                raise ValueError("with ZeRO stage >= 1 a client optimizer must have one parameter "
                                 "group and no state yet (TensorBrain rebuilds it over the "
                                 "sharded parameters)")
            cls = type(client)
            kwargs = {k: v for k, v in client.param_groups[0].items()
                      if k not in ("params", "initial_lr")}
        elif callable(client):
            return client(params)
        else:
            raise ValueError("deepspeed.initialize needs an optimizer: a config 'optimizer' "
                             "section or optimizer=")
        if self.stage in (1, 2) and self.world_size > 1:
            from ..distributed.optim import ZeroRedundancyOptimizer
            return ZeroRedundancyOptimizer(params, optimizer_class=cls, **kwargs)
        return cls(params, **kwargs)

    def _build_scheduler(self, client):
        spec = self.config.get("scheduler")
        if spec is not None:
            if client is not None:
                raise ValueError("given both a client lr_scheduler and a config 'scheduler'")
            kind = spec.get("type")
            if kind not in SCHEDULES:
                raise ValueError(f"DeepSpeed scheduler type {kind!r} is not supported by "
                                 f"tensorbrain.deepspeed (supported: {sorted(SCHEDULES)})")
            return SCHEDULES[kind](self.optimizer, **(spec.get("params") or {}))
        if client is None or hasattr(client, "step"):
            return client
        return client(self.optimizer)

    # ---- the training step ----------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        """The model's forward (autocast to float16/bfloat16 when enabled; floating outputs
        come back in float32)."""
        import tensorbrain as tb
        if hasattr(self._wrapped, "require_backward_grad_sync"):   # DDP: sync at boundaries
            self._wrapped.require_backward_grad_sync = self._next_is_boundary()
        if self._low_dtype is None:
            return self._wrapped(*args, **kwargs)
        with tb.autocast(self.device.type, dtype=self._low_dtype):
            out = self._wrapped(*args, **kwargs)
        return _map(out, lambda t: t.float() if t.dtype in (tb.float16, tb.bfloat16) else t)

    def _next_is_boundary(self) -> bool:
        return (self.micro_steps + 1) % self.gradient_accumulation_steps() == 0

    def is_gradient_accumulation_boundary(self) -> bool:
        """Whether the next ``step()`` applies the optimizer."""
        return self._next_is_boundary()

    def was_step_applied(self) -> bool:
        """Whether the last ``step()`` updated the weights (False between accumulation
        boundaries and when an fp16 overflow skipped it)."""
        return self._step_applied

    def backward(self, loss, retain_graph: bool = False, scale_wrt_gas: bool = True):
        """``loss.backward()`` of ``loss / gradient_accumulation_steps`` (times the fp16 scale).

        Args:
            loss: the scalar loss.
            retain_graph: keep the graph for another backward.
            scale_wrt_gas: divide by the accumulation steps (DeepSpeed's default).

        Returns:
            The loss as given.
        """
        scaled = loss.float() if self._fp16 else loss
        if scale_wrt_gas and self.gradient_accumulation_steps() > 1:
            scaled = scaled / self.gradient_accumulation_steps()
        if self.loss_scaler is not None:
            scaled = scaled * self.loss_scaler.loss_scale
        scaled.backward(retain_graph=retain_graph)
        return loss

    def step(self, lr_kwargs=None) -> None:
        """Count a micro-step; at an accumulation boundary unscale the gradients, skip the step
        on fp16 overflow (the scaler backs off), clip, step optimizer and scheduler, zero the
        gradients.

        Args:
            lr_kwargs: keywords for the scheduler's ``step``.
        """
        boundary = self._next_is_boundary()
        self.micro_steps += 1
        self._step_applied = False
        if not boundary:
            return
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        if getattr(self, "_moe", False):
            self._reduce_moe_grads(params)
        overflow = False
        if self.loss_scaler is not None:
            overflow = self._overflow(params)
            if not overflow:
                inv = 1.0 / self.loss_scaler.loss_scale
                for p in params:
                    if p.grad is not None:
                        p.grad._data *= p.grad._data.dtype.type(inv)
            self.loss_scaler.update_scale(overflow)
        if overflow:
            self.skipped_steps += 1
        else:
            clip = float(self.config.get("gradient_clipping", 0) or 0)
            if clip > 0:
                self.clip_grad_norm_(clip)
            self.optimizer.step()
            self._step_applied = True
            if self.lr_scheduler is not None:
                self.lr_scheduler.step(**(lr_kwargs or {}))
        self.optimizer.zero_grad(set_to_none=True)
        self.global_steps += 1
        self.global_samples += self.train_batch_size()
        every = int(self.config.get("steps_per_print", 0) or 0)
        if every and self.global_steps % every == 0 and self.global_rank == 0:
            print(f"[deepspeed] step={self.global_steps}, skipped={self.skipped_steps}, "
                  f"lr={self.get_lr()}", flush=True)

    def _overflow(self, params) -> bool:
        import tensorbrain as tb
        from .. import _xp
        bad = 0.0
        for p in params:
            if p.grad is not None:
                g = p.grad._data
                if not bool(_xp.get_array_module(g).isfinite(g).all()):
                    bad = 1.0
                    break
        if self.world_size > 1:   # sharded gradients: every rank must agree to skip
            flag = tb.tensor([bad])
            _dist().all_reduce(flag, op=_dist().ReduceOp.MAX)
            bad = float(flag.item())
        return bad > 0

    def clip_grad_norm_(self, max_norm: float):
        """Clip the total gradient norm (global over shards under ZeRO 3).

        Args:
            max_norm: the largest total norm.

        Returns:
            The norm before clipping.
        """
        if self._sharded():
            return self._wrapped.clip_grad_norm_(max_norm)
        if getattr(self, "_moe", False):
            return self._clip_moe(max_norm)
        from ..nn.utils import clip_grad_norm_
        return clip_grad_norm_([p for g in self.optimizer.param_groups for p in g["params"]],
                               max_norm)

    def zero_grad(self) -> None:
        """Clear the gradients."""
        self.optimizer.zero_grad(set_to_none=True)

    # ---- queries ----------------------------------------------------------------------------
    def train(self, mode: bool = True):
        """Training mode for the module.

        Args:
            mode: True for training, False for evaluation.

        Returns:
            The engine.
        """
        self._wrapped.train(mode)
        return self

    def eval(self):
        """Evaluation mode for the module; returns the engine."""
        self._wrapped.eval()
        return self

    def parameters(self, recurse: bool = True):
        """The parameters being trained (this rank's partitions under ZeRO 3).

        Args:
            recurse: include sub-modules' parameters.
        """
        return self._wrapped.parameters(recurse)

    def named_parameters(self, *args, **kwargs):
        """As ``Module.named_parameters`` of the (wrapped) module.

        Args:
            *args: ``Module.named_parameters``' arguments.
            **kwargs: its keywords.
        """
        return self._wrapped.named_parameters(*args, **kwargs)

    def get_lr(self) -> list:
        """The learning rate of every parameter group."""
        return [g["lr"] for g in self.optimizer.param_groups]

    def get_global_grad_norm(self):
        """Not tracked by TensorBrain's engine: returns None."""
        return None

    def train_batch_size(self) -> int:
        """``train_micro_batch_size_per_gpu * gradient_accumulation_steps * world_size``."""
        return self.config["train_batch_size"]

    def train_micro_batch_size_per_gpu(self) -> int:
        """Samples per forward on each rank."""
        return self.config["train_micro_batch_size_per_gpu"]

    def gradient_accumulation_steps(self) -> int:
        """Micro-steps per optimizer step."""
        return self.config["gradient_accumulation_steps"]

    def zero_optimization_stage(self) -> int:
        """The ZeRO stage (0-3)."""
        return self.stage

    def fp16_enabled(self) -> bool:
        """Whether fp16 (autocast float16 + loss scaling) is on."""
        return self._fp16

    def bfloat16_enabled(self) -> bool:
        """Whether bf16 (autocast bfloat16) is on."""
        return self._bf16

    def full_state_dict(self) -> dict:
        """The module's full (unsharded) state dict; a collective under ZeRO 3."""
        if self._sharded():
            from ..distributed.fsdp import (FullStateDictConfig, FullyShardedDataParallel,
                                            StateDictType)
            with FullyShardedDataParallel.state_dict_type(
                    self._wrapped, StateDictType.FULL_STATE_DICT,
                    FullStateDictConfig(offload_to_cpu=True, rank0_only=False)):
                return self._wrapped.state_dict()
        return self.module.state_dict()

    # ---- checkpoints ------------------------------------------------------------------------
    def save_16bit_model(self, save_dir, save_filename: str = "pytorch_model.bin",
                         exclude_frozen_parameters: bool = False) -> bool:
        """Write the whole model's weights to ``save_dir/save_filename`` on rank 0 (DeepSpeed's
        name; a collective: every rank calls it).

        At ZeRO stage 3 with several processes the module is FSDP-wrapped and
        ``engine.module.state_dict()`` holds this rank's partitions; this
        gathers the full state dict with the model's own names, as DeepSpeed's
        ``save_16bit_model`` does. The weights are written as trained (float32 master weights;
        fp16/bf16 here is autocast), with ``tensorbrain.save``, so ``tensorbrain.load`` (or
        ``torch.load`` under the import alias) reads them back.

        Args:
            save_dir: the folder (created if missing).
            save_filename: the file's name in it.
            exclude_frozen_parameters: leave out parameters with ``requires_grad=False``.

        Returns:
            True.

        Example:
            >>> import os, tempfile
            >>> import tensorbrain as tb
            >>> import tensorbrain.deepspeed as deepspeed
            >>> engine, *_ = deepspeed.initialize(model=tb.nn.Linear(2, 1), config={
            ...     "train_batch_size": 1, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}})
            >>> folder = tempfile.mkdtemp()
            >>> engine.save_16bit_model(folder)
            True
            >>> sorted(tb.load(os.path.join(folder, "pytorch_model.bin")))
            ['bias', 'weight']
            >>> tb.distributed.destroy_process_group()   # initialize joined a group of one
        """
        import tensorbrain as tb
        state = self.full_state_dict()
        if exclude_frozen_parameters:
            state = {k: v for k, v in state.items() if k not in self._frozen}
        if self.global_rank == 0:
            os.makedirs(str(save_dir), exist_ok=True)
            path = os.path.join(str(save_dir), save_filename)
            tmp = f"{path}.tmp{os.getpid()}"
            tb.save(state, tmp)
            os.replace(tmp, path)
        if self.world_size > 1:
            from .. import distributed
            distributed.barrier()
        return True

    def _local_optimizer(self):
        inner = getattr(self.optimizer, "optim", None)   # ZeroRedundancyOptimizer's own shard
        return inner if inner is not None and self.stage in (1, 2) else self.optimizer

    def save_checkpoint(self, save_dir, tag=None, client_state=None, save_latest: bool = True):
        """Save the module, this rank's optimizer state, scheduler, loss scale and counters to
        ``save_dir/tag`` (a collective: every rank calls it).

        Args:
            save_dir: the checkpoint folder.
            tag: the sub-folder (default ``global_step<N>``).
            client_state: a dict of the caller's own values (numbers, strings, tensors).
            save_latest: write ``save_dir/latest`` with the tag.

        Returns:
            True.
        """
        from . import _checkpoint
        return _checkpoint.save(self, save_dir, tag, client_state, save_latest)

    def load_checkpoint(self, load_dir, tag=None, load_module_strict: bool = True,
                        load_optimizer_states: bool = True, load_lr_scheduler_states: bool = True,
                        load_module_only: bool = False):
        """Load what :meth:`save_checkpoint` wrote (a collective).

        Args:
            load_dir: the checkpoint folder.
            tag: the sub-folder (default: the one ``load_dir/latest`` names).
            load_module_strict: strict ``load_state_dict`` of the module.
            load_optimizer_states: load this rank's optimizer state.
            load_lr_scheduler_states: load the scheduler's state.
            load_module_only: only the module's weights.

        Returns:
            ``(load_path, client_state)``, or ``(None, None)`` when there is no checkpoint.
        """
        from . import _checkpoint
        return _checkpoint.load(self, load_dir, tag, load_module_strict, load_optimizer_states,
                                load_lr_scheduler_states, load_module_only)

    def __getattr__(self, name):
        module = self.__dict__.get("module")
        if module is None:
            raise AttributeError(name)
        return getattr(module, name)


def _map(obj, fn):
    from ..tensor import Tensor
    if isinstance(obj, Tensor):
        return fn(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map(o, fn) for o in obj)
    if isinstance(obj, dict):
        return {k: _map(v, fn) for k, v in obj.items()}
    return obj


def _optimizer_from_config(spec: dict):
    """(class, kwargs) for a config ``optimizer`` section, DeepSpeed's defaults."""
    from .. import optim
    kind = str(spec.get("type", "")).lower()
    params = dict(spec.get("params") or {})
    if kind in ("adam", "adamw"):
        adam_w_mode = bool(params.pop("adam_w_mode", True)) if kind == "adam" else True
        params.pop("torch_adam", None)
        if not params.pop("bias_correction", True):
            raise ValueError("optimizer params bias_correction=false is not supported by "
                             "tensorbrain.deepspeed")
        return (optim.AdamW if adam_w_mode else optim.Adam), params
    if kind == "sgd":
        return optim.SGD, params
    raise ValueError(f"DeepSpeed optimizer type {spec.get('type')!r} is not supported by "
                     f"tensorbrain.deepspeed (supported: Adam, AdamW, SGD; Lamb, OneBitAdam, "
                     f"OneBitLamb, ZeroOneAdam and Adagrad are not)")
