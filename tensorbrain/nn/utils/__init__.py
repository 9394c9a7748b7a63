"""``tb.nn.utils``: gradient clipping and flat parameter vectors."""
from .clip_grad import clip_grad_norm_, clip_grad_value_, get_total_norm
from .convert_parameters import parameters_to_vector, vector_to_parameters
from . import parametrizations, parametrize, rnn  # noqa: E402  (torch.nn.utils.rnn, ...)
from .weight_norm import remove_weight_norm, weight_norm
from . import prune  # noqa: E402,F401
from .spectral_norm import remove_spectral_norm, spectral_norm  # noqa: E402

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "parameters_to_vector",
           "vector_to_parameters", "rnn", "parametrizations", "parametrize", "weight_norm", "remove_weight_norm", "prune", "spectral_norm",
           "remove_spectral_norm"]


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """torch's deprecated name of :func:`clip_grad_norm_` (warns, then calls it).

    Args:
        parameters: the parameters.
        max_norm: the largest total norm.
        norm_type: the norm's order.
        error_if_nonfinite: raise on a non-finite norm.
        foreach: accepted.
    """
    import warnings
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`torch.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None) -> None:
    """Scale the gradients by ``max_norm / (total_norm + 1e-6)`` when that is below 1 (the
    second half of :func:`clip_grad_norm_`, given a norm computed elsewhere).

    Args:
        parameters: a tensor or tensors with ``.grad``.
        max_norm: the largest total norm.
        total_norm: the total norm (a number or a 0-d tensor).
        foreach: accepted.
    """
    from ...tensor import Tensor
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    total = float(total_norm.item() if isinstance(total_norm, Tensor) else total_norm)
    coef = min(float(max_norm) / (total + 1e-6), 1.0)
    for p in params:
        if p.grad is not None:
            p.grad._data *= coef


def skip_init(module_cls, *args, **kwargs):
    """``module_cls(*args, **kwargs)`` whose parameters the caller will overwrite (torch skips
    their initialisation; here they are initialised, which is one of the values "uninitialised"
    allows).

    Args:
        module_cls: the module class.
        *args: its arguments.
        **kwargs: its keyword arguments.
    """
    return module_cls(*args, **kwargs)


def __getattr__(name):
    if name == "stateless":   # torch.nn.utils.stateless.functional_call
        import importlib
        return importlib.import_module(".stateless", __name__)
    raise AttributeError(f"module 'tensorbrain.nn.utils' has no attribute {name!r}")
