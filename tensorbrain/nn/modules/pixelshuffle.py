"""``PixelShuffle`` and ``PixelUnshuffle`` (as ``torch.nn.modules.pixelshuffle``)."""
from __future__ import annotations

from ..._ops import resample as _R
from .module import Module


class PixelShuffle(Module):
    """``(*, C * r^2, H, W) -> (*, C, H * r, W * r)``.

    >>> import tensorbrain as tb
    >>> tb.nn.PixelShuffle(3)(tb.ones(1, 9, 4, 4)).shape
    tb.Size([1, 1, 12, 12])
    """

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return _R.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """``(*, C, H * r, W * r) -> (*, C * r^2, H, W)``.

    >>> import tensorbrain as tb
    >>> tb.nn.PixelUnshuffle(2)(tb.ones(1, 1, 4, 4)).shape
    tb.Size([1, 4, 2, 2])
    """

    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return _R.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"
