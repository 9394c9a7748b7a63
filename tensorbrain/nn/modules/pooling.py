"""Pooling: ``MaxPool1d/2d/3d``, ``AvgPool1d/2d/3d``, ``AdaptiveAvgPool1d/2d/3d``,
``AdaptiveMaxPool1d/2d/3d``."""
from __future__ import annotations

from .. import functional as F
from .module import Module


class MaxPool2d(Module):
    """Max over ``kernel_size`` windows (``stride`` defaults to ``kernel_size``)."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """Mean over ``kernel_size`` windows."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input):
        kwargs = {}
        if self.divisor_override is not None:
            kwargs["divisor_override"] = self.divisor_override
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, **kwargs)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """Average pooling to a fixed ``output_size`` (``(1, 1)`` = global average pooling)."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class _PoolNd(Module):
    """A pooling layer whose forward is one ``F`` function of the input and its arguments."""

    _fn = ""
    _args: tuple = ()

    def forward(self, input):
        return getattr(F, self._fn)(input, *(getattr(self, a) for a in self._args))

    def extra_repr(self):
        return ", ".join(f"{a}={getattr(self, a)}" for a in self._args)


class MaxPool1d(_PoolNd):
    """Max over windows of ``(N, C, L)`` (``F.max_pool1d``).

    Args:
        kernel_size: the window length.
        stride: the step (default ``kernel_size``).
        padding: implicit -inf at both ends.
        dilation: the spacing inside a window.
        return_indices: also return the positions.
        ceil_mode: round the output up.
    """

    _fn, _args = "max_pool1d", ("kernel_size", "stride", "padding", "dilation", "ceil_mode",
                                "return_indices")

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode


class MaxPool3d(MaxPool1d):
    """Max over windows of ``(N, C, D, H, W)`` (``F.max_pool3d``; arguments as
    :class:`MaxPool1d`)."""

    _fn = "max_pool3d"


class AvgPool1d(_PoolNd):
    """Mean over windows of ``(N, C, L)`` (``F.avg_pool1d``).

    Args:
        kernel_size: the window length.
        stride: the step (default ``kernel_size``).
        padding: zeros at both ends.
        ceil_mode: round the output up.
        count_include_pad: count the padding in the divisor.
    """

    _fn, _args = "avg_pool1d", ("kernel_size", "stride", "padding", "ceil_mode",
                                "count_include_pad")

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, count_include_pad


class AvgPool3d(AvgPool1d):
    """Mean over windows of ``(N, C, D, H, W)`` (``F.avg_pool3d``; arguments as
    :class:`AvgPool1d`)."""

    _fn = "avg_pool3d"


class AdaptiveAvgPool1d(_PoolNd):
    """Average pooling to ``output_size`` positions (``F.adaptive_avg_pool1d``).

    Args:
        output_size: the output size.
    """

    _fn, _args = "adaptive_avg_pool1d", ("output_size",)

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size


class AdaptiveAvgPool3d(AdaptiveAvgPool1d):
    """Average pooling to ``output_size`` (``F.adaptive_avg_pool3d``)."""

    _fn = "adaptive_avg_pool3d"


class AdaptiveMaxPool1d(AdaptiveAvgPool1d):
    """Max pooling to ``output_size`` (``F.adaptive_max_pool1d``)."""

    _fn = "adaptive_max_pool1d"


class AdaptiveMaxPool2d(AdaptiveAvgPool1d):
    """Max pooling to ``output_size`` (``F.adaptive_max_pool2d``)."""

    _fn = "adaptive_max_pool2d"


class AdaptiveMaxPool3d(AdaptiveAvgPool1d):
    """Max pooling to ``output_size`` (``F.adaptive_max_pool3d``)."""

    _fn = "adaptive_max_pool3d"
