"""``SyncBatchNorm``: batch norm whose statistics cover the batch of *every* rank.

With DDP each rank sees only its shard, so plain BatchNorm normalises with per-rank statistics
(noisy for small per-rank batches, and not what one process on the whole batch computes).
SyncBatchNorm all_reduces the per-channel sums in forward and the two gradient sums in
backward, so forward, backward and the running statistics equal one process on the
concatenated batch (the test checks exactly that).

Forward uses two all_reduces -- the sums and counts for the mean, then the sums of squared
deviations from that mean -- rather than PyTorch's one all_gather of (mean, invstd, count):
one more latency per layer, but the variance is computed exactly as one process would (no
``E[x^2] - E[x]^2`` cancellation), and ranks may hold batches of different sizes.

>>> import tensorbrain as tb
>>> m = tb.nn.SyncBatchNorm.convert_sync_batchnorm(tb.nn.Sequential(tb.nn.BatchNorm1d(4)))
>>> type(m[0]).__name__
'SyncBatchNorm'
"""
from __future__ import annotations

import numpy as np

from ..._ops.core import make
from ..._xp import get_array_module
from ...tensor import Tensor
from ._norm_base import _BatchNorm

__all__ = ["SyncBatchNorm"]


def _dist():
    from ... import distributed
    return distributed


def sync_batch_norm(input, running_mean, running_var, weight, bias, momentum, eps, group):
    """Training-mode batch norm with statistics and gradient sums all-reduced over ``group``."""
    dist = _dist()
    x = input._data
    xp = get_array_module(x)
    c = x.shape[1]
    axes = (0,) + tuple(range(2, x.ndim))
    bshape = (1, c) + (1,) * (x.ndim - 2)
    n_local = x.size // c
    # 1. global mean: all_reduce [sum over the local batch (c values), local count]
    buf = xp.empty(c + 1, dtype=np.float64)
    buf[:c] = x.sum(axis=axes, dtype=np.float64)
    buf[c] = n_local
    dist.all_reduce(Tensor._wrap(buf), group=group)
    n = float(buf[c])
    if n <= 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got {int(n)} "
                         f"over all ranks (input size {tuple(x.shape)} here)")
    mu = (buf[:c] / n).astype(x.dtype).reshape(bshape)
    xc = x - mu
    # 2. global biased variance: all_reduce the sums of squared deviations
    sq = (xc * xc).sum(axis=axes, dtype=np.float64)
    dist.all_reduce(Tensor._wrap(sq), group=group)
    var = (sq / n).astype(x.dtype)
    rstd = (1 / xp.sqrt(var + eps)).reshape(bshape)
    if running_mean is not None:
        rm = running_mean._data
        rm *= 1 - momentum
        rm += momentum * mu.reshape(c).astype(rm.dtype)
        running_mean._version[0] += 1
    if running_var is not None:
        rv = running_var._data
        rv *= 1 - momentum
        rv += (momentum * n / (n - 1)) * var.astype(rv.dtype)  # unbiased, as PyTorch
        running_var._version[0] += 1
    xhat = xc * rstd
    wd = weight._data.reshape(bshape) if weight is not None else None
    out = xhat * wd if wd is not None else xhat.copy()
    if bias is not None:
        out += bias._data.reshape(bshape)

    def backward(g):
        gx = gw = gb = None
        if input.requires_grad:
            gxhat = g * wd if wd is not None else g
            sums = xp.empty(2 * c, dtype=np.float64)
            sums[:c] = gxhat.sum(axis=axes, dtype=np.float64)
            sums[c:] = (gxhat * xhat).sum(axis=axes, dtype=np.float64)
            dist.all_reduce(Tensor._wrap(sums), group=group)
            mean_dy = (sums[:c] / n).astype(x.dtype).reshape(bshape)
            mean_dy_xhat = (sums[c:] / n).astype(x.dtype).reshape(bshape)
            gx = rstd * (gxhat - mean_dy - xhat * mean_dy_xhat)
        if weight is not None and weight.requires_grad:
            gw = (g * xhat).sum(axis=axes)   # local: DDP averages parameter gradients
        if bias is not None and bias.requires_grad:
            gb = g.sum(axis=axes)
        return gx, gw, gb
    return make(out, (input, weight, bias), backward, "SyncBatchNormBackward",
                (weight,) if weight is not None else ())


class SyncBatchNorm(_BatchNorm):
    """``torch.nn.SyncBatchNorm``: batch norm over N-D input (N, C, ...) synchronised across the
    ranks of ``process_group`` (default: the world) in training; plain batch norm otherwise."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        dist = _dist()
        need_sync = (self.training and dist.is_available() and dist.is_initialized()
                     and dist.get_world_size(self.process_group) > 1)
        if not need_sync:
            return super().forward(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked._data += 1
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked._data)
        track = self.track_running_stats
        return sync_batch_norm(input, self.running_mean if track else None,
                               self.running_var if track else None, self.weight, self.bias,
                               factor, self.eps, self.process_group)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """Replace every BatchNorm*d in ``module`` by a SyncBatchNorm sharing its parameters and
        buffers (``torch.nn.SyncBatchNorm.convert_sync_batchnorm``); returns the new module."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = cls.__new__(cls)
            _BatchNorm.__init__(out, module.num_features, module.eps, module.momentum,
                                module.affine, module.track_running_stats)
            out.process_group = process_group
            for name in ("weight", "bias"):
                p = module._parameters.get(name)
                out._parameters[name] = p
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                out._buffers[name] = module._buffers.get(name)
            out.training = module.training
            if hasattr(module, "qconfig"):
                out.qconfig = module.qconfig
        for name, child in module.named_children():
            new = cls.convert_sync_batchnorm(child, process_group)
            if new is not child:
                out._modules[name] = new
        return out

