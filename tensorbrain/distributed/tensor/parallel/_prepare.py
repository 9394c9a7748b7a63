"""Sequence parallelism and the layout-preparing styles (torch's ``SequenceParallel``,
``PrepareModuleInput``, ``PrepareModuleOutput``, ``PrepareModuleInputOutput``).

``SequenceParallel`` (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
Models") runs a module that works on each position alone (LayerNorm, RMSNorm, Dropout) on this
rank's chunk of the sequence: its activations are split across the tensor-parallel ranks instead
of replicated. Its parameters are replicated ``DTensor``s; since each rank computes their
gradient from its own positions only, the gradients are summed over the group in backward (the
parameters pass through Megatron's ``f`` during the forward). A ``ColwiseParallel`` with
``input_layouts=Shard(1)`` gathers the sequence before the split matmul (gradient:
reduce-scatter), and a ``RowwiseParallel`` with ``output_layouts=Shard(1)`` reduce-scatters its
partial sums back into sequence chunks (gradient: all-gather), so a sequence-parallel block
moves the same bytes as the plain one (an all-gather and a reduce-scatter instead of an
all-reduce).

The ``PrepareModule*`` styles convert a module's tensor inputs/outputs to DTensors of a given
layout and redistribute them, with forward (pre-)hooks, as torch's do.
"""
from __future__ import annotations

import types

from .._api import DTensor
from ..placement_types import Placement, Replicate, Shard
from ._base import ParallelStyle, copy_to_region, distribute_param, local_input

__all__ = ["PrepareModuleInput", "PrepareModuleInputOutput", "PrepareModuleOutput",
           "SequenceParallel"]


class SequenceParallel(ParallelStyle):
    """Run a position-wise module (``nn.LayerNorm``, ``nn.RMSNorm``, ``nn.Dropout``, a custom
    RMSNorm) on this rank's chunk of the sequence, parameters replicated.

    A plain Tensor input is taken as this rank's chunk of dimension ``sequence_dim`` (equal
    chunks, as torch); a DTensor input in another layout is redistributed to
    ``Shard(sequence_dim)``. The parameters become ``Replicate()`` DTensors (rank
    ``src_data_rank``'s values, broadcast) and their gradients are summed over the mesh.

    Args:
        sequence_dim: the sequence dimension of the input (default 1: ``(batch, seq, ...)``).
        use_local_output: return this rank's chunk as a plain Tensor instead of a
            ``Shard(sequence_dim)`` DTensor (default False, as torch).

    Example:
        >>> parallelize_module(block, tp_mesh, {"norm": SequenceParallel(),          # doctest: +SKIP
        ...                                     "w1": ColwiseParallel(input_layouts=Shard(1)),
        ...                                     "w2": RowwiseParallel(output_layouts=Shard(1))})
    """

    def __init__(self, *, sequence_dim: int = 1, use_local_output: bool = False):
        self.sequence_sharding = (Shard(sequence_dim),)
        self.use_local_output = bool(use_local_output)

    def __repr__(self):
        return (f"SequenceParallel(sequence_dim={self.sequence_sharding[0].dim}, "
                f"use_local_output={self.use_local_output})")

    def _apply(self, module, device_mesh):
        mesh, group = device_mesh, device_mesh.get_group()
        owners = []     # (owning module, parameter name) of every parameter
        for qual, _ in list(module.named_parameters()):
            path, _, leaf = qual.rpartition(".")
            owner = module.get_submodule(path) if path else module
            distribute_param(owner, leaf, mesh, Replicate(), self.src_data_rank)
            owners.append((owner, leaf))
        inner = type(module).forward
        seq, use_local = self.sequence_sharding[0], self.use_local_output

        def forward(self_, x, *args, **kwargs):
            x, p, gshape = local_input(x, seq, mesh, "SequenceParallel")
            d = seq.dim % max(x.ndim, 1)
            if p != Shard(d):
                x = DTensor.from_local(x, mesh, [p], shape=gshape) \
                    .redistribute(placements=[Shard(d)]).to_local()
            # The module reads its parameters through Megatron's f (identity forward, gradient
            # summed over the group backward): each rank saw only its own positions. An entry
            # in the instance __dict__ shadows the registered parameter for this call only;
            # FSDP puts its unsharded view there during forward, so that one is wrapped then.
            shadowed = []
            try:
                for owner, leaf in owners:
                    had = leaf in owner.__dict__
                    current = owner.__dict__[leaf] if had else owner._parameters.get(leaf)
                    if current is None:
                        continue
                    owner.__dict__[leaf] = copy_to_region(current, group)
                    shadowed.append((owner, leaf, had, current))
                out = inner(self_, x, *args, **kwargs)
            finally:
                for owner, leaf, had, current in reversed(shadowed):
                    if had:
                        owner.__dict__[leaf] = current
                    else:
                        owner.__dict__.pop(leaf, None)
            if use_local:
                return out
            shape = None
            if gshape is not None:
                shape = list(out.shape)
                shape[d] = gshape[d]
            return DTensor.from_local(out, mesh, [Shard(d)], shape=shape)
        module.forward = types.MethodType(forward, module)
        return module


