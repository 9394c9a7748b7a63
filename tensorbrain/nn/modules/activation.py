"""Activation modules: thin wrappers over ``tb.nn.functional`` with PyTorch's reprs."""
from __future__ import annotations

from .. import functional as F
from .module import Module


class ReLU(Module):
    """max(0, x). ``inplace`` is accepted for PyTorch compatibility; see ``extra_repr``.

    Args:
        inplace: accepted for PyTorch compatibility.
    """

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    """``x`` if positive else ``negative_slope * x``.

    Args:
        negative_slope: the slope for negative inputs.
        inplace: accepted for PyTorch compatibility.

    Example:
        >>> import tensorbrain as tb
        >>> tb.nn.LeakyReLU(0.5)(tb.tensor([-2.0, 3.0])).tolist()
        [-1.0, 3.0]
    """
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class GELU(Module):
    """Gaussian error linear unit; ``approximate='tanh'`` selects the tanh approximation.

    Args:
        approximate: ``"none"`` (exact, with erf) or ``"tanh"``.

    Raises:
        ValueError: another ``approximate``.
    """

    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate='{self.approximate}'"


class SiLU(Module):
    """x * sigmoid(x) (a.k.a. swish).

    Args:
        inplace: accepted for PyTorch compatibility (the result is a new tensor).
    """

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.silu(input)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Tanh(Module):
    """The hyperbolic tangent, element-wise."""
    def forward(self, input):
        return input.tanh()


class Sigmoid(Module):
    """``1 / (1 + exp(-x))``, element-wise."""
    def forward(self, input):
        return input.sigmoid()


class Softmax(Module):
    """Softmax over ``dim`` (give it explicitly; PyTorch's implicit choice is deprecated).

    Args:
        dim: the dimension whose entries sum to 1.
    """

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, dim=self.dim if self.dim is not None else _legacy_dim(input))

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """``log(softmax(x))`` over ``dim``, computed stably.

    Args:
        dim: the dimension to normalise over (give it explicitly; PyTorch's implicit choice is
            deprecated).
    """
    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.log_softmax(input, dim=self.dim if self.dim is not None else _legacy_dim(input))

    def extra_repr(self):
        return f"dim={self.dim}"


def _legacy_dim(input):
    # PyTorch's _get_softmax_dim: 0 for 0-, 1- and 3-D inputs, else 1.
    return 0 if input.dim() in (0, 1, 3) else 1


# ***** more activations *****
class _Elementwise(Module):
    """A parameter-free activation ``F.<name>(input)``; ``inplace`` accepted for torch programs
    (the result is a new tensor either way)."""
    _fn: staticmethod | None = None  # each subclass sets its F.<name>

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return type(self)._fn(input)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Mish(_Elementwise):
    """``x * tanh(softplus(x))``."""
    _fn = staticmethod(F.mish)


class Hardswish(_Elementwise):
    """``x * relu6(x + 3) / 6``."""
    _fn = staticmethod(F.hardswish)


class Hardsigmoid(_Elementwise):
    """``relu6(x + 3) / 6``."""
    _fn = staticmethod(F.hardsigmoid)


class ReLU6(_Elementwise):
    """``min(max(0, x), 6)``."""
    _fn = staticmethod(F.relu6)


class LogSigmoid(Module):
    """``log(sigmoid(x))``."""

    def forward(self, input):
        return F.logsigmoid(input)


class Softplus(Module):
    """``log(1 + exp(beta * x)) / beta``, linear above ``threshold``.

    Args:
        beta: the sharpness.
        threshold: above ``beta * x > threshold`` the result is ``x``.
    """

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class ELU(Module):
    """``x`` if positive else ``alpha * (exp(x) - 1)``.

    Args:
        alpha: the value the output tends to for large negative inputs.
        inplace: accepted for PyTorch compatibility.
    """

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.elu(input, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Hardtanh(Module):
    """``clamp(x, min_val, max_val)``.

    Args:
        min_val: the lower bound.
        max_val: the upper bound.
        inplace: accepted for PyTorch compatibility.
    """

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
        super().__init__()
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + \
            (", inplace=True" if self.inplace else "")


class PReLU(Module):
    """``max(0, x) + weight * min(0, x)`` with a learnt ``weight``: one value, or one per
    channel (dim 1) with ``num_parameters=C``; initialised to ``init`` (torch's 0.25).

    >>> import tensorbrain as tb
    >>> tb.nn.PReLU()(tb.tensor([-2.0, 3.0])).tolist()
    [-0.5, 3.0]

    Args:
        num_parameters: 1, or the number of channels C.
        init: the initial value of ``weight``.
        device: the device of ``weight``.
        dtype: the dtype of ``weight``; None for the default dtype.
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
        super().__init__()
        from ... import _dtype
        from ...tensor import full
        from ..parameter import Parameter
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(full((num_parameters,), init,
                                     dtype=dtype or _dtype.get_default_dtype(), device=device))

    def reset_parameters(self):
        """Set every entry of ``weight`` back to ``init``."""
        from .. import init as _init
        _init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


from .attention import MultiheadAttention  # noqa: E402,F401  (torch.nn.modules.activation's)


class _Functional(Module):
    """An activation whose forward is one ``F`` function with the layer's arguments."""

    _fn = ""
    _args: tuple = ()

    def forward(self, input):
        return getattr(F, self._fn)(input, *(getattr(self, a) for a in self._args))

    def extra_repr(self):
        return ", ".join(f"{a}={getattr(self, a)}" for a in self._args)


class GLU(_Functional):
    """``a * sigmoid(b)`` of the two halves along ``dim`` (``F.glu``).

    Args:
        dim: the dimension to split.
    """

    _fn, _args = "glu", ("dim",)

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim


class SELU(_Functional):
    """``F.selu``.

    Args:
        inplace: accepted.
    """

    _fn = "selu"

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace


class CELU(_Functional):
    """``F.celu``.

    Args:
        alpha: the scale of the negative part.
        inplace: accepted.
    """

    _fn, _args = "celu", ("alpha",)

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace


class Softsign(_Functional):
    """``x / (1 + |x|)`` (``F.softsign``)."""

    _fn = "softsign"


class Tanhshrink(_Functional):
    """``x - tanh(x)`` (``F.tanhshrink``)."""

    _fn = "tanhshrink"


class Softshrink(_Functional):
    """``F.softshrink``.

    Args:
        lambd: the threshold.
    """

    _fn, _args = "softshrink", ("lambd",)

    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd


class Hardshrink(Softshrink):
    """``F.hardshrink`` (arguments as :class:`Softshrink`)."""

    _fn = "hardshrink"


class Threshold(_Functional):
    """``F.threshold``.

    Args:
        threshold: the threshold.
        value: the replacement below it.
        inplace: accepted.
    """

    _fn, _args = "threshold", ("threshold", "value")

    def __init__(self, threshold: float, value: float, inplace: bool = False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace


class Softmin(_Functional):
    """``F.softmin`` over ``dim``.

    Args:
        dim: the dimension.
    """

    _fn, _args = "softmin", ("dim",)

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim


class Softmax2d(Module):
    """Softmax over the channels of ``(N, C, H, W)`` or ``(C, H, W)``."""

    def forward(self, input):
        return F.softmax(input, -3)
