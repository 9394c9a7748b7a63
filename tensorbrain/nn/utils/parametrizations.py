"""``torch.nn.utils.parametrizations``: not supported yet.

torch's parametrizations swap the module's class and move the parameter under
``parametrizations.<name>.original*``; TensorBrain has no parametrization machinery. Use the
hook-based :func:`tensorbrain.nn.utils.weight_norm` (same maths, torch's ``weight_g`` /
``weight_v`` names) instead of ``parametrizations.weight_norm``.
"""
from __future__ import annotations

from ..._unsupported import unsupported

__all__ = ["weight_norm", "spectral_norm", "orthogonal"]


_WHY = "it has no parametrization machinery"
weight_norm = unsupported("torch.nn.utils.parametrizations.weight_norm", _WHY,
                          "tensorbrain.nn.utils.weight_norm (the hook-based form, torch's "
                          "weight_g/weight_v parameters)")
spectral_norm = unsupported("torch.nn.utils.parametrizations.spectral_norm", _WHY,
                            "a spectral normalisation computed in your module's forward")
orthogonal = unsupported("torch.nn.utils.parametrizations.orthogonal", _WHY)
