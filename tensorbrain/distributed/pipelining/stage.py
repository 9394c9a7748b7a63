"""``PipelineStage``: one stage's module and the state a schedule keeps for it during a step, plus
the ways to cut a model into stages (``split_sequential``, ``pipeline`` with ``SplitPoint``)."""
from __future__ import annotations

import enum

import numpy as np

from .. import distributed_c10d as c10d

__all__ = ["PipelineStage", "PipeliningShapeError", "SplitPoint", "Pipe", "pipeline",
           "split_sequential"]


class PipeliningShapeError(RuntimeError):
    """A stage's input or output does not have the shape/dtype its neighbour or its
    ``input_args``/``output_args`` say (torch's name)."""


def _meta_of(t) -> tuple:
    return tuple(int(n) for n in t.shape), np.dtype(t._data.dtype).name


def _fmt(meta) -> str:
    return f"shape {tuple(meta[0])} {meta[1]}" if meta is not None else "nothing"


def _example(args):
    """The one example tensor of ``input_args``/``output_args`` (a Tensor or a 1-tuple)."""
    from ...tensor import Tensor
    if args is None:
        return None
    if isinstance(args, (tuple, list)):
        if len(args) != 1:
            raise NotImplementedError(
                f"PipelineStage: {len(args)} example tensors given; TensorBrain stages take one "
                f"input tensor and return one output tensor")
        args = args[0]
    if not isinstance(args, Tensor):
        raise TypeError(f"PipelineStage: example args must be Tensors, got {type(args).__name__}")
    return _meta_of(args)


