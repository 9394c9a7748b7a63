"""Tensor-parallel styles (torch's ``torch.distributed.tensor.parallel.style``): Megatron-LM's
column and row splits of ``nn.Linear`` and ``nn.Embedding``, and (from ``_prepare``) sequence
parallelism and the module input/output layout styles.

``ColwiseParallel``: the weight's output rows are split (``Shard(0)`` for Linear, the embedding
dimension ``Shard(1)`` for Embedding); the replicated input passes through an operator that is
the identity forward and an all-reduce of its gradient backward (Megatron's ``f``); each rank
returns its slice of the output features. A sequence-sharded input (``input_layouts=Shard(1)``)
is all-gathered first instead, and its gradient reduce-scattered.

``RowwiseParallel``: the weight's input columns are split (``Shard(1)`` for Linear, the vocabulary
``Shard(0)`` for Embedding); each rank computes a partial sum from its slice of the input
features, and one all-reduce (Megatron's ``g``, identity backward) gives every rank the whole
output; the bias (replicated) is added once, after the sum. ``output_layouts=Shard(1)`` makes
that a reduce-scatter over the sequence (sequence parallelism).

So an MLP block ``Colwise -> activation -> Rowwise`` costs one all-reduce forward and one
backward, as in Megatron. Parameters become ``DTensor`` parameters (``weight.full_tensor()``
gives the whole matrix); the computation runs on the local shards.
"""
from __future__ import annotations

import types

from ... import distributed_c10d as c10d
from .._api import DTensor
from .._rules import local_ops
from ..placement_types import Replicate, Shard
from ._base import (ParallelStyle, copy_to_region, distribute_param, gather_from_sequence,
                    gather_last, gathered_size, kind_of, local_input, one_layout,
                    reduce_from_region, reduce_scatter_to_sequence, split_last)
from ._prepare import (PrepareModuleInput, PrepareModuleInputOutput, PrepareModuleOutput,
                       SequenceParallel)

__all__ = ["ColwiseParallel", "ParallelStyle", "PrepareModuleInput", "PrepareModuleInputOutput",
           "PrepareModuleOutput", "RowwiseParallel", "SequenceParallel"]


def _redistribute_local(x, placement, gshape, mesh, target):
    """``x`` (this rank's piece under ``placement``) as its piece under ``target``."""
    return DTensor.from_local(x, mesh, [placement], shape=gshape) \
        .redistribute(placements=[target]).to_local()


class ColwiseParallel(ParallelStyle):
    """Split ``nn.Linear``'s output features (or ``nn.Embedding``'s embedding dimension).

    Args:
        input_layouts: the input's layout: ``Replicate()`` (default) or ``Shard(d)`` (e.g.
            ``Shard(1)``, the output of a ``SequenceParallel`` norm: all-gathered along ``d``
            first, the gradient reduce-scattered). A DTensor input's own placement wins.
        output_layouts: ``Shard(-1)`` (default: each rank keeps its slice of the features) or
            ``Replicate()`` (all-gathered).
        use_local_output: return a plain local Tensor (default) instead of a DTensor.

    Raises:
        NotImplementedError: an output layout other than ``Shard(-1)``/``Replicate()``.

    Example:
        >>> parallelize_module(mlp, tp_mesh, {"w1": ColwiseParallel()})   # doctest: +SKIP
    """

    def __init__(self, *, input_layouts=None, output_layouts=None, use_local_output=True):
        self.input_layouts = one_layout(input_layouts, Replicate(), "ColwiseParallel input")
        self.output_layouts = one_layout(output_layouts, Shard(-1), "ColwiseParallel output")
        if self.output_layouts not in (Shard(-1), Replicate()):
            raise NotImplementedError(f"ColwiseParallel output: {self.output_layouts} is not "
                                      f"supported; use Shard(-1) or Replicate()")
        self.use_local_output = bool(use_local_output)

    def __repr__(self):
        return (f"ColwiseParallel(input_layouts={self.input_layouts}, output_layouts="
                f"{self.output_layouts}, use_local_output={self.use_local_output})")

    def _apply(self, module, device_mesh):
        kind = kind_of(module)
        mesh, group = device_mesh, device_mesh.get_group()
        n, index = device_mesh.size(), device_mesh.get_local_rank()
        if kind == "linear":
            distribute_param(module, "weight", mesh, Shard(0), self.src_data_rank)
            distribute_param(module, "bias", mesh, Shard(0), self.src_data_rank)
            full = module.weight.shape[0]
        else:
            distribute_param(module, "weight", mesh, Shard(1), self.src_data_rank)
            full = module.weight.shape[1]
        inner = type(module).forward
        style = self

        def forward(self_, x, *args, **kwargs):
            x, p, gshape = local_input(x, style.input_layouts, mesh, "ColwiseParallel")
            if isinstance(p, Shard):   # one gather; its backward sums the ranks' gradients
                x = gather_from_sequence(x, p.dim, gathered_size(x, p, gshape, n), group, n,
                                         index)
            elif kind == "linear":
                x = copy_to_region(x, group)      # the input's gradient is summed over ranks
            out = inner(self_, x, *args, **kwargs)
            if style.output_layouts == Replicate():
                out = gather_last(out, group, n, index, full)
                return out if style.use_local_output else \
                    DTensor.from_local(out, mesh, [Replicate()])
            if style.use_local_output:
                return out
            return DTensor.from_local(out, mesh, [Shard(-1)],
                                      shape=tuple(out.shape[:-1]) + (full,))
        module.forward = types.MethodType(local_ops(forward), module)
        return module