def _layouts(value, what):
    """None, or a tuple of placements/None from a placement or a sequence of them."""
    if value is None:
        return None
    value = (value,) if isinstance(value, Placement) else tuple(value)
    for v in value:
        if v is not None and not isinstance(v, Placement):
            raise TypeError(f"{what}: expected placements (Shard(d), Replicate(), Partial()) or "
                            f"None, got {v!r}")
    return value


def _prepare(x, mesh, layout, desired, use_local, what):
    """One input/output: annotated with ``layout``, redistributed to ``desired``."""
    from ....tensor import Tensor
    if layout is None:
        return x
    if isinstance(x, DTensor):
        dt = x
    elif isinstance(x, Tensor):
        dt = DTensor.from_local(x, mesh, [layout])
    else:
        raise TypeError(f"{what}: a layout {layout} is given for a {type(x).__name__}, which is "
                        f"not a Tensor; give None for it")
    if desired is not None:
        dt = dt.redistribute(placements=[desired])
    return dt.to_local() if use_local else dt


class PrepareModuleInput(ParallelStyle):
    """Convert a module's tensor inputs to DTensors of ``input_layouts`` and redistribute them
    to ``desired_input_layouts`` before its forward (a forward pre-hook).

    Args:
        input_layouts: one placement per positional input (None for inputs to leave alone);
            a plain Tensor is taken as this rank's piece under it, a DTensor keeps its own.
        desired_input_layouts: the placements the forward gets, the same length.
        input_kwarg_layouts: the same for keyword inputs, a dict by name.
        desired_input_kwarg_layouts: their desired placements.
        use_local_output: pass this rank's local tensors instead of DTensors (default False).

    Raises:
        ValueError: layouts and desired layouts of different lengths (at construction), or a
            module called with another number of positional inputs.

    Example:
        >>> PrepareModuleInput(input_layouts=(Shard(1), None),                    # doctest: +SKIP
        ...                    desired_input_layouts=(Replicate(), None))
    """

    def __init__(self, *, input_layouts=None, desired_input_layouts=None,
                 input_kwarg_layouts=None, desired_input_kwarg_layouts=None,
                 use_local_output=False):
        self.input_layouts = _layouts(input_layouts, "PrepareModuleInput input_layouts")
        self.desired_input_layouts = _layouts(desired_input_layouts,
                                              "PrepareModuleInput desired_input_layouts")
        if self.input_layouts is not None and (self.desired_input_layouts is None or len(
                self.input_layouts) != len(self.desired_input_layouts)):
            raise ValueError(f"PrepareModuleInput: input_layouts {self.input_layouts} and "
                             f"desired_input_layouts {self.desired_input_layouts} must have the "
                             f"same length")
        self.with_kwargs = input_kwarg_layouts is not None
        self.input_kwarg_layouts = dict(input_kwarg_layouts or {})
        self.desired_input_kwarg_layouts = dict(desired_input_kwarg_layouts or {})
        if self.with_kwargs and len(self.input_kwarg_layouts) != len(
                self.desired_input_kwarg_layouts):
            raise ValueError("PrepareModuleInput: input_kwarg_layouts and "
                             "desired_input_kwarg_layouts must have the same keys")
        self.use_local_output = bool(use_local_output)

    def __repr__(self):
        return (f"PrepareModuleInput(input_layouts={self.input_layouts}, desired_input_layouts="
                f"{self.desired_input_layouts}, input_kwarg_layouts={self.input_kwarg_layouts}, "
                f"desired_input_kwarg_layouts={self.desired_input_kwarg_layouts}, "
                f"use_local_output={self.use_local_output})")

    def _args(self, module, args, mesh):
        if self.input_layouts is None:
            return args
        if len(args) != len(self.input_layouts):
            raise ValueError(f"PrepareModuleInput: {type(module).__name__} got {len(args)} "
                             f"positional inputs but input_layouts has "
                             f"{len(self.input_layouts)} entries (None for non-tensors)")
        return tuple(_prepare(a, mesh, lay, want, self.use_local_output, "PrepareModuleInput")
                     for a, lay, want in zip(args, self.input_layouts,
                                             self.desired_input_layouts, strict=True))

    def _apply(self, module, device_mesh):
        if self.with_kwargs:
            def hook_kw(mod, args, kwargs):
                kw = {k: _prepare(v, device_mesh, self.input_kwarg_layouts.get(k),
                                  self.desired_input_kwarg_layouts.get(k), self.use_local_output,
                                  "PrepareModuleInput") for k, v in kwargs.items()}
                return self._args(mod, args, device_mesh), kw
            module.register_forward_pre_hook(hook_kw, with_kwargs=True)
        else:
            module.register_forward_pre_hook(lambda mod, args: self._args(mod, args, device_mesh))
        return module