class PipelineStage:
    """One stage of a pipeline: ``submodule`` runs on this rank as stage ``stage_index``.

    Stages are laid out as torch does: with ``P`` ranks in ``group`` and ``num_stages = V * P``,
    stage ``s`` lives on group rank ``s % P`` (``V = 1`` for GPipe and 1F1B, ``V >= 2`` for
    :class:`ScheduleInterleaved1F1B`). A stage takes one tensor and returns one tensor.

    Args:
        submodule: the layers of this stage (any Module, DDP-wrapped for pp x dp).
        stage_index: this stage's position, ``0 .. num_stages - 1``.
        num_stages: the number of stages of the whole pipeline.
        device: where the submodule's parameters and this stage's activations live.
        input_args: optional example input (one micro-batch); checked at the first step against
            what the previous stage really produces.
        output_args: optional example output (one micro-batch); checked likewise.
        group: the process group of the pipeline ranks (default: the world); for pp x dp, the
            mesh's ``"pp"`` group.
        dw_builder: not supported (torch's zero-bubble weight-gradient split).

    Raises:
        ValueError: ``stage_index`` out of range.
        NotImplementedError: ``dw_builder`` given, or several example tensors.

    Example:
        >>> stage = PipelineStage(layers, rank, world, "cpu")   # doctest: +SKIP
    """

    def __init__(self, submodule, stage_index, num_stages, device, input_args=None,
                 output_args=None, group=None, dw_builder=None):
        from ..._device import as_device
        if dw_builder is not None:
            raise NotImplementedError("PipelineStage: dw_builder (zero-bubble schedules) is not "
                                      "supported by TensorBrain")
        if not 0 <= int(stage_index) < int(num_stages):
            raise ValueError(f"PipelineStage: stage_index={stage_index} must be in "
                             f"0..{int(num_stages) - 1} (num_stages={num_stages})")
        self.submod = submodule
        self.stage_index, self.num_stages = int(stage_index), int(num_stages)
        self.device = as_device(device)
        self.group = group
        self.group_rank = c10d.get_rank(group)
        self.group_size = c10d.get_world_size(group)
        self.input_meta = _example(input_args)      # expected, from the user
        self.output_meta = _example(output_args)
        self.in_meta = self.out_meta = None          # measured at the first step
        self._cache: dict = {}                       # micro-batch -> (input, output)
        self.peak_live = 0                           # most micro-batches held at once (a step)

    @property
    def is_first(self) -> bool:
        """Whether this is stage 0 (it takes the schedule's inputs)."""
        return self.stage_index == 0

    @property
    def is_last(self) -> bool:
        """Whether this is the last stage (it computes the loss)."""
        return self.stage_index == self.num_stages - 1

    @property
    def global_rank(self) -> int:
        """This process's rank in the default group (for messages)."""
        return c10d.get_rank()

    def __repr__(self):
        return (f"PipelineStage(stage_index={self.stage_index}, num_stages={self.num_stages}, "
                f"rank={self.global_rank}, device={self.device})")

    # ***** what the schedule calls *****
    def _module(self):
        inner = getattr(self.submod, "module", None)
        from ...nn.parallel import DistributedDataParallel
        return inner if isinstance(self.submod, DistributedDataParallel) else self.submod

    def _is_ddp(self) -> bool:
        from ...nn.parallel import DistributedDataParallel
        return isinstance(self.submod, DistributedDataParallel)

    def _fsdp_sync(self, last_backward: bool):
        """An FSDP stage reduces its gradients once per step, in the last backward (as torch's
        PipelineStage does): earlier micro-batches' backwards accumulate unsharded gradients
        (``set_requires_gradient_sync(False)`` for fully_shard, ``no_sync()`` for FSDP1)."""
        import contextlib
        from ..fsdp import FSDPModule, FullyShardedDataParallel
        if isinstance(self.submod, FSDPModule):
            self.submod.set_requires_gradient_sync(last_backward)
        elif isinstance(self.submod, FullyShardedDataParallel) and not last_backward:
            return self.submod.no_sync()
        return contextlib.nullcontext()

    def forward_one_chunk(self, mb: int, x, keep: bool):
        """Run the submodule on micro-batch ``mb``; keep input and output for backward if
        ``keep``. Returns the output."""
        from ...autograd import grad_mode
        from ...tensor import Tensor
        if keep and not self.is_first and x._data.dtype.kind == "f":
            x = x.detach()
            x.requires_grad = True
        if self._is_ddp() and keep:
            with self.submod.no_sync():      # the reduction is armed before the last backward
                out = self.submod(x)
        elif keep:
            out = self.submod(x)
        else:
            with grad_mode.no_grad():
                out = self.submod(x)
        if not isinstance(out, Tensor):
            raise NotImplementedError(
                f"stage {self.stage_index} (rank {self.global_rank}) returned "
                f"{type(out).__name__}; TensorBrain pipeline stages return one Tensor")
        if _meta_of(out) != self.out_meta:
            raise PipeliningShapeError(
                f"stage {self.stage_index} (rank {self.global_rank}) produced {_fmt(_meta_of(out))}"
                f" for micro-batch {mb} but {_fmt(self.out_meta)} at the first step; pipeline "
                f"shapes are fixed at the first step (keep the batch size and n_microbatches)")
        if keep:
            self._cache[mb] = (x, out)
            self.peak_live = max(self.peak_live, len(self._cache))
        return out

    def backward_one_chunk(self, mb: int, grad_out=None, loss=None, scale=1.0,
                           last_backward=False):
        """Backpropagate micro-batch ``mb`` from ``loss`` (last stage, seeded with ``scale``) or
        from ``grad_out``; returns the gradient of this stage's input (None on stage 0)."""
        from ...autograd import backward
        from ...tensor import Tensor
        x, out = self._cache.pop(mb)
        if last_backward and self._is_ddp():
            red = self.submod.reducer
            red.prepare_for_backward([out] if (self.submod.find_unused_parameters
                                               or self.submod.static_graph) else None)
        with self._fsdp_sync(last_backward):
            if loss is not None:
                if loss.requires_grad:
                    from ..._xp import get_array_module
                    xp = get_array_module(loss._data)    # the seed on the loss's device
                    loss.backward(Tensor._wrap(xp.asarray(scale, dtype=loss._data.dtype)))
            elif out.requires_grad:
                backward([out], [grad_out])
        if self.is_first or x._data.dtype.kind != "f":
            return None
        if x.grad is None:
            return Tensor._wrap(np.zeros(x.shape, dtype=x._data.dtype)).to(self.device)
        return x.grad

    def _clear(self) -> None:
        self._cache.clear()
        self.peak_live = 0

    def _infer(self, x):
        """The first step's shape pass: run the submodule once (eval mode, no grad, the random
        generator's state restored) on ``x`` and return the output's (shape, dtype)."""
        from ..._random import default_generator
        from ...autograd import grad_mode
        mod = self._module()
        modes = [(m, m.training) for m in mod.modules()]
        rng = default_generator.get_state()
        try:
            mod.eval()
            with grad_mode.no_grad():
                out = mod(x)
        finally:
            default_generator.set_state(rng)
            for m, t in modes:
                m.training = t
        from ...tensor import Tensor
        if not isinstance(out, Tensor):
            raise NotImplementedError(
                f"stage {self.stage_index} (rank {self.global_rank}) returned "
                f"{type(out).__name__}; TensorBrain pipeline stages return one Tensor")
        return _meta_of(out)