class RowwiseParallel(ParallelStyle):
    """Split ``nn.Linear``'s input features (or ``nn.Embedding``'s vocabulary); one all-reduce
    (or reduce-scatter) gives every rank the whole output (or its sequence chunk).

    Args:
        input_layouts: ``Shard(-1)`` (default for Linear: the input is this rank's slice, e.g.
            a ColwiseParallel output) or ``Replicate()`` (default for Embedding; Linear slices
            it locally). A DTensor input's own placement wins.
        output_layouts: ``Replicate()`` (default: one all-reduce) or ``Shard(d)`` (sequence
            parallel, e.g. ``Shard(1)``: one reduce-scatter, each rank keeps its chunk of
            dimension ``d``; the bias is added to each chunk and its gradient summed).
        use_local_output: return a plain Tensor (default) instead of a DTensor.

    Example:
        >>> parallelize_module(mlp, tp_mesh, {"w2": RowwiseParallel()})   # doctest: +SKIP
    """

    def __init__(self, *, input_layouts=None, output_layouts=None, use_local_output=True):
        self._input_given = input_layouts is not None
        self.input_layouts = one_layout(input_layouts, Shard(-1), "RowwiseParallel input")
        self.output_layouts = one_layout(output_layouts, Replicate(), "RowwiseParallel output")
        self.use_local_output = bool(use_local_output)

    def __repr__(self):
        return (f"RowwiseParallel(input_layouts={self.input_layouts}, output_layouts="
                f"{self.output_layouts}, use_local_output={self.use_local_output})")

    def _finish(self, out, bias, mesh, group, n, index):
        """The partial sum ``out`` reduced to the output layout, plus the bias."""
        if self.output_layouts == Replicate():
            out = reduce_from_region(out, group)
            out = out + bias if bias is not None else out
            return out if self.use_local_output else DTensor.from_local(out, mesh, [Replicate()])
        d = self.output_layouts.dim % out.ndim
        gshape = tuple(out.shape)
        if self.use_local_output and gshape[d] % n:
            raise ValueError(
                f"RowwiseParallel: output_layouts={self.output_layouts} splits dimension {d} of "
                f"size {gshape[d]} unevenly over {n} ranks; a plain local output loses the "
                f"global size and the next layer would assume equal chunks. Make that size a "
                f"multiple of the tensor-parallel size (as torch needs) or pass "
                f"use_local_output=False (a DTensor keeps it)")
        out = reduce_scatter_to_sequence(out, d, group, n, index)
        if bias is not None:      # added to every rank's rows: its gradient is a partial sum
            out = out + copy_to_region(bias, group)
        return out if self.use_local_output else \
            DTensor.from_local(out, mesh, [Shard(d)], shape=gshape)

    def _apply(self, module, device_mesh):
        from ....nn import functional as F
        kind = kind_of(module)
        mesh, group = device_mesh, device_mesh.get_group()
        n, index = device_mesh.size(), device_mesh.get_local_rank()
        style = self

        if kind == "linear":
            distribute_param(module, "weight", mesh, Shard(1), self.src_data_rank)
            distribute_param(module, "bias", mesh, Replicate(), self.src_data_rank)
            in_full = module.weight.shape[1]

            def forward(self_, x):
                x, p, gshape = local_input(x, style.input_layouts, mesh, "RowwiseParallel")
                if p == Replicate():
                    x = split_last(x, group, n, index)
                elif p.dim != x.ndim - 1:
                    x = _redistribute_local(x, p, gshape, mesh, Shard(x.ndim - 1))
                if x.shape[-1] != self_.weight._data.shape[1]:
                    raise ValueError(
                        f"RowwiseParallel: rank {c10d.get_rank()} got an input with "
                        f"{x.shape[-1]} features but holds {self_.weight._data.shape[1]} of the "
                        f"weight's {in_full} input columns; pass this rank's slice (a "
                        f"ColwiseParallel output) or use input_layouts=Replicate()")
                return style._finish(F.linear(x, self_.weight), self_.bias, mesh, group, n,
                                     index)
        else:
            layout = self.input_layouts if self._input_given else Replicate()
            distribute_param(module, "weight", mesh, Shard(0), self.src_data_rank)
            lo, hi = Shard.local_range(module.num_embeddings, n, index)

            def forward(self_, ids):
                ids, p, gshape = local_input(ids, layout, mesh, "RowwiseParallel")
                if p != Replicate():
                    ids = _redistribute_local(ids, p, gshape, mesh, Replicate())
                outside = (ids < lo) | (ids >= hi)
                local = (ids - lo) * (~outside).long()
                pad = self_.padding_idx
                pad = pad - lo if pad is not None and lo <= pad < hi else None
                rows = F.embedding(local, self_.weight, padding_idx=pad, max_norm=self_.max_norm,
                                   norm_type=self_.norm_type)
                rows = rows * (~outside).unsqueeze(-1).to(rows.dtype)
                return style._finish(rows, None, mesh, group, n, index)
        module.forward = types.MethodType(local_ops(forward), module)
        return module