class PrepareModuleOutput(ParallelStyle):
    """Convert a module's tensor outputs to DTensors of ``output_layouts`` and redistribute them
    to ``desired_output_layouts`` (a forward hook).

    Args:
        output_layouts: one placement per output (None for outputs to leave alone).
        desired_output_layouts: the placements to return, the same length.
        use_local_output: return local tensors instead of DTensors (default True, as torch).

    Raises:
        ValueError: layouts of different lengths, or a module returning another number of
            outputs.

    Example:
        >>> PrepareModuleOutput(output_layouts=Shard(1),                          # doctest: +SKIP
        ...                     desired_output_layouts=Replicate())
    """

    def __init__(self, *, output_layouts, desired_output_layouts, use_local_output=True):
        self.output_layouts = _layouts(output_layouts, "PrepareModuleOutput output_layouts")
        self.desired_output_layouts = _layouts(desired_output_layouts,
                                               "PrepareModuleOutput desired_output_layouts")
        if self.output_layouts is None or self.desired_output_layouts is None or len(
                self.output_layouts) != len(self.desired_output_layouts):
            raise ValueError(f"PrepareModuleOutput: output_layouts {self.output_layouts} and "
                             f"desired_output_layouts {self.desired_output_layouts} must have "
                             f"the same length")
        self.use_local_output = bool(use_local_output)

    def __repr__(self):
        return (f"PrepareModuleOutput(output_layouts={self.output_layouts}, "
                f"desired_output_layouts={self.desired_output_layouts}, "
                f"use_local_output={self.use_local_output})")

    def _outputs(self, module, outputs, mesh):
        outs = outputs if isinstance(outputs, tuple) else (outputs,)
        if len(outs) != len(self.output_layouts):
            raise ValueError(f"PrepareModuleOutput: {type(module).__name__} returned "
                             f"{len(outs)} outputs but output_layouts has "
                             f"{len(self.output_layouts)} entries")
        got = tuple(_prepare(o, mesh, lay, want, self.use_local_output, "PrepareModuleOutput")
                    for o, lay, want in zip(outs, self.output_layouts,
                                            self.desired_output_layouts, strict=True))
        return got[0] if len(got) == 1 else got

    def _apply(self, module, device_mesh):
        module.register_forward_hook(lambda mod, args, out: self._outputs(mod, out, device_mesh))
        return module


class PrepareModuleInputOutput(ParallelStyle):
    """:class:`PrepareModuleInput` and :class:`PrepareModuleOutput` on one module.

    Args:
        input_layouts: as PrepareModuleInput's.
        desired_input_layouts: as PrepareModuleInput's.
        input_kwarg_layouts: as PrepareModuleInput's.
        desired_input_kwarg_layouts: as PrepareModuleInput's.
        use_local_input: PrepareModuleInput's ``use_local_output`` (default False).
        output_layouts: as PrepareModuleOutput's.
        desired_output_layouts: as PrepareModuleOutput's.
        use_local_output: as PrepareModuleOutput's (default True).

    Example:
        >>> PrepareModuleInputOutput(input_layouts=Shard(1),                      # doctest: +SKIP
        ...     desired_input_layouts=Replicate(), output_layouts=Replicate(),
        ...     desired_output_layouts=Shard(1))
    """

    def __init__(self, *, input_layouts=None, desired_input_layouts=None,
                 input_kwarg_layouts=None, desired_input_kwarg_layouts=None,
                 use_local_input=False, output_layouts, desired_output_layouts,
                 use_local_output=True):
        self.prepare_module_input = PrepareModuleInput(
            input_layouts=input_layouts, desired_input_layouts=desired_input_layouts,
            input_kwarg_layouts=input_kwarg_layouts,
            desired_input_kwarg_layouts=desired_input_kwarg_layouts,
            use_local_output=use_local_input)
        self.prepare_module_output = PrepareModuleOutput(
            output_layouts=output_layouts, desired_output_layouts=desired_output_layouts,
            use_local_output=use_local_output)

    def __repr__(self):
        return (f"PrepareModuleInputOutput({self.prepare_module_input!r}, "
                f"{self.prepare_module_output!r})")

    def _apply(self, module, device_mesh):
        self.prepare_module_input._apply(module, device_mesh)
        self.prepare_module_output._apply(module, device_mesh)
        return module
