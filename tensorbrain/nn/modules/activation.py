"""Activation modules: thin wrappers over ``tb.nn.functional`` with PyTorch's reprs."""
from __future__ import annotations

from .. import functional as F
from .module import Module


class ReLU(Module):
    """max(0, x). ``inplace`` is accepted for PyTorch compatibility; see ``extra_repr``."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class GELU(Module):
    """Gaussian error linear unit; ``approximate='tanh'`` selects the tanh approximation."""

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
    """x * sigmoid(x) (a.k.a. swish)."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.silu(input)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Tanh(Module):
    def forward(self, input):
        return input.tanh()


class Sigmoid(Module):
    def forward(self, input):
        return input.sigmoid()


class Softmax(Module):
    """Softmax over ``dim`` (give it explicitly; PyTorch's implicit choice is deprecated)."""

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, dim=self.dim if self.dim is not None else _legacy_dim(input))

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
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
