"""``torch.nn.utils.weight_norm`` / ``remove_weight_norm`` (the hook-based form) and the
parametrization forms, which are not supported.

``weight_norm(module)`` replaces ``module.weight`` by ``weight_g * weight_v / ||weight_v||``
(norm over every dim but ``dim``), recomputed by a forward pre-hook before each call; the
parameters are ``weight_g`` and ``weight_v``, torch's names, so state dicts move between the two.

>>> import tensorbrain as tb
>>> fc = tb.nn.utils.weight_norm(tb.nn.Linear(4, 3))
>>> sorted(n for n, _ in fc.named_parameters())
['bias', 'weight_g', 'weight_v']
>>> fc(tb.randn(2, 4)).shape
tb.Size([2, 3])
"""
from __future__ import annotations

from ..._ops import elementwise as _E
from ..._ops import reduce as _R
from ...autograd import grad_mode
from ...tensor import Tensor
from ..parameter import Parameter

__all__ = ["weight_norm", "remove_weight_norm"]


def _norm_except_dim(v, dim):
    """The 2-norm of ``v`` over all dims but ``dim`` (kept as size-1 dims); all dims if None."""
    sq = _E.mul(v, v)
    if dim is None:
        return _E.sqrt(_R.sum(sq))
    d = dim % v.dim()
    axes = tuple(i for i in range(v.dim()) if i != d)
    return _E.sqrt(_R.sum(sq, axes, keepdim=True)) if axes else _E.sqrt(sq)


class _WeightNorm:
    def __init__(self, name, dim):
        self.name, self.dim = name, dim

    def compute(self, module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return _E.mul(v, _E.div(g, _norm_except_dim(v, self.dim)))

    def __call__(self, module, inputs):
        object.__setattr__(module, self.name, self.compute(module))


def weight_norm(module, name: str = "weight", dim: int | None = 0):
    """Reparametrise ``module.<name>`` as magnitude ``<name>_g`` times direction
    ``<name>_v / ||<name>_v||``.

    Args:
        module: the module holding the parameter.
        name: the parameter's name.
        dim: the dim the norm keeps (one magnitude per output row by default); None for one
            magnitude for the whole tensor.

    Returns:
        ``module``, with the hook registered.

    Raises:
        RuntimeError: weight norm already registered on ``name``.
    """
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, _WeightNorm) and hook.name == name:
            raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter "
                               f"{name}")
    weight = getattr(module, name)
    fn = _WeightNorm(name, dim)
    with grad_mode.no_grad():
        g = _norm_except_dim(weight, dim)._data.copy()
    del module._parameters[name]
    module.register_parameter(name + "_g", Parameter(Tensor._wrap(g)))
    module.register_parameter(name + "_v", Parameter(Tensor._wrap(weight._data.copy())))
    object.__setattr__(module, name, fn.compute(module))
    module._weight_norm_handle = module.register_forward_pre_hook(fn)
    return module


def remove_weight_norm(module, name: str = "weight"):
    """Fold ``<name>_g`` and ``<name>_v`` back into one parameter ``<name>``.

    Raises:
        ValueError: no weight norm on ``name``.
    """
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, _WeightNorm) and hook.name == name:
            with grad_mode.no_grad():
                w = hook.compute(module)._data.copy()
            del module._forward_pre_hooks[key]
            del module._parameters[name + "_g"]
            del module._parameters[name + "_v"]
            module.__dict__.pop(name, None)
            module.register_parameter(name, Parameter(Tensor._wrap(w)))
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
