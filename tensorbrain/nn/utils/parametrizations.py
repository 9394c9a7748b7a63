"""``torch.nn.utils.parametrizations``: not supported yet.

torch's parametrizations swap the module's class and move the parameter under
``parametrizations.<name>.original*``; TensorBrain has no parametrization machinery. Use the
hook-based :func:`tensorbrain.nn.utils.weight_norm` (same maths, torch's ``weight_g`` /
``weight_v`` names) instead of ``parametrizations.weight_norm``.
"""
from __future__ import annotations

__all__ = ["weight_norm", "spectral_norm", "orthogonal"]


def _unsupported(name, hint):
    def fn(*args, **kwargs):
        raise NotImplementedError(f"torch.nn.utils.parametrizations.{name} is not supported in "
                                  f"TensorBrain (no parametrization machinery). {hint}")
    fn.__name__ = name
    fn.__doc__ = f"Not supported: raises NotImplementedError. {hint}"
    return fn


weight_norm = _unsupported("weight_norm", "Use tensorbrain.nn.utils.weight_norm (the hook-based "
                                          "form, torch's weight_g/weight_v parameters) instead.")
spectral_norm = _unsupported("spectral_norm", "Compute the spectral normalisation in your "
                                              "module's forward instead.")
orthogonal = _unsupported("orthogonal", "")
