"""``LayerNorm`` and ``GroupNorm`` (per-sample normalisation, no running statistics)."""
from __future__ import annotations

import numbers

from ... import _dtype
from ...tensor import ones, zeros
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module


def _register_affine(module, shape, affine: bool, bias: bool, dtype, device) -> None:
    """Register ``weight`` (ones) and ``bias`` (zeros) of ``shape`` on ``module``, each None
    where switched off (no weight without ``affine``); shared with the BatchNorm classes."""
    if affine:
        module.weight = Parameter(ones(*shape, dtype=dtype, device=device))
        if bias:
            module.bias = Parameter(zeros(*shape, dtype=dtype, device=device))
        else:
            module.register_parameter("bias", None)
    else:
        module.register_parameter("weight", None)
        module.register_parameter("bias", None)


def _reset_affine(module) -> None:
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


class LayerNorm(Module):
    """Normalise over the trailing ``normalized_shape`` dims, then scale and shift.

    >>> import tensorbrain as tb
    >>> ln = tb.nn.LayerNorm(4)
    >>> abs(ln(tb.randn(2, 4)).mean().item()) < 1e-5
    True

    Args:
        normalized_shape: the trailing shape to normalise over (an int for the last dim).
        eps: added to the variance for stability.
        elementwise_affine: learn ``weight`` (ones) and ``bias`` (zeros).
        bias: learn ``bias`` too (when ``elementwise_affine``).
        device: the device of the parameters.
        dtype: the dtype of the parameters.
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps, self.elementwise_affine, self.use_bias = eps, elementwise_affine, bias
        _register_affine(self, self.normalized_shape, elementwise_affine, bias,
                         dtype or _dtype.get_default_dtype(), device)

    def reset_parameters(self) -> None:
        """Reset the affine weight to ones and bias to zeros."""
        _reset_affine(self)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.use_bias}")


class GroupNorm(Module):
    """Normalise ``(N, C, ...)`` over groups of ``C // num_groups`` channels, per sample.

    Args:
        num_groups: the number of groups; must divide ``num_channels``.
        num_channels: C.
        eps: added to the variance for stability.
        affine: learn per-channel ``weight`` (ones) and ``bias`` (zeros).
        device: the device of the parameters.
        dtype: the dtype of the parameters.
        bias: learn ``bias`` too (when ``affine``).

    Raises:
        ValueError: ``num_channels`` is not divisible by ``num_groups``.
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 device=None, dtype=None, bias: bool = True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = \
            num_groups, num_channels, eps, affine
        self.use_bias = affine and bias
        _register_affine(self, (num_channels,), affine, self.use_bias,
                         dtype or _dtype.get_default_dtype(), device)

    def reset_parameters(self) -> None:
        """Reset the affine weight to ones and bias to zeros."""
        _reset_affine(self)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.use_bias}")


class RMSNorm(Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the trailing ``normalized_shape`` dims;
    ``eps`` None means the dtype's machine epsilon (torch's default).

    >>> import tensorbrain as tb
    >>> tb.nn.RMSNorm(4)(tb.ones(2, 4) * 3).tolist()[0]
    [1.0, 1.0, 1.0, 1.0]

    Args:
        normalized_shape: the trailing shape to normalise over (an int for the last dim).
        eps: added to the mean square; None for the dtype's machine epsilon.
        elementwise_affine: learn ``weight`` (ones).
        device: the device of ``weight``.
        dtype: the dtype of ``weight``.
    """

    def __init__(self, normalized_shape, eps: float | None = None,
                 elementwise_affine: bool = True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ones(*self.normalized_shape,
                                         dtype=dtype or _dtype.get_default_dtype(), device=device))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self) -> None:
        """Reset the weight to ones."""
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class LocalResponseNorm(Module):
    """``F.local_response_norm`` across channels (``torch.nn.LocalResponseNorm``).

    Args:
        size: how many neighbouring channels.
        alpha: the scale.
        beta: the exponent.
        k: the additive constant.
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
