"""``torch.nn.utils.parametrizations``: ``weight_norm`` and ``spectral_norm`` as
parametrizations (``tensorbrain/nn/utils/parametrize.py``), with torch's state-dict names
(``parametrizations.weight.original0`` / ``original1`` for weight norm's ``g`` and ``v``,
``parametrizations.weight.original`` plus ``_u``/``_v`` buffers for spectral norm).
``orthogonal`` is refused by name (use ``tb.linalg.qr`` in the module's forward).
"""
from __future__ import annotations

from ..._ops import elementwise as E
from ..._ops import reduce as R
from ..._ops import shape as S
from ..._unsupported import unsupported
from ...autograd import grad_mode
from ..modules.module import Module
from . import parametrize
from .spectral_norm import SpectralNorm, _normalize

__all__ = ["weight_norm", "spectral_norm", "orthogonal"]


class _WeightNorm(Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def _norm(self, v):
        if self.dim is None:
            return R.norm(v)
        d = self.dim % v.ndim
        return R.norm(v, 2, tuple(i for i in range(v.ndim) if i != d), True)

    def forward(self, weight_g, weight_v):
        return E.mul(weight_v, E.div(weight_g, self._norm(weight_v)))

    def right_inverse(self, weight):
        return self._norm(weight), weight


def weight_norm(module, name: str = "weight", dim: int | None = 0):
    """``module.<name>`` as ``g * v / ||v||`` (``original0`` = g, ``original1`` = v), as
    ``torch.nn.utils.parametrizations.weight_norm``.

    Args:
        module: the module.
        name: the weight's name.
        dim: the dimension the norm keeps; None for one norm over the whole tensor.

    Returns:
        The module.
    """
    return parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)


class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        self.fn = SpectralNorm("weight", n_power_iterations, dim % max(weight.ndim, 1), eps)
        with grad_mode.no_grad():
            mat = self.fn.reshape_weight_to_matrix(weight)
            from ..._factories import empty
            self.register_buffer("_u", _normalize(empty(mat.shape[0], dtype=weight.dtype)
                                                  .normal_(0, 1), eps))
            self.register_buffer("_v", _normalize(empty(mat.shape[1], dtype=weight.dtype)
                                                  .normal_(0, 1), eps))

    def forward(self, weight):
        mat = self.fn.reshape_weight_to_matrix(weight)
        u, v = self._u, self._v
        if self.training:
            with grad_mode.no_grad():
                for _ in range(self.fn.n_power_iterations):
                    v._data[...] = _normalize(S.matmul(S.t(mat), u), self.fn.eps)._data
                    u._data[...] = _normalize(S.matmul(mat, v), self.fn.eps)._data
            u, v = S.clone(u), S.clone(v)
        return E.div(weight, R.sum(E.mul(u, S.matmul(mat, v))))


def spectral_norm(module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None):
    """``module.<name>`` divided by its spectral norm (power iteration), as
    ``torch.nn.utils.parametrizations.spectral_norm``.

    Args:
        module: the module.
        name: the weight's name.
        n_power_iterations: power iterations per training forward.
        eps: the smallest norm.
        dim: the output dimension (1 for ConvTranspose layers when None, else 0).

    Returns:
        The module.
    """
    weight = getattr(module, name)
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    return parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))


orthogonal = unsupported("torch.nn.utils.parametrizations.orthogonal",
                         "TensorBrain has no orthogonal parametrization",
                         "an orthogonalisation (tb.linalg.qr) in the module's forward")
