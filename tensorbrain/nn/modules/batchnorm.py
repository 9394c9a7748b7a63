"""Batch normalisation: ``BatchNorm1d``, ``BatchNorm2d``, ``BatchNorm3d``, on the
``_NormBase`` / ``_BatchNorm`` base of _norm_base.py (re-exported here, torch's path; the
running statistics are described there), and torch's path of ``SyncBatchNorm``.
"""
from __future__ import annotations

from ._norm_base import _BatchNorm, _NormBase  # noqa: F401  (torch's path of the bases)


class BatchNorm1d(_BatchNorm):
    """Batch norm over ``(N, C)`` or ``(N, C, L)`` inputs, per channel ``C``.

    >>> import tensorbrain as tb
    >>> bn = tb.nn.BatchNorm1d(3)
    >>> y = bn(tb.randn(8, 3))
    >>> sorted(bn.state_dict())
    ['bias', 'num_batches_tracked', 'running_mean', 'running_var', 'weight']
    """

    def _check_input_dim(self, input):
        if input.dim() not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch norm over ``(N, C, H, W)`` inputs, per channel ``C``."""

    def _check_input_dim(self, input):
        if input.dim() != 4:
            raise ValueError(f"expected 4D input (got {input.dim()}D input)")


class BatchNorm3d(_BatchNorm):
    """Batch norm over ``(N, C, D, H, W)`` inputs, per channel ``C``."""

    def _check_input_dim(self, input):
        if input.dim() != 5:
            raise ValueError(f"expected 5D input (got {input.dim()}D input)")


def __getattr__(name):
    # torch.nn.modules.batchnorm.SyncBatchNorm: programs name it at torch's path (timm,
    # Lightning); it lives in sync_batchnorm.py, which builds on this module.
    if name == "SyncBatchNorm":
        from .sync_batchnorm import SyncBatchNorm
        return SyncBatchNorm
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
