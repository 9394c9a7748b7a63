"""Instance normalisation: ``InstanceNorm1d``/``2d``/``3d`` (``torch.nn.modules.instancenorm``):
each channel of each sample normalised over its positions; ``affine`` and
``track_running_stats`` are off by default, as torch's."""
from __future__ import annotations

from .. import functional as F
from ._norm_base import _NormBase


class _InstanceNorm(_NormBase):
    _dims = 0

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device=None,
                 dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype)

    def forward(self, input):
        if input.dim() not in (self._dims + 1, self._dims + 2):
            raise ValueError(f"expected {self._dims + 1}D or {self._dims + 2}D input (got "
                             f"{input.dim()}D input)")
        unbatched = input.dim() == self._dims + 1
        x = input.unsqueeze(0) if unbatched else input
        out = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats, self.momentum,
                              self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Instance norm over ``(N, C, L)`` or ``(C, L)``.

    Args:
        num_features: C.
        eps: added to the variance.
        momentum: the running statistics' update factor.
        affine: learn a per-channel weight and bias.
        track_running_stats: keep running statistics (used in eval mode).
        device: the parameters' device.
        dtype: the parameters' dtype.
    """
    _dims = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance norm over ``(N, C, H, W)`` or ``(C, H, W)`` (arguments as
    :class:`InstanceNorm1d`)."""
    _dims = 2


class InstanceNorm3d(_InstanceNorm):
    """Instance norm over ``(N, C, D, H, W)`` or ``(C, D, H, W)`` (arguments as
    :class:`InstanceNorm1d`)."""
    _dims = 3
