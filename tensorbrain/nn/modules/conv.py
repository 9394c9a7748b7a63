"""``Conv2d`` (and ``Conv1d`` as a thin reshape of it)."""
from __future__ import annotations

import math

from ... import _dtype
from ...tensor import empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module


def _pair(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x, x)


class Conv2d(Module):
    """2-D convolution over ``(N, C_in, H, W)``; weight ``(C_out, C_in // groups, kH, kW)``.

    Initialised as PyTorch does (``kaiming_uniform_(a=sqrt(5))``, bias U(+-1/sqrt(fan_in))).
    ``padding`` may be an int, a pair, ``'valid'`` or ``'same'`` (stride 1); only
    ``padding_mode='zeros'`` is supported.

    >>> import tensorbrain as tb
    >>> conv = tb.nn.Conv2d(1, 4, 3, padding=1)
    >>> conv(tb.ones(2, 1, 8, 8)).shape
    tb.Size([2, 4, 8, 8])
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None):
        super().__init__()
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"in_channels ({in_channels}) and out_channels ({out_channels}) "
                             f"must both be divisible by groups ({groups})")
        if padding_mode != "zeros":
            raise NotImplementedError(f"Conv2d: padding_mode={padding_mode!r} is not supported "
                                      f"(only 'zeros'); pad the input yourself")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 f"{{'valid', 'same'}}")
            if padding == "same" and _pair(stride) != (1, 1):
                raise ValueError("padding='same' is not supported for strided convolutions")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = _pair(kernel_size)
        self.stride = _pair(stride)
        self.padding = padding if isinstance(padding, str) else _pair(padding)
        self.dilation = _pair(dilation)
        self.groups = groups
        self.padding_mode = padding_mode
        dtype = dtype or _dtype.get_default_dtype()
        self.weight = Parameter(empty(out_channels, in_channels // groups, *self.kernel_size,
                                      dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _padding(self):
        if self.padding == "valid":
            return (0, 0)
        if self.padding == "same":
            total = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
            if any(t % 2 for t in total):
                raise NotImplementedError("padding='same' with an even effective kernel size "
                                          "needs asymmetric padding, which is not supported")
            return tuple(t // 2 for t in total)
        return self.padding

    def forward(self, input):
        return F.conv2d(input, self.weight, self.bias, self.stride, self._padding(),
                        self.dilation, self.groups)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, " \
            f"stride={self.stride}"
        if self.padding != (0, 0):
            s += f", padding={self.padding!r}" if isinstance(self.padding, str) else \
                f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s
