"""``Conv1d/2d/3d`` and ``ConvTranspose1d/2d/3d``: one N-d base each, as ``torch.nn.modules.conv``.

The arithmetic is ``tensorbrain/_ops/convnd.py`` (im2col/col2im and GEMMs). ``padding_mode``
other than ``'zeros'`` pads the input with ``F.pad`` first and convolves without padding, as
PyTorch does.
"""
from __future__ import annotations

import math

from ... import _dtype
from ..._ops import convnd as _C
from ..._ops.conv import conv2d as _conv2d
from ..._ops.windows import ntuple as _ntuple
from ...tensor import empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    """Shared by the convolutions and transposed convolutions: options, weight, initialisation."""

    _nd = 2
    _transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None, output_padding=0):
        super().__init__()
        nd, name = self._nd, type(self).__name__
        if groups <= 0:
            raise ValueError(f"{name}: groups must be a positive integer, got {groups}")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must both be divisible by groups ({groups})")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {_PADDING_MODES}, got "
                             f"{padding_mode!r}")
        if self._transposed and padding_mode != "zeros":
            raise ValueError(f"Only 'zeros' padding mode is supported for {name}")
        self.kernel_size = _ntuple(kernel_size, nd, "kernel_size")
        self.stride = _ntuple(stride, nd, "stride")
        self.dilation = _ntuple(dilation, nd, "dilation")
        if isinstance(padding, str):
            if self._transposed or padding not in ("same", "valid"):
                raise ValueError(f"{name}: invalid padding string {padding!r}" + (
                    " (transposed convolutions take ints)" if self._transposed else
                    ", should be one of {'valid', 'same'}"))
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _ntuple(padding, nd, "padding")
        self.output_padding = _ntuple(output_padding, nd, "output_padding")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.groups, self.padding_mode, self.transposed = groups, padding_mode, self._transposed
        dtype = dtype or _dtype.get_default_dtype()
        shape = (in_channels, out_channels // groups) if self._transposed else \
            (out_channels, in_channels // groups)
        self.weight = Parameter(empty(*shape, *self.kernel_size, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's initialisation: ``kaiming_uniform_(a=sqrt(5))``, bias U(+-1/sqrt(fan_in))."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _pad_input(self, input):
        """Non-zero padding modes: ``F.pad`` the input (last dim first, as ``F.pad`` wants)."""
        if self.padding == "valid":
            return input
        if self.padding == "same":
            tot = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size, strict=True)]
            pairs = [(t // 2, t - t // 2) for t in tot]
        else:
            pairs = [(p, p) for p in self.padding]
        flat = [v for pair in reversed(pairs) for v in pair]
        return F.pad(input, flat, mode=self.padding_mode)

    def extra_repr(self):
        nd = self._nd
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, " \
            f"stride={self.stride}"
        if self.padding != (0,) * nd:
            s += f", padding={self.padding!r}" if isinstance(self.padding, str) else \
                f", padding={self.padding}"
        if self.dilation != (1,) * nd:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * nd:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype)

    def forward(self, input):
        # through the public functions: they carry the autocast hook (tb.autocast casts a
        # Conv2d's input and weight to float16/bfloat16, as PyTorch's autocast does)
        conv = _CONV[self._nd]
        if self.padding_mode != "zeros":
            return conv(self._pad_input(input), self.weight, self.bias, self.stride, 0,
                        self.dilation, self.groups)
        return conv(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                    self.groups)


class Conv1d(_Conv):
    """1-D convolution over ``(N, C_in, L)`` or ``(C_in, L)``; weight ``(C_out, C_in // groups, k)``.

    ``padding``: int, tuple, ``'valid'`` or ``'same'`` (stride 1; an even kernel puts the extra
    pixel at the end, as PyTorch). ``padding_mode``: zeros, reflect, replicate or circular.

    >>> import tensorbrain as tb
    >>> tb.nn.Conv1d(2, 4, 3, padding="same", padding_mode="circular")(tb.ones(1, 2, 7)).shape
    tb.Size([1, 4, 7])
    """
    _nd = 1


class Conv2d(_Conv):
    """2-D convolution over ``(N, C_in, H, W)``; weight ``(C_out, C_in // groups, kH, kW)``.

    Initialised as PyTorch does (``kaiming_uniform_(a=sqrt(5))``, bias U(+-1/sqrt(fan_in))).
    ``padding`` may be an int, a pair, ``'valid'`` or ``'same'`` (stride 1); ``padding_mode``
    zeros, reflect, replicate or circular.

    >>> import tensorbrain as tb
    >>> conv = tb.nn.Conv2d(1, 4, 3, padding=1)
    >>> conv(tb.ones(2, 1, 8, 8)).shape
    tb.Size([2, 4, 8, 8])
    """
    _nd = 2


class Conv3d(_Conv):
    """3-D convolution over ``(N, C_in, D, H, W)``; weight ``(C_out, C_in // groups, kD, kH, kW)``.

    >>> import tensorbrain as tb
    >>> tb.nn.Conv3d(1, 2, 3, padding=1)(tb.ones(1, 1, 4, 4, 4)).shape
    tb.Size([1, 2, 4, 4, 4])
    """
    _nd = 3


class _ConvTranspose(_ConvNd):
    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype, output_padding)

    def _output_padding(self, input, output_size):
        """``output_size`` (torch): the output_padding that gives that size, checked."""
        if output_size is None:
            return self.output_padding
        nd = self._nd
        output_size = tuple(int(s) for s in output_size)[-nd:]
        if len(output_size) != nd:
            raise ValueError(f"{type(self).__name__}: output_size must have {nd} or {nd + 2} "
                             f"elements, got {output_size}")
        res = []
        for i, want in enumerate(output_size):
            lo = (input.shape[-nd + i] - 1) * self.stride[i] - 2 * self.padding[i] + \
                self.dilation[i] * (self.kernel_size[i] - 1) + 1
            if not lo <= want < lo + max(self.stride[i], self.dilation[i]):
                raise ValueError(f"{type(self).__name__}: requested output size {output_size} "
                                 f"is not reachable from input of shape {tuple(input.shape)} "
                                 f"(dim {i}: between {lo} and "
                                 f"{lo + max(self.stride[i], self.dilation[i]) - 1})")
            res.append(want - lo)
        return tuple(res)

    def forward(self, input, output_size=None):
        return _CONV_T[self._nd](input, self.weight, self.bias, self.stride, self.padding,
                                 self._output_padding(input, output_size), self.groups,
                                 self.dilation)


class ConvTranspose1d(_ConvTranspose):
    """1-D transposed convolution; weight ``(C_in, C_out // groups, k)``. ``forward`` takes an
    optional ``output_size`` as in PyTorch; only ``padding_mode='zeros'`` (as PyTorch).

    >>> import tensorbrain as tb
    >>> tb.nn.ConvTranspose1d(2, 3, 4, stride=2, padding=1)(tb.ones(1, 2, 5)).shape
    tb.Size([1, 3, 10])
    """
    _nd = 1


class ConvTranspose2d(_ConvTranspose):
    """2-D transposed convolution; weight ``(C_in, C_out // groups, kH, kW)``. Output size per
    dim: ``(in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1``.

    >>> import tensorbrain as tb
    >>> up = tb.nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1)
    >>> up(tb.ones(2, 8, 16, 16)).shape
    tb.Size([2, 4, 32, 32])
    """
    _nd = 2


class ConvTranspose3d(_ConvTranspose):
    """3-D transposed convolution; weight ``(C_in, C_out // groups, kD, kH, kW)``.

    >>> import tensorbrain as tb
    >>> tb.nn.ConvTranspose3d(2, 1, 2, stride=2)(tb.ones(1, 2, 3, 3, 3)).shape
    tb.Size([1, 1, 6, 6, 6])
    """
    _nd = 3


# the public (autocast-aware) convolution functions each module's forward calls, by nd
_CONV = {1: _C.conv1d, 2: _conv2d, 3: _C.conv3d}
_CONV_T = {1: _C.conv_transpose1d, 2: _C.conv_transpose2d, 3: _C.conv_transpose3d}
