"""``Unfold`` and ``Fold`` (``torch.nn.modules.fold``): im2col and col2im as layers."""
from __future__ import annotations

from .. import functional as F
from .module import Module


class Unfold(Module):
    """Sliding blocks as columns (``F.unfold``).

    Args:
        kernel_size: the block size.
        dilation: the spacing inside a block.
        padding: zeros on each side.
        stride: the step.
    """

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    """Columns summed back into an image (``F.fold``).

    Args:
        output_size: the image's spatial size.
        kernel_size: the block size.
        dilation: the spacing inside a block.
        padding: the padding unfold added.
        stride: the step.
    """

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")
