"""``Linear`` (y = x W^T + b) and ``Identity``."""
from __future__ import annotations

import math

from ... import _dtype
from ...tensor import empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module


class Identity(Module):
    """Returns its input unchanged; accepts and ignores any constructor arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight`` of shape (out_features, in_features).

    Initialised as in PyTorch: ``kaiming_uniform_(weight, a=sqrt(5))``, i.e. U(-1/sqrt(in),
    1/sqrt(in)), and the bias from the same bound.

    >>> import tensorbrain as tb
    >>> fc = tb.nn.Linear(3, 2)
    >>> fc(tb.ones(4, 3)).shape, fc
    (tb.Size([4, 2]), Linear(in_features=3, out_features=2, bias=True))
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        dtype = dtype or _dtype.get_default_dtype()
        self.weight = Parameter(empty(out_features, in_features, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-initialise weight and bias as torch does (Kaiming-uniform weight, uniform bias)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class NonDynamicallyQuantizableLinear(Linear):
    """torch's name for MultiheadAttention's output projection
    (``torch.nn.modules.linear.NonDynamicallyQuantizableLinear``): a :class:`Linear`, which
    programs name when they initialise or inspect ``out_proj``."""


class Bilinear(Module):
    """``y = x1^T A x2 + b`` (``torch.nn.Bilinear``): weight ``(out, in1, in2)``, bias
    ``(out,)``, both initialised uniform in ``±1/sqrt(in1)``, as torch's.

    Args:
        in1_features: the size of ``x1``'s last dimension.
        in2_features: the size of ``x2``'s last dimension.
        out_features: the output size.
        bias: learn a bias.
        device: the parameters' device.
        dtype: the parameters' dtype.
    """

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        dtype = dtype or _dtype.get_default_dtype()
        self.weight = Parameter(empty(out_features, in1_features, in2_features, dtype=dtype,
                                      device=device))
        if bias:
            self.bias = Parameter(empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Uniform in ``±1/sqrt(in1_features)``, as torch."""
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
