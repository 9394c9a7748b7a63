"""``tb.nn.utils.spectral_norm`` (torch's hook-based form): ``weight = weight_orig / sigma``,
``sigma`` the largest singular value of the weight (as a ``(dim, -1)`` matrix) estimated by
power iteration. As torch's: ``weight_orig`` is the parameter, ``weight_u`` and ``weight_v``
are buffers updated ``n_power_iterations`` times per forward in training mode (none in eval),
and the gradient flows through ``sigma`` as well. ``remove_spectral_norm`` folds it back.
"""
from __future__ import annotations

from ..._ops import elementwise as E
from ..._ops import reduce as R
from ..._ops import shape as S
from ...autograd import grad_mode
from ...tensor import Tensor
from ..parameter import Parameter


def _normalize(v, eps):
    return E.div(v, E.clamp(R.norm(v), min=eps))


class SpectralNorm:
    """The forward pre-hook (kept on the module, as torch's)."""

    def __init__(self, name="weight", n_power_iterations=1, dim=0, eps=1e-12):
        self.name, self.n_power_iterations, self.dim, self.eps = \
            name, n_power_iterations, dim, eps

    def reshape_weight_to_matrix(self, weight):
        """The weight as ``(size along dim, -1)``.

        Args:
            weight: the weight.
        """
        if self.dim != 0:
            order = [self.dim] + [d for d in range(weight.ndim) if d != self.dim]
            weight = S.permute(weight, *order)
        return S.reshape(weight, weight.shape[0], -1)

    def compute_weight(self, module, do_power_iteration):
        """``weight_orig / sigma`` (updating ``u``, ``v`` first when asked).

        Args:
            module: the module.
            do_power_iteration: run the power iterations.
        """
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with grad_mode.no_grad():
                for _ in range(self.n_power_iterations):
                    v._data[...] = _normalize(S.matmul(S.t(mat), u), self.eps)._data
                    u._data[...] = _normalize(S.matmul(mat, v), self.eps)._data
                u, v = S.clone(u), S.clone(v)
        sigma = R.sum(E.mul(u, S.matmul(mat, v)))
        return E.div(weight, sigma)

    def __call__(self, module, inputs):
        object.__setattr__(module, self.name, self.compute_weight(module, module.training))


def spectral_norm(module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None):
    """Spectrally normalise ``module.<name>``, as ``torch.nn.utils.spectral_norm``.

    Args:
        module: the module.
        name: the weight's name.
        n_power_iterations: power iterations per training forward.
        eps: the smallest norm in the normalisations.
        dim: the output dimension (0, or 1 for ConvTranspose layers when None).

    Returns:
        The module.

    Raises:
        RuntimeError: spectral norm already registered on ``name``.
    """
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter "
                               f"{name}")
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    fn = SpectralNorm(name, n_power_iterations, dim, eps)
    weight = module._parameters[name]
    with grad_mode.no_grad():
        mat = fn.reshape_weight_to_matrix(weight)
        h, w = mat.shape
        from ..._factories import empty
        u = _normalize(empty(h, dtype=weight.dtype).normal_(0, 1), eps)
        v = _normalize(empty(w, dtype=weight.dtype).normal_(0, 1), eps)
    del module._parameters[name]
    module.register_parameter(name + "_orig", weight)
    object.__setattr__(module, name, Tensor._wrap(weight._data))
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    module.register_forward_pre_hook(fn)
    return module


def remove_spectral_norm(module, name: str = "weight"):
    """Fold the spectral normalisation of ``name`` back into a plain parameter.

    Args:
        module: the module.
        name: the weight's name.

    Returns:
        The module.

    Raises:
        ValueError: no spectral norm on ``name``.
    """
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, SpectralNorm) and hook.name == name:
            with grad_mode.no_grad():
                w = hook.compute_weight(module, False)._data.copy()
            del module._forward_pre_hooks[key]
            del module._parameters[name + "_orig"]
            del module._buffers[name + "_u"]
            del module._buffers[name + "_v"]
            module.__dict__.pop(name, None)
            module.register_parameter(name, Parameter(Tensor._wrap(w)))
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
