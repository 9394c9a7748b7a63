"""``loss_parallel()`` (``torch.distributed.tensor.parallel.loss_parallel``): cross-entropy over
logits sharded on the class dimension, without gathering them.

Inside ``with loss_parallel():``, ``F.cross_entropy(logits, target)`` with a DTensor ``logits``
of shape ``(N, C)`` placed ``Shard(1)`` (or ``Shard(-1)``) on a 1-D mesh, and class-index
targets (a Tensor or a replicated DTensor of shape ``(N,)``), runs Megatron's vocab-parallel
cross-entropy: each rank's row maximum, then one all-reduce MAX; the sum of ``exp(x - max)``,
one all-reduce SUM; the target's logit from the rank that holds its class, one all-reduce SUM.
The loss (``log(sum) + max - target_logit``, reduced as ``reduction`` says, ``ignore_index`` rows
left out) is a replicated DTensor, as in torch; its backward is local: this rank's
``softmax - one_hot`` slice, scaled (no communication). Class weights and label smoothing are
refused (NotImplementedError); outside the block (or for other layouts) cross-entropy of sharded
or Partial logits is refused naming ``loss_parallel`` and ``full_tensor()``.

``DTensor.__tb_cross_entropy__`` is the hook ``F.cross_entropy`` calls (``_ops/loss.py``).
"""
from __future__ import annotations

import contextlib

import numpy as np

from ... import _xp
from ..._ops.core import make
from .. import distributed_c10d as c10d
from . import _redistribute as R
from ._dtensor_spec import DTensorSpec
from ._rules import bypassed
from .placement_types import Replicate, Shard

_ACTIVE = [0]


@contextlib.contextmanager
def loss_parallel():
    """Within the block, ``F.cross_entropy`` on class-sharded DTensor logits is computed in
    parallel (see the module docstring); the backward may run inside or after it.

    Example:
        >>> from tensorbrain.distributed.tensor.parallel import loss_parallel
        >>> with loss_parallel():
        ...     pass
    """
    _ACTIVE[0] += 1
    try:
        yield
    finally:
        _ACTIVE[0] -= 1


def _allreduce(arr, op, group):
    from ...tensor import Tensor
    c10d.all_reduce(Tensor._wrap(arr), op=op, group=group)
    return arr


def cross_entropy(input, target, weight, ignore_index: int, reduction: str,
                  label_smoothing: float):
    """The hook: ``NotImplemented`` outside ``loss_parallel`` or for other layouts."""
    spec = input._spec
    if all(p.is_replicate() for p in spec.placements):
        return NotImplemented   # the local copy is the whole tensor
    sharded = [p for p in spec.placements if isinstance(p, Shard)]
    if not _ACTIVE[0] or len(spec.shape) != 2 or spec.mesh.ndim != 1 or \
            not sharded or sharded[0].dim != 1:
        raise NotImplementedError(f"cross_entropy on a DTensor of shape {spec.shape} placed "
                                  f"{spec.placements}: TensorBrain computes it for (N, C) logits "
                                  f"placed Shard(1) on a 1-D mesh inside `with loss_parallel():`"
                                  f"; otherwise call .full_tensor() first")
    if weight is not None or label_smoothing:
        raise NotImplementedError("loss_parallel: class weights and label smoothing are not "
                                  "supported by TensorBrain's parallel cross-entropy")
    tgt = target._data   # a replicated DTensor's local data is the whole target
    if tgt.dtype.kind not in "iu" or tgt.shape != (spec.shape[0],):
        raise RuntimeError(f"loss_parallel: cross_entropy needs class indices of shape "
                           f"({spec.shape[0]},), got {tgt.dtype} {tuple(tgt.shape)}")
    mesh, group = spec.mesh, spec.mesh.get_group(0)
    x = input._data
    xp = _xp.get_array_module(x)
    lo = R.local_offset(spec.shape, mesh, spec.placements)[1]
    n_cls = x.shape[1]
    valid = tgt != ignore_index
    if ((tgt < 0) | (tgt >= spec.shape[1]))[valid].any():
        raise IndexError(f"cross_entropy: a target is out of bounds for {spec.shape[1]} classes")
    m = x.max(axis=1) if n_cls else xp.full(x.shape[0], -np.inf, x.dtype)
    m = _allreduce(xp.ascontiguousarray(m), c10d.ReduceOp.MAX, group)
    e = xp.exp(x - m[:, None])
    s = _allreduce(xp.ascontiguousarray(e.sum(axis=1)), c10d.ReduceOp.SUM, group)
    mine = valid & (tgt >= lo) & (tgt < lo + n_cls)
    rows = xp.arange(x.shape[0])
    cols = xp.where(mine, tgt - lo, 0)
    picked = xp.where(mine, x[rows, cols] if n_cls else 0, 0).astype(x.dtype)
    picked = _allreduce(xp.ascontiguousarray(picked), c10d.ReduceOp.SUM, group)
    per = xp.where(valid, xp.log(s) + m - picked, 0).astype(x.dtype)
    count = int(valid.sum())
    if reduction == "mean":
        out, scale = per.sum() / count, 1.0 / count   # 0 valid rows: nan, as torch
    elif reduction == "sum":
        out, scale = per.sum(), 1.0
    else:
        out, scale = per, None

    def backward(g):
        grad = e / s[:, None]
        if n_cls:
            grad[rows[mine], cols[mine]] -= 1
        grad = grad * valid[:, None]
        w = g[:, None] if scale is None else g * scale
        return (grad * w).astype(x.dtype, copy=False),
    with bypassed():
        t = make(xp.asarray(out, dtype=x.dtype), (input,), backward, "LossParallelBackward")
    shape = tuple(per.shape) if reduction == "none" else ()
    return type(input)._make(t._data, DTensorSpec(mesh, (Replicate(),), shape), like=t)
