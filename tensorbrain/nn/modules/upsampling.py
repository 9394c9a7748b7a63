"""``Upsample``, ``UpsamplingNearest2d``, ``UpsamplingBilinear2d`` (``torch.nn.modules.upsampling``)."""
from __future__ import annotations

from ..._ops import resample as _R
from .module import Module


class Upsample(Module):
    """Resize by ``scale_factor`` or to ``size`` with ``F.interpolate``'s modes (nearest,
    nearest-exact, linear, bilinear, bicubic, trilinear, area).

    >>> import tensorbrain as tb
    >>> tb.nn.Upsample(scale_factor=2, mode="bilinear")(tb.ones(1, 3, 4, 4)).shape
    tb.Size([1, 3, 8, 8])
    """

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, input):
        return _R.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                              recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        what = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else \
            f"size={self.size!r}"
        return f"{what}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Nearest 2-D upsampling (``Upsample(mode='nearest')``)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear 2-D upsampling with ``align_corners=True`` (as PyTorch's)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