# ***** cutting a model into stages *****
def split_sequential(model, num_stages=None, balance=None) -> list:
    """Cut an ``nn.Sequential`` into consecutive stages (the manual split; no tracing).

    Args:
        model: an ``nn.Sequential`` (its children run in order).
        num_stages: split into this many stages of near-equal layer counts.
        balance: or give the number of layers per stage, e.g. ``[2, 3]`` (as ``Pipe``'s).

    Returns:
        list: one ``nn.Sequential`` per stage, sharing the model's layers (not copies).

    Raises:
        ValueError: neither or both of ``num_stages``/``balance``, or counts that do not add up.
        TypeError: ``model`` is not an ``nn.Sequential``.

    Example:
        >>> import tensorbrain as tb
        >>> net = tb.nn.Sequential(*[tb.nn.Linear(4, 4) for _ in range(5)])
        >>> [len(s) for s in split_sequential(net, balance=[2, 3])]
        [2, 3]
    """
    from ...nn import Sequential
    if not isinstance(model, Sequential):
        raise TypeError(f"split_sequential: needs an nn.Sequential, got {type(model).__name__}; "
                        f"build each stage's module by hand for other models")
    layers = list(model.named_children())
    if (num_stages is None) == (balance is None):
        raise ValueError("split_sequential: give exactly one of num_stages= or balance=")
    if balance is None:
        if not 1 <= int(num_stages) <= len(layers):
            raise ValueError(f"split_sequential: num_stages={num_stages} must be between 1 and "
                             f"the number of layers ({len(layers)})")
        base, extra = divmod(len(layers), int(num_stages))
        balance = [base + (1 if i < extra else 0) for i in range(int(num_stages))]
    balance = [int(b) for b in balance]
    if sum(balance) != len(layers) or any(b <= 0 for b in balance):
        raise ValueError(f"split_sequential: balance={balance} must be positive counts adding up "
                         f"to the number of layers ({len(layers)})")
    out, lo = [], 0
    for b in balance:
        seq = Sequential()
        for name, layer in layers[lo:lo + b]:
            seq.add_module(name, layer)
        out.append(seq)
        lo += b
    return out


class SplitPoint(enum.Enum):
    """Where ``pipeline(split_spec=...)`` cuts: before (``BEGINNING``) or after (``END``) the
    named layer."""
    BEGINNING = 1
    END = 2


class Pipe:
    """What :func:`pipeline` returns: the stage modules, and ``build_stage`` for this rank."""

    def __init__(self, stages: list):
        self._stages = stages

    @property
    def num_stages(self) -> int:
        """How many stages the split produced."""
        return len(self._stages)

    def get_stage_module(self, stage_idx: int):
        """The module of stage ``stage_idx``.

        Args:
            stage_idx: the stage's index.
        """
        return self._stages[stage_idx]

    def build_stage(self, stage_index: int, device, group=None) -> PipelineStage:
        """A :class:`PipelineStage` running stage ``stage_index`` on this rank.

        Args:
            stage_index: the stage this rank runs.
            device: the device of the stage.
            group: the pipeline's process group (default: the world).
        """
        return PipelineStage(self._stages[stage_index], stage_index, self.num_stages, device,
                             group=group)


def pipeline(module, mb_args=None, mb_kwargs=None, split_spec=None, split_policy=None) -> Pipe:
    """Split a model at named layers (torch's ``pipeline``), for ``nn.Sequential`` models only.

    torch traces any model with ``torch.export``; TensorBrain has no tracer, so the model must be
    an ``nn.Sequential`` whose children run in order and ``split_spec`` names children.

    Args:
        module: the ``nn.Sequential`` to split.
        mb_args: an example micro-batch (accepted for torch compatibility; not needed).
        mb_kwargs: must be None.
        split_spec: ``{"child_name": SplitPoint.BEGINNING | SplitPoint.END}``.
        split_policy: not supported.

    Returns:
        Pipe: with ``num_stages``, ``get_stage_module(i)`` and ``build_stage(i, device, group)``.

    Raises:
        NotImplementedError: a non-Sequential model, ``mb_kwargs`` or ``split_policy``.
        ValueError: an unknown layer name in ``split_spec``.

    Example:
        >>> import tensorbrain as tb
        >>> net = tb.nn.Sequential(tb.nn.Linear(4, 4), tb.nn.ReLU(), tb.nn.Linear(4, 2))
        >>> pipeline(net, split_spec={"2": SplitPoint.BEGINNING}).num_stages
        2
    """
    from ...nn import Sequential
    if not isinstance(module, Sequential):
        raise NotImplementedError(
            f"pipeline(): TensorBrain cannot trace {type(module).__name__}; pass an nn.Sequential "
            f"or build each stage's module by hand (split_sequential, PipelineStage)")
    if mb_kwargs or split_policy is not None:
        raise NotImplementedError("pipeline(): mb_kwargs and split_policy are not supported")
    names = [n for n, _ in module.named_children()]
    cuts = set()
    for name, point in (split_spec or {}).items():
        if name not in names:
            raise ValueError(f"pipeline(): split_spec names {name!r}, which is not a child of "
                             f"the model; its children are {names}")
        i = names.index(name) + (0 if point == SplitPoint.BEGINNING else 1)
        if 0 < i < len(names):
            cuts.add(i)
    bounds = [0] + sorted(cuts) + [len(names)]
    return Pipe(split_sequential(module, balance=[b - a for a, b in zip(bounds, bounds[1:], strict=False)]))
